# Server side: ferroce0, then serve each client tool in turn.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
port=18515
for size in 1 4096 65536 1048576; do
	n=100; [ $size = 1048576 ] && n=10
	step rc-pingpong-$size 180 ibv_rc_pingpong -d ferroce0 -g 3 -s $size -n $n -p $port
	port=$((port + 1))
	step rc-pingpong-events-$size 180 ibv_rc_pingpong -d ferroce0 -g 3 -e -s $size -n $n -p $port
	port=$((port + 1))
done
step ud-pingpong 180 ibv_ud_pingpong -d ferroce0 -g 3 -s 1024 -n 100 -p 18540
step srq-pingpong 180 ibv_srq_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18541
step rping 240 rping -s -a 0.0.0.0 -p 7174 -C 100 -v -V
step nic-counters 15 hostctl nic counters
