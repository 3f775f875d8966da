# xrc, VM b: the servers, each once VM a has said that its client is about to start.
. /scenario/common.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
await go-xsrq 18820
step xsrq-pingpong 90 ibv_xsrq_pingpong -d ferroce0 -g 3 -c 3 -n 100 -p 18800
await go-xsrq-events 18821
step xsrq-pingpong-events 90 ibv_xsrq_pingpong -d ferroce0 -g 3 -c 3 -n 100 -e -p 18801
i=0
echo "$XRC_PERFTESTS" | while read -r name tool args; do
	await "go-$name" $((18830 + i))
	# shellcheck disable=SC2086 # $args holds the tool's options
	step "$name" 90 $tool -F -c XRC -d ferroce0 -x 3 -p $((18810 + i)) $args < /dev/null
	i=$((i + 1))
done
step nic-counters 15 hostctl nic counters
