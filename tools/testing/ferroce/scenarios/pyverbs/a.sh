# rdma-core's own test suite (pyverbs), against ferroce0 and against rxe0 in the same VM.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
step rxe-setup 30 sh -c 'modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0'
wait_for_gid rxe0 1
step toolroot 120 toolroot_setup
# Debian ships the suite compressed, as documentation.
step tests-copy 120 sh -c 'cp -r /newroot/usr/share/doc/rdma-core/tests /tmp/tests && gunzip /tmp/tests/*.gz && ls /tmp/tests/*.py | wc -l'
# A destroyed QP's CQE never reaches the next QP with its number (provider cq_clean).
# ... nor a deregistered MR's rkey the MR after it (MR key variants).
# ... nor lose or repeat a completion across ibv_resize_cq.
# ... nor ibv_modify_srq(IBV_SRQ_MAX_WR) a posted receive.
step reuse-copy 5 cp /scenario/stale-cqe /scenario/stale-rkey /scenario/resize-cq /scenario/resize-srq /tmp/
step reuse-ferroce 60 in_toolroot python3 /tmp/stale-cqe ferroce0 3
step reuse-rxe 60 in_toolroot python3 /tmp/stale-cqe rxe0 1
step rkey-ferroce 60 in_toolroot python3 /tmp/stale-rkey ferroce0 3
step rkey-rxe 60 in_toolroot python3 /tmp/stale-rkey rxe0 1
step resize-ferroce 60 in_toolroot python3 /tmp/resize-cq ferroce0 3
step resize-rxe 60 in_toolroot python3 /tmp/resize-cq rxe0 1
step resize-srq-ferroce 60 in_toolroot python3 /tmp/resize-srq ferroce0 3
step resize-srq-rxe 60 in_toolroot python3 /tmp/resize-srq rxe0 1
step pyverbs-ferroce 2400 pyverbs_suite ferroce0 3
step pyverbs-rxe 2400 pyverbs_suite rxe0 1
step nic-counters 15 hostctl nic counters
step dmesg 10 sh -c 'dmesg | grep -iE "warning|bug:|oops" || true'
