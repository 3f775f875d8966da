# tools-matrix, VM a: the clients, each tool on ferroce0 then on rxe0, at MTU 1500 and 9000.
. /scenario/common.sh
# All sizes (-a) of a latency test take rxe more than two minutes under TCG.
export TOOLS_SECS=600
step rdma-setup 60 sh -c 'modprobe ferroce && modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth1'
step gids-ferroce 40 sh -c "$SC ipv4_gid ferroce0 3"
step gids-rxe 40 sh -c "$SC ipv4_gid rxe0 1"
wait_for_ping "$(peer_on ferroce b)"
wait_for_ping "$(peer_on rxe b)"
# A mode perftest refuses fails at once on both sides: do not retry it for long.
export TOOLS_RETRY_FOR=40
run_tools client b
step mtu-9000 30 sh -c "$SC ip link set eth0 mtu 9000 && ip link set eth1 mtu 9000 && active_mtu ferroce0 4096 && active_mtu rxe0 4096"
signal "$(ip_of b)" 18893 mtu-a
run_tools client b -9000 19600
step nic-counters 15 hostctl nic counters
