# Pair 2's server.
. /scenario/common.sh
serve together 18802
