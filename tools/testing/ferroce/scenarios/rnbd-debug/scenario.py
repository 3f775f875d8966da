"""RNBD over RTRS between two ferroce VMs on the debug kernel (KASAN, kmemleak, lockdep).

VM b (ferroce) serves /dev/ram0 with rnbd_server; VM a (ferroce) maps it with map_device, moves
a 16 MiB pattern each way, bit-exact (rnbd moves 64 MiB on the default kernel; here the same
paths run under the debug kernel's checkers, where a copy runs at about half the speed), unmaps
it, waits for its RTRS session to close and
removes the modules and the RDMA driver: the driver's and the NIC's part of a kernel consumer
under the kernel's memory and lock checkers. (rnbd runs the interop with rxe on the default
kernel: rxe's copies under KASAN take minutes.) The VMs' scripts and the checks: block_rdma.py.
"""

from block_rdma import scenario_for

scenario = scenario_for("rnbd", {"a": "ferroce", "b": "ferroce"}, serves={"b": ["a"]}, timeout=180,
                        debug_lane=True, mibs=16)
