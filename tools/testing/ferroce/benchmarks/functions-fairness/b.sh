# VF b: ib_write_bw to d for 15 s, at the same time as VF c; then again while the PF floods.
. /scenario/common.sh
wait_for_ping "$(ip_of d)"
retry write-bw-quiet 120 ib_write_bw -d ferroce0 -x 3 -s 65536 -D 15 -p 18900 "$(ip_of d)"
signal "$(ip_of a)" 18912 quiet
await go 18910
retry write-bw-flood 120 ib_write_bw -d ferroce0 -x 3 -s 65536 -D 15 -p 18902 "$(ip_of d)"
