"""Two hosts (network namespaces on an underlay LAN) joined by UDP tunnels (`--wire
udp:LOCAL,REMOTE`, QEMU's `-netdev dgram` framing): ferroce VM a on host east and ferroce VM b
on host west at the ends of one, ibv_rc_pingpong and ib_write_bw a -> b, then NVMe over RDMA
a -> b; ferroce VM d on east and rxe VM c on west at the ends of another, c's end a plain QEMU
NIC (`-netdev dgram` with inet addresses): ibv_rc_pingpong d -> c.
"""

from across_hosts import scenario_across

scenario = scenario_across("udp", timeout=120)
