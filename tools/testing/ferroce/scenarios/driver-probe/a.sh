# ferroce.ko bound to a ferroce function: probe, commands, an async event,
# unbind, then 20 more load/unload cycles.
. /ferroce/lib.sh

step counters-before 15 hostctl nic counters
step modprobe 30 modprobe ferroce
step bound 5 sh -c 'ls /sys/bus/pci/drivers/ferroce/ | grep "^0000:"'
step dmesg-probe 5 sh -c 'dmesg | grep ferroce'
step counters-probe 15 hostctl nic counters
step objects-probe 15 hostctl nic objects
step port-down 15 hostctl nic port down
# The NIC applies host requests on its own thread: wait for the event. (Read
# each reply whole: a reader that quits early leaves the rest on the line.)
step async-posted 15 sh -c '. /ferroce/lib.sh
	for i in $(seq 50); do
		out=$(hostctl nic counters)
		case $out in *"\"async_events\": 1,"*) echo posted; exit 0 ;; esac
		sleep 0.1
	done
	exit 1'
step rmmod 30 rmmod ferroce
step dmesg-remove 5 sh -c 'dmesg | grep ferroce'
step counters-remove 15 hostctl nic counters
step objects-remove 15 hostctl nic objects
step port-up 15 hostctl nic port up
step reload 600 sh -c 'for i in $(seq 1 20); do modprobe ferroce && rmmod ferroce || { echo "cycle $i failed"; exit 1; }; done; echo "20 cycles done"'
step dmesg-reload 5 sh -c 'dmesg | grep ferroce'
step counters-reload 15 hostctl nic counters
step gone 5 sh -c '! grep "^ferroce " /proc/modules'
