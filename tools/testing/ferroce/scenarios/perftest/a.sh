# perftest client on ferroce0 (GID 3, RoCE v2 IPv4), kernel-bypass through the provider.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
wait_for_ping "$(ip_of b)"
perftest_client ferroce0 3 "$(ip_of b)"
step nic-counters 15 hostctl nic counters
