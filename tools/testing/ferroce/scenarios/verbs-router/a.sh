# VM a (10.0.0.1, ferroce) reaches VM b (10.0.1.1, ferroce) through router r.
. /ferroce/lib.sh
peer=$(ip_of b)
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
wait_for_ping "$peer"
step route 10 ip route get "$peer"
step neighbours 10 ip neigh show
# The IPv4-mapped RoCE v2 GID is routable: the frames go to the gateway's MAC.
retry rc-pingpong-routed 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18800 "$peer"
# The fe80:: GID is link-local: its MAC is derived from the GID, which is not on this segment.
# The client must fail (transport retries exceeded), not hang.
# The run is expected to fail: only a refused TCP connection (b not listening yet) is retried.
step rc-pingpong-link-local 90 sh -c '
	for _ in $(seq 30); do
		ibv_rc_pingpong -d ferroce0 -g 0 -s 4096 -n 10 -p 18801 "$1" > /tmp/ll.out 2>&1
		rc=$?
		grep -q "Couldn'"'"'t connect" /tmp/ll.out || break
		sleep 1
	done
	cat /tmp/ll.out
	exit $rc' sh "$peer"
step nic-counters 15 hostctl nic counters
# b's link-local server waits for a receive that never comes: told, it stops (through r, up
# until it is notified).
signal "$peer" 18802 link-local-done
retry notify-router 10 sh -c "echo done | nc -w 5 $(ip_of r) 4430"
