# rxe server side: set up rxe0, show it, then serve each client tool in turn.
. /ferroce/lib.sh
step rxe-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
wait_for_gid rxe0 1
step rdma-link 10 rdma link show
step devinfo 20 ibv_devinfo -v -d rxe0
step rc-pingpong 180 ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 100 -p 18515
step ud-pingpong 180 ibv_ud_pingpong -d rxe0 -g 1 -s 1024 -n 100 -p 18516
step rping 180 rping -s -a 0.0.0.0 -p 7174 -C 10 -v -V
step write-bw 300 ib_write_bw -F -d rxe0 -x 1 -s 65536 -n 1000 -p 18517
step send-lat 300 ib_send_lat -F -d rxe0 -x 1 -s 8 -n 1000 -p 18518
