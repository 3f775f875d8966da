"""Two hosts (network namespaces on an underlay LAN) whose ferroce VMs' NIC ports are the two
ends of a UDP tunnel (`--wire udp:LOCAL,REMOTE`, QEMU's `-netdev dgram` framing): VM a on host
east, VM b on host west. ibv_rc_pingpong and ib_write_bw a -> b, then NVMe over RDMA a -> b.
"""

from across_hosts import scenario_across

scenario = scenario_across("udp", rxe=False)
