# Pair 1's client: alone on the segment, then at the same time as pair 2 (it tells c to go).
. /scenario/common.sh
bw alone 18800 "$(ip_of b)"
signal "$(ip_of c)" 18810 go
bw together 18801 "$(ip_of b)"
