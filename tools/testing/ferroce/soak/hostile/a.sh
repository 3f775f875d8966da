# The hostile campaign (make soak): 10^5 random verbs calls from processes killed at random,
# 100 removals of ferroce.ko under a process holding a context and 100 under kernel verbs
# traffic, then a pingpong. make check runs the same with 10^4 calls and 20 cycles
# (scenarios verbs-hostile and kverbs).
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step res-before 15 rdma res show
step random 3600 ferroce_random -n 100000 -p 4 -s 2
step res-after 15 sh -c 'sleep 1; rdma res show'
step objects-random 15 hostctl nic objects
ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18900 > /tmp/server.out 2>&1 &
retry pingpong-after 60 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18900 "$(ip_of a)"
wait
step rmmod 30 rmmod ferroce
step unplug 1200 sh /scenario/unplug.sh 100
step load-kverbs 30 modprobe ferroce_kverbs_test
step unload-under-traffic 1200 sh /scenario/unload.sh 100
step unload-kverbs 30 rmmod ferroce_kverbs_test
step modules-gone 5 sh -c '! grep -E "^(ferroce|ferroce_kverbs_test) " /proc/modules'
