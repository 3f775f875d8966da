"""NVMe over RDMA, ferroce to ferroce, with 5 % of RoCE frames dropped and 5 % reordered by the NICs.

The same run as nvme-rdma (checks: nvme_rdma.py) on a lossy wire: the NICs' go-back-N
retransmission, sequence NAKs and duplicate handling must deliver every byte; the NIC counters
(retransmits, NAKs, drops) are recorded and retransmissions must have happened.
"""

from nvme_rdma import scenario_for

FAULTS = ["--fault-drop", "0.05", "--fault-reorder", "0.05", "--fault-seed", "7"]

# a.sh's NVME_CONNECT_OPTS: a slow machine fails the checks, not NVMe's error recovery.
CONNECT_OPTS = {"ctrl_loss_tmo": "900"}

# 16 MiB: enough losses to recover from (thousands), in a quarter of the time.
scenario = scenario_for({"a": "ferroce", "b": "ferroce"}, timeout=360, nic_args=FAULTS, expect_retransmits=True,
                        mibs=16, connect_opts=CONNECT_OPTS)
