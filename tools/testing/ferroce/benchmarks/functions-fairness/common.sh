. /ferroce/lib.sh
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3

# measure OFFSET GO_PORT QUIET_PORT: a VF's two runs of ib_write_bw to d (ports 18900 + OFFSET
# quietly, 18902 + OFFSET under the flood), side by side with the other VF's; between them it
# tells a (on QUIET_PORT) that its quiet run is done and waits for a's go (on GO_PORT).
measure() {
	wait_for_ping "$(ip_of d)"
	retry write-bw-quiet 120 ib_write_bw -d ferroce0 -x 3 -s 65536 -D 15 -p $((18900 + $1)) "$(ip_of d)"
	signal "$(ip_of a)" "$3" quiet
	await go "$2"
	retry write-bw-flood 120 ib_write_bw -d ferroce0 -x 3 -s 65536 -D 15 -p $((18902 + $1)) "$(ip_of d)"
}
