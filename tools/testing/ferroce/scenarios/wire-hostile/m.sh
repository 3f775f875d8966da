# The hostile host: on the switch's mirror port it sees the NVMe connections between a and b,
# and forges responses at their requesters until the wire has been quiet for 20 s.
. /ferroce/lib.sh
step forge 600 ferroce_forge -n 20000 -t 500 -q 20
