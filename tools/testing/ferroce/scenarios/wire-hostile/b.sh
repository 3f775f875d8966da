# NVMe/RDMA target over ferroce while host m forges responses on the segment (m.sh).
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
nvme_target "$(ip_of b)"
rc=$?
step nic-counters 15 hostctl nic counters
exit $rc
