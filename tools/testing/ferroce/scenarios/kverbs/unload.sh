# unload.sh N: N times, ferroce.ko is loaded, ferroce_kverbs_test (loaded) binds ferroce0,
# sets up its QPs and streams RDMA WRITEs from a kernel thread (phase "stream"), and the
# driver is removed under that traffic: ib_core removes the test's client, which stops the
# stream with a chain in flight and destroys its objects, then the device goes. One line
# per cycle: rmmod's status and time, and what the stream did.
. /ferroce/lib.sh
n=$1 failed=0
p=/sys/module/ferroce_kverbs_test/parameters
for i in $(seq "$n"); do
	modprobe ferroce || { echo "cycle $i: modprobe failed"; exit 1; }
	wait_for_gid ferroce0 3 || exit 1
	if ! echo setup > $p/run || ! echo stream > $p/run; then
		echo "cycle $i: $(cat $p/result)"
		rmmod ferroce
		exit 1
	fi
	# Let a few chains go by, then remove the device under the stream.
	sleep 0.$((2 + i % 5))
	t0=$(_uptime)
	rmmod ferroce
	rc=$?
	t1=$(_uptime)
	echo "cycle $i: rmmod rc=$rc in $(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}') s: $(cat $p/result)"
	case $(cat $p/result) in
	*" under traffic: stream rounds="[1-9]*" bad=0 "*) [ "$rc" = 0 ] || failed=$((failed + 1)) ;;
	*) failed=$((failed + 1)) ;;
	esac
done
echo "unload cycles: $n, failed: $failed"
[ "$failed" = 0 ]
