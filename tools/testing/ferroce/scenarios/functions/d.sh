# Another NIC on the segment: the pingpong's server for a, across the wire.
. /scenario/common.sh
step pingpong-ad 240 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18801
