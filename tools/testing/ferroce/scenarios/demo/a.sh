# make run: VM a, the client. Says what it does, then does it through ferroce0.
. /ferroce/lib.sh
server=$(ip_of b)
say() { echo "### a: $*"; }
say "loading ferroce.ko: the PCI driver binds the emulated NIC, registers ferroce0"
step rdma-setup 30 modprobe ferroce
wait_for_gid ferroce0 3
say "ferroce0 and its port, as rdma-core sees it through libferroce-rdmav34.so"
step devinfo 30 sh -c 'ibv_devinfo -d ferroce0 | grep -E "hca_id|transport|vendor|state|link_layer|active_mtu"; ibv_devinfo -v -d ferroce0 | grep "GID\["'
wait_for_ping "$server"
say "ibv_rc_pingpong to $server: 100 round trips of 4 KiB, kernel bypass (WQEs into user rings, doorbells on our own page)"
step mark-pingpong 15 hostctl nic trace mark rc-pingpong
retry rc-pingpong 120 ibv_rc_pingpong -d ferroce0 -g 3 -s 4096 -n 100 -p 18515 "$server"
say "ib_write_bw to $server: RDMA WRITEs of 64 KiB"
step mark-write-bw 15 hostctl nic trace mark write-bw
retry write-bw 280 ib_write_bw -F -d ferroce0 -x 3 -s 65536 -n 500 -p 18516 "$server"
say "what the NIC counted: doorbells, WQE fetches and pushes, CQEs, interrupts, packets"
step nic-counters 15 sh -c 'cd /sys/class/infiniband/ferroce0/ports/1/hw_counters && for c in doorbells wqe_fetches wqe_pushes payload_dma_reads cqes interrupts tx_packets rx_packets retransmits; do echo "$c $(cat $c)"; done'
say "done"
