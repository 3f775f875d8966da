# Client side: ferroce0, then each rdma-core tool against VM b, kernel-bypass through the provider.
. /ferroce/lib.sh
server=$(ip_of b)
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
wait_for_ping "$server"
retry rc-pingpong 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18515 "$server"
step nic-counters 15 hostctl nic counters
