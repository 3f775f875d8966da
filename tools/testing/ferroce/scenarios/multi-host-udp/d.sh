# VM d (ferroce), on host east: ibv_rc_pingpong to rxe VM c over a UDP tunnel (guest/lib.sh).
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step nic-wire 10 hostctl nic status
rxe_pingpong_client c
