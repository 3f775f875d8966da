# SPDX-License-Identifier: GPL-2.0
"""NFS over RDMA between VMs, for any mix of RDMA device kinds (the nfs-rdma* scenarios).

A server VM runs Debian's nfs-utils from the toolchain root: rpcbind, an export of a tmpfs
(/export, fsid=0), rpc.mountd and nfsd with an RDMA listener on port 20049 (svcrdma). A client
VM mounts it with `proto=rdma` (xprtrdma) as NFSv4.2 and as NFSv3, writes the 64 MiB pattern
of nvme_rdma.py with O_DIRECT (each 1 MiB write an RPC whose data the server pulls with RDMA
READs), reads it back the same way (RDMA WRITEs into the client's registered pages) and
compares; the server then checksums the files it holds. The guest side is nfs_* in guest/lib.sh.
"""

import re

from harness import CheckFailed, Run, Scenario, Vm
from nvme_rdma import DEVICE, SIZE, pattern_copied, pattern_sha256

NFS_RDMA_PORT = 20049
MOUNTS = re.compile(r"^=== STEP mount-(\w+)-([\d.]+) begin$", re.M)


def scenario_for(kinds: dict[str, str], servers: list[str], clients: dict[str, list[tuple[str, str]]],
                 timeout: int) -> Scenario:
    """`kinds` maps each VM to "ferroce" or "rxe"; `servers` export; `clients` maps a client
    VM to its (server, NFS version) mounts in the order its script makes them."""
    vms = [Vm(name, f"10.0.0.{i}/24", memory_mib=1024, nic=kind == "ferroce", toolroot=True)
           for i, (name, kind) in enumerate(kinds.items(), start=1)]
    scenario = Scenario(vms=vms, timeout=timeout)
    want = pattern_sha256()

    @scenario.check
    def rdma_devices(run: Run) -> str:
        for vm in vms:
            run.vm(vm.name).step("rdma-setup").ok()
            run.vm(vm.name).step("rdma-link").expect(rf"link {DEVICE[kinds[vm.name]]}/1 state ACTIVE .*netdev eth0")
            run.vm(vm.name).step("toolroot").ok()
        return ", ".join(f"{vm.name}: {DEVICE[kinds[vm.name]]}" for vm in vms)

    @scenario.check
    def servers_listen_on_rdma(run: Run) -> str:
        said = []
        for name in servers:
            step = run.vm(name).step("nfs-server")
            step.ok()
            step.expect(r"^grace ended: Y$")
            step.expect(r"^/export\s")
            step.expect(rf"^portlist:.*\brdma {NFS_RDMA_PORT}\b")
            said.append(f"{name}: " + step.expect(r"^versions: (.*)$").group(1))
        return "; ".join(said)

    @scenario.check
    def mounts_are_rdma(run: Run) -> str:
        said = []
        for client, mounts in clients.items():
            vm = run.vm(client)
            for server, vers in mounts:
                tag = f"{server}-{vers}"
                mount = vm.step(f"mount-{tag}")
                mount.ok()
                addr = next(v.address for v in vms if v.name == server)
                mount.expect(rf"^{re.escape(addr)}:/\S* /newroot/mnt/{server} nfs4? .*\bproto=rdma\b.*\bport={NFS_RDMA_PORT}\b")
                mount.expect(rf"Flags:.*\bvers={re.escape(vers)}\b.*\bproto=rdma\b")
                vm.step(f"mountstats-{tag}").expect(r"^\s*xprt:\s+rdma\b")
                said.append(f"{client} -> {server} ({DEVICE[kinds[client]]} -> {DEVICE[kinds[server]]}) "
                            f"NFSv{vers} proto=rdma after {mount.tries} tries")
        return "\n".join(said)

    @scenario.check
    def data_intact(run: Run) -> str:
        said = []
        for client, mounts in clients.items():
            vm = run.vm(client)
            vm.step("pattern").expect(rf"\b{SIZE}\b.*/tmp/nvme-pattern")
            for server, vers in mounts:
                said.append(pattern_copied(vm.step(f"copy-{server}-{vers}"), f"{client} -> {server} NFSv{vers}"))
        # The other side: each server holds what its clients wrote, byte for byte.
        for server in servers:
            sums = run.vm(server).step("export-sums")
            sums.ok()
            for client, mounts in clients.items():
                for s, vers in mounts:
                    if s == server:
                        sums.expect(rf"^{want}\s+{re.escape(client)}-{re.escape(vers)}\.pattern$")
            said.append(f"{server}: {len(re.findall(rf'^{want} ', sums.output, re.M))} files hold the pattern")
        return "\n".join(said)

    @scenario.check
    def ferroce_carried_it(run: Run) -> str:
        """The ferroce NICs moved the data as NFS over RDMA does: a client registers its pages
        with FRWR, the server pulls written data with RDMA READs and pushes read data with RDMA
        WRITEs, and answers with SEND with invalidate; each NIC counted its side of it."""
        said = []
        for vm in vms:
            if kinds[vm.name] != "ferroce":
                continue
            counters = run.vm(vm.name).step("nic-counters").json("counters")
            # Each mount moves the pattern once each way: DMA reads on one side, writes on the other.
            moved = sum(SIZE for c, m in clients.items() for s, _ in m if vm.name in (c, s))
            needed = ["payload_read_bytes", "payload_write_bytes"]
            if vm.name in clients:
                needed += ["fast_registrations", "tx_read_responses", "rx_write_packets", "remote_invalidations"]
            if vm.name in servers:
                needed += ["tx_read_requests", "rx_read_responses", "tx_write_packets"]
            for key in needed:
                least = moved if key.startswith("payload_") else 1
                if counters[key] < least:
                    raise CheckFailed(f"{vm.name}'s NIC: {key} {counters[key]}, expected at least {least}")
            said.append(f"{vm.name}: " + " ".join(f"{k}={counters[k]}" for k in needed + ["retransmits", "timeouts"]))
        return "\n".join(said)

    @scenario.check
    def clean_teardown(run: Run) -> str:
        for client, mounts in clients.items():
            for server, vers in mounts:
                run.vm(client).step(f"umount-{server}-{vers}").expect(rf"^unmounted /mnt/{server}$")
        for server in servers:
            stop = run.vm(server).step("nfs-server-stop")
            stop.ok()
            stop.expect(r"^threads: 0$")
            stop.expect(r"^portlist: *$")
        said = []
        for vm in vms:
            step = run.vm(vm.name).step("rmmod")
            step.ok()
            module = "ferroce" if kinds[vm.name] == "ferroce" else "rdma_rxe"
            said.append(step.expect(rf"^{module} removed$").group(0))
        return ", ".join(said)

    return scenario
