# SPDX-License-Identifier: GPL-2.0
#
# tools-parity: what a.sh and b.sh share. Each tool runs once on ferroce0 (eth0, GID 3) and
# once on rxe0 (eth1, GID 1): a ferroce NIC steers every RoCE frame for its MAC to its engine,
# as a converged RNIC does, so rxe gets a NIC of its own on a second segment. Step names are
# "<test>-ferroce" / "<test>-rxe"; scenario.py checks that ferroce works wherever rxe does.
. /ferroce/lib.sh

# Steps run their command in a shell with lib.sh only: "sh -c \"$SC fn args\"" gives it these.
SC=". /scenario/common.sh;"

# DEVICES: "kind device gid netdev" per line.
DEVICES="ferroce ferroce0 3 eth0
rxe rxe0 1 eth1"

# The peer's address on a device kind's segment.
peer_on() {
	case $1 in
	ferroce) ip_of "$2" ;;
	rxe) ip_of "$2" | sed 's/^10\.0\.0\./10.0.1./' ;;
	esac
}

# gid_table DEV: the filled GID entries of port 1: "index gid type netdev".
gid_table() {
	for _g in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		_i=${_g##*/}
		_v=$(cat "$_g" 2>/dev/null) || continue
		[ "$_v" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
		echo "$_i $_v $(cat /sys/class/infiniband/"$1"/ports/1/gid_attrs/types/"$_i" 2>/dev/null) $(cat /sys/class/infiniband/"$1"/ports/1/gid_attrs/ndevs/"$_i" 2>/dev/null)"
	done | sort -n
}

# ipv4_gid DEV INDEX: until GID INDEX is an IPv4-mapped RoCE v2 GID (30 s), then the table.
# perftest's "Found Incompatibility issue with GID types" compares exactly this (IPv4-mapped
# or not) between the two sides; an empty entry reads as a zero GID, which counts as IPv6.
ipv4_gid() {
	for _ in $(seq 300); do
		grep -q '^0000:0000:0000:0000:0000:ffff:' "/sys/class/infiniband/$1/ports/1/gids/$2" 2>/dev/null &&
			grep -q '^RoCE v2$' "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$2" 2>/dev/null && break
		sleep 0.1
	done
	gid_table "$1"
	grep -q '^0000:0000:0000:0000:0000:ffff:' "/sys/class/infiniband/$1/ports/1/gids/$2" &&
		grep -q '^RoCE v2$' "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$2"
}

# active_mtu DEV BYTES: until port 1 of DEV reports active MTU BYTES (30 s).
active_mtu() {
	for _ in $(seq 300); do
		ibv_devinfo -d "$1" | grep -qE "active_mtu:[[:space:]]+$2 " && break
		sleep 0.1
	done
	ibv_devinfo -d "$1" | grep -E 'state|active_mtu'
	ibv_devinfo -d "$1" | grep -qE "active_mtu:[[:space:]]+$2 "
}

# tool_list: the lines of the scenario's tools.list, comments and blank lines left out:
# "NAME ROW COMMAND...".
tool_list() {
	grep -v '^#' /scenario/tools.list | grep -v '^[[:space:]]*$'
}

# tool_cmd ROLE COMMAND DEV GID PORT ME PEER: COMMAND as the ROLE (server or client) runs it on
# device DEV (GID index GID) with TCP or rdma_cm port PORT, the server at address ME, the
# client talking to PEER.
tool_cmd() {
	_role=$1 _cmd=$2 _dev=$3 _gid=$4 _port=$5 _me=$6 _peer=$7
	_tool=${_cmd%% *}
	_rest=$(echo "$_cmd" | cut -s -d' ' -f2-)
	_to=
	[ "$_role" = client ] && _to=$_peer
	case $_tool in
	# -F: perftest fits its cycle counter to gettimeofday; under TCG the fit's r^2 can fall
	# below 0.9, and a bandwidth test then exits "Can't produce a report" after it ran (seen
	# on the server of ib_send_bw -e -R, on ferroce, whose client then waited for it). With
	# -F it reports anyway (figures inf or nan, which are recorded, not compared).
	ib_*) echo "$_cmd -F -d $_dev -x $_gid -p $_port $_to" ;;
	ibv_*_pingpong) echo "$_cmd -d $_dev -g $_gid -p $_port $_to" ;;
	rping)
		[ "$_role" = server ] && echo "rping -s -a $_me -p $_port $_rest" ||
			echo "rping -c -a $_peer -p $_port $_rest" ;;
	udaddy)
		[ "$_role" = server ] && echo "udaddy -b $_me $_rest" || echo "udaddy -s $_peer $_rest" ;;
	cmtime)
		[ "$_role" = server ] && echo "cmtime -b $_me -p $_port $_rest" ||
			echo "cmtime -s $_peer -p $_port $_rest" ;;
	rdma_server)
		[ "$_role" = server ] && echo "rdma_server -s $_me -p $_port" ||
			echo "rdma_client -s $_peer -p $_port" ;;
	*) echo "$_cmd" ;;
	esac
}

# addr_of NETDEV: this VM's IPv4 address on NETDEV.
addr_of() {
	ip -4 -o addr show "$1" | awk '{ sub("/.*", "", $4); print $4 }'
}

# run_tools ROLE PEER [SUFFIX [BASE]]: every tool of tools.list on each device kind, as ROLE;
# steps are named "<tool><SUFFIX>-<kind>", ports BASE (19000) + 10 * line + device. The
# client retries until the server listens, for TOOLS_RETRY_FOR seconds (120); a run may take
# TOOLS_SECS seconds (150), the server's 30 more.
run_tools() {
	_line=0 _suffix=${3:-} _base=${4:-19000}
	tool_list | while read -r name row cmd; do
		name=$name$_suffix
		echo "$DEVICES" | while read -r kind dev gid ndev; do
			port=$((_base + 10 * _line + $([ "$kind" = rxe ] && echo 1 || echo 0)))
			me=$(addr_of "$ndev")
			if [ "$1" = server ]; then
				full=$(tool_cmd server "$cmd" "$dev" "$gid" "$port" "$me" "")
				secs=$((${TOOLS_SECS:-150} + 30))
			else
				full=$(tool_cmd client "$cmd" "$dev" "$gid" "$port" "$me" "$(peer_on "$kind" "$2")")
				secs=${TOOLS_SECS:-150}
			fi
			# shellcheck disable=SC2086 # a -R tool's options are words for pair_step
			case "$full " in
			ib_*" -R "*) pair_step "$1" "$name-$kind" "$secs" $full < /dev/null ;;
			*) if [ "$1" = server ]; then
				step "$name-$kind" "$secs" sh -c "$full" < /dev/null
			else
				RETRY_FOR=${TOOLS_RETRY_FOR:-120} retry "$name-$kind" "$secs" sh -c "$full" < /dev/null
			fi ;;
			esac
		done
		_line=$((_line + 1))
	done
}

# ucmatose_listen BIND PORT: serves one ucmatose -c 16 on BIND:PORT in the background; returns
# once it listens (its rdma_cm ID is in LISTEN), leaving its pid in /tmp/ucmatose.pid.
ucmatose_listen() {
	ucmatose -b "$1" -p "$2" -c 16 > /tmp/ucmatose.out 2>&1 &
	echo $! > /tmp/ucmatose.pid
	for _ in $(seq 300); do
		rdma resource show cm_id | grep -q "LISTEN.*$1:$2" && { rdma resource show cm_id; return 0; }
		kill -0 "$(cat /tmp/ucmatose.pid)" 2>/dev/null || break
		sleep 0.1
	done
	cat /tmp/ucmatose.out
	return 1
}

# ucmatose_finish: waits for the background server (bounded by the step), prints its output.
ucmatose_finish() {
	_pid=$(cat /tmp/ucmatose.pid)
	while kill -0 "$_pid" 2>/dev/null; do sleep 0.2; done
	cat /tmp/ucmatose.out
	grep -q '^return status 0$' /tmp/ucmatose.out
}
