# A NIC with two MSI-X vectors: one for EQ 0, one for EQ 1, no completion EQs.
. /ferroce/lib.sh
step modprobe 60 modprobe ferroce
wait_for_gid ferroce0 3
step rdma-link 10 rdma link show
step interrupts 5 grep ferroce /proc/interrupts
step nic-objects 15 hostctl nic objects
step rmmod 30 rmmod ferroce
