# unplug.sh N: N times, ferroce.ko is loaded, a process opens ferroce0 and holds a context
# (ferroce_hostile hold), and the module is removed under it: rmmod must not wait for the
# process, which must get IB_EVENT_DEVICE_FATAL and exit. One line per cycle.
. /ferroce/lib.sh
n=$1 failed=0
for i in $(seq "$n"); do
	modprobe ferroce || { echo "cycle $i: modprobe failed"; exit 1; }
	out=/tmp/hold.$i
	for _ in $(seq 100); do [ -e /sys/class/infiniband/ferroce0 ] && break; sleep 0.05; done
	ferroce_hostile hold > "$out" 2>&1 &
	pid=$!
	for _ in $(seq 200); do grep -q '^holding$' "$out" && break; sleep 0.05; done
	if ! grep -q '^holding$' "$out"; then
		echo "cycle $i: the process did not get its context: $(cat "$out")"
		kill "$pid" 2>/dev/null; wait "$pid"; rmmod ferroce; exit 1
	fi
	t0=$(_uptime)
	rmmod ferroce
	rc=$?
	t1=$(_uptime)
	wait "$pid"
	prc=$?
	echo "cycle $i: rmmod rc=$rc in $(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}') s; process rc=$prc: $(tail -n 1 "$out")"
	[ "$rc" = 0 ] && [ "$prc" = 0 ] || failed=$((failed + 1))
done
echo "unplug cycles: $n, failed: $failed"
[ "$failed" = 0 ]
