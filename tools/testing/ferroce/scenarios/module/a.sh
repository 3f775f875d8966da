# ferroce.ko without a ferroce function: load, look, unload.
. /ferroce/lib.sh
step modprobe 30 modprobe ferroce
step lsmod 5 cat /proc/modules
step dmesg-load 5 sh -c 'dmesg | grep ferroce'
step rmmod 30 rmmod ferroce
step dmesg-unload 5 sh -c 'dmesg | grep ferroce'
step gone 5 sh -c '! grep "^ferroce " /proc/modules'
