# SPDX-License-Identifier: GPL-2.0
#
# Shell library for scenario scripts running in ferroce test VMs
# (". /ferroce/lib.sh"). Steps print markers the host-side checks parse:
#   === STEP <name> begin
#   ... output ...
#   === STEP <name> rc=<status> secs=<seconds>
# on the script's output, the virtio console hvc0 (guest/init), which carries no
# kernel messages: those go to the serial console. A step that wants the kernel's
# messages runs dmesg.

# Where the other VMs are: /scenario/hosts has "<ip> <name>" lines.
ip_of() {
	awk -v n="$1" '$2 == n { print $1 }' /scenario/hosts
}

_uptime() { cut -d' ' -f1 /proc/uptime; }

# _bounded TIMEOUT CMD...: CMD (a program or one of these functions) with a
# time limit; functions run in a shell that has this library loaded. On a slower kernel
# (FERROCE_SLOW, from the command line: the debug kernel) the limit scales.
_bounded() {
	_limit=$(awk -v t="$1" -v f="${FERROCE_SLOW:-1}" 'BEGIN { printf "%d", t * f + 0.5 }')
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
# The step shows the last try's output and, if it failed, also the longest
# try's (the one that got furthest, e.g. connected and then failed).
retry() {
	_name=$1 _timeout=$2
	shift 2
	echo "=== STEP $_name begin"
	_t0=$(_uptime)
	_try=0 _longest=0 _longest_secs=-1
	while :; do
		_try=$((_try + 1))
		_tl=$(_uptime)
		_bounded "$_timeout" "$@" > /tmp/retry.out 2>&1
		_rc=$?
		[ $_rc = 0 ] && break
		_secs=$(awk -v a="$_tl" -v b="$(_uptime)" 'BEGIN { printf "%.1f", b - a }')
		if awk -v a="$_secs" -v b="$_longest_secs" 'BEGIN { exit !(a > b) }'; then
			_longest=$_try _longest_secs=$_secs
			cp /tmp/retry.out /tmp/retry.longest.out
		fi
		# 126/127: not executable or not there; trying again will not help.
		[ $_rc = 126 ] || [ $_rc = 127 ] && break
		_spent=$(awk -v a="$_t0" -v b="$(_uptime)" 'BEGIN { print int(b - a) }')
		[ "$_spent" -ge "${RETRY_FOR:-120}" ] && break
		sleep 0.2
	done
	if [ $_rc != 0 ] && [ "$_longest" != "$_try" ]; then
		echo "--- try $_longest of $_try, the longest ($_longest_secs s):"
		cat /tmp/retry.longest.out
		echo "--- the last try:"
	fi
	cat /tmp/retry.out
	# waited: the failed tries and the pauses between them, before the last try began.
	echo "=== STEP $_name rc=$_rc tries=$_try secs=$(awk -v a="$_t0" -v b="$(_uptime)" 'BEGIN { printf "%.1f", b - a }')" \
		"waited=$(awk -v a="$_t0" -v b="$_tl" 'BEGIN { printf "%.1f", b - a }')"
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

# signal HOST PORT WORD: tells HOST (which waits with "await NAME PORT") that WORD happened;
# retried until HOST listens (RETRY_FOR, default 240 s).
signal() {
	RETRY_FOR=${RETRY_FOR:-240} retry "signal-$3" 10 sh -c "echo $3 | nc -w 5 $1 $2"
}

# await NAME PORT: waits (a step, up to 600 s) for a peer's signal on TCP PORT.
await() {
	step "await-$1" 600 sh -c "nc -l -p $2 < /dev/null"
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

# wait_for_line FILE PATTERN: until a line of FILE (a background program's output) matches
# the extended regular expression PATTERN; bounded by the step that calls it.
wait_for_line() {
	until grep -Eq "$2" "$1" 2> /dev/null; do
		sleep 0.1
	done
	grep -E "$2" "$1"
}

# wait_for_kmsg PATTERN: until a kernel message matches the extended regular expression
# PATTERN (a driver's report of what it met); bounded by the step that calls it.
wait_for_kmsg() {
	until dmesg | grep -Eq "$1"; do
		sleep 0.1
	done
	dmesg | grep -E "$1"
}

# hw_counters DEV: port 1's hardware counters of RDMA device DEV (for ferroce, the NIC's
# own), one "name value" line each. ib_core keeps the values 10 ms: wait that out first.
# One process reads them all (a fork per counter is slow on the debug kernel).
hw_counters() {
	sleep 0.05
	_dir=/sys/class/infiniband/$1/ports/1/hw_counters
	[ -f "$_dir/lifespan" ] || { echo "no hw_counters for $1"; return 1; }
	awk 'FNR == 1 { n = FILENAME; sub(".*/", "", n) } n != "lifespan" { print n, $0 }' "$_dir"/*
}

# hostctl CMD...: ask the host (the harness, over ttyS1) to run CMD and print
# its answer; returns its status. "hostctl nic counters" reads this VM's
# ferroce-nic counters, "hostctl nic stall on" stalls it, and so on.
hostctl() {
	exec 3<> /dev/ttyS1
	stty -F /dev/ttyS1 raw -echo
	echo "$*" >&3
	# Read the whole reply before printing any of it: a reader that stops early (| grep -q)
	# must not leave the rest of the reply on the line for the next call. awk reads it, not
	# the shell's read: when a signal interrupts busybox ash's read (a child of this shell
	# ending), it drops the part of the line it had read, and a lost "=== HOSTCTL rc=" left
	# this reader waiting for ever (ibv-devinfo's replies.sh).
	rm -f /tmp/hostctl.rc
	awk '/^=== HOSTCTL rc=/ { sub(/^=== HOSTCTL rc=/, ""); print > "/tmp/hostctl.rc"; exit }
		{ print }' <&3 > /tmp/hostctl.reply
	exec 3<&-
	cat /tmp/hostctl.reply
	return "$(cat /tmp/hostctl.rc 2> /dev/null || echo 1)"
}

# NVMe over RDMA (the nvme-rdma* scenarios). A scenario script sets up its VM's RDMA device
# (rxe, ferroce, ...), then runs "nvme_target ADDR" (nvmet exporting a 64 MiB brd RAM disk on
# an rdma port at ADDR) or "nvme_host ADDR" (connect through /dev/nvme-fabrics, write a known
# pattern with O_DIRECT dd, read it back, compare, disconnect). Both return 1 if a step failed.
# The host tells the target it has disconnected with a line on TCP port 4421, so the target
# stays up until then (bounded by the step's timeout).
NVME_NQN=nqn.2026-11.org.ferroce:ram0
_nvmet=/sys/kernel/config/nvmet

nvme_target() {
	_fail=0
	step nvmet-setup 60 nvmet_setup "$1" || _fail=1
	step wait-host 1100 sh -c 'nc -l -p 4421 < /dev/null' || _fail=1
	step rdma-stats 10 rdma statistic show
	step target-qps 60 rc_qps_gone || _fail=1
	step nvmet-log 10 sh -c 'dmesg | grep -E "nvmet|brd"' || _fail=1
	step nvmet-teardown 60 nvmet_teardown || _fail=1
	return $_fail
}

# srq_watch: waits until an SRQ exists and lists the SRQs into /tmp/srqs (run it in the
# background: nvmet-rdma creates its SRQs when the first host connects).
srq_watch() {
	until rdma resource show srq > /tmp/srqs 2>&1 && grep -q srqn /tmp/srqs; do sleep 1; done
}

nvme_host() {
	_fail=0
	step pattern 300 nvme_pattern || _fail=1
	wait_for_ping "$1"
	RETRY_FOR=300 retry connect 60 nvme_connect "$1" || _fail=1
	step namespace 60 nvme_namespace || _fail=1
	_mib=${NVME_MIB:-64}
	step write 600 timed_dd write $((_mib << 20)) if=/tmp/nvme-pattern of=/dev/nvme0n1 bs=1M count=$_mib oflag=direct conv=fsync || _fail=1
	step read 600 timed_dd read $((_mib << 20)) if=/dev/nvme0n1 of=/tmp/nvme-readback bs=1M count=$_mib iflag=direct || _fail=1
	step compare 300 sh -c 'sha256sum /tmp/nvme-pattern /tmp/nvme-readback; cmp /tmp/nvme-pattern /tmp/nvme-readback' || _fail=1
	[ -n "${NVME_LIES:-}" ] && { step lies 300 nvme_lies $NVME_LIES || _fail=1; }
	step rdma-stats 10 rdma statistic show
	step disconnect 60 nvme_disconnect || _fail=1
	step host-qps 60 rc_qps_gone || _fail=1
	retry notify 10 sh -c "echo host-disconnected | nc -w 5 $1 4421" || _fail=1
	return $_fail
}

# nvme_lies LIE...: for each kind of lie (host control "lie KIND 1"), the host's NIC tells one
# while O_DIRECT reads of 4 MiB run. The driver must drop it and count it (driver_bad_cqes, or
# driver_bad_events for an event), nvme-rdma must recover (the driver moves a QP it was lied
# about to ERR, which nvme-rdma's error recovery reconnects; a command whose completion was
# dropped times out, with the same end) and what is read afterwards must be the pattern. One
# line per lie: "lie KIND: bad_cqes=A bad_events=B -> bad_cqes=C bad_events=D, told, state S,
# data intact|differs, T s".
_distrust() {
	hw_counters ferroce0 | awk '$1 == "driver_bad_cqes" { c = $2 } $1 == "driver_bad_events" { e = $2 }
		END { printf "bad_cqes=%d bad_events=%d", c, e }'
}
nvme_lies() {
	_failed=0 _k=0
	for _lie in "$@"; do
		_k=$((_k + 1)) _t0=$(_uptime)
		_before=$(_distrust)
		hostctl nic lie "$_lie" 1 > /dev/null || { echo "lie $_lie: host control refused it"; return 1; }
		_skip=$(((_k * 4) % (${NVME_MIB:-64} - 4)))
		# Reads until the NIC has told the lie (it waits for an entry of its kind).
		_told=untold
		for _ in $(seq 20); do
			dd if=/dev/nvme0n1 of=/dev/null bs=1M count=4 skip="$_skip" iflag=direct 2> /dev/null
			hostctl nic status | grep -q '"lie": null' && { _told=told; break; }
		done
		_state=
		for _ in $(seq 600); do
			_state=$(cat /sys/class/nvme/nvme0/state 2> /dev/null)
			[ "$_state" = live ] && break
			sleep 0.1
		done
		dd if=/dev/nvme0n1 of=/tmp/lie-read bs=1M count=4 skip="$_skip" iflag=direct 2> /dev/null
		dd if=/tmp/nvme-pattern of=/tmp/lie-want bs=1M count=4 skip="$_skip" 2> /dev/null
		if cmp -s /tmp/lie-read /tmp/lie-want; then _data=intact; else _data=differs; _failed=$((_failed + 1)); fi
		[ "$_told" = told ] && [ "$_state" = live ] || _failed=$((_failed + 1))
		echo "lie $_lie: $_before -> $(_distrust), $_told, state $_state, data $_data," \
			"$(awk -v a="$_t0" -v b="$(_uptime)" 'BEGIN { printf "%.1f", b - a }') s"
		# What the driver and nvme-rdma said meanwhile (every level: recovery, reconnect).
		dmesg | awk -v t="$_t0" '{ ts = substr($0, 2, index($0, "]") - 2) + 0 }
			ts >= t && /nvme|ferroce/ { print "  " $0 }'
	done
	rm -f /tmp/lie-read /tmp/lie-want
	echo "lies: $#, failed: $_failed"
	[ "$_failed" = 0 ]
}

# nvme_pattern: /tmp/nvme-pattern, NVME_MIB (64, at most 64) MiB of 8-byte records "<m><nnnnnn>\n"
# where m is the MiB (0-9A-Za-z+/) and nnnnnn the record in it: every sector differs, every byte
# says where it belongs. (One MiB from seq, copied with tr: seq alone takes minutes under TCG.)
nvme_pattern() {
	seq -w 0 131071 | sed 's/^/X/' > /tmp/nvme-mib || return
	: > /tmp/nvme-pattern
	for _m in $(echo 0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/ | cut -c1-"${NVME_MIB:-64}" | sed 's/./& /g'); do
		tr X "$_m" < /tmp/nvme-mib >> /tmp/nvme-pattern || return
	done
	rm /tmp/nvme-mib
	ls -l /tmp/nvme-pattern
}

# nvmet_setup ADDR: /dev/ram0 (64 MiB) as namespace 1 of $NVME_NQN, any host, rdma port ADDR:4420.
nvmet_setup() {
	modprobe brd rd_nr=1 rd_size=65536 || return
	grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs configfs /sys/kernel/config || return
	_sub=$_nvmet/subsystems/$NVME_NQN _port=$_nvmet/ports/1
	mkdir "$_sub" && echo 1 > "$_sub/attr_allow_any_host" &&
		mkdir "$_sub/namespaces/1" && echo -n /dev/ram0 > "$_sub/namespaces/1/device_path" &&
		echo 1 > "$_sub/namespaces/1/enable" &&
		mkdir "$_port" && echo rdma > "$_port/addr_trtype" && echo ipv4 > "$_port/addr_adrfam" &&
		echo "$1" > "$_port/addr_traddr" && echo 4420 > "$_port/addr_trsvcid" &&
		ln -s "$_sub" "$_port/subsystems/$NVME_NQN" || return
	echo "ram0 bytes: $(blockdev --getsize64 /dev/ram0)"
	cd "$_nvmet" && grep . "subsystems/$NVME_NQN/attr_allow_any_host" \
		"subsystems/$NVME_NQN/namespaces/1/device_path" "subsystems/$NVME_NQN/namespaces/1/enable" \
		ports/1/addr_trtype ports/1/addr_adrfam ports/1/addr_traddr ports/1/addr_trsvcid
	ls ports/1/subsystems
	dmesg | grep 'enabling port'
}

nvmet_teardown() {
	_sub=$_nvmet/subsystems/$NVME_NQN
	rm "$_nvmet/ports/1/subsystems/$NVME_NQN" && rmdir "$_nvmet/ports/1" &&
		echo 0 > "$_sub/namespaces/1/enable" && rmdir "$_sub/namespaces/1" && rmdir "$_sub" &&
		rmmod brd && echo "subsystems: $(ls $_nvmet/subsystems) ports: $(ls $_nvmet/ports)"
}

# rc_qps_gone: until no RC QP (an NVMe queue) is left on any RDMA device (30 s at most).
rc_qps_gone() {
	for _ in $(seq 300); do
		rdma res show qp | grep -q ' type RC ' || break
		sleep 0.1
	done
	rdma res show qp
	echo "rc-qps: $(rdma res show qp | grep -c ' type RC ')"
	! rdma res show qp | grep -q ' type RC '
}

# nvme_connect ADDR: connect to $NVME_NQN at ADDR:4420; prints the reply ("instance=0,cntlid=1").
# $NVME_CONNECT_OPTS adds options (e.g. keep_alive_tmo=120); a scenario exports it, as steps
# run in a shell of their own, and nvme_namespace shows what the controller made of them.
nvme_connect() {
	exec 3<> /dev/nvme-fabrics || return
	if ! echo "transport=rdma,traddr=$1,trsvcid=4420,nqn=$NVME_NQN${NVME_CONNECT_OPTS:+,$NVME_CONNECT_OPTS}" >&3; then
		exec 3<&-
		return 1
	fi
	read -r _reply <&3
	exec 3<&-
	echo "$_reply"
}

# nvme_namespace: until /dev/nvme0n1 appears (30 s at most); shows nvme0 and the namespace,
# and each of $NVME_CONNECT_OPTS as the controller has it ("option KEY: VALUE"; it fails if one
# is not what was asked).
nvme_namespace() {
	for _ in $(seq 300); do
		[ -b /dev/nvme0n1 ] && break
		sleep 0.1
	done
	for _f in transport subsysnqn address state; do
		echo "$_f: $(cat /sys/class/nvme/nvme0/$_f)"
	done
	_bad=0
	for _opt in $(echo "${NVME_CONNECT_OPTS:-}" | tr , ' '); do
		_key=${_opt%%=*} _want=${_opt#*=}
		case $_key in
		keep_alive_tmo) _attr=kato ;; # the controller's name for it
		*) _attr=$_key ;;
		esac
		_got=$(cat "/sys/class/nvme/nvme0/$_attr" 2> /dev/null)
		echo "option $_key: $_got"
		[ "$_got" = "$_want" ] || { echo "option $_key: asked $_want, the controller has ${_got:-none}"; _bad=1; }
	done
	dmesg | grep 'nvme nvme0'
	echo "namespace bytes: $(blockdev --getsize64 /dev/nvme0n1)"
	[ "$_bad" = 0 ]
}

# timed_dd NAME BYTES DD-ARGS...: dd, then "NAME: BYTES bytes copied, S s, R MB/s" (busybox's
# dd prints no rate; /proc/uptime has 10 ms steps).
timed_dd() {
	_what=$1 _bytes=$2
	shift 2
	_d0=$(_uptime)
	dd "$@" || return
	_d1=$(_uptime)
	awk -v w="$_what" -v n="$_bytes" -v a="$_d0" -v b="$_d1" \
		'BEGIN { s = b - a; if (s < 0.01) s = 0.01; printf "%s: %d bytes copied, %.2f s, %.1f MB/s\n", w, n, s, n / s / 1e6 }'
}

# nvme_disconnect: delete nvme0 and wait for it and its namespace to go (30 s at most).
nvme_disconnect() {
	echo 1 > /sys/class/nvme/nvme0/delete_controller || return
	for _ in $(seq 300); do
		[ ! -e /sys/class/nvme/nvme0 ] && [ ! -e /dev/nvme0n1 ] && break
		sleep 0.1
	done
	echo "left in /dev: $(cd /dev && echo nvme*)"
	[ ! -e /sys/class/nvme/nvme0 ] && [ ! -e /dev/nvme0n1 ] && echo "nvme0 and nvme0n1 are gone"
}

# perftest: the same five tools on each VM pair, each once with the connection set up over
# TCP and once through rdma_cm (-R). "perftest_server DEV GID" serves them in turn,
# "perftest_client DEV GID SERVER" runs them; step names are the test names below, ports
# differ per test so that a late client never meets the previous server.
PERFTESTS="write-bw:ib_write_bw:-s 65536 -n 200
read-bw:ib_read_bw:-s 65536 -n 200
send-bw:ib_send_bw:-s 65536 -n 200
send-lat:ib_send_lat:-s 8 -n 200
atomic-bw:ib_atomic_bw:-n 200"

_perftests() {
	_port=18600
	echo "$PERFTESTS" | while IFS=: read -r _name _tool _args; do
		for _cm in "" -R; do
			echo "$_name${_cm:+-cm} $_tool $_port $_cm $_args"
			_port=$((_port + 1))
		done
	done
}

# A perftest run over rdma_cm (-R) connects twice: its exchange channel, then, after a first
# handshake, its data QP, whose listener the server makes only after that handshake. The
# client's REQ can come first: it is rejected (no listener), the client gives up, and the
# server waits for good; a client run again then meets the server's data listener with its
# exchange channel, and both wait. So both sides of a -R run are bounded by CM_TRY seconds a
# run and run again until the pair succeeds: a lost race costs one CM_TRY (20 s: a -R run of
# make check takes 1 to 3 s, scaled by FERROCE_SLOW on a slower kernel; at 90, one lost race of
# perftest-rxe's send-lat-cm cost 93 s of its 111). Other runs get one server run and client
# runs until the server listens.
CM_TRY=20

# pair_step ROLE NAME TIMEOUT CMD...: one side of a client/server pair (ROLE server or
# client); a perftest CMD (ib_*) with -R connects through rdma_cm.
pair_step() {
	_role=$1 _pname=$2 _ptimeout=$3
	shift 3
	case "$* " in
	ib_*" -R "*) RETRY_FOR=$((_ptimeout + CM_TRY)) retry "$_pname" $CM_TRY "$@" ;;
	*) if [ "$_role" = server ]; then step "$_pname" "$_ptimeout" "$@"; else retry "$_pname" "$_ptimeout" "$@"; fi ;;
	esac
}

perftest_server() {
	_perftests | while read -r _name _tool _port _rest; do
		# shellcheck disable=SC2086 # _rest holds the tool's options
		pair_step server "$_name" 300 $_tool -F -d "$1" -x "$2" -p "$_port" $_rest < /dev/null
	done
}

perftest_client() {
	_perftests | while read -r _name _tool _port _rest; do
		# shellcheck disable=SC2086
		pair_step client "$_name" 280 $_tool -F -d "$1" -x "$2" -p "$_port" $_rest "$3" < /dev/null
	done
}

# toolroot_setup: the toolchain root (shared by the host over virtio-9p, tag "toolroot",
# Vm(toolroot=True); unchanged while VMs run, so the guest caches it) as /newroot, read-only
# under a tmpfs overlay, with our provider added and /proc, /sys, /dev and /tmp of this VM.
# Big userspace (python3, pyverbs) runs from there: "in_toolroot CMD..." runs CMD chrooted
# into it.
toolroot_setup() {
	mkdir -p /run/toolroot /run/overlay /newroot &&
		mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose toolroot /run/toolroot &&
		mount -t tmpfs tmpfs /run/overlay &&
		mkdir -p /run/overlay/upper /run/overlay/work &&
		mount -t overlay overlay \
			-o lowerdir=/run/toolroot,upperdir=/run/overlay/upper,workdir=/run/overlay/work \
			/newroot || return
	for d in proc sys dev tmp; do mount --bind /$d /newroot/$d || return; done
	cp /usr/lib/x86_64-linux-gnu/libibverbs/libferroce-rdmav34.so \
		/newroot/usr/lib/x86_64-linux-gnu/libibverbs/ &&
		cp /etc/libibverbs.d/ferroce.driver /newroot/etc/libibverbs.d/ &&
		chroot /newroot python3 --version
}

in_toolroot() {
	chroot /newroot /usr/bin/env PATH=/usr/sbin:/usr/bin HOME=/tmp "$@"
}

# pyverbs_suite DEV GID: rdma-core's test suite (copied to /tmp/tests), one python process per
# test module so that a crash (pyverbs has segfaulted on rxe) costs only that module; each
# module's output ends with "=== MODULE <name> rc=<exit status>". The vendor modules (mlx5,
# EFA, CUDA) are left out: they skip every test on other devices, and take half the time. They
# leave the suite's directory too: its __init__.py imports every test_*.py there in each run,
# which made each module's run take 4 s, nearly all of it imports.
pyverbs_suite() {
	mkdir -p /tmp/tests-vendor
	for _t in /tmp/tests/test_mlx5_*.py /tmp/tests/test_efa*.py /tmp/tests/test_cuda*.py; do
		[ -e "$_t" ] && mv "$_t" /tmp/tests-vendor/
	done
	for _m in $(cd /tmp && ls tests/test_*.py tests-vendor/test_*.py | sed 's,.*/,,; s,\.py$,,' | sort); do
		case $_m in test_mlx5_* | test_efa* | test_cuda*)
			echo "=== MODULE $_m left out (vendor-specific)"
			continue ;;
		esac
		echo "=== MODULE $_m"
		in_toolroot timeout 600 python3 /tmp/tests/run_tests.py --dev "$1" --gid "$2" -v \
			-k "tests.$_m." 2>&1
		echo "=== MODULE $_m rc=$?"
	done
}

# RDMA across hosts (the multi-host* scenarios, across_hosts.py). across_hosts_client (VM a):
# ibv_rc_pingpong and ib_write_bw against VM b, ibv_rc_pingpong against rxe VM $RXE_PEER if
# set, then NVMe over RDMA to b. across_hosts_server (VM b): their other ends, then the NVMe
# target. rxe_pingpong_server: rxe and the pingpong's server; rxe_pingpong_client PEER: its
# client on ferroce.
across_hosts_client() {
	step rdma-setup 30 modprobe ferroce
	wait_for_gid ferroce0 3
	step rdma-link 10 rdma link show
	step nic-wire 10 hostctl nic status
	wait_for_ping "$(ip_of b)"
	retry rc-pingpong 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18700 "$(ip_of b)"
	retry write-bw 280 ib_write_bw -d ferroce0 -x 3 -s 65536 -n 200 -p 18701 "$(ip_of b)"
	[ -n "${RXE_PEER:-}" ] && rxe_pingpong_client "$RXE_PEER"
	export NVME_MIB=16
	nvme_host "$(ip_of b)"
	_rc=$?
	step nic-counters 15 hostctl nic counters
	return $_rc
}

across_hosts_server() {
	step rdma-setup 30 modprobe ferroce
	wait_for_gid ferroce0 3
	step rdma-link 10 rdma link show
	step nic-wire 10 hostctl nic status
	step rc-pingpong 180 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18700
	step write-bw 300 ib_write_bw -d ferroce0 -x 3 -s 65536 -n 200 -p 18701
	nvme_target "$(ip_of b)"
	_rc=$?
	step nic-counters 15 hostctl nic counters
	return $_rc
}

rxe_pingpong_client() {
	wait_for_ping "$(ip_of "$1")"
	retry rc-pingpong-rxe 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18702 "$(ip_of "$1")"
}

rxe_pingpong_server() {
	step rdma-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
	wait_for_gid rxe0 1
	step rc-pingpong-rxe 300 ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 100 -p 18702
}

# NFS over RDMA (the nfs-rdma* scenarios, nfs_rdma.py). The tools are Debian's nfs-utils and
# rpcbind from the toolchain root (toolroot_setup first); the kernel's client (xprtrdma) and
# server (svcrdma) are built in. The export is a tmpfs of its own (an overlay cannot be
# exported) at /newroot/export, seen as /export by the root's tools; the nfsd filesystem is
# mounted inside the root as well, where rpc.nfsd and exportfs look for it.
NFS_RDMA_PORT=20049
NFS_MOUNTD_PORT=20048

# nfs_server: rpcbind, the export (fsid=0: the NFSv4 pseudo-root, and NFSv3's /export),
# rpc.mountd on a fixed port and nfsd with an RDMA listener on 20049 besides TCP 2049, as
# Debian's nfs-server.service starts them. nfsdcld (on rpc_pipefs) tracks the v4 clients: with
# none to reclaim, nfsd skips the grace period (without a tracker it waits 90 s and refuses
# every OPEN meanwhile).
nfs_server() {
	mkdir -p /newroot/export /newroot/proc/fs/nfsd /newroot/run/rpc_pipefs &&
		mount -t tmpfs -o size=256m tmpfs /newroot/export &&
		mount -t nfsd nfsd /newroot/proc/fs/nfsd &&
		mount -t rpc_pipefs sunrpc /newroot/run/rpc_pipefs &&
		in_toolroot nfsdcld &&
		in_toolroot rpcbind -w &&
		echo "/export *(rw,fsid=0,no_root_squash,no_subtree_check,insecure)" > /newroot/etc/exports &&
		in_toolroot exportfs -ra &&
		in_toolroot rpc.mountd -p "$NFS_MOUNTD_PORT" &&
		in_toolroot rpc.nfsd --no-udp --rdma="$NFS_RDMA_PORT" 8 || return
	echo "grace ended: $(cat /newroot/proc/fs/nfsd/v4_end_grace)"
	in_toolroot exportfs -v
	echo "portlist:" $(cat /newroot/proc/fs/nfsd/portlist)
	echo "versions: $(cat /newroot/proc/fs/nfsd/versions)"
	dmesg | grep -E 'svcrdma|NFSD|nfsd' | tail -n 5
}

# nfs_mount SERVER VERS MNT: mounts SERVER's export over RDMA at /newroot/MNT (NFSv4.x: the
# pseudo-root "/"; NFSv3: /export, with MOUNT over TCP and no lock manager), then shows what
# the client made of it.
nfs_mount() {
	mkdir -p "/newroot$3" || return
	case $2 in
	3) in_toolroot mount -t nfs -o "vers=3,proto=rdma,port=$NFS_RDMA_PORT,nolock,mountproto=tcp,mountport=$NFS_MOUNTD_PORT" \
		"$1:/export" "$3" || return ;;
	*) in_toolroot mount -t nfs -o "vers=$2,proto=rdma,port=$NFS_RDMA_PORT" "$1:/" "$3" || return ;;
	esac
	grep " /newroot$3 " /proc/mounts
	in_toolroot nfsstat -m
}

# nfs_copy MNT NAME: writes the pattern (nvme_pattern's /tmp/nvme-pattern) as MNT/NAME with
# O_DIRECT (each 1 MiB write goes to the server, not the page cache), reads it back the same
# way and compares; the figures come from timed_dd.
nfs_copy() {
	pattern_copy "/newroot$1/$2"
}

# pattern_copy PATH: the pattern (nvme_pattern's /tmp/nvme-pattern) to PATH (a file or a block
# device) and back to /tmp/readback, O_DIRECT both ways; both checksums, then cmp.
pattern_copy() {
	_bytes=$(stat -c %s /tmp/nvme-pattern) _mib=$(($(stat -c %s /tmp/nvme-pattern) >> 20))
	timed_dd write "$_bytes" if=/tmp/nvme-pattern of="$1" bs=1M count="$_mib" oflag=direct conv=fsync 2>&1 &&
		timed_dd read "$_bytes" if="$1" of=/tmp/readback bs=1M count="$_mib" iflag=direct 2>&1 || return
	sha256sum /tmp/nvme-pattern /tmp/readback
	cmp /tmp/nvme-pattern /tmp/readback || return
	rm /tmp/readback
}

# nfs_mountstats MNT: the transport of the mount at MNT as the client counts it
# (/proc/self/mountstats: "xprt: rdma ...").
nfs_mountstats() {
	awk -v m="/newroot$1" '$1 == "device" { on = ($5 == m) } on && /xprt:|opts:|RPC iostats/' /proc/self/mountstats
}

# nfs_umount MNT
nfs_umount() {
	umount "/newroot$1" && ! grep -q " /newroot$1 " /proc/mounts && echo "unmounted $1"
}

# nfs_server_stop: no export, no nfsd thread and no listener left (rpc.nfsd 0 closes the
# RDMA listener's QP), then the export's files as the server sees them.
nfs_server_stop() {
	in_toolroot exportfs -ua && in_toolroot rpc.nfsd 0 || return
	echo "threads: $(cat /newroot/proc/fs/nfsd/threads)"
	echo "portlist: $(cat /newroot/proc/fs/nfsd/portlist)"
}

# nfs_client_run SERVER "VERS...": for each NFS version, steps mount-SERVER-VERS, copy-…,
# mountstats-… and umount-… (file SERVER-VERS.pattern in SERVER's export); 1 if one failed.
nfs_client_run() {
	_fail=0
	wait_for_ping "$(ip_of "$1")"
	for _v in $2; do
		RETRY_FOR=120 retry "mount-$1-$_v" 30 nfs_mount "$(ip_of "$1")" "$_v" "/mnt/$1" || { _fail=1; continue; }
		step "copy-$1-$_v" 600 nfs_copy "/mnt/$1" "$(hostname)-$_v.pattern" || _fail=1
		step "mountstats-$1-$_v" 10 nfs_mountstats "/mnt/$1"
		step "umount-$1-$_v" 60 nfs_umount "/mnt/$1" || _fail=1
	done
	return $_fail
}

# rmmod_device MODULE: removes an RDMA device's driver (after its consumers are gone): the
# devices go, and nothing hangs.
rmmod_device() {
	rmmod "$1" || return
	echo "RDMA devices left: $(ls /sys/class/infiniband 2> /dev/null | tr '\n' ' ')"
	! lsmod | grep -q "^$1 " && echo "$1 removed"
}

# A consumer under faults (nfs_rdma.py's faults_scenario). nic_counter NAME: one counter of
# this VM's NIC.
nic_counter() {
	hostctl nic counters | sed -n "s/^ *\"$1\": \([0-9]*\).*/\1/p"
}

# copy_under PATH ON SECONDS OFF [AFTER]: pattern_copy PATH into a fault: the command ON makes
# it before the copy starts (so the copy's I/O meets it) or, given AFTER, that many seconds into
# the copy (it meets I/O in flight); it lasts SECONDS (0: the whole copy), and the command OFF
# ends it. The copy must still come out bit-exact. It says how long ON took, then what the
# fault cost the NIC: frames retransmitted, timer expiries, frames its port dropped while down.
copy_under() {
	_resent=$(nic_counter retransmits) _expired=$(nic_counter timeouts) _unported=$(nic_counter port_down_drops)
	_pid= _rc=0
	if [ -n "$5" ]; then
		pattern_copy "$1" &
		_pid=$!
		sleep "$5"
	fi
	_made=$(_uptime)
	if ! $2 > /dev/null; then
		[ -z "$_pid" ] || wait "$_pid"
		return 1
	fi
	echo "fault: $2"
	echo "made in $(echo "$_made $(_uptime)" | awk '{printf "%.2f", $2 - $1}') s"
	if [ "$3" = 0 ] && [ -z "$_pid" ]; then
		pattern_copy "$1"
		_rc=$?
	else
		if [ -z "$_pid" ]; then
			pattern_copy "$1" &
			_pid=$!
		fi
		sleep "$3"
	fi
	if ! $4 > /dev/null; then
		[ -z "$_pid" ] || wait "$_pid"
		return 1
	fi
	echo "fault ended: $4"
	[ -z "$_pid" ] || wait "$_pid" || _rc=1
	echo "retransmitted: $(($(nic_counter retransmits) - _resent)), timer expiries: $(($(nic_counter timeouts) - _expired))"
	echo "frames the port dropped while down: $(($(nic_counter port_down_drops) - _unported))"
	return $_rc
}

# Block storage over RDMA: iSER, SRP and RNBD (block_rdma.py; scenarios iser, srp, rnbd).
# A target exports brd's /dev/ram0 (64 MiB); an initiator writes the pattern (nvme_pattern) to
# the disk it gets with O_DIRECT, reads it back and compares (blk_copy), and the target then
# checksums what the pattern's NVME_MIB MiB cover of its /dev/ram0 (blk_backing_sum). Modules load from here, not from the toolchain root
# (it has no /lib/modules); configfs is mounted where the root's tools see it too.
_cfg=/sys/kernel/config/target

blk_backing() {
	modprobe brd rd_nr=1 rd_size=65536 || return
	grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs configfs /sys/kernel/config || return
	# The toolchain root's tools (targetcli) see it there.
	[ ! -d /newroot/sys/kernel/config ] || grep -q ' /newroot/sys/kernel/config ' /proc/mounts ||
		mount -t configfs configfs /newroot/sys/kernel/config || return
	echo "ram0 bytes: $(blockdev --getsize64 /dev/ram0)"
}

blk_backing_sum() {
	dd if=/dev/ram0 bs=1M count="${NVME_MIB:-64}" iflag=direct 2> /dev/null | sha256sum
}

# blk_copy DEV: the pattern to block device DEV and back, O_DIRECT both ways.
blk_copy() {
	echo "$1 bytes: $(blockdev --getsize64 "$1")"
	pattern_copy "$1"
}

# blk_client_run KIND SERVER: for consumer KIND (iser, srp, rnbd), steps attach-SERVER,
# copy-SERVER and detach-SERVER against VM SERVER; 1 if one failed. KIND_attach ADDR prints
# the disk as "disk: /dev/X"; KIND_detach undoes it.
blk_client_run() {
	wait_for_ping "$(ip_of "$2")"
	RETRY_FOR=120 retry "attach-$2" 60 "$1_attach" "$(ip_of "$2")" || return 1
	_disk=$(sed -n 's/^disk: //p' /tmp/retry.out)
	_fail=0
	step "copy-$2" 600 blk_copy "$_disk" || _fail=1
	step "rdma-cm-$2" 10 rdma resource show cm_id
	step "detach-$2" 60 "$1_detach" "$(ip_of "$2")" || _fail=1
	return $_fail
}

# iSER: LIO's iSCSI target with iSER on its portal, made with targetcli (one session reading
# its commands from standard input; nothing is saved), and open-iscsi's initiator over the
# iser interface.
ISER_IQN=iqn.2026-12.org.ferroce
iser_target() {
	modprobe ib_isert || return
	# The system bus, which targetcli asks for tcmu-runner's user backstores.
	mkdir -p /newroot/run/dbus && in_toolroot dbus-daemon --system --fork || return
	_t=$ISER_IQN:$(hostname)
	printf '%s\n' "set global auto_save_on_exit=false color_mode=false" \
		"/backstores/block create name=ram0 dev=/dev/ram0" "/iscsi create $_t" \
		"/iscsi/$_t/tpg1/portals/0.0.0.0:3260 enable_iser true" \
		"/iscsi/$_t/tpg1/luns create /backstores/block/ram0" \
		"/iscsi/$_t/tpg1 set attribute generate_node_acls=1 demo_mode_write_protect=0 cache_dynamic_acls=1" \
		"ls /iscsi" | in_toolroot targetcli || return
	_tpg=$_cfg/iscsi/$_t/tpgt_1
	echo "iser: $(cat "$_tpg"/np/*/iser)"
	[ "$(cat "$_tpg"/np/*/iser)" = 1 ] && [ "$(cat "$_tpg/enable")" = 1 ] && [ -d "$_tpg/lun/lun_0" ]
}

iser_target_stop() {
	printf '%s\n' "/iscsi delete $ISER_IQN:$(hostname)" "/backstores/block delete ram0" | in_toolroot targetcli &&
		rmmod ib_isert && echo "targets: $(ls $_cfg/iscsi | grep -c iqn), backstores: $(ls $_cfg/core | grep -c iblock)"
}

iser_initiator() {
	modprobe ib_iser || return
	echo "InitiatorName=$ISER_IQN:init-$(hostname)" > /newroot/etc/iscsi/initiatorname.iscsi &&
		mkdir -p /newroot/run/lock/iscsi /newroot/var/lib/iscsi && in_toolroot iscsid || return
	echo "iscsid started"
}

# iser_attach ADDR: the target's node record on the iser interface, made as an administrator
# who knows the target's name makes it (iser_target names it after its host), and its login,
# which iscsid does over iSER; the session's disk.
#
# Not SendTargets discovery over iSER (`-m discovery -I iser`): iscsiadm then logs in through
# the kernel by itself and can lose a login response. It sends each login PDU with a netlink
# request and reads the kernel's reply to it; a response that arrives before that reply (the
# RNIC answered while the vCPU was away: 4.4 ms after the request, behind a 3 ms interrupt
# latency, in a failed run) is taken off the socket there and set aside (open-iscsi's
# __kipc_call and ctldev_handle), and iscsi_login then polls the socket for it: the
# discovery's 30 s active_timeout, and a discovery session left in the kernel that keeps
# ib_iser loaded. iscsid queues such an event and loses nothing. Discovery over TCP would need
# iscsi_tcp, which the guest kernel does not build.
iser_attach() {
	_t=$ISER_IQN:$(awk -v a="$1" '$1 == a { print $2 }' /scenario/hosts)
	in_toolroot iscsiadm -m node -o new -T "$_t" -p "$1:3260" -I iser > /dev/null &&
		in_toolroot iscsiadm -m node -T "$_t" -p "$1:3260" -I iser --login || return
	for _ in $(seq 100); do
		in_toolroot iscsiadm -m session -P3 | grep -q 'Attached scsi disk' && break
		sleep 0.1
	done
	in_toolroot iscsiadm -m session
	in_toolroot iscsiadm -m session -P3 | grep -E 'Target:|Current Portal|Iface (Name|Transport)|iSCSI Session State|Attached scsi disk'
	_d=$(in_toolroot iscsiadm -m session -P3 | sed -n 's/.*Attached scsi disk \([a-z]*\).*/\1/p' | head -n 1)
	[ -n "$_d" ] && [ -b "/dev/$_d" ] && echo "disk: /dev/$_d"
}

iser_detach() {
	in_toolroot iscsiadm -m node -p "$1:3260" -I iser --logout &&
		in_toolroot iscsiadm -m node -o delete -p "$1:3260" || return
	echo "sessions: $(in_toolroot iscsiadm -m session 2>&1)"
}

iser_initiator_stop() {
	in_toolroot iscsiadm -k 0 && rmmod ib_iser && echo "ib_iser removed"
}

# KIND_back ADDR (iser_back, srp_back, rnbd_back): after a fault of the blk faults scenarios
# (block_rdma.py's faults_scenario), the disk of the consumer attached to ADDR usable again, as
# its user would make it: "disk: /dev/X" once it is (retry it). iSER's iscsid logs in again by
# itself; SRP's rport reconnects after a port down by itself, but its SCSI host goes with a
# removed device, and add_target makes it again; RTRS fails RNBD's I/O on a path error and
# reconnects only 30 s later (after a port down) or never (after a removal) unless told to.
iser_back() {
	_s=$(in_toolroot iscsiadm -m session -P3) || return
	echo "$_s" | grep -E 'iSCSI Session State|Attached scsi disk'
	_d=$(echo "$_s" | sed -n 's/.*Attached scsi disk \([a-z]*\).*/\1/p' | head -n 1)
	echo "$_s" | grep -q 'iSCSI Session State: LOGGED_IN' && [ -n "$_d" ] && [ -b "/dev/$_d" ] && echo "disk: /dev/$_d"
}

srp_back() {
	ls /sys/class/srp_remote_ports/ | grep -q port- || { srp_attach "$1"; return; }
	echo "rport: $(cat /sys/class/srp_remote_ports/port-*/state)"
	_d=$(ls /sys/class/scsi_host/host*/device/target*/*/block/ 2> /dev/null | head -n 1)
	grep -qx running /sys/class/srp_remote_ports/port-*/state && [ -n "$_d" ] && [ -b "/dev/$_d" ] &&
		echo "disk: /dev/$_d"
}

rnbd_back() {
	_src=$(ip -4 -o addr show eth0 | awk '{ sub(/\/.*/, "", $4); print $4 }')
	_sess=$(hostname)-$(awk -v a="$1" '$1 == a { print $2 }' /scenario/hosts)
	_s=/sys/class/rtrs-client/$_sess/paths/ip:$_src@ip:$1
	# The write returns once the path reconnected, or fails (ENOTCONN: retry).
	[ "$(cat "$_s/state")" = connected ] || echo 1 > "$_s/reconnect" || return
	echo "path: $(cat "$_s/state")"
	echo "rnbd0: $(cat /sys/block/rnbd0/rnbd/state)"
	[ "$(cat "$_s/state")" = connected ] && [ "$(cat /sys/block/rnbd0/rnbd/state)" = open ] && echo "disk: /dev/rnbd0"
}

# SRP: ib_srpt in configfs (targetcli cannot set its RDMA/CM port; srpt has no demo mode, so
# each initiator gets an ACL) and ib_srp's add_target with an RDMA/CM destination. The target's
# port is named by its GID 0; an initiator's port ID is 0x<8 zero bytes><its GID 0's interface
# ID>, and it logs in naming the target's service GUID: the two swap them over TCP first
# (srp_offer/srp_accept, then srp_reply/srp_learn), as an administrator would read them off.
SRP_PORT=5555
_gid0() { tr -d : < "/sys/class/infiniband/$1/ports/1/gids/0"; }

srp_target() {
	modprobe ib_srpt || return
	_tp=$_cfg/srpt/0x$(_gid0 "$1")
	mkdir -p "$_cfg/core/iblock_0/ram0" && echo udev_path=/dev/ram0 > "$_cfg/core/iblock_0/ram0/control" &&
		echo 1 > "$_cfg/core/iblock_0/ram0/enable" &&
		mkdir -p "$_tp/tpgt_1/lun/lun_0" && ln -s "$_cfg/core/iblock_0/ram0" "$_tp/tpgt_1/lun/lun_0/ram0" &&
		echo "$SRP_PORT" > "$_cfg/srpt/discovery_auth/rdma_cm_port" && echo 1 > "$_tp/tpgt_1/enable" || return
	echo "tport: ${_tp##*/}"
	echo "rdma_cm_port: $(cat "$_cfg/srpt/discovery_auth/rdma_cm_port")"
	echo "service guid: $(cat /sys/module/ib_srpt/parameters/srpt_service_guid)"
}

# srp_offer TARGET PORT DEV: tells VM TARGET this initiator's port ID (until it listens).
srp_offer() {
	echo "0x0000000000000000$(_gid0 "$3" | cut -c17-)" > /tmp/srp-id &&
		RETRY_FOR=240 retry "srp-offer-$1" 10 sh -c "nc -w 5 $(ip_of "$1") $2 < /tmp/srp-id"
}

# srp_accept PORT: takes an initiator's port ID and gives it an ACL mapping LUN 0.
srp_accept() {
	nc -l -p "$1" < /dev/null > /tmp/srp-peer || return
	_acl=$(ls -d "$_cfg"/srpt/0x*/tpgt_1)/acls/$(cat /tmp/srp-peer)
	mkdir -p "$_acl/lun_0" && ln -s "$(dirname "$_acl")/../lun/lun_0" "$_acl/lun_0/map" || return
	echo "acl: $(basename "$_acl")"
}

# srp_reply INITIATOR PORT / srp_learn PORT: the target's service GUID to the initiator.
srp_reply() {
	cat /sys/module/ib_srpt/parameters/srpt_service_guid > /tmp/srp-guid &&
		RETRY_FOR=240 retry "srp-reply-$1" 10 sh -c "nc -w 5 $(ip_of "$1") $2 < /tmp/srp-guid"
}
srp_learn() {
	nc -l -p "$1" < /dev/null > /tmp/srp-target-guid && echo "service guid: $(cat /tmp/srp-target-guid)"
}

srp_initiator() {
	modprobe ib_srp && ls /sys/class/infiniband_srp/
}

srp_initiator_stop() {
	rmmod ib_srp && echo "ib_srp removed"
}

# srp_attach ADDR: logs in to the SRP target at ADDR; the SCSI disk it brings.
srp_attach() {
	_g=$(cat /tmp/srp-target-guid)
	_ctl=$(ls -d /sys/class/infiniband_srp/srp-*-1)
	echo "id_ext=$_g,ioc_guid=$_g,dest=$1:$SRP_PORT" > "$_ctl/add_target" || return
	for _ in $(seq 100); do
		ls /sys/class/scsi_host/host*/device/target*/*/block/ > /dev/null 2>&1 && break
		sleep 0.1
	done
	for _h in /sys/class/scsi_host/host*; do
		[ "$(cat "$_h/proc_name")" = ib_srp ] || continue
		echo "${_h##*/}: local_ib_device $(cat "$_h/local_ib_device"), ch_count $(cat "$_h/ch_count"), dgid $(cat "$_h/dgid")"
		_d=$(ls "$_h"/device/target*/*/block/ 2> /dev/null | head -n 1)
	done
	echo "rport: $(cat /sys/class/srp_remote_ports/port-*/state)"
	[ -n "$_d" ] && [ -b "/dev/$_d" ] && echo "disk: /dev/$_d"
}

srp_detach() {
	for _p in /sys/class/srp_remote_ports/port-*; do echo 1 > "$_p/delete" || return; done
	for _ in $(seq 300); do
		ls /sys/class/srp_remote_ports/ | grep -q port- || break
		sleep 0.1
	done
	echo "remote ports left: $(ls /sys/class/srp_remote_ports/ | wc -l)"
}

# The fabric's own directory holds ib_srpt (LIO takes a module reference for it): it goes last.
srp_target_stop() {
	_tp=$(ls -d "$_cfg"/srpt/0x*)
	echo 0 > "$_tp/tpgt_1/enable" || return
	for _acl in "$_tp"/tpgt_1/acls/*; do
		[ -d "$_acl" ] || continue
		rm "$_acl/lun_0/map" && rmdir "$_acl/lun_0" "$_acl" || return
	done
	rm "$_tp/tpgt_1/lun/lun_0/ram0" && rmdir "$_tp/tpgt_1/lun/lun_0" "$_tp/tpgt_1" "$_tp" &&
		echo 0 > "$_cfg/srpt/discovery_auth/rdma_cm_port" && rmdir "$_cfg/core/iblock_0/ram0" "$_cfg/core/iblock_0" &&
		rmdir "$_cfg/srpt" && rmmod ib_srpt && echo "ib_srpt removed"
}

# RNBD: the target (rnbd_server) exports block devices by path (port 1234); the initiator
# (rnbd_client) maps one with a line to map_device, over an RTRS session of one path.
rnbd_target() {
	modprobe rnbd_server || return
	for _ in $(seq 100); do rdma resource show cm_id | grep -q ':1234 ' && break; sleep 0.1; done
	rdma resource show cm_id | grep ':1234 '
}

rnbd_initiator() {
	modprobe rnbd_client && ls /sys/class/rnbd-client/ctl/
}

# rnbd_attach ADDR: maps ADDR's /dev/ram0 read-write (the server lets one client write at a time:
# the caller retries while another has it).
rnbd_attach() {
	_src=$(ip -4 -o addr show eth0 | awk '{ sub(/\/.*/, "", $4); print $4 }')
	_path=ip:$_src@ip:$1
	# A session's name may hold neither "/" nor ".": it is named by the VMs.
	_sess=$(hostname)-$(awk -v a="$1" '$1 == a { print $2 }' /scenario/hosts)
	echo "sessname=$_sess path=$_path device_path=/dev/ram0 access_mode=rw" \
		> /sys/class/rnbd-client/ctl/map_device || return
	_s=/sys/class/rtrs-client/$_sess/paths/$_path
	echo "path: $(cat "$_s/state") on $(cat "$_s/hca_name") port $(cat "$_s/hca_port")"
	echo "rnbd0: $(cat /sys/block/rnbd0/rnbd/state), mapped $(cat /sys/block/rnbd0/rnbd/mapping_path)"
	[ -b /dev/rnbd0 ] && echo "disk: /dev/rnbd0"
}

# rnbd_detach ADDR: unmaps rnbd0, then waits for the RTRS session to ADDR to close: the last
# unmap closes it in the background, and rnbd_client's exit does not wait for that (removed
# first, on the debug kernel the session's close work called into the unloaded module).
rnbd_detach() {
	_sess=$(hostname)-$(awk -v a="$1" '$1 == a { print $2 }' /scenario/hosts)
	echo normal > /sys/block/rnbd0/rnbd/unmap_device || return
	for _ in $(seq 300); do [ -e /sys/block/rnbd0 ] || break; sleep 0.1; done
	[ ! -e /sys/block/rnbd0 ] && echo "rnbd0 unmapped" || return
	for _ in $(seq 300); do [ -e "/sys/class/rtrs-client/$_sess" ] || break; sleep 0.1; done
	[ ! -e "/sys/class/rtrs-client/$_sess" ] && echo "session $_sess closed"
}

rnbd_target_stop() {
	ls /sys/class/rnbd-server/ctl/devices/ 2> /dev/null
	rmmod rnbd_server rtrs_server && echo "rnbd_server removed"
}

rnbd_initiator_stop() {
	rmmod rnbd_client rtrs_client && echo "rnbd_client removed"
}
