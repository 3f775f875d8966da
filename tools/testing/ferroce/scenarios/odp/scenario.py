"""On-demand paging between two VMs with ferroce. ferroce_odp (verbs/ferroce_odp.c) drops both
sides' registered pages with madvise(MADV_DONTNEED) between RDMA WRITEs, READs and atomics of
1 MiB, and checks every byte landed in, and came from, the pages the process has now. Then
rdma-core's and perftest's own modes: ibv_rc_pingpong -o (its buffers registered
with IBV_ACCESS_ON_DEMAND: nothing pinned, the NIC faults pages in through the driver) at 4 KiB
and 1 MiB, and with -P (ibv_advise_mr prefetch), and perftest's ib_write_bw and ib_read_bw
--odp. The NICs' counters show the faults served, the pages mapped and, when the processes
exit, invalidated. Before all that, VM a serves a page fault that waits: ferroce_odp -L writes
from an on-demand MR over a file of a FUSE mount whose daemon (ferroce_fuse) holds its reads,
and the kernel goes on meanwhile (needs the debug kernel's FUSE).
"""

from harness import CheckFailed, Run, Scenario, Vm
from pingpong import pingpong, write_bw

# a's NIC tells page-fault lies (host control "lie"): it steers its NIC.
VMS = [Vm("a", "10.0.0.1/24", nic=True, steers_nic=True), Vm("b", "10.0.0.2/24", nic=True)]
PAGE_FAULT_LIES = ("page-fault-key", "page-fault-range", "page-fault-flood")
NAMES = [vm.name for vm in VMS]
# Pages given back while the NIC may be reaching them: memory lifetime and DMA, so the
# debug kernel (KASAN, kmemleak, lockdep) runs it.
scenario = Scenario(vms=VMS, timeout=120, debug_lane=True)


@scenario.check
def odp_caps(run: Run) -> str:
    """ibv_devinfo shows the ODP capabilities the driver reports (RC, UD, XRC; no implicit)."""
    step = run.vm("a").step("odp-caps")
    step.ok()
    step.expect(r"general_odp_caps:\s*$")
    step.expect(r"^\s*ODP_SUPPORT\s*$")
    return "general ODP_SUPPORT"


@scenario.check
def hugetlb_on_demand_refused(run: Run) -> str:
    """On-demand memory with IBV_ACCESS_HUGETLB is refused (EOPNOTSUPP): the device's
    on-demand page tables hold 4 KiB entries, and a huge page's would be indexed wrongly."""
    step = run.vm("a").step("odp-hugetlb-refused")
    step.ok()
    return step.expect(r"^odp hugetlb refused: Operation not supported$").group(0)


@scenario.check
def on_demand_mrs_leave_room_for_others(run: Run) -> str:
    """Issue 36, defect 5: 16 on-demand MRs of 1 GiB over PROT_NONE address space took the
    function's whole page-list budget (2^22 entries) at creation, and every other process's
    MR, CQ, QP and SRQ creation then failed. The NIC now counts an on-demand MR's present pages
    only. The host bounds each process's objects with the rdma cgroup: with rdma.max
    hca_object=5, the process's PD and 4 MRs are charged, and the fifth MR is refused."""
    vm = run.vm("a")
    free = vm.step("odp-reserve")
    free.ok()
    free.expect(r"^odp reserve: registered 16 on-demand MRs of 1 GiB over memory not there$")
    free.expect(r"^odp reserve: then a CQ, a QP and a pinned MR of 64 KiB: ok$")
    limited = vm.step("odp-reserve-cgroup")
    limited.ok()
    limited.expect(r"^ferroce0 hca_handle=max hca_object=5\s*$")
    stopped = limited.expect(
        r"^odp reserve: registered 4 of 16 on-demand MRs of 1 GiB: Resource temporarily unavailable$")
    limited.expect(r"^odp reserve: then a CQ failed: Resource temporarily unavailable$")
    return f"16 MRs of 1 GiB, then a CQ, a QP and an MR; in rdma.max hca_object=5: {stopped.group(0)}"


@scenario.check
def a_waiting_fault_blocks_nothing_else(run: Run) -> str:
    """Issue 36, defect 2: a page fault whose page-in waits (ferroce_fuse holds the FUSE read
    its page cache needs) blocks neither a netdev change under rtnl nor another MR's page
    fault, and is served once the daemon answers. Before, the driver served faults under the
    device-wide lock the netdev notifier takes for every netdev event, one after another: `ip
    link set lo mtu` waited for the held read, and so did the second MR's fault."""
    vm = run.vm("a")
    vm.step("fuse-mount").ok()
    held = vm.step("fault-held")
    held.ok()
    read = held.expect(r"^held read \d+\+\d+$").group(0)
    vm.step("netdev-while-fault-waits").ok()
    second = vm.step("second-mr-while-fault-waits")
    second.ok()
    second.expect(r"^odp loopback ok: 64 KiB from anonymous memory$")
    released = vm.step("fault-released")
    released.ok()
    served = released.expect(r"^odp loopback ok: 64 KiB from /mnt/held/data$").group(0)
    return f"{read}; meanwhile lo's MTU changed and another MR's fault was served; {served}"


def driver_counters(run: Run, step: str) -> dict[str, int]:
    return run.vm("a").step(step).counters("driver_bad_events")


@scenario.check
def page_fault_lies_are_dropped(run: Run) -> str:
    """Issue 36: PAGE_FAULT events that are not true. One for a key no MR has and one for pages
    past its MR's end are dropped and counted (driver_bad_events); 16 copies of a true fault
    are served as it is; each time the true fault beside the lie is served and the loopback
    WRITE completes."""
    vm = run.vm("a")
    lines = []
    for lie in PAGE_FAULT_LIES:
        vm.step(f"{lie}-arm").ok()
        step = vm.step(lie)
        step.ok()
        step.expect(r"^odp loopback ok: 64 KiB from anonymous memory$")
        before, after = driver_counters(run, f"{lie}-before"), driver_counters(run, f"{lie}-after")
        bad = after["driver_bad_events"] - before["driver_bad_events"]
        want = 0 if lie == "page-fault-flood" else 1
        if bad != want:
            raise CheckFailed(f"{lie}: driver_bad_events grew by {bad}, expected {want}")
        lines.append(f"{lie}: {bad} dropped, the true fault served")
    told = vm.step("lies-told").json("lies_told")
    if told != len(PAGE_FAULT_LIES):
        raise CheckFailed(f"the NIC told {told} lies, expected {len(PAGE_FAULT_LIES)}")
    return "\n".join(lines)


@scenario.check
def dropped_pages_stay_exact(run: Run) -> str:
    """Four rounds of ferroce_odp: after each madvise(MADV_DONTNEED) the NIC wrote into, read
    from and added to the new pages, never the ones given back."""
    lines = []
    for name in NAMES:
        step = run.vm(name).step("odp-dropped-pages")
        step.ok()
        lines.append(f"{name}: " + step.expect(r"^odp ok rounds=4: .*$").group(0))
    return "\n".join(lines)


@scenario.check
def rc_pingpong_odp_4096(run: Run) -> str:
    return pingpong(run, "rc-pingpong-odp-4096", NAMES, 4096, 100)


@scenario.check
def rc_pingpong_odp_1mib(run: Run) -> str:
    return pingpong(run, "rc-pingpong-odp-1048576", NAMES, 1048576, 10)


@scenario.check
def rc_pingpong_odp_prefetch(run: Run) -> str:
    for name in NAMES:
        if "Couldn't prefetch" in run.vm(name).step("rc-pingpong-odp-prefetch").output:
            raise CheckFailed(f"{name}: ibv_advise_mr failed")
    return pingpong(run, "rc-pingpong-odp-prefetch", NAMES, 65536, 100)


@scenario.check
def write_bw_odp(run: Run) -> str:
    return write_bw(run, "write-bw-odp", NAMES, "a")


@scenario.check
def read_bw_odp(run: Run) -> str:
    return write_bw(run, "read-bw-odp", NAMES, "a")


@scenario.check
def faults_served(run: Run) -> str:
    """Both NICs raised page faults that the driver answered with pages, and cleared pages
    when the processes gave their memory back (ferroce_odp's madvise); no command or DMA
    failed."""
    lines = []
    for name in NAMES:
        c = run.vm(name).step("nic-counters").json("counters")
        if c["command_errors"] or c["dma_errors"]:
            raise CheckFailed(f"{name}: command_errors {c['command_errors']}, dma_errors {c['dma_errors']}")
        if not (c["odp_fault_events"] and c["odp_pages_mapped"] and c["odp_pages_invalidated"]):
            raise CheckFailed(f"{name}: " + ", ".join(f"{k} {c[k]}" for k in (
                "odp_faults", "odp_fault_events", "odp_pages_mapped", "odp_pages_invalidated")))
        lines.append(f"{name}: " + " ".join(f"{k}={c[k]}" for k in (
            "odp_faults", "odp_fault_events", "odp_pages_mapped", "odp_pages_invalidated",
            "rnr_resends", "retransmits")))
    return "\n".join(lines)
