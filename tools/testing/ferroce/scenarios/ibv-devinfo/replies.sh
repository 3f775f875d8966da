# Host control's replies read whole while the shell's children exit: each exit is a SIGCHLD
# to the shell that reads the reply (in-flight.sh's four ibv_devinfo processes end while it
# reads the answer to "stall off"). The host sends these replies a few bytes at a time, so
# the reader waits in the middle of lines while 20 children end, in each of three rounds.
. /ferroce/lib.sh
words="the quick brown fox jumps over the lazy dog"
n=0
for _ in $(seq 3); do
	for j in $(seq 20); do sleep "0.$(printf %02d $((j * 4)))" & done
	hostctl echo-slowly $words > /tmp/reply || exit 1
	wait
	[ "$(grep -cxF "$words" /tmp/reply)" = 10 ] && n=$((n + 1))
done
echo "whole replies: $n of 3"
