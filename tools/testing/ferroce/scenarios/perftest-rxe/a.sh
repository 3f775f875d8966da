# perftest client on rxe0 (GID 1, rxe's RoCE v2 IPv4), the reference for the perftest scenario.
. /ferroce/lib.sh
step rdma-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
wait_for_gid rxe0 1
wait_for_ping "$(ip_of b)"
perftest_client rxe0 1 "$(ip_of b)"
