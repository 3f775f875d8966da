# rxe: NFS server for a (ferroce), NFSv4.2 client of b (ferroce).
. /ferroce/lib.sh
step rdma-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
wait_for_gid rxe0 1
step rdma-link 10 rdma link show
step toolroot 120 toolroot_setup
step nfs-server 60 nfs_server
step pattern 300 nvme_pattern
nfs_client_run b "4.2"
signal "$(ip_of b)" 4432 c-done
await a-done 4431
step export-sums 60 sh -c 'cd /newroot/export && sha256sum *'
step nfs-server-stop 60 nfs_server_stop
step rmmod 60 sh -c 'rdma link delete rxe0 && rmmod rdma_rxe && echo "rdma_rxe removed"'
