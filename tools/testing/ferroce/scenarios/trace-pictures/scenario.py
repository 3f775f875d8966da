"""The mechanism as pictures, drawn from the NIC traces of real runs between two ferroce VMs.

a runs ibv_rc_pingpong (64-byte SENDs), polling and then with completion events, ib_write_bw (4 KiB WRITEs, 4 per ibv_post_send) and
ibv_rc_pingpong again while its NIC drops 30 % of the requests it sends, and one SEND with ferroce_rnr
against a b that posts its receive only once its NIC has RNR NAKed the SEND (verbs/ferroce_rnr.c:
an RNR NAK by construction, not by a race between a's sends and b's reposts); each run follows a
mark in a's
NIC trace. The checks draw, with nictrace.py (`tools/ferroce trace`), the sequence picture of a
pingpong iteration, of the first WRITE burst and of a SEND lost and retransmitted, and the
latency breakdown of the pingpong, into the log directory; and they check that the pictures
show what the mechanism is: per pingpong iteration one doorbell, one WQE, one SEND and the ACK
of its PSN, one CQE; with events, the CQE followed by an EQE, the MSI-X interrupt and the
consumer's re-arm of the CQ; a doorbell per 4 WRITE WQEs; the lost SEND's PSN sent again and ACKed;
the SEND that got an RNR NAK sent again after the RNR timer and ACKed.
"""

import re
from pathlib import Path

import nictrace
from harness import CheckFailed, Run, Scenario, Vm

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True), Vm("b", "10.0.0.2/24", nic=True)],
                    timeout=120, faults=True)  # the lossy pingpong drops 30 % of a's requests

SEND_ONLY, ACK = 4, 17
WRITES = {"WRITE_FIRST": 6, "WRITE_MIDDLE": 7, "WRITE_LAST": 8, "WRITE_ONLY": 10}


def events(run: Run, mark: str) -> list[nictrace.Event]:
    if run.log_dir is None:
        raise CheckFailed("no log directory: the NIC traces are not available")
    paths = [run.log_dir / f"{vm}.nic-trace.jsonl" for vm in ("a", "b")]
    for path in paths:
        if not path.exists():
            raise CheckFailed(f"no NIC trace {path}")
    try:
        return nictrace.after_mark(nictrace.load_all(paths), mark)
    except SystemExit as e:
        raise CheckFailed(str(e)) from e


def picture(evs: list[nictrace.Event], skip: int, wrs: int,
            with_: str | None = None) -> list[nictrace.Arrow]:
    try:
        chosen = nictrace.select(evs, None, skip, wrs, None, with_)
        return nictrace.arrows(chosen, 2, nictrace.match_frames(evs))
    except SystemExit as e:
        raise CheckFailed(str(e)) from e


def of(drawn: list[nictrace.Arrow], node: str, *kinds: str) -> list[nictrace.Arrow]:
    return [a for a in drawn if a.kind in kinds and "ab"[a.node] == node]


def sq_doorbells(drawn: list[nictrace.Arrow]) -> list[nictrace.Arrow]:
    return [a for a in of(drawn, "a", "doorbell") if a.fields["reg"] in nictrace.SQ_DOORBELLS]


def draw(run: Run, drawn: list[nictrace.Arrow], name: str, title: str) -> Path:
    path = run.log_dir / f"{name}.svg"
    nictrace.draw(drawn, 2, title, path)
    nictrace.draw(drawn, 2, title, path.with_suffix(".png"))
    return path


@scenario.check
def runs_completed(run: Run) -> None:
    for vm in ("a", "b"):
        for step in ("rc-pingpong", "rc-pingpong-events", "write-bw", "rc-pingpong-lossy",
                     "rnr"):
            run.vm(vm).step(step).ok()


@scenario.check
def pingpong_iteration(run: Run) -> str:
    """Each of the 5 SENDs: one doorbell, one WQE taken, one SEND_ONLY, the ACK of its PSN, one
    CQE, all on a; the figure of the third iteration shows them."""
    evs = events(run, "pingpong")
    psns = []
    for k in range(5):
        drawn = picture(evs, k, 1)
        doorbells, wqes = sq_doorbells(drawn), of(drawn, "a", "wqe_fetch", "wqe_push")
        sends = [a for a in of(drawn, "a", "frame") if a.fields.get("opcode") == SEND_ONLY]
        cqes = of(drawn, "a", "cqe")
        if (len(doorbells), len(wqes), len(sends), len(cqes)) != (1, 1, 1, 1):
            raise CheckFailed(f"iteration {k}: {len(doorbells)} doorbells, {len(wqes)} WQEs, "
                              f"{len(sends)} SEND_ONLY frames, {len(cqes)} CQEs on a; "
                              "expected one each:\n"
                              + "\n".join(f"  {a.summary()}" for a in drawn))
        psn = sends[0].fields["psn"]
        acks = [a for a in of(drawn, "b", "frame")
                if a.fields.get("opcode") == ACK and a.fields.get("psn") == psn]
        if len(acks) != 1 or cqes[0].fields.get("status") != 0:
            raise CheckFailed(f"iteration {k}: SEND PSN {psn}: {len(acks)} ACKs of it from b, "
                              f"CQE status {cqes[0].fields.get('status')}")
        psns.append(psn)
    if psns != [psns[0] + i for i in range(5)]:
        raise CheckFailed(f"the SENDs' PSNs {psns} do not follow each other")
    drawn = picture(evs, 2, 1)
    path = draw(run, drawn, "pingpong", "ibv_rc_pingpong: one 64-byte SEND from a to b, ACKed")
    svg = path.read_text()
    for text in (f"SEND_ONLY PSN {psns[2]}", f"ACK PSN {psns[2]}", "CQE"):
        if text not in svg:
            raise CheckFailed(f"{path.name} does not show {text!r}")
    return (f"5 iterations of 1 doorbell, 1 WQE, SEND_ONLY/ACK PSNs {psns[0]}..{psns[-1]}, "
            f"1 CQE; {path} ({len(drawn)} events)")


@scenario.check
def completion_interrupt(run: Run) -> str:
    """With -e, a's CQEs are followed by an EQE on a completion EQ, the MSI-X interrupt that
    announces it, and the consumer arming the CQ again (ibv_req_notify_cq). Which CQE gets the
    EQE depends on timing (CQEs that come while the CQ is not armed share the next event), so
    the check finds the sequence among all 5 iterations and draws the first iteration that
    shows it whole."""
    evs = events(run, "pingpong-events")

    def a_kinds(drawn: list[nictrace.Arrow]) -> list[str]:
        return [a.kind for a in drawn if "ab"[a.node] == "a"]

    def announced(kinds: list[str]) -> bool:
        wanted = iter(["cqe", "eqe", "irq", "cq_arm"])
        step = next(wanted)
        for kind in kinds:
            if kind == step:
                step = next(wanted, None)
                if step is None:
                    return True
        return False

    every = a_kinds(picture(evs, 0, 5))
    if not announced(every):
        raise CheckFailed(f"no CQE followed by an EQE, the interrupt and the re-arm on a: {every}")
    drawn = next((d for d in (picture(evs, k, 1) for k in range(5)) if announced(a_kinds(d))),
                 picture(evs, 2, 1))
    path = draw(run, drawn, "pingpong-events",
                "ibv_rc_pingpong -e: the CQE, its EQE and MSI-X interrupt, the re-arm")
    rows = nictrace.latencies(evs, None)
    irq = [r["stages"][4] for r in rows if r["stages"][4] is not None]
    if not irq:
        raise CheckFailed("no CQE → interrupt time measured")
    return f"CQE → EQE → MSI-X → CQ arm; CQE → interrupt {min(irq):.0f}..{max(irq):.0f} µs; {path}"


@scenario.check
def write_burst(run: Run) -> str:
    """The first 8 WRITE WQEs: a doorbell per ibv_post_send of 4, every WRITE in 4 frames."""
    evs = events(run, "write-bw")
    drawn = picture(evs, 0, 8)
    wqes = of(drawn, "a", "wqe_fetch", "wqe_push")
    doorbells = sq_doorbells(drawn)
    if len(wqes) < 8 or not doorbells or len(doorbells) * 4 > len(wqes) + 3:
        raise CheckFailed(f"{len(doorbells)} doorbells for {len(wqes)} WQEs; expected one per 4")
    steps = {a.fields["index"] % 4 for a in doorbells}
    if steps != {0}:
        raise CheckFailed("doorbells at producer indexes "
                          f"{[a.fields['index'] for a in doorbells]}: not one per 4 WQEs")
    # The frames of each WRITE, in the order sent: FIRST, MIDDLE, MIDDLE, LAST for 4 KiB at
    # an MTU of 1024 (the picture may end inside the last one).
    names = {op: name for name, op in WRITES.items()}
    sent = [names[a.fields["opcode"]] for a in of(drawn, "a", "frame")
            if a.fields.get("opcode") in names and not a.fields.get("retransmit")]
    groups: list[list[str]] = []
    for name in sent:
        if name == "WRITE_FIRST" or not groups:
            groups.append([])
        groups[-1].append(name)
    whole = ["WRITE_FIRST", "WRITE_MIDDLE", "WRITE_MIDDLE", "WRITE_LAST"]
    complete = [g for g in groups if g == whole]
    if len(complete) < 8 or any(g != whole for g in groups[:-1]):
        raise CheckFailed(f"WRITE frames {groups}: expected FIRST, 2 MIDDLE, LAST per 4 KiB")
    first = len(complete)
    # The figure: the first ibv_post_send's 4 WRITEs.
    path = draw(run, picture(evs, 0, 4), "write-burst",
                "ib_write_bw: 4 KiB RDMA WRITEs, 4 per ibv_post_send and doorbell")
    return (f"{len(wqes)} WQEs, {len(doorbells)} doorbells (indexes "
            f"{[a.fields['index'] for a in doorbells]}), {first} WRITEs of 4 frames; {path}")


@scenario.check
def retransmission(run: Run) -> str:
    """A SEND a's NIC dropped: its PSN goes out again (retransmit), b receives and ACKs it, and
    the WR completes once, successfully."""
    evs = events(run, "retransmit")
    drawn = picture(evs, 0, 1, "lost")
    lost = [a for a in of(drawn, "a", "frame_lost") if a.fields.get("opcode") == SEND_ONLY]
    if not lost:
        raise CheckFailed("no lost SEND in the picture:\n"
                          + "\n".join(f"  {a.summary()}" for a in drawn))
    psn = lost[0].fields["psn"]
    again = [a for a in of(drawn, "a", "frame") if a.fields.get("psn") == psn
             and a.fields.get("opcode") == SEND_ONLY and a.fields.get("retransmit")]
    timer = of(drawn, "a", "retransmit")
    acked = [a for a in of(drawn, "a", "ack") if a.fields.get("psn") == psn]
    cqes = of(drawn, "a", "cqe")
    if not again or not timer or not acked or len(cqes) != 1 or cqes[0].fields.get("status") != 0:
        raise CheckFailed(f"lost SEND PSN {psn}: {len(again)} retransmissions received, "
                          f"{len(timer)} retransmit events, {len(acked)} ACKs, {len(cqes)} CQEs:\n"
                          + "\n".join(f"  {a.summary()}" for a in drawn))
    path = draw(run, drawn, "retransmit", "a SEND lost on the wire, sent again by the timer")
    return f"SEND PSN {psn} lost; {timer[0].label}; received and ACKed; {path}"


@scenario.check
def rnr_nak(run: Run) -> str:
    """A SEND b had no receive for: b answers with an RNR NAK of its PSN, a sends it again once
    the RNR timer ran out, b receives and ACKs it, the WR completes once."""
    evs = events(run, "rnr")
    drawn = picture(evs, 0, 1, "nak")
    naks = [a for a in of(drawn, "a", "nak") if a.fields.get("syndrome", 0) & 0x60 == 0x20]
    if not naks:
        raise CheckFailed("no RNR NAK in the picture:\n" + "\n".join(f"  {a.summary()}" for a in drawn))
    psn = naks[0].fields["psn"]
    # b's frame of it: an ACKNOWLEDGE whose AETH syndrome says RNR, drawn as an RNR NAK.
    sent = [a for a in of(drawn, "b", "frame") if a.fields.get("opcode") == ACK
            and a.fields.get("psn") == psn and a.label.startswith("RNR NAK")]
    if not sent:
        raise CheckFailed(f"b's RNR NAK frame of PSN {psn} is not in the picture")
    again = [a for a in of(drawn, "a", "frame") if a.fields.get("psn") == psn
             and a.fields.get("retransmit") and a.t0 > naks[0].t0]
    timer = [a for a in of(drawn, "a", "retransmit") if "RNR" in a.label]
    cqes = of(drawn, "a", "cqe")
    if not again or not timer or not cqes or cqes[-1].fields.get("status") != 0:
        raise CheckFailed(f"RNR NAK of PSN {psn}: {len(again)} retransmissions, {len(timer)} "
                          f"RNR retransmit events, CQEs {[c.fields for c in cqes]}:\n"
                          + "\n".join(f"  {a.summary()}" for a in drawn))
    waited = again[0].t0 - naks[0].t0
    path = draw(run, drawn, "rnr-nak", "ferroce_rnr: b has no receive posted, RNR NAK, sent again")
    return f"RNR NAK of PSN {psn}, sent again {waited:.0f} µs later, ACKed, completed; {path}"


@scenario.check
def latency_breakdown(run: Run) -> str:
    """Where the microseconds of each pingpong SEND go: every stage up to the CQE measured."""
    rows = nictrace.latencies(events(run, "pingpong"), None)
    if len(rows) < 5:
        raise CheckFailed(f"{len(rows)} completed WRs measured, expected 5")
    for row in rows:
        missing = [nictrace.STAGES[i] for i, v in enumerate(row["stages"][:4]) if v is None]
        if missing:
            raise CheckFailed(f"WR {row['wr_id']} (WQE {row['index']}): no {', '.join(missing)}")
    table = nictrace.latency_table(rows)
    path = run.log_dir / "pingpong-latency.svg"
    nictrace.draw_latency(rows, "ibv_rc_pingpong, 64-byte SENDs: where the microseconds go", path)
    median = re.search(r"^first frame → last ACK\s+\d+\s+[\d.]+\s+([\d.]+)", table, re.M)
    return f"{len(rows)} WRs, round trip median {median.group(1) if median else '?'} µs; {path}\n{table}"
