"""NVMe over RDMA, rxe host to ferroce target: Linux's software RoCE against our RoCEv2 frames.

VM a (host) runs rxe on its virtio-net, VM b (target) has a ferroce NIC: nvmet-rdma's RDMA
READs and WRITEs come from ferroce this way. Checks: nvme_rdma.py.
"""

from nvme_rdma import scenario_for

scenario = scenario_for({"a": "rxe", "b": "ferroce"}, timeout=120)
