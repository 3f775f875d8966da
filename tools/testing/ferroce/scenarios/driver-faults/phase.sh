# phase.sh PHASE: runs one phase of ferroce_kverbs_test and prints its result line; fails
# when the phase does (the write to "run" then fails).
p=/sys/module/ferroce_kverbs_test/parameters
echo "$1" > "$p/run"
rc=$?
cat "$p/result"
exit $rc
