# perftest server on rxe0.
. /ferroce/lib.sh
step rdma-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
wait_for_gid rxe0 1
perftest_server rxe0 1
