# perftest server on ferroce0.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
perftest_server ferroce0 3
export FERROCE_DOORBELL=record
for n in 64 256; do
	step "record-n$n" 150 ib_write_bw -F -d ferroce0 -x 3 -p $((18700 + n)) -s 64 -n "$n" < /dev/null
done
step nic-counters 15 hostctl nic counters
