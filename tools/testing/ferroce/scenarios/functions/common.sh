# Every VM of the scenario: its ferroce function's PCI identity, the driver's probe, ferroce0.
. /ferroce/lib.sh
step identity 10 sh -c 'for d in /sys/bus/pci/devices/*; do
	[ "$(cat $d/vendor)" = 0x1234 ] && echo "function ${d##*/} device $(cat $d/device)"; done'
step rdma-setup 30 modprobe ferroce
step probe-log 10 sh -c 'dmesg | grep "ferroce .* function .* found"'
wait_for_gid ferroce0 3
