# The hostile host: on the switch's mirror port it sees the NVMe connections between a and b,
# and forges responses at their requesters until a says its NVMe host is done (or the wire
# has been quiet for 20 s).
. /ferroce/lib.sh
step forge 600 sh -c '
	ferroce_forge -n 20000 -t 500 -q 20 & pid=$!
	nc -l -p 4440 < /dev/null
	kill -TERM $pid 2> /dev/null
	wait $pid'
