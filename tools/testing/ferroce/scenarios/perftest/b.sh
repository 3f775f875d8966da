# perftest server on ferroce0.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
perftest_server ferroce0 3
CM_TRY=10 pair_step server cm-rejoin 60 ib_read_lat -F -d ferroce0 -x 3 -R -p 18790 -s 8 -n 100 \
	< /dev/null
for mode in record:FERROCE_DOORBELL=record push:FERROCE_PUSH=1; do
	for n in 64 256; do
		step "${mode%%:*}-n$n" 150 env "${mode#*:}" ib_write_bw -F -d ferroce0 -x 3 \
			-p $((18700 + n + ${#mode})) -s 64 -n "$n" < /dev/null
	done
done
step nic-counters 15 hostctl nic counters
