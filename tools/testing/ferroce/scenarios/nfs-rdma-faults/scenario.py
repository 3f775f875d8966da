"""NFS over RDMA under faults, ferroce to ferroce: a 1 % frame drop and a NIC stall during I/O.

VM b serves NFSv4.2 over RDMA (as in nfs-rdma); VM a mounts it and copies the 16 MiB pattern
there and back twice, each time into a fault of its own NIC made before the copy starts: 1 % of
frames dropped both ways for the whole copy, then the NIC stalled for 3 s. Each copy must come
out bit-exact, and the NIC must have retransmitted through the drop. The VMs' scripts and the
checks: nfs_rdma.py's faults_scenario.
"""

from nfs_rdma import faults_scenario

scenario = faults_scenario(timeout=120)
