# Exclusive mode: ferroce0 and its netdev move into the namespace "tenant", where a pingpong
# runs, while the init namespace no longer sees the device; when the namespace ends, both come
# home and the device works there again.
. /ferroce/lib.sh
# iproute2's ip by its path: busybox's shell prefers its own applet, which has no netns.
export ip=/usr/sbin/ip
me=$(ip_of a)
peer=$(ip_of b)
# ib_core changes mode only while no namespace but the initial one exists.
step exclusive 15 rdma system set netns exclusive
step mode 15 rdma system show
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step netns-add 15 $ip netns add tenant
step move-netdev 15 $ip link set eth0 netns tenant
# A process has the device open (a pingpong server: its context, PD, MR, CQ and QP made,
# waiting for a client that never comes) when the device moves: ib_core takes its objects
# from it (the driver's disassociation), and the move goes on.
ibv_rc_pingpong -d ferroce0 -g 3 -p 18513 > /tmp/holder.out 2>&1 &
holder=$!
step holder-open 15 sh -c 'until rdma resource show qp | grep ibv_rc_pingpong; do sleep 0.1; done'
step move-device 15 rdma dev set ferroce0 netns tenant
step holder-objects 15 $ip netns exec tenant sh -c 'rdma resource show; rdma resource show qp'
kill "$holder" 2> /dev/null
wait "$holder"
echo "=== holder exited: rc=$?"
step tenant-net 15 $ip netns exec tenant sh -c \
	"$ip link set lo up && $ip addr add $me/24 dev eth0 && $ip link set eth0 up"
step tenant-device 30 $ip netns exec tenant sh -c \
	'. /ferroce/lib.sh; wait_for_gid ferroce0 3 && rdma dev && rdma link && ibv_devices'
step outside-device 15 sh -c 'rdma dev; rdma link; ibv_devices'
step outside-pingpong 15 ibv_rc_pingpong -d ferroce0 -g 3 -n 1 -p 18514 "$peer"
retry tenant-pingpong 120 $ip netns exec tenant ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18515 "$peer"
# Ending the namespace sends the device and the netdev back to the initial one.
step netns-del 15 $ip netns del tenant
step home 30 sh -c 'until rdma dev | grep -q ferroce0 && $ip link show eth0 > /dev/null 2>&1; do
	sleep 0.1; done; rdma dev && rdma link'
step home-net 15 sh -c "$ip addr add $me/24 dev eth0 && $ip link set eth0 up"
step home-gid 30 sh -c '. /ferroce/lib.sh; wait_for_gid ferroce0 3 && ibv_devices'
retry home-pingpong 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18516 "$peer"
step nic-counters 15 hostctl nic counters
step rmmod 30 rmmod ferroce
