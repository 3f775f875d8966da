# SPDX-License-Identifier: GPL-2.0
"""NVMe over RDMA between two VMs, for any pair of RDMA device kinds (the nvme-rdma* scenarios).

VM b is the target: brd's /dev/ram0 as namespace 1 of nqn.2026-11.org.ferroce:ram0 on an rdma
port (configfs). VM a is the host: it connects through /dev/nvme-fabrics, writes 64 MiB with
O_DIRECT dd, reads them back, compares checksums and deletes the controller; then it tells the
target (TCP), which waits for that, sees the queues' QPs go and tears its configuration down.
The guest side is nvme_target/nvme_host in guest/lib.sh; a scenario's a.sh and b.sh only set up
the RDMA device of their VM, and its scenario.py calls scenario_for() with the kinds.
"""


import functools
import hashlib
import re
import string

from harness import CheckFailed, Run, Scenario, Vm

DEVICE = {"rxe": "rxe0", "ferroce": "ferroce0"}
NQN = "nqn.2026-11.org.ferroce:ram0"
SIZE = 64 << 20
# The pattern (nvme_pattern in guest/lib.sh): per MiB, named by one of these, 131072 records
# "<MiB><record, 6 digits>\n".
MIBS = string.digits + string.ascii_uppercase + string.ascii_lowercase + "+/"

@functools.cache
def pattern_sha256(mibs: int = 64) -> str:
    h, mib = hashlib.sha256(), "".join(f"X{i:06d}\n" for i in range(1 << 17))
    for m in MIBS[:mibs]:
        h.update(mib.replace("X", m).encode())
    return h.hexdigest()



def pattern_copied(copy, what: str, mibs: int = 64) -> str:
    """The step of guest/lib.sh's `pattern_copy` (the pattern to a file or disk and back): both
    checksums are the pattern's and cmp found no difference; its write and read figures."""
    want = pattern_sha256(mibs)
    sums = dict((path, digest) for digest, path in re.findall(r"^([0-9a-f]{64})\s+(\S+)$", copy.output, re.M))
    if sums.get("/tmp/nvme-pattern") != want or sums.get("/tmp/readback") != want:
        raise CheckFailed(f"{what}: sha256 {sums}, expected {want}:\n{copy.output}")
    copy.ok()  # cmp found no difference
    size = mibs << 20
    figures = [copy.expect(rf"^{name}: {size} bytes copied, ([\d.]+) s, ([\d.]+) MB/s$").group(2)
               for name in ("write", "read")]
    return f"{what}: {mibs} MiB written {figures[0]} MB/s, read back {figures[1]} MB/s"


# NIC counters that tell of loss and recovery (hostctl nic counters, ferroce VMs).
RECOVERY_COUNTERS = ["tx_packets", "rx_packets", "drops", "retransmits", "timeouts", "naks_sent",
                     "naks_received", "seq_errors", "duplicates", "rnr_retries"]


def scenario_for(KINDS: dict[str, str], timeout: int, nic_args: list[str] | None = None,  # noqa: N803
                 expect_retransmits: bool = False, target_srq: bool = False, mibs: int = 64,
                 lies: list[str] | None = None, debug_lane: bool = False,
                 connect_opts: dict[str, str] | None = None, hosts: dict[str, str] | None = None,
                 wire: str = "tap") -> Scenario:
    """The scenario for VM a's and VM b's device kinds ("rxe" or "ferroce"). `nic_args` go to
    the ferroce NICs (fault injection); with `expect_retransmits` the NICs must have recovered
    lost frames by retransmission; with `target_srq` the target's nvmet-rdma (built in) gets
    use_srq=1 and must have received through SRQs (b.sh's steps nvmet-srq and srqs). The host
    writes and reads back `mibs` MiB (its script sets NVME_MIB to the same). With `lies`, the
    host's NIC then tells one lie of each kind under its reads (its script sets NVME_LIES to
    the same): each must be counted by the driver and survived by nvme-rdma with the data
    intact. `connect_opts` are the options the host connects with (its script exports them as
    NVME_CONNECT_OPTS): the controller must show each as asked. `hosts` places VMs on hosts
    (network namespaces, hosts.py) whose NIC ports have `wire` ("tap" or "udp")."""
    moved = mibs << 20
    # 1 GiB each: the target's 64 MiB RAM disk; the host's pattern and read-back copy in tmpfs.
    VMS = [Vm(name, ip, memory_mib=1024, nic=KINDS[name] == "ferroce", nic_args=list(nic_args or []),
              cmdline="nvmet_rdma.use_srq=1" if target_srq and name == "b" else "",
              host=(hosts or {}).get(name), wire=wire, steers_nic=bool(lies) and name == "a")
           for name, ip in [("a", "10.0.0.1/24"), ("b", "10.0.0.2/24")]]
    TARGET = VMS[1]
    scenario = Scenario(vms=VMS, timeout=timeout, faults=expect_retransmits, debug_lane=debug_lane)


    @scenario.check
    def rdma_devices(run: Run) -> str:
        for vm in VMS:
            run.vm(vm.name).step("rdma-setup").ok()
            dev = DEVICE[KINDS[vm.name]]
            run.vm(vm.name).step("rdma-link").expect(rf"link {dev}/1 state ACTIVE .*netdev eth0")
        return ", ".join(f"{vm.name}: {DEVICE[KINDS[vm.name]]}" for vm in VMS)


    @scenario.check
    def target_configured(run: Run) -> None:
        setup = run.vm("b").step("nvmet-setup")
        setup.ok()
        setup.expect(rf"^ram0 bytes: {SIZE}$")
        for attr, value in [(f"subsystems/{NQN}/attr_allow_any_host", "1"),
                            (f"subsystems/{NQN}/namespaces/1/device_path", "/dev/ram0"),
                            (f"subsystems/{NQN}/namespaces/1/enable", "1"),
                            ("ports/1/addr_trtype", "rdma"), ("ports/1/addr_adrfam", "ipv4"),
                            ("ports/1/addr_traddr", TARGET.address), ("ports/1/addr_trsvcid", "4420")]:
            setup.expect(rf"^{re.escape(attr)}:{re.escape(value)}$")
        setup.expect(rf"^{re.escape(NQN)}$")
        setup.expect(rf"nvmet_rdma: enabling port 1 \({re.escape(TARGET.address)}:4420\)")


    if target_srq:
        @scenario.check
        def target_uses_srqs(run: Run) -> str:
            run.vm("b").step("nvmet-srq").expect(r"^Y$")
            srqs = run.vm("b").step("srqs")
            srqs.ok()
            found = re.findall(rf"dev {DEVICE[KINDS['b']]} srqn (\d+)", srqs.output)
            if not found:
                raise CheckFailed(f"no SRQ of {DEVICE[KINDS['b']]} while the host was connected:\n{srqs.output}")
            return f"SRQs {', '.join(found)} of {DEVICE[KINDS['b']]}"


    @scenario.check
    def host_connected(run: Run) -> str:
        connect = run.vm("a").step("connect")
        connect.ok()
        reply = connect.expect(r"^instance=(\d+),cntlid=(\d+)$")
        ns = run.vm("a").step("namespace")
        ns.ok()
        ns.expect(r"^transport: rdma$")
        ns.expect(rf"^subsysnqn: {re.escape(NQN)}$")
        ns.expect(rf"^address: traddr={re.escape(TARGET.address)},trsvcid=4420\b")
        ns.expect(r"^state: live$")
        ns.expect(rf'nvme nvme0: new ctrl: NQN "{re.escape(NQN)}", addr {re.escape(TARGET.address)}:4420')
        ns.expect(rf"^namespace bytes: {SIZE}$")
        for key, value in (connect_opts or {}).items():
            ns.expect(rf"^option {re.escape(key)}: {re.escape(value)}$")
        # The target's side of it.
        run.vm("b").step("nvmet-log").expect(rf"nvmet: Created nvm controller {reply.group(2)} for subsystem {re.escape(NQN)}")
        return f"{reply.group(0)} after {connect.tries} tries; namespace of {SIZE >> 20} MiB"


    @scenario.check
    def data_intact(run: Run) -> str:
        run.vm("a").step("pattern").expect(rf"\b{moved}\b.*/tmp/nvme-pattern")
        compare = run.vm("a").step("compare")
        sums = dict((path, digest) for digest, path in
                    re.findall(r"^([0-9a-f]{64})\s+(\S+)$", compare.output, re.M))
        written, read = sums.get("/tmp/nvme-pattern"), sums.get("/tmp/nvme-readback")
        want = pattern_sha256(mibs)
        if written != want:
            raise CheckFailed(f"the pattern's sha256 is {written}, expected {want}")
        if read != written:
            raise CheckFailed(f"read back sha256 {read}, wrote {written}:\n{compare.output.strip()}")
        compare.ok()  # cmp found no difference
        return f"sha256 {want[:16]}... written and read back"


    if lies:
        @scenario.check
        def lies_survived(run: Run) -> str:
            """Each lie of the host's NIC under NVMe reads was dropped and counted by the driver
            (a CQE's in driver_bad_cqes, an event's in driver_bad_events), nvme-rdma's
            controller was live again afterwards and the data read was the pattern."""
            step = run.vm("a").step("lies")
            step.expect(rf"^lies: {len(lies)}, failed: 0$")
            said = []
            for lie in lies:
                m = step.expect(rf"^lie {re.escape(lie)}: bad_cqes=(\d+) bad_events=(\d+) -> "
                                rf"bad_cqes=(\d+) bad_events=(\d+), told, state live, data intact, ([\d.]+) s$")
                cqes, events = int(m.group(3)) - int(m.group(1)), int(m.group(4)) - int(m.group(2))
                counted = events if lie.startswith("eqe-") else cqes
                if counted != 1:
                    raise CheckFailed(f"lie {lie}: driver_bad_cqes +{cqes}, driver_bad_events +{events}, "
                                      f"expected +1 of {'events' if lie.startswith('eqe-') else 'CQEs'}")
                said.append(f"{lie} {m.group(5)} s")
            return "each dropped, counted once and survived: " + ", ".join(said)


    @scenario.check
    def dd_throughput(run: Run) -> str:
        """The write and read figures, and the loss/retry counters: recorded, never asserted."""
        figures = []
        for name in ("write", "read"):
            step = run.vm("a").step(name)
            step.ok()
            step.expect(rf"^{mibs}\+0 records in$")
            step.expect(rf"^{mibs}\+0 records out$")
            m = step.expect(rf"^{name}: {moved} bytes copied, ([\d.]+) s, ([\d.]+) MB/s$")
            figures.append(f"{name} {m.group(2)} MB/s ({m.group(1)} s)")
        return ", ".join(figures) + "".join(f"\n{vm.name}: {trouble_counters(run, vm.name)}" for vm in VMS)


    def nic_counters(run: Run, vm: str) -> dict[str, int] | None:
        step = run.vm(vm).steps().get("nic-counters")
        return step.json("counters") if step is not None and step.rc == 0 else None

    @scenario.check
    def nic_recovery(run: Run) -> str:
        """The ferroce NICs' traffic and recovery counters (recorded; asserted only under faults)."""
        lines, retransmits = [], 0
        for vm in VMS:
            if KINDS[vm.name] != "ferroce":
                continue
            counters = nic_counters(run, vm.name)
            if counters is None:
                raise CheckFailed(f"VM {vm.name}: no NIC counters (step nic-counters)")
            retransmits += counters["retransmits"]
            lines.append(f"{vm.name}: " + " ".join(f"{k}={counters[k]}" for k in RECOVERY_COUNTERS))
        if expect_retransmits and retransmits == 0:
            raise CheckFailed("frames were dropped on purpose but no NIC retransmitted:\n" + "\n".join(lines))
        return "\n".join(lines) or "no ferroce VM"

    def trouble_counters(run: Run, vm: str) -> str:
        """The port counters after the transfer that tell of loss and retries (device-specific names)."""
        step = run.vm(vm).steps().get("rdma-stats")
        if step is None or step.rc != 0:
            return "no rdma statistic"
        pairs = re.findall(r"\b([a-z][a-z0-9_]*) (\d+)\b", step.output)
        shown = [f"{k}={v}" for k, v in pairs if v != "0" and re.search(r"retr|seq|dup|rnr|err|drop", k)]
        return " ".join(shown) or "no retry/error counters above 0"


    @scenario.check
    def clean_disconnect(run: Run) -> None:
        host, target = run.vm("a"), run.vm("b")
        disconnect = host.step("disconnect")
        disconnect.ok()
        disconnect.expect(r"^nvme0 and nvme0n1 are gone$")
        for vm, step in [(host, "host-qps"), (target, "target-qps")]:
            qps = vm.step(step)
            qps.ok()
            qps.expect(r" type GSI ")  # the listing works: ib_core's own QP is there
            qps.expect(r"^rc-qps: 0$")
        host.step("notify").ok()
        wait = target.step("wait-host")
        wait.ok()
        wait.expect(r"^host-disconnected$")
        teardown = target.step("nvmet-teardown")
        teardown.ok()
        teardown.expect(r"^subsystems: +ports: *$")

    return scenario
