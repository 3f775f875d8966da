# NFS server over ferroce, for a (ferroce) and c (rxe).
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
step toolroot 120 toolroot_setup
step nfs-server 60 nfs_server
await a-done 4431
await c-done 4432
step export-sums 60 sh -c 'cd /newroot/export && sha256sum *'
step nfs-server-stop 60 nfs_server_stop
step nic-counters 15 hostctl nic counters
step rmmod 60 rmmod_device ferroce
