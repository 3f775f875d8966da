# NFS client over ferroce: NFSv4.2 and NFSv3 from b (ferroce), NFSv4.2 from c (rxe).
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
step toolroot 120 toolroot_setup
step pattern 300 nvme_pattern
nfs_client_run b "4.2 3"
nfs_client_run c "4.2"
signal "$(ip_of b)" 4431 a-done
signal "$(ip_of c)" 4431 a-done
step nic-counters 15 hostctl nic counters
step rmmod 60 rmmod_device ferroce
