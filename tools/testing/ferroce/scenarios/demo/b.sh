# make run: VM b, the server.
. /ferroce/lib.sh
say() { echo "### b: $*"; }
say "loading ferroce.ko"
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
say "serving ibv_rc_pingpong"
step rc-pingpong 180 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18515
say "serving ib_write_bw"
step write-bw 300 ib_write_bw -F -d ferroce0 -x 3 -s 65536 -n 500 -p 18516
say "done"
