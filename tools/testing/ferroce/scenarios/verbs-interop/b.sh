# VM b has rxe (RoCE v2 only: its IPv4 GID is index 1): first the server, then the client.
. /ferroce/lib.sh
peer=$(ip_of a)
step rdma-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
wait_for_gid rxe0 1
step rc-pingpong-to-rxe 180 ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 100 -p 18700
step write-bw-to-rxe 300 ib_write_bw -F -d rxe0 -x 1 -s 65536 -n 200 -p 18701
step pmem-to-rxe 120 ferroce_pmem -d rxe0 -g 1 -p 18704
wait_for_ping "$peer"
retry rc-pingpong-from-rxe 120 ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 100 -p 18702 "$peer"
retry write-bw-from-rxe 280 ib_write_bw -F -d rxe0 -x 1 -s 65536 -n 200 -p 18703 "$peer"
step pmem-from-rxe 120 ferroce_pmem -d rxe0 -g 1 -p 18705 "$peer"
