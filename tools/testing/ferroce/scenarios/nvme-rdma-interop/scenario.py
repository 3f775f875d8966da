"""NVMe over RDMA, ferroce host to rxe target: our RoCEv2 frames against Linux's software RoCE.

VM a (host) has a ferroce NIC, VM b (target) runs rxe on its virtio-net. Checks: nvme_rdma.py.
"""

from nvme_rdma import scenario_for

scenario = scenario_for({"a": "ferroce", "b": "rxe"}, timeout=120)
