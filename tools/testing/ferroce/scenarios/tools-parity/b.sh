# tools-parity, VM b: the servers. Each tool on ferroce0, then on rxe0.
. /scenario/common.sh
a=$(ip_of a)
step rdma-setup 60 sh -c 'modprobe ferroce && modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth1'
step gids-ferroce 40 sh -c "$SC ipv4_gid ferroce0 3"
step gids-rxe 40 sh -c "$SC ipv4_gid rxe0 1"
step devinfo-ferroce 30 ibv_devinfo -v -d ferroce0
step devinfo-rxe 30 ibv_devinfo -v -d rxe0
echo "$DEVICES" | while read -r kind dev gid ndev; do
	port=$((18810 + $([ "$kind" = rxe ] && echo 1 || echo 0)))
	step "write-lat-ev-$kind" 180 ib_write_lat -e -s 8 -n 100 -d "$dev" -x "$gid" -p "$port" < /dev/null
done
# The tools of tools.list (ports 19000 + 10 * line + device; sync signals on 18890.., to a).
run_tools server
# ucmatose -c 16: the client starts only once the server listens (a client retried after a
# partial attempt would make the server see more than 16 connect requests: it rejects those
# with IB_CM_REJ_CONSUMER_DEFINED, "error: 28" at the client, and exits).
echo "$DEVICES" | while read -r kind dev gid ndev; do
	me=$(ip -4 -o addr show "$ndev" | awk '{ sub("/.*", "", $4); print $4 }')
	port=$((18830 + $([ "$kind" = rxe ] && echo 1 || echo 0)))
	step "ucmatose-listen-$kind" 60 sh -c "$SC ucmatose_listen $me $port" < /dev/null
	signal "$a" $((18890 + $([ "$kind" = rxe ] && echo 1 || echo 0))) "ucmatose-$kind"
	step "ucmatose-$kind" 240 sh -c "$SC ucmatose_finish"
	step "cm-ids-$kind" 10 rdma resource show cm_id
done
# MTU 9000 on both segments, at run time; the GID tables must not change.
step gids-before-mtu 60 sh -c "$SC gid_table ferroce0; gid_table rxe0"
step mtu-9000 30 sh -c "$SC ip link set eth0 mtu 9000 && ip link set eth1 mtu 9000 && active_mtu ferroce0 4096 && active_mtu rxe0 4096"
step gids-after-mtu 60 sh -c "$SC gid_table ferroce0; gid_table rxe0"
await mtu-a 18893
echo "$DEVICES" | while read -r kind dev gid ndev; do
	port=$((18840 + $([ "$kind" = rxe ] && echo 1 || echo 0)))
	step "write-bw-9000-$kind" 180 ib_write_bw -F -d "$dev" -x "$gid" -s 65536 -n 200 -p "$port" < /dev/null
	# No -x: perftest picks the GID itself (IPv4 over IPv6, global over link-local, v2 over v1).
	step "write-bw-9000-auto-$kind" 180 ib_write_bw -F -d "$dev" -s 65536 -n 200 -p $((port + 2)) < /dev/null
done
step nic-counters 15 hostctl nic counters
step dmesg 10 sh -c 'dmesg | grep -iE "warning|bug:|oops|ferroce" | tail -40 || true'
