# ferroce0 as a kernel verbs consumer (ferroce_kverbs_test), one phase per step; the NIC's
# counters (ib_core's hw_counters) are read right before and after each counted phase.
. /ferroce/lib.sh
step modprobe 30 modprobe ferroce
wait_for_gid ferroce0 3
step load 30 modprobe ferroce_kverbs_test
step setup 60 sh /scenario/phase.sh setup
for phase in chain inline push; do
	step "$phase-before" 15 hw_counters ferroce0
	step "$phase" 60 sh /scenario/phase.sh "$phase"
	step "$phase-after" 15 hw_counters ferroce0
done
step cqoverrun 60 sh /scenario/phase.sh cqoverrun
step srq 60 sh /scenario/phase.sh srq
step reuse-before 15 hw_counters ferroce0
step reuse 60 sh /scenario/phase.sh reuse
step reuse-after 15 hw_counters ferroce0
step rdma-statistic 10 rdma statistic show link ferroce0/1
step teardown 60 sh /scenario/phase.sh teardown
step unload 30 rmmod ferroce_kverbs_test
step unload-ferroce 30 rmmod ferroce
# The device goes first this time, with the test's objects alive: its client removal frees them.
step reload 30 sh -c 'modprobe ferroce && modprobe ferroce_kverbs_test'
wait_for_gid ferroce0 3
step setup-again 60 sh /scenario/phase.sh setup
step remove-device 30 rmmod ferroce
step removed 5 cat /sys/module/ferroce_kverbs_test/parameters/result
# And under traffic: the device removed while a kernel thread streams WRITEs, 20 times.
step unload-under-traffic 300 sh /scenario/unload.sh 20
step unload-again 30 rmmod ferroce_kverbs_test
step modules-gone 5 sh -c 'cat /proc/modules; ! grep -E "^(ferroce|ferroce_kverbs_test) " /proc/modules'
step nic-counters 15 hostctl nic counters
# The whole log: every load of ferroce (22 here) prints its KUnit results, about 2,000 lines
# through the console. 3.9 s in the README's run, over 15 s on the debug kernel beside another
# scenario on a slower machine (its limit was 5 s, times 3 there): the bound is for a hang only.
step dmesg 60 dmesg
