"""ferroce0 as a kernel verbs consumer: doorbell batching, inline data, the push window, CQ overrun and the SRQ limit, proven with the NIC's own counters.

One VM: ferroce_kverbs_test (tools/testing/ferroce/kverbs) connects two RC QPs of ferroce0 to
each other through the port's own RoCE v2 GID and MAC (the NIC loops the frames back) and runs
one phase per step; a.sh reads the port's hw_counters right before and after each counted
phase, which only posts and polls (its CQ is never armed, no receive is posted).
"""

import re

from harness import KERNEL_TROUBLE, CheckFailed, Run, Scenario, Vm

# --qpn-lowest-free: the reuse phase needs the destroyed QP's number back at once (by default
# the NIC hands numbers out in turn).
scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, nic_args=["--qpn-lowest-free"])],
                    timeout=240, debug_lane=True)

CHAIN = 32
INLINE_WRS = 8
MSG = 64


def counters(run: Run, step: str) -> dict[str, int]:
    return run.vm("a").step(step).counters("doorbells")


def delta(run: Run, phase: str, name: str) -> int:
    before, after = counters(run, f"{phase}-before"), counters(run, f"{phase}-after")
    if name not in before or name not in after:
        raise CheckFailed(f"no counter {name} in hw_counters: {sorted(before)}")
    return after[name] - before[name]


def deltas(run: Run, phase: str) -> str:
    """Every counter that moved during the phase, for the check's report."""
    before, after = counters(run, f"{phase}-before"), counters(run, f"{phase}-after")
    return " ".join(f"{k}+{after[k] - before[k]}" for k in sorted(after)
                    if k in before and after[k] != before[k] and k not in ("mmio_reads",))


def expect_delta(run: Run, phase: str, name: str, want: int) -> str:
    got = delta(run, phase, name)
    if got != want:
        raise CheckFailed(f"{phase}: {name} grew by {got}, expected {want} (moved: {deltas(run, phase)})")
    return f"{phase}: {name} +{got} (moved: {deltas(run, phase)})"


def phase_result(run: Run, phase: str, pattern: str) -> str:
    step = run.vm("a").step(phase)
    m = re.search(rf"^{phase} (ok|FAIL).*$", step.output, re.M)
    if not m:
        raise CheckFailed(f"phase {phase} printed no result (rc={step.rc}):\n{step.output}")
    if m.group(1) != "ok" or step.rc != 0:
        raise CheckFailed(f"{m.group(0)} (rc={step.rc})")
    if not re.search(pattern, m.group(0)):
        raise CheckFailed(f"phase {phase}: /{pattern}/ not in: {m.group(0)}")
    return m.group(0)


@scenario.check
def setup(run: Run) -> str:
    vm = run.vm("a")
    vm.step("modprobe").ok()
    vm.step("load").ok()
    return phase_result(run, "setup", r"gid_index=3 ")


@scenario.check
def chain_completes(run: Run) -> str:
    return phase_result(run, "chain", rf"posted={CHAIN} completed={CHAIN} .*data=verified")


@scenario.check
def chain_one_doorbell(run: Run) -> str:
    return expect_delta(run, "chain", "doorbells", 1)


@scenario.check
def chain_wqe_fetches(run: Run) -> str:
    return expect_delta(run, "chain", "wqe_fetches", CHAIN)


@scenario.check
def inline_data_arrives(run: Run) -> str:
    return phase_result(run, "inline", rf"posted={INLINE_WRS} completed={INLINE_WRS} .*inline=1 data=verified")


@scenario.check
def inline_no_payload_reads(run: Run) -> str:
    return expect_delta(run, "inline", "payload_dma_reads", 0)


@scenario.check
def inline_payload_written(run: Run) -> str:
    writes = delta(run, "inline", "payload_dma_writes")
    if writes <= 0:
        raise CheckFailed(f"inline: payload_dma_writes grew by {writes} (moved: {deltas(run, 'inline')})")
    return expect_delta(run, "inline", "payload_write_bytes", INLINE_WRS * MSG) + f", payload_dma_writes +{writes}"


@scenario.check
def push_completes(run: Run) -> str:
    return phase_result(run, "push", r"posted=1 completed=1 .*data=verified")


@scenario.check
def push_through_window(run: Run) -> str:
    return expect_delta(run, "push", "wqe_pushes", 1)


@scenario.check
def push_no_fetch(run: Run) -> str:
    return expect_delta(run, "push", "wqe_fetches", 0)


@scenario.check
def push_one_doorbell(run: Run) -> str:
    return expect_delta(run, "push", "doorbells", 1)


@scenario.check
def cq_overrun_event(run: Run) -> str:
    return phase_result(run, "cqoverrun", r"polled=0 event=IB_EVENT_CQ_ERR")


@scenario.check
def srq_limit_event(run: Run) -> str:
    return phase_result(run, "srq", r"limit=4 .*early_events=0 event=IB_EVENT_SRQ_LIMIT_REACHED")


@scenario.check
def reused_qpn_gets_no_stale_cqe(run: Run) -> str:
    """A QP destroyed with its CQE in the CQ: the driver removes the CQE (cq_clean), the next QP
    with that number polls nothing of it, and the CQE of another QP behind it still arrives."""
    result = phase_result(run, "reuse", r"reused=1 polled=1 stale=0")
    cleaned = delta(run, "reuse", "driver_cleaned_cqes")
    refused = delta(run, "reuse", "driver_bad_cqes")
    if cleaned != 1 or refused != 0:
        raise CheckFailed(f"reuse: driver_cleaned_cqes +{cleaned} (expected 1), driver_bad_cqes +{refused} (expected 0)")
    return f"{result}; driver_cleaned_cqes +1"


@scenario.check
def unload_clean(run: Run) -> str:
    vm = run.vm("a")
    result = phase_result(run, "teardown", r"")
    vm.step("unload").ok()
    vm.step("unload-ferroce").ok()
    return result


@scenario.check
def device_removal_frees(run: Run) -> str:
    """ferroce0 unregisters while the test module's objects exist: its client remove frees them,
    first draining a QP whose CQ ib_core polls (ib_drain_qp(), as ULPs do), which needs the
    drain's completions delivered while the device unregisters."""
    vm = run.vm("a")
    vm.step("reload").ok()
    vm.step("setup-again").ok()
    vm.step("remove-device").ok()
    removed = vm.step("removed").expect(r"^removed device=ferroce0$").group(0)
    return removed


@scenario.check
def device_removal_under_traffic(run: Run) -> str:
    """20 times: ferroce.ko is removed while a kernel thread of the test module streams RDMA
    WRITEs; ib_core's client removal stops the stream with a chain in flight and frees the
    objects, the driver then goes. Every completion the stream saw was true and successful."""
    vm = run.vm("a")
    step = vm.step("unload-under-traffic")
    step.expect(r"^unload cycles: 20, failed: 0$")
    cycles = re.findall(r"^cycle \d+: rmmod rc=0 in ([\d.]+) s: removed device=ferroce0 under traffic: "
                        r"stream rounds=(\d+) completed=(\d+) bad=0 ", step.output, re.M)
    if len(cycles) != 20:
        raise CheckFailed(f"{len(cycles)} clean cycles of 20:\n{step.output}")
    vm.step("unload-again").ok()
    vm.step("modules-gone").ok()
    slowest = max(float(c[0]) for c in cycles)
    completed = sum(int(c[2]) for c in cycles)
    return f"20 removals under traffic, {completed} WRITEs completed before them, slowest rmmod {slowest:.2f} s"


@scenario.check
def nic_saw_no_errors(run: Run) -> str:
    """Every command of the run, creation to destruction, and every doorbell were accepted."""
    nic = run.vm("a").step("nic-counters").json("counters")
    bad = {k: nic.get(k) for k in ("command_errors", "bad_doorbells", "dma_errors")}
    if any(bad.values()):
        raise CheckFailed(f"NIC counters at the end: {bad}")
    return f"{bad}, commands {nic.get('commands')}, doorbells {nic.get('doorbells')}"


@scenario.check
def kernel_log_clean(run: Run) -> str:
    log = run.vm("a").step("dmesg").output
    trouble = [line for line in log.splitlines() if KERNEL_TROUBLE.search(line)]
    if trouble:
        raise CheckFailed("kernel log:\n" + "\n".join(trouble[:20]))
    errors = re.findall(r"^.*ferroce_kverbs_test: unexpected.*$", log, re.M)
    if errors:
        raise CheckFailed("the test module reported:\n" + "\n".join(errors[:20]))
    return f"{len(log.splitlines())} lines, no warnings"
