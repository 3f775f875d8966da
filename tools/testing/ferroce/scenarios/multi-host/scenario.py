"""Two hosts (network namespaces, each with a Linux bridge, joined by VXLAN over an underlay):
ferroce VM a on host east, ferroce VM b and rxe VM c on host west. The NICs' ports are TAPs
on their hosts' bridges (`--wire tap:NAME`), rxe's VM a QEMU tap. ibv_rc_pingpong and
ib_write_bw a -> b, ibv_rc_pingpong a -> c (ferroce to rxe), then NVMe over RDMA a -> b.
"""

from across_hosts import scenario_across

scenario = scenario_across("tap", timeout=120)
