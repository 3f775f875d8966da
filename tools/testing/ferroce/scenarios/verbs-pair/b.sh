# Server side: ferroce0, then serve each client tool in turn.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rc-pingpong 180 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18515
step nic-counters 15 hostctl nic counters
