# Client side: rdma-core's and perftest's own on-demand paging modes against VM b.
. /ferroce/lib.sh
server=$(ip_of b)
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
wait_for_ping "$server"
step odp-caps 30 sh -c 'ibv_devinfo -d ferroce0 -v | grep -A12 -i "odp"'
step odp-hugetlb-refused 30 ferroce_odp -d ferroce0 -H
step odp-dropped-pages 180 ferroce_odp -d ferroce0 -g 3 -p 18520 -r 4 "$server"
retry rc-pingpong-odp-4096 120 ibv_rc_pingpong -d ferroce0 -g 3 -o -s 4096 -n 100 -p 18515 "$server"
retry rc-pingpong-odp-1048576 120 ibv_rc_pingpong -d ferroce0 -g 3 -o -s 1048576 -n 10 -p 18516 "$server"
retry rc-pingpong-odp-prefetch 120 ibv_rc_pingpong -d ferroce0 -g 3 -o -P -s 65536 -n 100 -p 18517 "$server"
retry write-bw-odp 180 ib_write_bw -d ferroce0 -x 3 --odp -s 65536 -n 200 -p 18518 "$server"
retry read-bw-odp 180 ib_read_bw -d ferroce0 -x 3 --odp -s 65536 -n 200 -p 18519 "$server"
step nic-counters 15 hostctl nic counters
