# VF c: ib_write_bw to d for 15 s, at the same time as VF b; then again while the PF floods.
. /scenario/common.sh
wait_for_ping "$(ip_of d)"
retry write-bw-quiet 120 ib_write_bw -d ferroce0 -x 3 -s 65536 -D 15 -p 18901 "$(ip_of d)"
signal "$(ip_of a)" 18913 quiet
await go 18911
retry write-bw-flood 120 ib_write_bw -d ferroce0 -x 3 -s 65536 -D 15 -p 18903 "$(ip_of d)"
