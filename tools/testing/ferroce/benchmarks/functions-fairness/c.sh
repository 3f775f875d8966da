# VF c: ib_write_bw to d for 15 s, at the same time as VF b; then again while the PF floods.
. /scenario/common.sh
measure 1 18911 18913
