# SPDX-License-Identifier: GPL-2.0
#
# Shell library for scenario scripts running in ferroce test VMs
# (". /ferroce/lib.sh"). Steps print markers the host-side checks parse:
#   === STEP <name> begin
#   ... output ...
#   === STEP <name> rc=<status> secs=<seconds>

# Where the other VMs are: /scenario/hosts has "<ip> <name>" lines.
ip_of() {
	awk -v n="$1" '$2 == n { print $1 }' /scenario/hosts
}

_uptime() { cut -d' ' -f1 /proc/uptime; }

# _bounded TIMEOUT CMD...: CMD (a program or one of these functions) with a
# time limit; functions run in a shell that has this library loaded.
_bounded() {
	_limit=$1
	shift
	timeout "$_limit" sh -c '. /ferroce/lib.sh; "$@"' sh "$@"
}

# step NAME TIMEOUT CMD...: run CMD once, bounded by TIMEOUT seconds.
step() {
	_name=$1 _timeout=$2
	shift 2
	echo "=== STEP $_name begin"
	_t0=$(_uptime)
	_bounded "$_timeout" "$@" 2>&1
	_rc=$?
	echo "=== STEP $_name rc=$_rc secs=$(awk -v a="$_t0" -v b="$(_uptime)" 'BEGIN { printf "%.1f", b - a }')"
	return $_rc
}

# retry NAME TIMEOUT CMD...: the client side of a client/server pair. The
# server may not listen yet, so CMD is run again (each run bounded by
# TIMEOUT) until it succeeds or RETRY_FOR seconds (default 120) have passed.
retry() {
	_name=$1 _timeout=$2
	shift 2
	echo "=== STEP $_name begin"
	_t0=$(_uptime)
	_try=0
	while :; do
		_try=$((_try + 1))
		_bounded "$_timeout" "$@" > /tmp/retry.out 2>&1
		_rc=$?
		[ $_rc = 0 ] && break
		# 126/127: not executable or not there; trying again will not help.
		[ $_rc = 126 ] || [ $_rc = 127 ] && break
		_spent=$(awk -v a="$_t0" -v b="$(_uptime)" 'BEGIN { print int(b - a) }')
		[ "$_spent" -ge "${RETRY_FOR:-120}" ] && break
		sleep 1
	done
	cat /tmp/retry.out
	echo "=== STEP $_name rc=$_rc tries=$_try secs=$(awk -v a="$_t0" -v b="$(_uptime)" 'BEGIN { printf "%.1f", b - a }')"
	return $_rc
}

# wait_for_ping HOST: until HOST answers (the peer VM may still be booting).
wait_for_ping() {
	_i=0
	until ping -c1 -W1 "$1" > /dev/null 2>&1; do
		_i=$((_i + 1))
		[ $_i -ge 120 ] && { echo "=== $1 unreachable"; return 1; }
	done
}

# wait_for_gid DEV INDEX: until the GID table entry is filled (ib_core adds
# GIDs asynchronously after the netdev gets its addresses).
wait_for_gid() {
	_i=0
	until [ -r "/sys/class/infiniband/$1/ports/1/gids/$2" ] &&
		! grep -q '^0000:0000:0000:0000:0000:0000:0000:0000$' "/sys/class/infiniband/$1/ports/1/gids/$2"; do
		_i=$((_i + 1))
		[ $_i -ge 100 ] && { echo "=== $1 GID $2 never appeared"; return 1; }
		sleep 0.1
	done
}

# hostctl CMD...: ask the host (the harness, over ttyS1) to run CMD and print
# its answer; returns its status. "hostctl nic counters" reads this VM's
# ferroce-nic counters, "hostctl nic stall on" stalls it, and so on.
hostctl() {
	exec 3<> /dev/ttyS1
	stty -F /dev/ttyS1 raw -echo
	echo "$*" >&3
	# Read the whole reply before printing any of it: a reader that stops early (| grep -q)
	# must not leave the rest of the reply on the line for the next call.
	_rc=1
	: > /tmp/hostctl.reply
	while IFS= read -r _line <&3; do
		case $_line in
		"=== HOSTCTL rc="*) _rc=${_line#=== HOSTCTL rc=}; break ;;
		esac
		echo "$_line" >> /tmp/hostctl.reply
	done
	exec 3<&-
	cat /tmp/hostctl.reply
	return "$_rc"
}
