# The ferroce function without a driver: PCI identity, registers, counters.
. /ferroce/lib.sh
bdf=$(ferroce-bar find | head -n1)
echo "ferroce function at $bdf"
step sysfs-ids 5 sh -c "cd /sys/bus/pci/devices/$bdf && echo vendor=\$(cat vendor) && echo device=\$(cat device) && echo class=\$(cat class)"
step reg-id 5 ferroce-bar read "$bdf" 0x0
step reg-version 5 ferroce-bar read "$bdf" 0x4
step counters-before 15 hostctl nic counters
step writes 15 sh -c "for i in \$(seq 1 10); do ferroce-bar write $bdf 0x8c \$i > /dev/null || exit 1; done"
step scratch 5 ferroce-bar read "$bdf" 0x8c
step counters-after 15 hostctl nic counters
