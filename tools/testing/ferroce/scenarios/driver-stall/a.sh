# ferroce.ko with a NIC that processes no commands: probe must time out.
. /ferroce/lib.sh
step modprobe 60 modprobe ferroce
step dmesg-probe 5 sh -c 'dmesg | grep ferroce'
step unbound 5 sh -c '! ls /sys/bus/pci/drivers/ferroce/ | grep "^0000:"'
step counters 15 hostctl nic counters
step objects 15 hostctl nic objects
step rmmod 30 rmmod ferroce
step dmesg-unload 5 sh -c 'dmesg | grep ferroce'
step gone 5 sh -c '! grep "^ferroce " /proc/modules'
