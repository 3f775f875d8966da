# NVMe/RDMA host over ferroce. Only the device setup is ferroce's: nvme_host (guest/lib.sh) is shared.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
nvme_host "$(ip_of b)"
rc=$?
step nic-counters 15 hostctl nic counters
exit $rc
