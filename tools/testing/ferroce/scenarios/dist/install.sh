# Both VMs: make dist's packages installed, ferroce loaded by udev, the device found; it
# sets $dev, the name Debian gives the RDMA device. Sourced by a.sh and b.sh.
step system 60 sh -c 'echo "init: $(cat /proc/1/comm)"; echo "debian: $(cat /etc/debian_version)"
	echo "kernel: $(uname -r)"; echo "dist: $(cd /dist && echo *)"
	dpkg-query -W -f "\${Package} \${Version}\n" rdma-core libibverbs1 ibverbs-providers ibverbs-utils
	echo "ferroce packages before: $(dpkg-query -W "*ferroce*" 2> /dev/null | wc -l)"'
step install 180 sh -c 'dpkg -i /dist/*.deb'
step autoload 60 sh -c 'udevadm trigger --action=add --subsystem-match=pci && udevadm settle &&
	test -d /sys/module/ferroce && echo "udev loaded ferroce"'
# Debian's rdma-core names RDMA devices by their place (60-rdma-persistent-naming.rules:
# rocep<bus>s<slot> for RoCE), as on a machine with an RNIC.
# Until udev has renamed it (the driver registers ferroce0 first) and its port has eth0.
step name 30 sh -c 'until dev=$(ls /sys/class/infiniband 2> /dev/null | grep "^rocep" | head -n 1) &&
	[ -n "$dev" ] && rdma link show "$dev/1" | grep -q " netdev eth0"; do sleep 0.1; done
	echo "device: $dev"; rdma link'
dev=$(ls /sys/class/infiniband | grep "^rocep" | head -n 1)
wait_for_gid "$dev" 3
step devinfo 30 ibv_devinfo -d "$dev"
