"""perftest on ferroce: ib_write_bw, ib_read_bw, ib_send_bw, ib_send_lat and ib_atomic_bw with
GID 3, over TCP and through rdma_cm (-R), kernel-bypass through libferroce-rdmav34.so; then
ib_write_bw with doorbell records the NIC polls (FERROCE_DOORBELL=record) and with the push
window (FERROCE_PUSH=1). Checks and figures: perftest.py; perftest-rxe is the same on rxe."""

from harness import CheckFailed, Run
from perftest import scenario_for

scenario = scenario_for("ferroce", timeout=300)
# Counted per WR from the runs of 64 and 256 WRs (their setup cancels out).
RUNS = (64, 256)
WRS = RUNS[1] - RUNS[0]


def costs(run: Run, mode: str) -> tuple[dict, dict]:
    """What the client's NIC counted for the longer run of `mode`, and for its 192 more WRs."""
    a = run.vm("a")
    moved = {}
    for n in RUNS:
        for vm in ("a", "b"):
            step = run.vm(vm).step(f"{mode}-n{n}")
            step.ok()
            if "ringing doorbells" in step.output or "failed" in step.output.lower():
                raise CheckFailed(f"{vm}: {mode}-n{n}:\n{step.output[-1500:]}")
        before = a.step(f"{mode}-n{n}-before").json("counters")
        after = a.step(f"{mode}-n{n}-after").json("counters")
        moved[n] = {c: after[c] - before[c] for c in after}
    long = moved[RUNS[1]]
    return long, {c: long[c] - moved[RUNS[0]][c] for c in long}


# The kernel's own doorbells: a command rings the command queue (REG_CMDQ_DB), and after an
# interrupt the driver re-arms its EQ (REG_EQ_DB). Both may come in either run (a GID the
# kernel adds late, a late command completion): the doorbells a count allows beside the WRs'
# are one per command and the interrupts' re-arms, more or fewer (the shorter run may have had
# more). A loaded make check's short run had 2 more commands: 'doorbells': -4,
# 'interrupts': -2, 'commands': -2.


def kernel_doorbells(count: int, extra: dict) -> bool:
    """`count` doorbells beyond the WRs' are what the commands and interrupts of `extra` (the
    counters' differences between the runs: they may be negative) can explain."""
    rearms, interrupts = count - extra["commands"], extra["interrupts"]
    return min(interrupts, 0) <= rearms <= max(interrupts, 0)


@scenario.check
def doorbell_records(run: Run) -> str:
    """With FERROCE_DOORBELL=record a WR costs no doorbell write and no push while the NIC is
    awake (perftest.py keeps it so): the NIC finds the WR in the QP's doorbell record
    (record_doorbells; several WRs may be found at once) and fetches it."""
    long, extra = costs(run, "record")
    ok = (extra["wqe_pushes"] == 0 and extra["wqe_fetches"] == WRS
          and kernel_doorbells(extra["doorbells"], extra) and long["record_doorbells"] > 0)
    if not ok:
        raise CheckFailed(f"{WRS} more WRs moved {extra} ({long['record_doorbells']} record "
                          f"doorbells in the run of {RUNS[1]}), expected no push, {WRS} fetches "
                          "and no doorbell but the commands' and the interrupts' EQ re-arms")
    return (f"{WRS} more WRs: {extra['doorbells']} doorbells ({extra['interrupts']} interrupts), "
            f"{extra['wqe_pushes']} pushes, {extra['wqe_fetches']} fetches; "
            f"{long['record_doorbells']} record doorbells in the run of {RUNS[1]}")


@scenario.check
def push_window(run: Run) -> str:
    """With FERROCE_PUSH=1 a single WR rings one doorbell (DB_PUSH) and goes through the push
    window, unless the NIC already holds 16 pushed WQEs of the QP: then it is fetched."""
    _, extra = costs(run, "push")
    pushes, fetches, doorbells = extra["wqe_pushes"], extra["wqe_fetches"], extra["doorbells"]
    if (not kernel_doorbells(doorbells - WRS, extra)
            or pushes + fetches != WRS or pushes == 0):
        raise CheckFailed(f"{WRS} more WRs moved {extra}, expected {WRS} doorbells and pushes "
                          f"(some) plus fetches making {WRS}")
    return f"{WRS} more WRs: {doorbells} doorbells, {pushes} pushes, {fetches} fetches"


@scenario.check
def cm_rejoin(run: Run) -> str:
    """After a -R client quit half way, the server ran again and served the next client (a
    client that lost perftest's race, whose data connection came before the server listened,
    left the server waiting for good: tools-parity/read-lat-cm failed so)."""
    quitter = run.vm("a").step("cm-quitter")
    quitter.ok()
    quitter.expect(r"^quitter: killed once connected: .* type RC .*state RTS ")
    for vm in ("a", "b"):
        run.vm(vm).step("cm-rejoin").ok()
    server = run.vm("b").step("cm-rejoin")
    return f"server: {server.tries} runs; client: {run.vm('a').step('cm-rejoin').tries} runs"
