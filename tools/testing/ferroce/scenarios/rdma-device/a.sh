# ferroce0: registration, netdev association, GID table in ib_core and in the NIC, link state.
. /ferroce/lib.sh
port=/sys/class/infiniband/ferroce0/ports/1

show_gids() { sh /scenario/gids.sh; }

# until_gid TEXT [absent]: wait (5 s at most) for a GID line containing TEXT (or its absence).
until_gid() {
	for _ in $(seq 50); do
		if show_gids | grep -q "$1"; then [ "${2:-}" != absent ] && return 0
		else [ "${2:-}" = absent ] && return 0
		fi
		sleep 0.1
	done
	return 1
}

step modprobe 60 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
step rdma-dev 10 rdma dev show
step port-state 5 cat $port/state
step gids 10 sh /scenario/gids.sh
step nic-gids 15 hostctl nic gids

ip addr add 10.0.9.1/24 dev eth0
ip -6 addr add 2001:db8::1/64 dev eth0
until_gid 2001:0db8:0000:0000:0000:0000:0000:0001 && until_gid 0000:0000:0000:0000:0000:ffff:0a00:0901
step gids-added 10 sh /scenario/gids.sh
step nic-gids-added 15 hostctl nic gids

ip addr del 10.0.9.1/24 dev eth0
ip -6 addr del 2001:db8::1/64 dev eth0
until_gid 2001:0db8 absent && until_gid 0a00:0901 absent
step gids-removed 10 sh /scenario/gids.sh
step nic-gids-removed 15 hostctl nic gids

ip link set eth0 down
sleep 0.5
step port-down 5 cat $port/state
ip link set eth0 up
for _ in $(seq 50); do grep -q ACTIVE $port/state && break; sleep 0.1; done
step port-up 5 cat $port/state
# The NIC's own port (its link to the segment) counts too.
hostctl nic port down > /dev/null
for _ in $(seq 50); do grep -q DOWN $port/state && break; sleep 0.1; done
step nic-port-down 5 cat $port/state
hostctl nic port up > /dev/null
for _ in $(seq 50); do grep -q ACTIVE $port/state && break; sleep 0.1; done
step nic-port-up 5 cat $port/state
step log 5 sh -c 'dmesg | grep ferroce'
step interrupts 5 grep ferroce /proc/interrupts
hostctl nic fatal > /dev/null
for _ in $(seq 50); do dmesg | grep -q 'reported to ib_core' && break; sleep 0.1; done
step fatal 5 sh -c 'dmesg | grep -i fatal'
step rmmod 30 rmmod ferroce
