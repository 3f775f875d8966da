# VM a has ferroce (GID 3): first the client of VM b's rxe, then the server for it.
# The client retries while the server does not listen yet; 40 s of that leaves the step time to
# show why a try failed before the scenario's 120 s run out.
. /ferroce/lib.sh
peer=$(ip_of b)
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
wait_for_ping "$peer"
retry rc-pingpong-to-rxe 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18700 "$peer"
RETRY_FOR=40 retry write-bw-to-rxe 280 ib_write_bw -F -d ferroce0 -x 3 -s 65536 -n 200 -p 18701 "$peer"
step pmem-to-rxe 120 ferroce_pmem -d ferroce0 -g 3 -p 18704 "$peer"
step rc-pingpong-from-rxe 180 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18702
step write-bw-from-rxe 300 ib_write_bw -F -d ferroce0 -x 3 -s 65536 -n 200 -p 18703
step pmem-from-rxe 120 ferroce_pmem -d ferroce0 -g 3 -p 18705
step nic-counters 15 hostctl nic counters
