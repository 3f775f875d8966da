"""SRP: LIO's SRP target ib_srpt (configfs, an ACL per initiator) and ib_srp's add_target.

VM b (ferroce) and VM c (rxe) are targets listening on RDMA/CM port 5555; VM a (ferroce) logs
in to b and then to c, and c to b, after each pair has swapped port IDs and service GUIDs. Each
login moves the 64 MiB pattern each way through a SCSI disk, bit-exact, and the target's RAM
disk holds it afterwards; then the remote ports are deleted, the targets taken down and the RDMA
drivers removed. The VMs' scripts and the checks: block_rdma.py.
"""

from block_rdma import scenario_for

scenario = scenario_for("srp", {"a": "ferroce", "b": "ferroce", "c": "rxe"},
                        serves={"b": ["a", "c"], "c": ["a"]}, timeout=300)
