# Pair 1's server, for both rounds.
. /scenario/common.sh
serve alone 18800
serve together 18801
