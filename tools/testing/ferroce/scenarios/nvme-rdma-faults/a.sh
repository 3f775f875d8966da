# NVMe/RDMA host over ferroce on a lossy wire. The NICs' adaptive retransmission recovers lost
# tails quickly, but the I/O timeout and the controller-loss timeout are raised so that a slow
# machine fails the checks (data, throughput) rather than NVMe's error recovery. The keep-alive
# timeout stays NVMe's 5 s: the disconnect's DREQ, lost on this wire, is not sent again once the
# host destroys its CM ID, and the target then frees that queue when the keep-alive expires
# (with keep_alive_tmo=120, two minutes later, long after target-qps gave up).
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
step nvme-timeouts 10 sh -c 'echo 900 > /sys/module/nvme_core/parameters/io_timeout && cat /sys/module/nvme_core/parameters/io_timeout'
export NVME_CONNECT_OPTS=ctrl_loss_tmo=900
export NVME_MIB=16 # scenario.py's mibs
nvme_host "$(ip_of b)"
rc=$?
step nic-counters 15 hostctl nic counters
exit $rc
