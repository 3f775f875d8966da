"""perftest on ferroce: ib_write_bw, ib_read_bw, ib_send_bw, ib_send_lat and ib_atomic_bw with
GID 3, over TCP and through rdma_cm (-R), kernel-bypass through libferroce-rdmav34.so; then
ib_write_bw with doorbell records the NIC polls (FERROCE_DOORBELL=record).
Checks and figures: perftest.py; perftest-rxe is the same on rxe."""

from harness import CheckFailed, Run
from perftest import scenario_for

scenario = scenario_for("ferroce")
# Counted per WR from the runs of 64 and 256 WRs (their setup cancels out).
RECORD_RUNS = (64, 256)


@scenario.check
def doorbell_records(run: Run) -> str:
    """With FERROCE_DOORBELL=record a WR costs no doorbell write and no push while the NIC is
    awake (perftest.py keeps it so): the NIC finds the WR in the QP's doorbell record
    (record_doorbells) and fetches it."""
    a = run.vm("a")
    moved = {}
    for n in RECORD_RUNS:
        for vm in ("a", "b"):
            step = run.vm(vm).step(f"record-n{n}")
            step.ok()
            if "ringing doorbells" in step.output or "failed" in step.output.lower():
                raise CheckFailed(f"{vm}: record-n{n}:\n{step.output[-1500:]}")
        before = a.step(f"record-n{n}-before").json("counters")
        after = a.step(f"record-n{n}-after").json("counters")
        moved[n] = {c: after[c] - before[c] for c in after}
    extra = {c: moved[RECORD_RUNS[1]][c] - moved[RECORD_RUNS[0]][c] for c in moved[RECORD_RUNS[0]]}
    wrs = RECORD_RUNS[1] - RECORD_RUNS[0]
    want = {"doorbells": 0, "wqe_pushes": 0, "wqe_fetches": wrs}
    got = {c: extra[c] for c in want}
    if got != want or not 0 < extra["record_doorbells"] <= wrs:
        raise CheckFailed(f"{wrs} more WRs moved {extra}, expected {want} and 1..{wrs} "
                          "record_doorbells")
    return (f"{wrs} more WRs: {extra['doorbells']} doorbells, {extra['wqe_pushes']} pushes, "
            f"{extra['wqe_fetches']} fetches, {extra['record_doorbells']} record doorbells")
