# perftest server on ferroce0.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
perftest_server ferroce0 3
step nic-counters 15 hostctl nic counters
