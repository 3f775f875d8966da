# NVMe/RDMA target over ferroce. Only the device setup is ferroce's: nvme_target (guest/lib.sh) is shared.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
# nvmet-rdma takes its receives from SRQs (one per completion vector): nvmet_rdma.use_srq=1.
step nvmet-srq 5 cat /sys/module/nvmet_rdma/parameters/use_srq
srq_watch &
nvme_target "$(ip_of b)"
rc=$?
step srqs 5 cat /tmp/srqs
step nic-counters 15 hostctl nic counters
exit $rc
