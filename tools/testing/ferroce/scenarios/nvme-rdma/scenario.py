"""NVMe over RDMA, ferroce to ferroce: nvmet exports a 64 MiB RAM disk, the host writes a pattern and reads it back.

Both VMs have a ferroce NIC; nvme-rdma and nvmet-rdma run on ferroce0 through the kernel verbs
(fast registration, RDMA READ/WRITE, SEND, ib_cm over QP1); the target receives through
SRQs (nvmet-rdma use_srq=1). Checks: nvme_rdma.py.
"""

from nvme_rdma import scenario_for

scenario = scenario_for({"a": "ferroce", "b": "ferroce"}, target_srq=True)
