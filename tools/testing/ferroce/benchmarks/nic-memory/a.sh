# make bench: the NIC process's memory while ferroce_objects holds QPs and registered memory
# (each series in ascending order, memory first: a process's freed heap may stay resident).
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3

# hold NAME QPS MIB: the NIC's memory while QPS QPs and MIB MiB live.
hold() {
	ferroce_objects ferroce0 "$2" "$3" > /tmp/objects.out 2>&1 &
	_pid=$!
	step "hold-$1" 120 sh -c "until grep -q holding /tmp/objects.out; do
		kill -0 $_pid 2> /dev/null || { cat /tmp/objects.out; exit 1; }; sleep 0.2; done
		cat /tmp/objects.out"
	step "memory-$1" 15 hostctl nic memory
	kill "$_pid"
	wait "$_pid" 2> /dev/null || :  # killed (143), as it should be
}
hold base 0 0
hold mr64 0 64
hold mr256 0 256
hold qp64 64 0
hold qp256 256 0
