"""Userspace interop: ferroce (VM a, through the provider) against Linux rxe (VM b), both ways.

ibv_rc_pingpong, ib_write_bw and ferroce_pmem (IBTA 1.5: ATOMIC WRITE and FLUSH, then the
responder checks its memory) with ferroce as client and rxe as server, then the reverse.
rxe speaks RoCE v2 only, so its IPv4 GID is index 1 and ferroce's index 3: the frames on the
wire are the same RoCE v2, which is what this proves.
"""

from harness import CheckFailed, Run, Scenario, Vm
from pingpong import pingpong, write_bw

VMS = [Vm("a", "10.0.0.1/24", nic=True), Vm("b", "10.0.0.2/24")]
scenario = Scenario(vms=VMS, timeout=120)


@scenario.check
def rc_pingpong_ferroce_to_rxe(run: Run) -> str:
    return pingpong(run, "rc-pingpong-to-rxe", ["a", "b"])


@scenario.check
def write_bw_ferroce_to_rxe(run: Run) -> str:
    return write_bw(run, "write-bw-to-rxe", ["a", "b"], "a")


@scenario.check
def rc_pingpong_rxe_to_ferroce(run: Run) -> str:
    return pingpong(run, "rc-pingpong-from-rxe", ["a", "b"])


@scenario.check
def write_bw_rxe_to_ferroce(run: Run) -> str:
    return write_bw(run, "write-bw-from-rxe", ["a", "b"], "b")


def pmem(run: Run, step: str, client: str, server: str) -> str:
    """ferroce_pmem's client saw its five completions in order and its server its memory."""
    for vm in (client, server):
        run.vm(vm).step(step).ok()
    done = run.vm(client).step(step).expect(r"^pmem ok: .*$").group(0)
    seen = run.vm(server).step(step).expect(r"^pmem ok: .*$").group(0)
    return f"{client}: {done}\n{server}: {seen}"


@scenario.check
def atomic_write_and_flush_ferroce_to_rxe(run: Run) -> str:
    return pmem(run, "pmem-to-rxe", "a", "b")


@scenario.check
def atomic_write_and_flush_rxe_to_ferroce(run: Run) -> str:
    return pmem(run, "pmem-from-rxe", "b", "a")


@scenario.check
def no_doorbell_rejected(run: Run) -> None:
    counters = run.vm("a").step("nic-counters").json("counters")
    if counters["bad_doorbells"] or counters["icrc_errors"]:
        raise CheckFailed(f"bad_doorbells {counters['bad_doorbells']}, icrc_errors {counters['icrc_errors']}")
