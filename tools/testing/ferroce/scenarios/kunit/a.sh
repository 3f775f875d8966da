# KUnit suites: the Rust abstractions' run at boot, the driver's when the module loads.
. /ferroce/lib.sh
step boot-suites 5 sh -c 'dmesg | grep -E "KTAP|# Subtest|^\[[ 0-9.]+\]  *(not )?ok |# Totals"'
step modprobe 30 modprobe ferroce
step module-suites 5 sh -c 'dmesg | grep -E "KTAP|# Subtest|^\[[ 0-9.]+\]  *(not )?ok |# Totals"'
step rmmod 30 rmmod ferroce
