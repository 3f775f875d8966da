# Client side: ferroce0, then each rdma-core tool against VM b, kernel-bypass through the provider.
. /ferroce/lib.sh
server=$(ip_of b)
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
wait_for_ping "$server"
port=18515
for size in 1 4096 65536 1048576; do
	n=100; [ $size = 1048576 ] && n=10
	retry rc-pingpong-$size 120 ibv_rc_pingpong -d ferroce0 -g 3 -s $size -n $n -p $port "$server"
	port=$((port + 1))
	retry rc-pingpong-events-$size 120 ibv_rc_pingpong -d ferroce0 -g 3 -e -s $size -n $n -p $port "$server"
	port=$((port + 1))
done
retry ud-pingpong 120 ibv_ud_pingpong -d ferroce0 -g 3 -s 1024 -n 100 -p 18540 "$server"
retry srq-pingpong 120 ibv_srq_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18541 "$server"
retry rping 180 rping -c -a "$server" -p 7174 -C 100 -v -V
step nic-counters 15 hostctl nic counters
