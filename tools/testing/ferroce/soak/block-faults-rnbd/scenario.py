"""A block consumer under faults, long (make soak): rnbd-faults with the 64 MiB pattern copied
16 times into each fault, 1 GiB per fault, the disk brought back after each as its user would.

The same VMs, scripts and checks as rnbd-faults (block_rdma.py's faults_scenario).
"""

from block_rdma import faults_scenario

scenario = faults_scenario("rnbd", timeout=7200, mibs=64, loops=16)
