# Pair 2's client: once a has measured alone, at the same time as a's second run.
. /scenario/common.sh
await go 18810
bw together 18802 "$(ip_of d)"
