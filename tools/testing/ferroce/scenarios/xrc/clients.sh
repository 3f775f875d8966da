# SPDX-License-Identifier: GPL-2.0
#
# clients.sh N SECS CMD...: N runs of client CMD (the server's address last) at once, each
# bounded by SECS (scaled as steps are, FERROCE_SLOW) and run again only while the server does
# not listen yet ("Couldn't connect to", as ibv_xsrq_pingpong and perftest say), for 20 s at
# most: unlike guest/lib.sh's retry, a client that reached the server and failed is not run
# again, so that its own error is what the step shows, not a later run's "Couldn't connect".
# Prints each client's last run after "=== client I rc=RC tries=T", then "clients: N, K exited
# 0" (no "failed": the perftest checks look for that word); fails if any client failed.
#
# ibv_xsrq_pingpong's clients must run together: its server (-c N) sends nothing until all N
# have connected, and answers each client through another client's XRC_SEND/XRC_RECV pair into
# its SRQ, which works because the clients of one host share an XRC domain (/tmp/xrc_domain).
n=$1 secs=$2
shift 2
limit=$(awk -v t="$secs" -v f="${FERROCE_SLOW:-1}" 'BEGIN { printf "%d", t * f + 0.5 }')
t0=$(cut -d' ' -f1 /proc/uptime)
i=1
while [ "$i" -le "$n" ]; do
	(
		tries=0
		while :; do
			tries=$((tries + 1))
			timeout "$limit" "$@" < /dev/null > "/tmp/client.$i" 2>&1
			rc=$?
			[ $rc = 0 ] && break
			grep -q "Couldn't connect to" "/tmp/client.$i" || break
			spent=$(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { print int(b - a) }')
			[ "$spent" -ge 20 ] && break
			sleep 1
		done
		echo "rc=$rc tries=$tries" > "/tmp/client.$i.rc"
	) &
	i=$((i + 1))
done
wait
failed=0
i=1
while [ "$i" -le "$n" ]; do
	status=$(cat "/tmp/client.$i.rc" 2> /dev/null || echo "rc=none tries=0")
	echo "=== client $i $status"
	cat "/tmp/client.$i" 2> /dev/null
	case $status in rc=0\ *) ;; *) failed=$((failed + 1)) ;; esac
	rm -f "/tmp/client.$i" "/tmp/client.$i.rc"
	i=$((i + 1))
done
echo "clients: $n, $((n - failed)) exited 0"
[ "$failed" = 0 ]
