# Shared mode (ib_core's default): eth0 moves into the namespace "tenant" and ferroce0 stays in
# every namespace; a process in "tenant" runs the server side of both of a's pingpongs.
. /ferroce/lib.sh
# iproute2's ip by its path: busybox's shell prefers its own applet, which has no netns.
export ip=/usr/sbin/ip
me=$(ip_of b)
step mode 15 rdma system show
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step netns-add 15 $ip netns add tenant
step move-netdev 15 $ip link set eth0 netns tenant
step tenant-net 15 $ip netns exec tenant sh -c \
	"$ip link set lo up && $ip addr add $me/24 dev eth0 && $ip link set eth0 up"
step tenant-device 30 $ip netns exec tenant sh -c \
	'. /ferroce/lib.sh; wait_for_gid ferroce0 3 && rdma dev && rdma link && ibv_devices'
step outside-device 15 sh -c 'rdma dev; rdma link; ibv_devices'
step tenant-pingpong 180 $ip netns exec tenant ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18515
step home-pingpong 180 $ip netns exec tenant ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18516
step nic-counters 15 hostctl nic counters
