# multicast, VM a: the sender. For each device, once both receivers listen, mckey -s.
. /scenario/common.sh
step rdma-setup 60 sh -c 'modprobe ferroce && modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth1'
wait_for_gid ferroce0 3
wait_for_gid rxe0 1
echo "$KINDS" | while read -r kind ndev group port; do
	for r in $RECEIVERS; do
		step "await-receiver-$r-$kind" 400 sh -c "nc -l -p $((port + r)) < /dev/null"
	done
	step "mckey-send-$kind" 180 sh -c "$SC mckey_send $(addr_of "$ndev") $group"
done
step nic-counters 15 hostctl nic counters
