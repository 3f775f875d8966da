# VF 1: the pingpong's server for a, ib_write_bw to VF c, then a hostile process that rings
# doorbells for queue numbers it does not own (c's among them) while c holds live objects.
. /scenario/common.sh
step pingpong-ab 180 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18800
wait_for_ping "$(ip_of c)"
retry write-bw-bc 280 ib_write_bw -F -d ferroce0 -x 3 -s 65536 -n 200 -p 18802 "$(ip_of c)"
await ready 18810
step counters-before 10 hostctl nic counters
step hostile 60 ferroce_hostile
step counters-after 10 hostctl nic counters
signal "$(ip_of c)" 18811 attacked
# The host-control line relays what a guest may ask of its own function and nothing more.
step relay-own-faults 10 sh -c '. /ferroce/lib.sh; hostctl nic fault drop 1 && hostctl nic fault off'
step relay-host-path 10 sh -c '. /ferroce/lib.sh; ! hostctl nic pcap start /tmp/ferroce-relay-probe'
step relay-other-function 10 sh -c '. /ferroce/lib.sh; ! hostctl nic vf 0 fault drop 1'
step relay-misbehave 10 sh -c '. /ferroce/lib.sh; ! hostctl nic stall on'
