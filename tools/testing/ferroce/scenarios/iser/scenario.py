"""iSER: LIO's iSCSI target with iSER (targetcli) and open-iscsi's iser initiator (iscsiadm).

VM b (ferroce) and VM c (rxe) are targets; VM a (ferroce) logs in to b and then to c, and c
to b. Each session moves the 64 MiB pattern each way through a SCSI disk, bit-exact, and the
target's RAM disk holds it afterwards; then everything is logged out, the targets deleted and
the RDMA drivers removed. The VMs' scripts and the checks: block_rdma.py.
"""

from block_rdma import scenario_for

scenario = scenario_for("iser", {"a": "ferroce", "b": "ferroce", "c": "rxe"},
                        serves={"b": ["a", "c"], "c": ["a"]}, timeout=240)
