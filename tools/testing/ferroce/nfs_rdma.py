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
from typing import NamedTuple

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


class Fault(NamedTuple):
    """A fault faults_scenario's client meets: the command that makes it (on the client's own
    NIC or driver), how long it lasts (0: the whole copy), the command that ends it, whether
    the NIC must have retransmitted to get through it, and when it comes: before the copy starts
    (None: so that the copy's I/O meets it) or that many seconds into the copy (the fault then
    meets I/O in flight)."""

    on: str
    seconds: float
    off: str
    must_resend: bool
    after: float | None = None


# The faults, in order. The port stays down longer than an RC QP keeps trying (xprtrdma's 6
# retries after the first try, each after the 537 ms that rdma_cm's CM gives a RoCE QP: 3.8 s),
# so that the QP fails and NFS connects again. The removal takes the RDMA driver away under the
# copy (rmmod must return: ib_core's clients drain their QPs while it unregisters the device),
# and the hard mount's I/O waits until the driver is back and NFS has connected again.
FAULTS = {"drop": Fault("hostctl nic fault drop 0.01", 0, "hostctl nic fault off", True),
          "stall": Fault("hostctl nic stall on", 3, "hostctl nic stall off", False),
          "port": Fault("hostctl nic port down", 8, "hostctl nic port up", True),
          "removal": Fault("rmmod ferroce", 3, "modprobe ferroce", False, after=0.3)}
# The faults after which the client's transport must have connected anew.
RECONNECTS = ("port", "removal")


def fault_met(copy, name: str, fault: str) -> tuple[str, int, int]:
    """guest/lib.sh's copy_under step `copy` (called `name`) met FAULTS[fault]: it was made and
    ended; how long making it took, the frames the NIC retransmitted (the faults that must
    make it resend did) and those its port dropped while down (the port's alone)."""
    f = FAULTS[fault]
    copy.expect(rf"^fault: {re.escape(f.on)}$")
    made = copy.expect(r"^made in ([\d.]+) s$").group(1)
    copy.expect(rf"^fault ended: {re.escape(f.off)}$")
    resent = int(copy.expect(r"^retransmitted: (\d+), timer expiries: \d+$").group(1))
    if f.must_resend and resent == 0:
        raise CheckFailed(f"{name}: the NIC retransmitted nothing:\n{copy.output}")
    unported = int(copy.expect(r"^frames the port dropped while down: (\d+)$").group(1))
    if (fault == "port") != (unported > 0):
        raise CheckFailed(f"{name}: the port dropped {unported} frames while down:\n{copy.output}")
    return made, resent, unported


def fault_copies(loops: int) -> list[tuple[str, str]]:
    """Each copy of `loops` rounds over FAULTS: its name (its step's and its file's) and its fault."""
    return [(f"{fault}-{n}" if loops > 1 else fault, fault) for n in range(1, loops + 1) for fault in FAULTS]


def faults_scripts(mibs: int, loops: int) -> dict[str, str]:
    """a.sh and b.sh of faults_scenario: each fault `loops` times, a copy of the `mibs` MiB
    pattern each time."""
    copies = []
    for name, fault in fault_copies(loops):
        f = FAULTS[fault]
        after = "" if f.after is None else f" {f.after}"
        copies.append(f'step copy-{name} 600 copy_under /newroot/mnt/b/{name}.pattern "{f.on}" {f.seconds} "{f.off}"'
                      f'{after} || rc=1')
    a = ["# NFS over RDMA under faults (nfs_rdma.py's faults_scripts): a (ferroce) writes the pattern",
         "# to b's export and reads it back into each fault of its own NIC.",
         ". /ferroce/lib.sh", "rc=0", "step rdma-setup 30 modprobe ferroce", "wait_for_gid ferroce0 3",
         "step rdma-link 10 rdma link show", "step toolroot 120 toolroot_setup",
         f"export NVME_MIB={mibs}", "step pattern 300 nvme_pattern", 'wait_for_ping "$(ip_of b)"',
         'RETRY_FOR=120 retry mount-b 30 nfs_mount "$(ip_of b)" 4.2 /mnt/b || rc=1', *copies,
         "step mountstats-b 10 nfs_mountstats /mnt/b", "step umount-b 60 nfs_umount /mnt/b || rc=1", 'signal "$(ip_of b)" 4431 a-done',
         "step rmmod 60 rmmod_device ferroce || rc=1", "exit $rc"]
    b = ["# NFS server over ferroce for a, whose NIC meets faults (nfs_rdma.py's faults_scripts).",
         ". /ferroce/lib.sh", "rc=0", "step rdma-setup 30 modprobe ferroce", "wait_for_gid ferroce0 3",
         "step rdma-link 10 rdma link show", "step toolroot 120 toolroot_setup",
         "step nfs-server 60 nfs_server || rc=1", "await a-done 4431",
         "step export-sums 600 sh -c 'cd /newroot/export && sha256sum *'",
         "step nfs-server-stop 60 nfs_server_stop || rc=1", "step rmmod 60 rmmod_device ferroce || rc=1",
         "exit $rc"]
    return {"a.sh": "\n".join(a) + "\n", "b.sh": "\n".join(b) + "\n"}


def faults_scenario(timeout: int, mibs: int = 16, loops: int = 1) -> Scenario:
    """NFSv4.2 over RDMA between two ferroce VMs, a's copies each into a fault of FAULTS, `loops`
    rounds (nfs-rdma-faults; make soak's consumer-faults runs it long)."""
    # a stalls its NIC: only a VM that steers its NIC may.
    vms = [Vm(name, f"10.0.0.{i}/24", memory_mib=1024, nic=True, toolroot=True, steers_nic=name == "a")
           for i, name in enumerate("ab", 1)]
    scenario = Scenario(vms=vms, timeout=timeout, faults=True)
    scenario.files.update(faults_scripts(mibs, loops))
    want = pattern_sha256(mibs)
    names = fault_copies(loops)

    @scenario.check
    def mounted_over_rdma(run: Run) -> str:
        for vm in vms:
            run.vm(vm.name).step("rdma-link").expect(r"link ferroce0/1 state ACTIVE .*netdev eth0")
        run.vm("b").step("nfs-server").expect(rf"^portlist:.*\brdma {NFS_RDMA_PORT}\b")
        mount = run.vm("a").step("mount-b")
        mount.expect(r"Flags:.*\bvers=4\.2\b.*\bproto=rdma\b")
        return f"a -> b NFSv4.2 proto=rdma after {mount.tries} tries"

    @scenario.check
    def data_intact_through_faults(run: Run) -> str:
        """Each copy made into a fault (1 % of frames dropped both ways, the NIC stalled, its
        port down for 8 s, the RDMA driver removed for 3 s) came out bit-exact; the NIC
        retransmitted to get through the drop and the port, and only while the port was down did
        it drop frames there."""
        said = []
        for name, fault in names:
            copy = run.vm("a").step(f"copy-{name}")
            figures = pattern_copied(copy, name, mibs)
            made, resent, unported = fault_met(copy, name, fault)
            said.append(f"{figures}; `{FAULTS[fault].on}` took {made} s; {resent} frames retransmitted"
                        + (f", {unported} dropped by the port while down" if unported else ""))
        return "\n".join(said)

    @scenario.check
    def connected_again_after_the_port_and_the_driver_went(run: Run) -> str:
        """Each time the port was down or the RDMA driver removed, the client's QP went and NFS
        connected again (the RDMA transport's connect count, the third figure of its "xprt:
        rdma" line); the other faults may have cost a connection too."""
        stats = run.vm("a").step("mountstats-b")
        connects = int(stats.expect(r"^\s*xprt:\s+rdma \d+ \d+ (\d+) ").group(1))
        gone = sum(1 for _, fault in names if fault in RECONNECTS)
        if connects < 1 + gone:
            raise CheckFailed(f"{connects} connects after {gone} times the port or the driver went:\n"
                              f"{stats.output}")
        return f"{connects} connects of the RDMA transport, the port or the driver gone {gone} times"

    @scenario.check
    def server_holds_every_copy(run: Run) -> str:
        sums = run.vm("b").step("export-sums")
        sums.ok()
        for name, _ in names:
            sums.expect(rf"^{want}\s+{re.escape(name)}\.pattern$")
        return f"b: the {len(names)} files hold the pattern (sha256 {want[:12]}...)"

    @scenario.check
    def clean_teardown(run: Run) -> str:
        run.vm("a").step("umount-b").expect(r"^unmounted /mnt/b$")
        run.vm("b").step("nfs-server-stop").expect(r"^threads: 0$")
        return ", ".join(run.vm(vm.name).step("rmmod").expect(r"^ferroce removed$").group(0) for vm in vms)

    return scenario
