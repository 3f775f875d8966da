# perftest client on ferroce0 (GID 3, RoCE v2 IPv4), kernel-bypass through the provider.
. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
server=$(ip_of b)
wait_for_ping "$server"
perftest_client ferroce0 3 "$server"
# Doorbell records the NIC polls (FERROCE_DOORBELL=record): ib_write_bw of 64 and of 256 WRs,
# the NIC's counters around each; scenario.py checks what the 192 more WRs cost.
export FERROCE_DOORBELL=record
for n in 64 256; do
	step "record-n$n-before" 15 hostctl nic counters
	RETRY_FOR=60 retry "record-n$n" 140 ib_write_bw -F -d ferroce0 -x 3 -p $((18700 + n)) \
		-s 64 -n "$n" "$server" < /dev/null
	step "record-n$n-after" 15 hostctl nic counters
done
step nic-counters 15 hostctl nic counters
