# NVMe/RDMA host over ferroce. Only the device setup is ferroce's: nvme_host (guest/lib.sh) is shared.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
# The lies (scenario.py's LIES) after the transfer: a command whose completion the driver
# dropped times out after io_timeout, and the controller reconnects after reconnect_delay.
step nvme-timeouts 10 sh -c 'echo 8 > /sys/module/nvme_core/parameters/io_timeout && cat /sys/module/nvme_core/parameters/io_timeout'
export NVME_CONNECT_OPTS=reconnect_delay=1
export NVME_LIES="cqe-opcode cqe-qpn cqe-wr-id cqe-byte-len cqe-wqe-index eqe-object"
nvme_host "$(ip_of b)"
rc=$?
step nic-counters 15 hostctl nic counters
exit $rc
