"""ferroce.ko against a NIC that lies: well-formed CQEs, EQEs and command completions that are
not true.

One VM. For each kind of lie (ferroce-hw.rst, "Host control"), the NIC tells one while
ferroce_kverbs_test's chain of 32 signalled RDMA WRITEs completes (its "distrust" phase). The
driver must drop the lie, count it in driver_bad_cqes, and deliver nothing that is not true:
every wr_id one that was posted, at most once, of the QP that posted it, no more bytes than
posted. The WR the lie was about comes back flushed, from the driver (driver_flushed_wrs: the
chain's next CQE went past it), and the QP moves to ERR (IB_EVENT_QP_FATAL). Events for objects that do not
exist are counted in driver_bad_events and the real event still arrives. A lie about the GSI QP's
completion (rdma_cm's connection request, rping on the NIC's own address) is dropped too, but
that QP stays up: ib_mad could not recover it, and a second rping connects. Then lies about
command completions, to a process's verbs (ferroce_objects): a create reply naming a live CQ is
refused without harm to that CQ, an undefined status is an error of that verb alone, and a
completion nobody's command asked for is passed over (driver_bad_replies). With the lies off,
the same traffic works, and the kernel log has no warning.
"""

import re

from harness import KERNEL_TROUBLE, CheckFailed, Run, Scenario, Vm

# The command timeout is long enough for the unsolicited-completion lie's stall (the driver
# waits for the command's own completion until the scenario lets the NIC go on). The scenario's
# timeout (three times this on the debug lane) is three times its slowest run on a slower
# machine: 159 s in a make check there (2026-12-07), where 360 s was less than 3 x 142.
scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, steers_nic=True,
                            nic_args=["--cmd-timeout-ms", "30000"])], timeout=180, debug_lane=True)

CHAIN = 32


def counters(run: Run, step: str) -> dict[str, int]:
    return run.vm("a").step(step).counters("driver_bad_cqes")


def delta(run: Run, lie: str, name: str) -> int:
    return counters(run, f"{lie}-after")[name] - counters(run, f"{lie}-before")[name]


def phase_result(run: Run, step: str, phase: str) -> str:
    out = run.vm("a").step(step)
    m = re.search(rf"^{phase} (ok|FAIL).*$", out.output, re.M)
    if not m:
        raise CheckFailed(f"step {step} printed no result (rc={out.rc}):\n{out.output}")
    if m.group(1) != "ok" or out.rc != 0:
        raise CheckFailed(f"{m.group(0)} (rc={out.rc})")
    return m.group(0)


def caught(run: Run, lie: str) -> str:
    """The lie was told, dropped and counted once; what came back is true: every WR of the
    chain once, the one the lie was about flushed by the driver, and the QP in ERR."""
    vm = run.vm("a")
    vm.step(f"{lie}-setup").ok()
    told = vm.step(f"{lie}-arm").json("told")
    result = phase_result(run, lie, "distrust")
    fields = dict(re.findall(r"(\w+)=(\d+)", result))
    delivered, success, flushed = (int(fields[k]) for k in ("delivered", "success", "flushed"))
    if success >= CHAIN:
        raise CheckFailed(f"{lie}: all {CHAIN} WRs succeeded, the lie among them: {result}")
    if delivered != CHAIN or flushed < 1:
        raise CheckFailed(f"{lie}: {delivered} of {CHAIN} WRs completed, {flushed} flushed: the one the lie "
                          f"was about must come back flushed: {result}")
    if int(fields["qp_fatal"]) != 1:
        raise CheckFailed(f"{lie}: qp_fatal={fields['qp_fatal']}, expected 1: {result}")
    bad, lost = delta(run, lie, "driver_bad_cqes"), delta(run, lie, "driver_flushed_wrs")
    if (bad, lost) != (1, 1):
        raise CheckFailed(f"{lie}: driver_bad_cqes +{bad}, driver_flushed_wrs +{lost}, expected +1 each ({result})")
    vm.step(f"{lie}-teardown").ok()
    return f"{result}; driver_bad_cqes +1, driver_flushed_wrs +1 (NIC lies told before: {told})"


@scenario.check
def setup(run: Run) -> str:
    vm = run.vm("a")
    vm.step("modprobe").ok()
    return vm.step("load").ok()


@scenario.check
def undefined_opcode_dropped(run: Run) -> str:
    return caught(run, "cqe-opcode")


@scenario.check
def foreign_qpn_dropped(run: Run) -> str:
    # The CQE names a QP of other CQs: the driver cannot tell whose it was, but the QP whose
    # CQE it took learns of the loss from its next one, and goes to ERR.
    return caught(run, "cqe-qpn")


@scenario.check
def forged_wr_id_dropped(run: Run) -> str:
    return caught(run, "cqe-wr-id")


@scenario.check
def oversized_byte_len_dropped(run: Run) -> str:
    return caught(run, "cqe-byte-len")


@scenario.check
def unposted_wqe_index_dropped(run: Run) -> str:
    return caught(run, "cqe-wqe-index")


@scenario.check
def unknown_object_events_counted(run: Run) -> str:
    vm = run.vm("a")
    vm.step("eqe-object-setup").ok()
    vm.step("eqe-object-arm").ok()
    result = phase_result(run, "eqe-object", "srq")
    bad = delta(run, "eqe-object", "driver_bad_events")
    if bad != 1:
        raise CheckFailed(f"eqe-object: driver_bad_events grew by {bad}, expected 1 ({result})")
    return f"{result}; driver_bad_events +1"


@scenario.check
def every_lie_was_told(run: Run) -> str:
    status = run.vm("a").step("lies-told").json()
    if status.get("lies_told") != 6 or status.get("lie") is not None:
        raise CheckFailed(f"NIC status: lies_told={status.get('lies_told')} lie={status.get('lie')}, expected 6 and none armed")
    return "lies_told=6, none armed"


@scenario.check
def gsi_lie_leaves_the_connection_manager(run: Run) -> str:
    """A lie about a completion of the GSI QP (ib_mad's QP 1, which carries rdma_cm's
    connection requests) is dropped and counted, and the QP is not moved to ERR, which ib_mad
    cannot recover from: rping connects afterwards."""
    vm = run.vm("a")
    told = vm.step("gsi-arm").json("told")
    bad = delta(run, "gsi", "driver_bad_cqes")
    if bad != 1:
        raise CheckFailed(f"gsi: driver_bad_cqes grew by {bad}, expected 1 (the lie was about another CQE?):\n"
                          f"{vm.step('gsi-lied').output}")
    vm.step("gsi-cm").ok()
    lied = "connected" if vm.step("gsi-lied").rc == 0 else f"failed (rc {vm.step('gsi-lied').rc})"
    return (f"driver_bad_cqes +1 (NIC lies told before: {told}); the rping lied to {lied}, "
            f"the next one connected")


def objects_run(run: Run, step: str) -> str:
    """What `ferroce_objects ... once` printed in `step`, and its exit status."""
    out = run.vm("a").step(step)
    return f"{out.output.strip() or '(nothing)'} (rc {out.rc})"


@scenario.check
def create_reply_naming_a_live_cq_refused(run: Run) -> str:
    """CREATE_CQ's reply names another live CQ, the holder's (lie cmd-number). The driver
    refuses the number: the process's ibv_create_cq fails with EIO, nothing is mapped or
    destroyed by it, and every CQ the NIC had before lives on."""
    vm = run.vm("a")
    vm.step("cmd-holder").ok()
    before = {cq["cqn"] for cq in vm.step("cmd-objects-before").json("cqs")}
    vm.step("cmd-number-arm").ok()
    out = vm.step("cmd-number")
    if out.rc == 0 or "ibv_create_cq: Input/output error" not in out.output:
        raise CheckFailed(f"ibv_create_cq under the lie: {objects_run(run, 'cmd-number')}, expected EIO")
    after = {cq["cqn"] for cq in vm.step("cmd-objects-after").json("cqs")}
    if lost := before - after:
        raise CheckFailed(f"the lie destroyed CQ {sorted(lost)}: the NIC had {sorted(before)}, now {sorted(after)}")
    return f"{out.output.strip()}; the NIC's CQs {sorted(before)} all live"


@scenario.check
def undefined_command_status_is_an_error(run: Run) -> str:
    """A command completes with a status the interface does not define (lie cmd-status): the
    process gets EIO from that verb and nothing else happens."""
    vm = run.vm("a")
    vm.step("cmd-status-arm").ok()
    out = vm.step("cmd-status")
    if out.rc == 0 or "Input/output error" not in out.output:
        raise CheckFailed(f"under the lie: {objects_run(run, 'cmd-status')}, expected EIO")
    return out.output.strip()


@scenario.check
def unsolicited_completion_passed_over(run: Run) -> str:
    """A completion for a command nobody posted waits in the next command's slot (lie
    cmd-unsolicited; the NIC stalls until the driver has met it): the driver passes over it,
    waits for the command's own, and the verbs all succeed. That lie and the number lie are
    counted in driver_bad_replies."""
    vm = run.vm("a")
    vm.step("cmd-unsolicited-arm").ok()
    vm.step("cmd-unsolicited-seen").ok()
    vm.step("cmd-unsolicited-go").ok()
    out = vm.step("cmd-unsolicited")
    if "holding 1 QPs" not in out.output or "rc=0" not in out.output:
        raise CheckFailed(f"under the lie: {out.output.strip()}")
    bad = delta(run, "cmd", "driver_bad_replies")
    if bad != 2:
        raise CheckFailed(f"driver_bad_replies grew by {bad}, expected 2 (the number and the unsolicited completion)")
    # 6 under kernel verbs, 1 about the GSI QP, then one of each about commands.
    status = vm.step("cmd-lies-told").json()
    if status.get("lies_told") != 10 or status.get("lie") is not None:
        raise CheckFailed(f"NIC status: lies_told={status.get('lies_told')} lie={status.get('lie')}, expected 10 and none armed")
    passed = vm.step("cmd-unsolicited-seen").output.strip().splitlines()[-1].split("] ", 1)[-1]
    return f"{passed}; {' '.join(out.output.split())}; driver_bad_replies +2, lies_told=10"


@scenario.check
def commands_after_the_lies(run: Run) -> str:
    """The truth again: the same verbs succeed, and once the holder exits its CQ is gone
    from the NIC with everything else of its process (only the device's memory for the CQ it
    created under the lie stays, with the CQ itself)."""
    vm = run.vm("a")
    out = vm.step("cmd-truth")
    if out.rc != 0:
        raise CheckFailed(objects_run(run, "cmd-truth"))
    # Context 0 is the kernel's.
    contexts = [c for c in vm.step("cmd-holder-gone").json("contexts") if c["ctx"] != 0]
    if contexts:
        raise CheckFailed(f"user contexts left in the NIC after every process exited: {contexts}")
    return out.output.strip()


@scenario.check
def truth_works(run: Run) -> str:
    vm = run.vm("a")
    result = phase_result(run, "truth", "chain")
    if f"completed={CHAIN} " not in result:
        raise CheckFailed(result)
    vm.step("teardown").ok()
    vm.step("unload").ok()
    vm.step("unload-ferroce").ok()
    return result


@scenario.check
def kernel_log(run: Run) -> str:
    log = run.vm("a").step("dmesg").output
    trouble = [line for line in log.splitlines() if KERNEL_TROUBLE.search(line)]
    # The driver's deferred work (moving the lied-about QPs to ERR) goes to a queue that is
    # not deprecated (the kernel warns once per boot, naming the first work function).
    trouble += [line for line in log.splitlines() if "deprecated workqueue" in line and "[ferroce]" in line]
    if trouble:
        raise CheckFailed("kernel log:\n" + "\n".join(trouble[:20]))
    dropped = re.findall(r"ferroce: CQ \d+: dropped a CQE the device wrote \(([^)]*)\)", log)
    # One per CQE lie: five under the chain, one about the GSI QP.
    if len(dropped) != 6:
        raise CheckFailed(f"{len(dropped)} 'dropped a CQE' reports, expected 6: {dropped}")
    events = re.findall(r"ferroce: dropped an event of \w+ \d+, which does not exist", log)
    if len(events) != 1:
        raise CheckFailed(f"{len(events)} unknown-object event reports, expected 1")
    return "; ".join(dropped)
