"""NFS over RDMA (NFSv4.2 and NFSv3): ferroce to ferroce, and against rxe both ways.

VM b (ferroce) and VM c (rxe) are NFS servers with an RDMA listener; VM a (ferroce) mounts b
as NFSv4.2 and NFSv3 and c as NFSv4.2, and c mounts b as NFSv4.2. Each mount moves the 64 MiB
pattern each way, bit-exact; afterwards everything is unmounted, nfsd stopped and the RDMA
driver removed. Checks: nfs_rdma.py.
"""

from nfs_rdma import scenario_for

scenario = scenario_for({"a": "ferroce", "b": "ferroce", "c": "rxe"}, servers=["b", "c"],
                        clients={"a": [("b", "4.2"), ("b", "3"), ("c", "4.2")], "c": [("b", "4.2")]},
                        timeout=240)
