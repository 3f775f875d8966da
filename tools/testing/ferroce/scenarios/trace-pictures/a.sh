# trace-pictures, VM a (the client): runs that make the figures of Documentation/infiniband/
# ferroce.rst, each after a mark in the NIC's trace so that the pictures can find it.
. /ferroce/lib.sh
server=$(ip_of b)
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
wait_for_ping "$server"
# One SEND of 64 bytes per iteration: one doorbell (a push), one frame, one ACK, one CQE.
step mark-pingpong 15 hostctl nic trace mark pingpong
retry rc-pingpong 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 64 -n 5 -p 18515 "$server"
# The same with completion events (-e): CQE, then EQE and MSI-X, then the consumer re-arms.
step mark-pingpong-events 15 hostctl nic trace mark pingpong-events
retry rc-pingpong-events 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 64 -n 5 -e -p 18518 "$server"
# RDMA WRITEs of 4 KiB, posted 4 per ibv_post_send: one doorbell per 4 WQEs, 4 frames each.
step mark-write-bw 15 hostctl nic trace mark write-bw
retry write-bw 120 ib_write_bw -d ferroce0 -x 3 -s 4096 -n 16 -l 4 -t 8 -F -p 18516 "$server"
# a's NIC drops 30 % of the requests it sends: lost SENDs come again, by the retransmission
# timer. Its ACKs all go: ibv_rc_pingpong has no goodbye, and a lost ACK of b's last SEND would
# leave b retrying against the QP a destroyed on exit ("retry counter exceeded" on b). The drops
# are the first draws of seed 0's stream, which never has 8 in a row (a SEND goes at most 8
# times): a test of the NIC's faults (engine/faults.rs) checks it.
step lossy-on 15 sh -c '. /ferroce/lib.sh; hostctl nic fault direction tx &&
	hostctl nic fault frames requests && hostctl nic fault drop 0.3'
step mark-retransmit 15 hostctl nic trace mark retransmit
retry rc-pingpong-lossy 180 ibv_rc_pingpong -d ferroce0 -g 3 -s 64 -n 30 -p 18517 "$server"
step lossy-off 15 sh -c '. /ferroce/lib.sh; hostctl nic fault off && hostctl nic fault frames all'
# b posts no receive until its NIC has RNR NAKed a's SEND (ferroce_rnr): the SEND comes again
# after the RNR timer, and completes.
step mark-rnr 15 hostctl nic trace mark rnr
retry rnr 60 ferroce_rnr -d ferroce0 -g 3 -p 18519 "$server"
step mark-end 15 hostctl nic trace mark end
