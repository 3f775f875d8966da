# Router r: 10.0.0.254 on a's segment, 10.0.1.254 on b's; forwards IPv4 (RoCE v2 is UDP).
. /ferroce/lib.sh
step forwarding 5 cat /proc/sys/net/ipv4/ip_forward
step addresses 5 ip -4 addr show
# Stay up until a says it is done (b finishes on its own by then).
step wait-done 500 sh -c 'nc -l -p 4430 < /dev/null'
