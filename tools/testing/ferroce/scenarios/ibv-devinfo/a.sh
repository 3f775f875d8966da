# rdma-core meets ferroce0 through our provider (libferroce-rdmav34.so): ibv_open_device makes a
# user context (a NIC context with its doorbell page mapped into the process), then the device
# and port queries.
. /ferroce/lib.sh
step modprobe 60 modprobe ferroce
wait_for_gid ferroce0 3
step provider 5 sh -c 'ls /usr/lib/x86_64-linux-gnu/libibverbs/libferroce-rdmav34.so; cat /etc/libibverbs.d/ferroce.driver'
step ibv-devices 10 ibv_devices
step ibv-devinfo 30 ibv_devinfo -v -d ferroce0
step in-flight 60 sh /scenario/in-flight.sh
step replies 30 sh /scenario/replies.sh
# A process's queues take local QIDs of its doorbell page: as many as the NIC's QID table has
# (REG_QID_TABLE_LEN, 8 here), then ENOSPC.
step qid-table 60 ferroce_hostile cqs
# Each open above allocated a NIC context and freed it on close.
step nic-objects 15 hostctl nic objects
step rmmod 30 rmmod ferroce
