# SPDX-License-Identifier: GPL-2.0
#
# multicast: what the three VMs share. mckey runs on ferroce0 (eth0, segment "lan", group
# 239.1.1.1) and on rxe0 (eth1, segment "rxe", group 239.1.2.1); a sends, b and c receive.
. /ferroce/lib.sh

# Steps run their command in a shell with lib.sh only: "sh -c \"$SC fn args\"" gives it these.
SC=". /scenario/common.sh;"

# KINDS: "kind netdev group port" per line. A receiver tells a that it listens on TCP port
# port + the last byte of its eth0 address (b: +2, c: +3): a port each, since a second client
# of one `nc -l` can be accepted into its backlog and then dropped when the first one is served.
KINDS="ferroce eth0 239.1.1.1 18900
rxe eth1 239.1.2.1 18910"
RECEIVERS="2 3"

# tell_port BASE: the port on which this receiver tells a that it listens.
tell_port() {
	echo $(($1 + $(addr_of eth0 | cut -d. -f4)))
}

# addr_of NETDEV: this VM's IPv4 address on NETDEV.
addr_of() {
	ip -4 -o addr show dev "$1" | awk '{ split($4, a, "/"); print a[1] }'
}

# mckey_receive BIND GROUP SENDER PORT: joins GROUP from BIND and waits for 10 datagrams; once
# the join is under way, tells SENDER (listening on PORT, this receiver's tell_port) that this
# receiver listens.
mckey_receive() {
	mckey -m "$2" -b "$1" -C 10 > /tmp/mckey.out 2>&1 &
	_pid=$!
	sleep 2
	_told=1
	for _ in $(seq 120); do
		echo listening | nc -w 5 "$3" "$4" && { _told=0; break; }
		sleep 1
	done
	wait "$_pid"
	_rc=$?
	cat /tmp/mckey.out
	[ $_told = 0 ] || { echo "=== the sender never listened"; return 1; }
	return $_rc
}

# mckey_send BIND GROUP: three rounds of 10 datagrams to GROUP from BIND (mckey -s joins, waits
# 3 s and sends unsignaled SENDs: a receiver counts 10 of any round).
mckey_send() {
	for _round in 1 2 3; do
		mckey -m "$2" -b "$1" -s -C 10 || return 1
	done
}
