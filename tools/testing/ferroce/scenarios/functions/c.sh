# VF 2, with limits the host set (qp=16,cq=16,mr=64): what the device reports, ib_write_bw's
# server for b, then live objects (a context with a PD, a CQ and its doorbell page) held
# while b attacks, between two readings of c's counters; then CQs until the limit refuses one.
. /scenario/common.sh
step devinfo 10 ibv_devinfo -v -d ferroce0
step write-bw-bc 300 ib_write_bw -F -d ferroce0 -x 3 -s 65536 -n 200 -p 18802
ferroce_hostile hold > /tmp/hold.out 2>&1 &
hold=$!
step holding 10 sh -c 'until grep -q holding /tmp/hold.out; do sleep 0.1; done; cat /tmp/hold.out'
step counters-before 10 hostctl nic counters
signal "$(ip_of b)" 18810 ready
await attacked 18811
step counters-after 10 hostctl nic counters
kill "$hold"
wait "$hold"
step cqs-over-limit 60 ferroce_hostile cqs
signal "$(ip_of a)" 18812 done
