# IP between the VMs, through both converged ports.
. /ferroce/lib.sh
peer=$(ip_of b)
wait_for_ping "$peer"
step ping 30 ping -c 5 -W 2 "$peer"
# b's link-local address is the EUI-64 of its MAC 52:54:00:fe:00:02.
step ping6 30 ping -6 -c 3 -W 2 fe80::5054:ff:fefe:2%eth0
# b stays up until told.
signal "$peer" 18900 pinged
