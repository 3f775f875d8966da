"""NVMe over RDMA, ferroce to ferroce: nvmet exports a 64 MiB RAM disk, the host writes a pattern and reads it back.

Both VMs have a ferroce NIC; nvme-rdma and nvmet-rdma run on ferroce0 through the kernel verbs
(fast registration, RDMA READ/WRITE, SEND, ib_cm over QP1); the target receives through
SRQs (nvmet-rdma use_srq=1). Then the host's NIC lies, once per kind, under the host's reads
(a.sh's NVME_LIES): the driver drops and counts each lie, nvme-rdma recovers and the data read
is the pattern. On the debug kernel in make check (memory lifetime under error recovery).
Checks: nvme_rdma.py.
"""

from nvme_rdma import scenario_for

LIES = ["cqe-opcode", "cqe-qpn", "cqe-wr-id", "cqe-byte-len", "cqe-wqe-index", "eqe-object"]

# a.sh's NVME_CONNECT_OPTS: a controller a lie broke reconnects after 1 s, not 10.
CONNECT_OPTS = {"reconnect_delay": "1"}

scenario = scenario_for({"a": "ferroce", "b": "ferroce"}, timeout=180, target_srq=True, lies=LIES, debug_lane=True,
                        connect_opts=CONNECT_OPTS)
