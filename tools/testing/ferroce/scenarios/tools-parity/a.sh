# tools-parity, VM a: the clients. Each tool on ferroce0, then on rxe0.
. /scenario/common.sh
step rdma-setup 60 sh -c 'modprobe ferroce && modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth1'
step gids-ferroce 40 sh -c "$SC ipv4_gid ferroce0 3"
step gids-rxe 40 sh -c "$SC ipv4_gid rxe0 1"
step devinfo-ferroce 30 ibv_devinfo -v -d ferroce0
step devinfo-rxe 30 ibv_devinfo -v -d rxe0
step rdma-res 30 sh -c 'for r in "" qp cq pd mr; do echo "=== res $r"; rdma res show $r; done'
wait_for_ping "$(peer_on ferroce b)"
wait_for_ping "$(peer_on rxe b)"
# ib_write_lat -e: perftest refuses events on WRITE on every device, at once on both sides:
# tried once (retrying it would only delay the next test: 20 s a device when it did).
echo "$DEVICES" | while read -r kind dev gid ndev; do
	port=$((18810 + $([ "$kind" = rxe ] && echo 1 || echo 0)))
	RETRY_FOR=0 retry "write-lat-ev-$kind" 150 ib_write_lat -e -s 8 -n 100 -d "$dev" -x "$gid" -p "$port" "$(peer_on "$kind" b)" < /dev/null
done
run_tools client b
echo "$DEVICES" | while read -r kind dev gid ndev; do
	port=$((18830 + $([ "$kind" = rxe ] && echo 1 || echo 0)))
	await "ucmatose-$kind" $((18890 + $([ "$kind" = rxe ] && echo 1 || echo 0)))
	# Once, not retried: the server counts connect requests.
	step "ucmatose-$kind" 240 ucmatose -s "$(peer_on "$kind" b)" -p "$port" -c 16 < /dev/null
done
step gids-before-mtu 60 sh -c "$SC gid_table ferroce0; gid_table rxe0"
step mtu-9000 30 sh -c "$SC ip link set eth0 mtu 9000 && ip link set eth1 mtu 9000 && active_mtu ferroce0 4096 && active_mtu rxe0 4096"
step gids-after-mtu 60 sh -c "$SC gid_table ferroce0; gid_table rxe0"
signal "$(ip_of b)" 18893 mtu-a
echo "$DEVICES" | while read -r kind dev gid ndev; do
	port=$((18840 + $([ "$kind" = rxe ] && echo 1 || echo 0)))
	retry "write-bw-9000-$kind" 150 ib_write_bw -F -d "$dev" -x "$gid" -s 65536 -n 200 -p "$port" "$(peer_on "$kind" b)" < /dev/null
	retry "write-bw-9000-auto-$kind" 150 ib_write_bw -F -d "$dev" -s 65536 -n 200 -p $((port + 2)) "$(peer_on "$kind" b)" < /dev/null
done
step nic-counters 15 hostctl nic counters
step dmesg 10 sh -c 'dmesg | grep -iE "warning|bug:|oops|ferroce" | tail -40 || true'
