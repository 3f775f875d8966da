# Another NIC: the servers of b's and c's ib_write_bw, side by side, for both rounds.
. /scenario/common.sh
for round in quiet:18900 flood:18902; do
	name=${round%:*} port=${round#*:}
	step servers-$name 300 sh -c "ib_write_bw -d ferroce0 -x 3 -s 65536 -D 15 -p $port > /tmp/b.out 2>&1 &
		ib_write_bw -d ferroce0 -x 3 -s 65536 -D 15 -p $((port + 1)) > /tmp/c.out 2>&1 &
		wait; cat /tmp/b.out /tmp/c.out"
done
