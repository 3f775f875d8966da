"""iSER: LIO's iSCSI target with iSER (targetcli) and open-iscsi's iser initiator (iscsiadm).

VM b (ferroce) and VM c (rxe) are targets; VM a (ferroce) logs in to b and then to c. Each
session moves the 64 MiB pattern each way through a SCSI disk, bit-exact, and the target's RAM
disk holds it afterwards; then everything is logged out, the targets deleted and the RDMA
drivers removed. The VMs' scripts and the checks: block_rdma.py.

No rxe initiator logs in: rxe may send its DREQ before the ACK of the target's Logout Response,
the target's QP then flushes that SEND, and isert releases a flushed Logout Response without
taking it off its connection (WARNING in iscsit_release_cmd; the connection leaks, and neither
ib_isert nor the RDMA driver can be removed). It happened once in eight runs with a ferroce target;
by isert's code, any target device meets it.
"""

from block_rdma import scenario_for

scenario = scenario_for("iser", {"a": "ferroce", "b": "ferroce", "c": "rxe"},
                        serves={"b": ["a"], "c": ["a"]}, timeout=240)
