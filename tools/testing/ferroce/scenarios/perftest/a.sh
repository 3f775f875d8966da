# perftest client on ferroce0 (GID 3, RoCE v2 IPv4), kernel-bypass through the provider.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
server=$(ip_of b)
wait_for_ping "$server"
perftest_client ferroce0 3 "$server"
# A -R client that quits half way, once it has exchanged its QP with the server (as one that
# lost perftest's race does): the next client must find the server listening afresh (pair_step
# runs the server again). Connected is its RC QP in RTS (its own output, a file, is not
# written before it is killed: stdio buffers it).
step cm-quitter 40 sh -c '
	while :; do
		ib_read_lat -F -d ferroce0 -x 3 -R -p 18790 -s 8 -n 1000000 "$1" < /dev/null > /dev/null 2>&1 &
		pid=$!
		for _ in $(seq 100); do
			rdma resource show qp | grep " type RC " | grep -q " state RTS " && break
			kill -0 $pid 2> /dev/null || break
			sleep 0.1
		done
		rdma resource show qp | grep " type RC " | grep " state RTS " > /tmp/quitter.qp
		kill -KILL $pid 2> /dev/null
		wait $pid
		[ -s /tmp/quitter.qp ] && break
		sleep 1
	done
	echo "quitter: killed once connected: $(cat /tmp/quitter.qp)"' sh "$server"
CM_TRY=10 pair_step client cm-rejoin 60 ib_read_lat -F -d ferroce0 -x 3 -R -p 18790 -s 8 -n 100 \
	"$server" < /dev/null
# How WRs reach the NIC, FERROCE_DOORBELL=record (doorbell records it polls) and FERROCE_PUSH=1
# (push window): ib_write_bw of 64 and of 256 WRs, the NIC's counters around each; scenario.py
# checks what the 192 more WRs cost. The counters before a run are those before its last try:
# a try that finds no server listening yet (retry runs it again) opens and closes the device,
# and those commands, interrupts and doorbells are not the WRs' (a short run that took two
# tries failed perftest/doorbell-records with 'doorbells': -7, 'commands': -2, 'cq_arms': -1).
for mode in record:FERROCE_DOORBELL=record push:FERROCE_PUSH=1; do
	for n in 64 256; do
		RETRY_FOR=60 retry "${mode%%:*}-n$n" 140 sh -c '. /ferroce/lib.sh
			hostctl nic counters > /tmp/counters-before || exit 1
			exec env "$1" ib_write_bw -F -d ferroce0 -x 3 -p "$2" -s 64 -n "$3" "$4" < /dev/null' \
			sh "${mode#*:}" $((18700 + n + ${#mode})) "$n" "$server"
		step "${mode%%:*}-n$n-before" 15 cat /tmp/counters-before
		step "${mode%%:*}-n$n-after" 15 hostctl nic counters
	done
done
step nic-counters 15 hostctl nic counters
