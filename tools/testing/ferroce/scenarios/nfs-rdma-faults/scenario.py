"""NFS over RDMA under faults, ferroce to ferroce: a 1 % frame drop, a NIC stall, the port down
and the RDMA driver removed during I/O.

VM b serves NFSv4.2 over RDMA (as in nfs-rdma); VM a mounts it and copies the 16 MiB pattern
there and back four times, each time into a fault of its own NIC or driver: 1 % of frames
dropped both ways for the whole copy, the NIC stalled for 3 s, its port down for 8 s (made
before the copy starts), and `rmmod ferroce` 0.3 s into the copy, `modprobe ferroce` 3 s
later. Each copy must come out bit-exact, the NIC must have retransmitted through the drop and
the port, and NFS must have connected again after the port and the driver came back. The VMs'
scripts and the checks: nfs_rdma.py's faults_scenario."""

from nfs_rdma import faults_scenario

scenario = faults_scenario(timeout=180)
