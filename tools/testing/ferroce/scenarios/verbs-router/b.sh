# VM b, on the other subnet: serves both pingpongs.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rc-pingpong-routed 180 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18800
# Nothing arrives for the link-local attempt: the server waits until a says its client gave up.
step rc-pingpong-link-local 90 sh -c '
	ibv_rc_pingpong -d ferroce0 -g 0 -s 4096 -n 10 -p 18801 & pid=$!
	nc -l -p 18802 < /dev/null
	kill $pid
	wait $pid
	exit 0'
