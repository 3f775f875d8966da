# NVMe/RDMA target over rxe. Only the device setup is rxe's: nvme_target (guest/lib.sh) is shared.
. /ferroce/lib.sh
step rdma-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
wait_for_gid rxe0 1
step rdma-link 10 rdma link show
nvme_target "$(ip_of b)"
