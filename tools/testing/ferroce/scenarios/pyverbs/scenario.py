"""rdma-core's test suite (pyverbs, /usr/share/doc/rdma-core/tests/run_tests.py) against
ferroce0 (--gid 3) and rxe0 (--gid 1) in the same VM.

python3 and pyverbs come from the toolchain root over virtio-9p (guest/lib.sh: toolroot_setup).
Each test module runs in its own process (guest/lib.sh: pyverbs_suite; the mlx5, EFA and CUDA
modules are left out, as they skip everything on other devices). On ferroce no module
may crash or hang and the kernel must stay clean; the passed/failed/skipped figures of both
devices are recorded, and so are the tests rxe passes and ferroce does not.

Before the suite, programs of ours on both devices: stale-cqe (a destroyed QP's CQE never
reaches the next QP with its number), stale-rkey (no MR gets the key of the one before it in
its slot; a stale rkey gets a remote access error) and resize-cq (ibv_resize_cq with
completions in flight loses and repeats none; one below what waits is refused with EINVAL) and
resize-srq (ibv_modify_srq growing an SRQ with receives posted loses none of them).

Every test rxe passes must pass on ferroce, except those of features ferroce does not have
yet (NOT_YET, each with its reason; none today): the check compares the two by test name. The
suite's XRC tests and its ODP prefetch tests, which rxe skips (it has no XRC and no
ibv_advise_mr), must pass on ferroce (BEYOND_RXE).
"""

import re

from harness import CheckFailed, Run, Scenario, Step, Vm

# --qpn-lowest-free: reuse-ferroce needs a destroyed QP's number back at once.
scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, toolroot=True, memory_mib=1536,
                         nic_args=["--qpn-lowest-free"])],
                    timeout=780)
HEADER = re.compile(r"^(test_\w+) \(([\w.]+)\)", re.M)
# After " ... ", or alone on a line when warnings or late tracebacks came in between.
VERDICT = re.compile(r"(?:\.\.\. |^)(ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b", re.M)


def outcomes(step: Step) -> dict[str, str]:
    """Each test's verdict. Its "... verdict" may come after stray output (warnings, late
    tracebacks), so it is searched for up to the next test's header."""
    found = {}
    output = step.output
    headers = list(HEADER.finditer(output))
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(output)
        verdict = VERDICT.search(output, header.end(), end)
        found[header.group(2)] = verdict.group(1) if verdict else "no verdict (crashed?)"
    return found


MODULE_END = re.compile(r"^=== MODULE (\w+) rc=(\d+)$", re.M)

# Tests rxe passes that ferroce may not yet, by the feature they need (the next issue's): a
# test of these that ferroce passes is fine; any other test rxe passes and ferroce does not
# fails the comparison. None today.
NOT_YET: dict[str, re.Pattern] = {}


# Tests of what rxe does not offer (XRC; ibv_advise_mr prefetch of on-demand MRs): ferroce
# must pass them (a skip is a failure).
BEYOND_RXE = {
    "tests.test_qpex.QpExTestCase.test_qp_ex_xrc_send",
    "tests.test_qpex.QpExTestCase.test_qp_ex_xrc_send_imm",
    "tests.test_cqex.CqExTestCase.test_xrc_traffic_cq_ex",
    "tests.test_atomic.AtomicTest.test_xrc_atomic_fetch_and_add",
    "tests.test_atomic.AtomicTest.test_xrc_atomic_cmp_and_swap",
    "tests.test_relaxed_ordering.RoTestCase.test_ro_xrc_traffic",
    "tests.test_odp.OdpTestCase.test_odp_xrc_traffic",
    "tests.test_odp.OdpTestCase.test_odp_sync_prefetch_rc_traffic",
    "tests.test_odp.OdpTestCase.test_odp_async_prefetch_rc_traffic",
    "tests.test_odp.OdpTestCase.test_odp_prefetch_sync_no_page_fault_rc_traffic",
    "tests.test_odp.OdpTestCase.test_odp_prefetch_async_no_page_fault_rc_traffic",
}


def not_yet(test: str) -> str | None:
    return next((why for why, pattern in NOT_YET.items() if pattern.search(test)), None)


def totals(step: Step) -> tuple[dict[str, int], list[str]]:
    """Tests run, passed, failed (incl. errors) and skipped over all modules; crashed modules."""
    count = {"ran": 0, "passed": 0, "failed": 0, "skipped": 0}
    for ran in re.finditer(r"^Ran (\d+) tests? in [\d.]+s\n\n(OK|FAILED)(?: \(([^)]*)\))?$", step.output, re.M):
        n = int(ran.group(1))
        detail = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", ran.group(3) or ""))
        failed = detail.get("failures", 0) + detail.get("errors", 0) + detail.get("unexpected_successes", 0)
        skipped = detail.get("skipped", 0) + detail.get("expected_failures", 0)
        count["ran"] += n
        count["failed"] += failed
        count["skipped"] += skipped
        count["passed"] += n - failed - skipped
    crashed = [f"{m} (rc {rc})" for m, rc in MODULE_END.findall(step.output) if int(rc) >= 124]
    return count, crashed


def summary(step: Step, crashes_fail: bool) -> str:
    if step.rc is None or not MODULE_END.search(step.output):
        raise CheckFailed(f"the suite did not run (rc {step.rc})")
    count, crashed = totals(step)
    line = (f"ran {count['ran']}: passed {count['passed']}, failed {count['failed']}, "
            f"skipped {count['skipped']}")
    if crashed:
        line += f"; modules that crashed or timed out: {', '.join(crashed)}"
        if crashes_fail:
            raise CheckFailed(line)
    return line


@scenario.check
def toolroot_mounted(run: Run) -> str:
    step = run.vm("a").step("toolroot")
    step.ok()
    return step.expect(r"^Python 3\.\d+\.\d+$").group(0)


@scenario.check
def reused_qpn_gets_no_stale_cqe(run: Run) -> str:
    """The provider removes a destroyed QP's CQEs from its CQ (reuse.py); rxe, same program."""
    vm = run.vm("a")
    vm.step("reuse-copy").ok()
    ferroce = vm.step("reuse-ferroce").expect(r"^reuse ok reused=1 polled=1 stale=0 orphans=0$").group(0)
    rxe = vm.step("reuse-rxe").expect(r"^reuse ok .*$").group(0)
    return f"ferroce: {ferroce}; rxe: {rxe}"


@scenario.check
def stale_rkey_reaches_no_new_mr(run: Run) -> str:
    """Each MR key differs from the last one of its slot; a stale rkey is NAK'd (stale-rkey)."""
    vm = run.vm("a")
    ferroce = vm.step("rkey-ferroce").expect(r"^rkey ok cycles=(\d+) same_slot=8 fresh=\1 .*$").group(0)
    rxe = vm.step("rkey-rxe").expect(r"^rkey ok .*$").group(0)
    return f"ferroce: {ferroce}; rxe: {rxe}"


@scenario.check
def resize_cq_loses_and_repeats_nothing(run: Run) -> str:
    """ibv_resize_cq shrinking and growing with CQEs waiting and arriving (resize-cq)."""
    vm = run.vm("a")
    ferroce = vm.step("resize-ferroce").expect(r"^resize ok cqes=59 .*$").group(0)
    rxe = vm.step("resize-rxe").expect(r"^resize ok .*$").group(0)
    return f"ferroce: {ferroce}; rxe: {rxe}"


@scenario.check
def resize_srq_loses_no_receive(run: Run) -> str:
    """ibv_modify_srq(IBV_SRQ_MAX_WR) with six receives posted, then 20 more (resize-srq)."""
    vm = run.vm("a")
    ferroce = vm.step("resize-srq-ferroce").expect(r"^resize-srq ok received=26 .*$").group(0)
    rxe = vm.step("resize-srq-rxe").expect(r"^resize-srq ok .*$").group(0)
    return f"ferroce: {ferroce}; rxe: {rxe}"


@scenario.check
def suite_on_ferroce(run: Run) -> str:
    return summary(run.vm("a").step("pyverbs-ferroce"), crashes_fail=True)


@scenario.check
def suite_on_rxe(run: Run) -> str:
    return summary(run.vm("a").step("pyverbs-rxe"), crashes_fail=False)


@scenario.check
def ferroce_against_rxe(run: Run) -> str:
    """Every test rxe passes passes on ferroce, but those of NOT_YET; both directions listed."""
    ferroce = outcomes(run.vm("a").step("pyverbs-ferroce"))
    rxe = outcomes(run.vm("a").step("pyverbs-rxe"))
    worse = sorted(t for t, v in rxe.items() if v == "ok" and ferroce.get(t) != "ok")
    better = sorted(t for t, v in ferroce.items() if v == "ok" and rxe.get(t) != "ok")
    lines = [f"rxe passes, ferroce does not ({len(worse)}):"]
    lines += [f"  {t}: {ferroce.get(t, 'not run')} ({not_yet(t) or 'a regression'})" for t in worse]
    lines.append(f"ferroce passes, rxe does not ({len(better)}):")
    lines += [f"  {t}: {rxe.get(t, 'not run')}" for t in better]
    if any(not_yet(t) is None for t in worse):
        raise CheckFailed("\n".join(lines))
    return "\n".join(lines)


@scenario.check
def beyond_rxe(run: Run) -> str:
    """The XRC and prefetch tests (BEYOND_RXE) pass on ferroce."""
    ferroce = outcomes(run.vm("a").step("pyverbs-ferroce"))
    verdicts = {t: ferroce.get(t, "not run") for t in sorted(BEYOND_RXE)}
    missed = {t: v for t, v in verdicts.items() if v != "ok"}
    if missed:
        raise CheckFailed("\n".join(f"{t}: {v}" for t, v in missed.items()))
    return f"{len(verdicts)} tests rxe skips pass: " + ", ".join(t.rsplit(".", 1)[1] for t in verdicts)


@scenario.check
def no_kernel_warning(run: Run) -> None:
    log = run.vm("a").step("dmesg").output.strip()
    if log:
        raise CheckFailed(log)
