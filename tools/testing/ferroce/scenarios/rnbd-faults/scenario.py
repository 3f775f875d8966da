"""RNBD under faults: VM a (ferroce) maps VM b's RAM disk over RTRS (ferroce) and copies the
16 MiB pattern through /dev/rnbd0 into each fault of its own NIC and driver: 1 % of frames
dropped and the NIC stalled for 3 s (bit-exact), its port down for 8 s and ferroce removed 0.3
s into the copy for 3 s (RTRS fails the I/O of its one path; a asks the path to reconnect, as
its sysfs offers). Nothing hangs, and one more copy after the faults is bit-exact on b's RAM
disk too. block_rdma.py's faults_scenario.
"""

from block_rdma import faults_scenario

scenario = faults_scenario("rnbd", timeout=480)
