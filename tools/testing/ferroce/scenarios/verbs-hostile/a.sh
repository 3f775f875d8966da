# A hostile process against ferroce0, then proof that the device still works.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step counters-before 15 hostctl nic counters
step hostile 60 ferroce_hostile
step counters-after 15 hostctl nic counters
# The process exited without destroying anything: the kernel must have cleaned up.
step objects-after 15 hostctl nic objects
step dmesg 10 sh -c 'dmesg | grep -iE "warning|bug|oops|ferroce.*(rejected|error)" || true'
# Random and hostile verbs calls from 4 processes killed at random (ferroce_random), then
# nothing of theirs may be left: the kernel's resources as before, no user context in the NIC.
step res-before 15 rdma res show
step random 600 ferroce_random -n 10000 -p 4 -s 1
step res-after 15 sh -c 'sleep 1; rdma res show'
step objects-random 15 hostctl nic objects
step counters-random 15 hostctl nic counters
# Still working: an RC pingpong between two processes of this VM, through the NIC's loopback.
ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18900 > /tmp/server.out 2>&1 &
retry pingpong-after 60 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18900 "$(ip_of a)"
wait
step pingpong-server 5 cat /tmp/server.out
step rmmod 30 rmmod ferroce
# Unplug under a process: rmmod with a context open, 20 times (disassociate_ucontext).
step unplug 240 sh /scenario/unplug.sh 20
step dmesg-unplug 10 sh -c 'dmesg | grep -iE "warning|bug:|oops|memory leaks" || true'
step modules-gone 5 sh -c '! grep "^ferroce " /proc/modules'
