"""A kernel consumer under faults, long (make soak): nfs-rdma-faults with the 64 MiB pattern
copied 16 times into each fault, 1 GiB each way per fault.

The same VMs, scripts and checks as nfs-rdma-faults (nfs_rdma.py's faults_scenario): an NFSv4.2
client over ferroce copies into a 1 % frame drop, a 3 s NIC stall, its port down for 8 s and its
RDMA driver removed for 3 s, round after round; every copy bit-exact, every file on the server the pattern, the kernel log clean.
"""

from nfs_rdma import faults_scenario

scenario = faults_scenario(timeout=7200, mibs=64, loops=16)
