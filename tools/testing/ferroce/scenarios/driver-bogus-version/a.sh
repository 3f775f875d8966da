# ferroce.ko with a NIC reporting an unknown interface version.
. /ferroce/lib.sh
step modprobe 30 modprobe ferroce
step dmesg-probe 5 sh -c 'dmesg | grep ferroce'
step unbound 5 sh -c '! ls /sys/bus/pci/drivers/ferroce/ | grep "^0000:"'
step counters 15 hostctl nic counters
step rmmod 30 rmmod ferroce
step dmesg-unload 5 sh -c 'dmesg | grep ferroce'
