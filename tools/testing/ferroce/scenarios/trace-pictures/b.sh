# trace-pictures, VM b: serves each of a's runs in turn.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rc-pingpong 180 ibv_rc_pingpong -d ferroce0 -g 3 -s 64 -n 5 -p 18515
step rc-pingpong-events 180 ibv_rc_pingpong -d ferroce0 -g 3 -s 64 -n 5 -e -p 18518
step write-bw 180 ib_write_bw -d ferroce0 -x 3 -s 4096 -n 16 -l 4 -t 8 -F -p 18516
step rc-pingpong-lossy 240 ibv_rc_pingpong -d ferroce0 -g 3 -s 64 -n 30 -p 18517
# The port's counters read fresh (ib_core keeps them 10 ms by default): b posts its receive
# after the first RNR NAK, not ten of them, and the picture shows one.
step rnr 120 sh -c 'echo 0 > /sys/class/infiniband/ferroce0/ports/1/hw_counters/lifespan &&
	ferroce_rnr -d ferroce0 -g 3 -p 18519'
