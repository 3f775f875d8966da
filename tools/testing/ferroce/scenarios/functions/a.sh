# The NIC's physical function: ibv_rc_pingpong to VF b (inside the NIC) and to d (another NIC,
# over the wire), each between two readings of its function's counters; the host's view of
# the functions, and a limit beyond a VF's slice.
. /scenario/common.sh
step functions-before 15 hostctl nic functions
wait_for_ping "$(ip_of b)"
step fn-before-b 10 hostctl nic vf 0
retry pingpong-ab 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18800 "$(ip_of b)"
step fn-after-b 10 hostctl nic vf 0
wait_for_ping "$(ip_of d)"
retry pingpong-ad 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18801 "$(ip_of d)"
step fn-after-d 10 hostctl nic vf 0
step limits-over-slice 10 sh -c '. /ferroce/lib.sh; ! hostctl nic vf 2 limits qp=5000'
await done 18812
step functions-after 15 hostctl nic functions
