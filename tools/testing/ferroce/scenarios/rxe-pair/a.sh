# rxe client side: set up rxe0, then run each tool against VM b.
. /ferroce/lib.sh
server=$(ip_of b)
step rxe-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
wait_for_gid rxe0 1
step rdma-link 10 rdma link show
step devinfo 20 ibv_devinfo -v -d rxe0
wait_for_ping "$server"
retry rc-pingpong 120 ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 100 -p 18515 "$server"
retry ud-pingpong 120 ibv_ud_pingpong -d rxe0 -g 1 -s 1024 -n 100 -p 18516 "$server"
retry rping 120 rping -c -a "$server" -p 7174 -C 10 -v -V
retry write-bw 280 ib_write_bw -F -d rxe0 -x 1 -s 65536 -n 1000 -p 18517 "$server"
retry send-lat 280 ib_send_lat -F -d rxe0 -x 1 -s 8 -n 1000 -p 18518 "$server"
