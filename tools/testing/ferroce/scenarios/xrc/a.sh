# xrc, VM a: ferroce_xrc on its own NIC first, then the clients of VM b's servers, each pair
# started by a signal to b (guest/lib.sh: signal), so that a failed pair never leaves the next
# one out of step. clients.sh runs a client again only while its server does not listen yet.
. /scenario/common.sh
server=$(ip_of b)
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step xrc-verbs 90 ferroce_xrc ferroce0 3
wait_for_ping "$server"
signal "$server" 18820 go-xsrq
step xsrq-pingpong 90 sh /scenario/clients.sh 3 60 \
	ibv_xsrq_pingpong -d ferroce0 -g 3 -n 100 -p 18800 "$server"
signal "$server" 18821 go-xsrq-events
step xsrq-pingpong-events 90 sh /scenario/clients.sh 3 60 \
	ibv_xsrq_pingpong -d ferroce0 -g 3 -n 100 -e -p 18801 "$server"
i=0
echo "$XRC_PERFTESTS" | while read -r name tool args; do
	signal "$server" $((18830 + i)) "go-$name"
	# shellcheck disable=SC2086 # $args holds the tool's options
	step "$name" 90 sh /scenario/clients.sh 1 60 \
		$tool -F -c XRC -d ferroce0 -x 3 -p $((18810 + i)) $args "$server" < /dev/null
	i=$((i + 1))
done
step nic-counters 15 hostctl nic counters
