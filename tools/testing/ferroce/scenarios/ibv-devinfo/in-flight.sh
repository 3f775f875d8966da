# Commands in flight at once: four processes open ferroce0 (a CMD_ALLOC_CTX each) while the NIC
# takes no commands. Each takes its own slot of the command ring and waits there, so all four are
# posted before the NIC resumes (the NIC's consumer index is four behind its producer index);
# then all four complete. The NIC's command timeout is long enough for this (scenario.py).
. /ferroce/lib.sh
hostctl nic stall on > /dev/null || exit 1
pids=
for i in 1 2 3 4; do
	ibv_devinfo -d ferroce0 > /tmp/devinfo.$i 2>&1 &
	pids="$pids $!"
done
outstanding=0
for _ in $(seq 40); do
	hostctl nic objects > /tmp/objects || break
	# The cmdq object's indexes (its keys are sorted, one per line).
	ci=$(sed -n '/"cmdq": {/,/}/s/^ *"ci": \([0-9]*\),*$/\1/p' /tmp/objects)
	pi=$(sed -n '/"cmdq": {/,/}/s/^ *"pi": \([0-9]*\),*$/\1/p' /tmp/objects)
	outstanding=$(( (pi - ci + 65536) % 65536 ))
	[ "$outstanding" -ge 4 ] && break
	sleep 0.2
done
echo "commands posted while stalled: $outstanding"
hostctl nic stall off > /dev/null || exit 1
i=0
for pid in $pids; do
	i=$((i + 1))
	wait "$pid"
	echo "open $i: rc=$? $(grep -c 'hca_id:[[:space:]]*ferroce0' /tmp/devinfo.$i) device"
done
dmesg | grep -o 'command timeout [0-9]* ms' | tail -1
