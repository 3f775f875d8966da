# Server side: serve each client tool in turn, its memory on demand too.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step odp-dropped-pages 240 ferroce_odp -d ferroce0 -g 3 -p 18520 -r 4
step rc-pingpong-odp-4096 180 ibv_rc_pingpong -d ferroce0 -g 3 -o -s 4096 -n 100 -p 18515
step rc-pingpong-odp-1048576 180 ibv_rc_pingpong -d ferroce0 -g 3 -o -s 1048576 -n 10 -p 18516
step rc-pingpong-odp-prefetch 180 ibv_rc_pingpong -d ferroce0 -g 3 -o -P -s 65536 -n 100 -p 18517
step write-bw-odp 240 ib_write_bw -F -d ferroce0 -x 3 --odp -s 65536 -n 200 -p 18518
step read-bw-odp 240 ib_read_bw -F -d ferroce0 -x 3 --odp -s 65536 -n 200 -p 18519
step nic-counters 15 hostctl nic counters
