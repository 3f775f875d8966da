"""SRP under faults: VM a (ferroce) logs in to VM b's ib_srpt (ferroce) and copies the 16 MiB
pattern through its SCSI disk into each fault of its own NIC and driver: 1 % of frames dropped,
the NIC stalled for 3 s, its port down for 8 s (the rport reconnects and the I/O completes)
and ferroce removed 0.3 s into the copy for 3 s (the SCSI host goes and the I/O fails; a's
add_target logs in again). Every copy that completes is bit-exact, nothing hangs, and one
more copy after the faults is bit-exact on b's RAM disk too. block_rdma.py's faults_scenario.
"""

from block_rdma import faults_scenario

scenario = faults_scenario("srp", timeout=300)
