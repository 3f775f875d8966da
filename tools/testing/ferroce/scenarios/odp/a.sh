# Client side: rdma-core's and perftest's own on-demand paging modes against VM b.
. /ferroce/lib.sh
server=$(ip_of b)
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
wait_for_ping "$server"
step odp-caps 30 sh -c 'ibv_devinfo -d ferroce0 -v | grep -A12 -i "odp"'
step odp-hugetlb-refused 30 ferroce_odp -d ferroce0 -H
# 16 on-demand MRs of 1 GiB over memory that is not there leave room for other objects; in an
# rdma cgroup of 5 objects, the PD and 4 MRs are all a process gets.
step odp-reserve 60 ferroce_odp -d ferroce0 -R 16
step odp-reserve-cgroup 60 sh -c 'mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup &&
	echo +rdma > /sys/fs/cgroup/cgroup.subtree_control && mkdir /sys/fs/cgroup/odp &&
	echo "ferroce0 hca_object=5" > /sys/fs/cgroup/odp/rdma.max && cat /sys/fs/cgroup/odp/rdma.max &&
	echo $$ > /sys/fs/cgroup/odp/cgroup.procs && exec ferroce_odp -d ferroce0 -R 16'
# A page fault that waits for memory (a FUSE daemon holds its reads) holds up neither netdev
# changes (rtnl) nor another MR's fault; let go, it is served.
step fuse-mount 30 sh -c '. /ferroce/lib.sh; mkdir -p /mnt/held && { ferroce_fuse /mnt/held > /tmp/fuse.log 2>&1 & } &&
	wait_for_line /tmp/fuse.log "^mounted"'
step fault-held 60 sh -c '. /ferroce/lib.sh; { ferroce_odp -d ferroce0 -g 3 -L /mnt/held/data > /tmp/held.log 2>&1 & } &&
	wait_for_line /tmp/held.log "^odp loopback: write posted" && wait_for_line /tmp/fuse.log "^held read"'
step netdev-while-fault-waits 30 sh -c 'ip link set lo mtu 1500 && ip link set lo mtu 65536 && echo "lo mtu changed twice"'
step second-mr-while-fault-waits 60 ferroce_odp -d ferroce0 -g 3 -L
step fault-released 60 sh -c '. /ferroce/lib.sh; grep -q "^odp loopback ok" /tmp/held.log && { echo "served before the daemon answered"; exit 1; }
	kill -USR1 $(pidof ferroce_fuse) && wait_for_line /tmp/fuse.log "^released" &&
	wait_for_line /tmp/held.log "^odp loopback (ok|.*: write:)" && umount /mnt/held && cat /tmp/held.log'
# Page faults that are not true (host control "lie"): the driver drops and counts them and
# serves the true one beside them; a flood of copies of a fault is served as one.
for lie in page-fault-key page-fault-range page-fault-flood; do
	step "$lie-before" 15 hw_counters ferroce0
	step "$lie-arm" 15 hostctl nic lie "$lie" 1
	step "$lie" 60 ferroce_odp -d ferroce0 -g 3 -L
	step "$lie-after" 15 hw_counters ferroce0
done
step lies-told 15 hostctl nic status
step odp-dropped-pages 180 ferroce_odp -d ferroce0 -g 3 -p 18520 -r 4 "$server"
retry rc-pingpong-odp-4096 120 ibv_rc_pingpong -d ferroce0 -g 3 -o -s 4096 -n 100 -p 18515 "$server"
retry rc-pingpong-odp-1048576 120 ibv_rc_pingpong -d ferroce0 -g 3 -o -s 1048576 -n 10 -p 18516 "$server"
retry rc-pingpong-odp-prefetch 120 ibv_rc_pingpong -d ferroce0 -g 3 -o -P -s 65536 -n 100 -p 18517 "$server"
retry write-bw-odp 180 ib_write_bw -F -d ferroce0 -x 3 --odp -s 65536 -n 200 -p 18518 "$server"
retry read-bw-odp 180 ib_read_bw -F -d ferroce0 -x 3 --odp -s 65536 -n 200 -p 18519 "$server"
step nic-counters 15 hostctl nic counters
