"""RNBD over RTRS: rnbd_server exports /dev/ram0, rnbd_client maps it with map_device.

VM b (ferroce) and VM c (rxe) are servers; VM a (ferroce) maps b's disk and then c's, and c
maps b's (the server lets one client open a device read-write at a time, so c waits for a).
Each mapping moves the 64 MiB pattern each way, bit-exact, and the server's RAM disk holds it
afterwards; then the devices are unmapped, the modules removed and the RDMA drivers with them.
The same between two ferroce VMs runs on the debug kernel:
rnbd-debug. The VMs' scripts and the checks: block_rdma.py.
"""

from block_rdma import scenario_for

scenario = scenario_for("rnbd", {"a": "ferroce", "b": "ferroce", "c": "rxe"},
                        serves={"b": ["a", "c"], "c": ["a"]}, timeout=300)
