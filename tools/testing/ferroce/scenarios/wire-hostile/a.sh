# NVMe/RDMA host over ferroce while host m forges responses on the segment (m.sh).
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
export NVME_MIB=16 # scenario.py's mibs
nvme_host "$(ip_of b)"
rc=$?
# The forger on m stops: no RoCE frame crosses the wire any more.
signal "$(ip_of m)" 4440 nvme-done
# nvme-rdma's error recovery would show here: a forged NAK or response that was believed.
step recovery 10 sh -c 'dmesg | grep -E "nvme nvme0: .*(reconnect|recovery|reset|error|timeout)" || true'
step nic-counters 15 hostctl nic counters
exit $rc
