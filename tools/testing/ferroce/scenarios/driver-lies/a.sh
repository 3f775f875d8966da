# ferroce.ko against a NIC that lies (host control "lie KIND 1"): one well-formed lie per
# kind under kernel-verbs traffic (ferroce_kverbs_test), the driver's counters read around
# each; then the same traffic with the lies off.
. /ferroce/lib.sh
step modprobe 30 modprobe ferroce
wait_for_gid ferroce0 3
step load 30 modprobe ferroce_kverbs_test
for lie in cqe-opcode cqe-qpn cqe-wr-id cqe-byte-len cqe-wqe-index; do
	step "$lie-setup" 60 sh /scenario/phase.sh setup
	step "$lie-before" 15 hw_counters ferroce0
	step "$lie-arm" 15 hostctl nic lie "$lie" 1
	step "$lie" 60 sh /scenario/phase.sh distrust
	step "$lie-after" 15 hw_counters ferroce0
	step "$lie-teardown" 60 sh /scenario/phase.sh teardown
done
# Events for objects that do not exist, before the SRQ's limit event.
step eqe-object-setup 60 sh /scenario/phase.sh setup
step eqe-object-before 15 hw_counters ferroce0
step eqe-object-arm 15 hostctl nic lie eqe-object 1
step eqe-object 60 sh /scenario/phase.sh srq
step eqe-object-after 15 hw_counters ferroce0
step lies-told 15 hostctl nic status
# A lie about a completion of the GSI QP (ib_mad's QP 1): the first CQE after arming is that
# of the connection request rping's rdma_cm sends through it (on the NIC's own address). The
# connection manager must go on working: a second rping connects.
step gsi-before 15 hw_counters ferroce0
step gsi-arm 15 hostctl nic lie cqe-wr-id 1
step gsi-lied 90 sh -c 'rping -s -a 10.0.0.1 -p 7175 -C 1 & sleep 1; rping -c -a 10.0.0.1 -p 7175 -C 1 -v; wait'
step gsi-after 15 hw_counters ferroce0
step gsi-cm 90 sh -c 'rping -s -a 10.0.0.1 -p 7176 -C 3 & sleep 1; rping -c -a 10.0.0.1 -p 7176 -C 3 -v && wait $!'
# Lies about command completions, to a process's verbs (ferroce_objects: a context, a PD, a CQ
# and a QP). A holder keeps a CQ of its own meanwhile: the lied-about reply names it (the
# highest-numbered other CQ), and it must live on.
ferroce_objects ferroce0 0 0 > /tmp/holder.out 2>&1 &
holder=$!
step cmd-holder 60 wait_for_line /tmp/holder.out holding
step cmd-before 15 hw_counters ferroce0
step cmd-objects-before 15 hostctl nic objects
step cmd-number-arm 15 hostctl nic lie cmd-number 1
step cmd-number 30 ferroce_objects ferroce0 1 0 once
step cmd-objects-after 15 hostctl nic objects
step cmd-status-arm 15 hostctl nic lie cmd-status 1
step cmd-status 30 ferroce_objects ferroce0 1 0 once
step cmd-unsolicited-arm 15 hostctl nic lie cmd-unsolicited 1
# The NIC stalls once it told that lie, so that the next command meets the completion nobody
# asked for; when the driver has said it passed over it, the NIC goes on (the driver waits up to
# the NIC's command timeout, 30 s here).
ferroce_objects ferroce0 1 0 once > /tmp/unsolicited.out 2>&1 &
unsolicited=$!
step cmd-unsolicited-seen 60 wait_for_kmsg "passed over a completion"
step cmd-unsolicited-go 15 hostctl nic stall off
wait "$unsolicited"
echo "rc=$?" >> /tmp/unsolicited.out
step cmd-unsolicited 15 cat /tmp/unsolicited.out
step cmd-after 15 hw_counters ferroce0
step cmd-lies-told 15 hostctl nic status
step cmd-truth 30 ferroce_objects ferroce0 1 0 once
kill "$holder"
wait "$holder" 2> /dev/null || :  # killed (143), as it should be
step cmd-holder-gone 15 hostctl nic objects
# The truth again: the same traffic works.
step truth 60 sh /scenario/phase.sh chain
step teardown 60 sh /scenario/phase.sh teardown
step unload 30 rmmod ferroce_kverbs_test
step unload-ferroce 30 rmmod ferroce
# The whole log through the console: bounded for a hang only (see kverbs).
step dmesg 30 dmesg
