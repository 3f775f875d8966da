# multicast, VMs b and c (c.sh is this file): the receivers. For each device, mckey joins the
# group and waits for 10 datagrams from a; then the kernel's IGMP memberships.
. /scenario/common.sh
step rdma-setup 60 sh -c 'modprobe ferroce && modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth1'
wait_for_gid ferroce0 3
wait_for_gid rxe0 1
echo "$KINDS" | while read -r kind ndev group port; do
	step "mckey-$kind" 240 sh -c "$SC mckey_receive $(addr_of "$ndev") $group $(ip_of a) $(tell_port "$port")"
done
step igmp 10 cat /proc/net/igmp
step nic-counters 15 hostctl nic counters
step dmesg 10 sh -c 'dmesg | grep -iE "warning|bug:|oops|ferroce" | tail -40 || true'
