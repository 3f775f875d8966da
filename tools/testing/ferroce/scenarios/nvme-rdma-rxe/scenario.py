"""NVMe over RDMA, rxe to rxe: nvmet exports a 64 MiB RAM disk, the host writes a pattern and reads it back.

The reference run for the ferroce ones: the same VMs, kernel and checks (nvme_rdma.py).
"""

from nvme_rdma import scenario_for

scenario = scenario_for({"a": "rxe", "b": "rxe"}, timeout=120)
