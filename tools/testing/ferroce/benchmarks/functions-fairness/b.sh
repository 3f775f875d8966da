# VF b: ib_write_bw to d for 15 s, at the same time as VF c; then again while the PF floods.
. /scenario/common.sh
measure 0 18910 18912
