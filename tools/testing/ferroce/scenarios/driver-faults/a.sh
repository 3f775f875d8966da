# ferroce.ko against a misbehaving NIC (host control): a device fatal error,
# a stall and a hang, each while bound and at probe, and recovery after each.
. /ferroce/lib.sh

# A fatal error while bound: reported by the async EQ, drained at unbind.
step probe-1 30 modprobe ferroce
step fatal 15 hostctl nic fatal
step fatal-posted 15 sh -c '. /ferroce/lib.sh
	for i in $(seq 50); do
		out=$(hostctl nic status)
		case $out in *"\"fatal_code\": 4,"*) echo fatal; exit 0 ;; esac
		sleep 0.1
	done
	exit 1'
step rmmod-fatal 30 rmmod ferroce

# Stalled while bound: unbind must not wait for the device.
step probe-2 30 modprobe ferroce
step stall-on 15 hostctl nic stall on
step rmmod-stalled 30 rmmod ferroce
# Stalled at probe: the first command times out; then recovery.
step probe-stalled 60 modprobe ferroce
step stall-off 15 hostctl nic stall off
step rmmod-after-stall 30 rmmod ferroce
step probe-3 30 modprobe ferroce

# Hung (MMIO reads all ones) while bound, then at probe; then recovery.
step hang-on 15 hostctl nic hang on
step rmmod-hung 30 rmmod ferroce
step probe-hung 30 modprobe ferroce
step hang-off 15 hostctl nic hang off
step rmmod-after-hang 30 rmmod ferroce
step probe-4 30 modprobe ferroce
step rmmod-4 30 rmmod ferroce

# Stalled while kernel objects die: WRITEs posted, then everything destroyed and freed while
# the NIC takes nothing; resumed, it must reach none of that memory (bus mastering is off).
step probe-5 30 modprobe ferroce
wait_for_gid ferroce0 3
step kv-load 30 modprobe ferroce_kverbs_test
step kv-setup 60 sh /scenario/phase.sh setup
step stall-objects 15 hostctl nic stall on
step kv-post 60 sh /scenario/phase.sh distrust
step kv-teardown 60 sh /scenario/phase.sh teardown
step kv-unload 30 rmmod ferroce_kverbs_test
step stalled-counters 15 hostctl nic counters
step resume 15 hostctl nic stall off
step resumed-status 15 sh -c '. /ferroce/lib.sh; sleep 1; hostctl nic status'
step resumed-counters 15 hostctl nic counters
step rmmod-5 30 rmmod ferroce
step probe-6 30 modprobe ferroce
step rmmod-6 30 rmmod ferroce

step dmesg 5 sh -c 'dmesg | grep ferroce'
step counters 15 hostctl nic counters
