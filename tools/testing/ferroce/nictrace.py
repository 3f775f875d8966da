#!/usr/bin/env python3
"""See the mechanism: sequence pictures and latency breakdowns from ferroce-nic traces.

`tools/ferroce trace A.nic-trace.jsonl [B.nic-trace.jsonl] -o run.svg` draws what the NICs
recorded (`ferroce-nic serve --trace`, kept by the harness as `<vm>.nic-trace.jsonl`) as a sequence
diagram: time runs down, and the lanes are

    A host (rings, doorbell page)  |  NIC A  |  wire  |  NIC B  |  B host (memory, CQ, EQ)

Each arrow is one recorded event: a doorbell (host -> NIC), a WQE fetch or push, a payload DMA,
a frame (NIC A -> NIC B, drawn from when A sent it to when B received it: both traces are put on
one time base by their `clock` records), an ACK or NAK, a CQE, an EQE and the MSI-X interrupt
(NIC -> host). `--qp`, `--wrs`, `--skip` and `--window` pick what to draw, so that one
`ibv_rc_pingpong` iteration or one retransmission makes a readable figure; `--after-mark NAME`
starts at a `mark` record (`ferroce-nic ctl SOCKET trace mark NAME`, in the guest `hostctl nic
trace mark NAME`) and ends at the node's next one.

`--latency` prints, per work request of A's QP, where the time went: doorbell -> WQE fetch ->
first frame out -> last ACK in -> CQE written -> interrupt, as min/median/p99 per stage, and
`--latency-figure FILE` draws it as stacked bars. `--summary FILE` writes what the figure shows
as JSON (the trace-pictures scenario checks it). SVG or PNG by the output's suffix.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import itertools
import json
import statistics
import sys
from pathlib import Path

# Doorbell registers inside a doorbell page (ferroce-hw.rst, "Doorbells").
DOORBELL_NAMES = {0x000: "SQ", 0x004: "RQ", 0x008: "SRQ", 0x00c: "CQ arm", 0x010: "push"}
SQ_DOORBELLS = ("SQ", "push")

# BTH opcodes (IBA 9.2, table 38): the RC and UD ones the engine sends.
OPCODES = {
    0: "SEND_FIRST", 1: "SEND_MIDDLE", 2: "SEND_LAST", 3: "SEND_LAST_IMM", 4: "SEND_ONLY",
    5: "SEND_ONLY_IMM", 6: "WRITE_FIRST", 7: "WRITE_MIDDLE", 8: "WRITE_LAST",
    9: "WRITE_LAST_IMM", 10: "WRITE_ONLY", 11: "WRITE_ONLY_IMM", 12: "READ_REQ",
    13: "READ_RESP_FIRST", 14: "READ_RESP_MIDDLE", 15: "READ_RESP_LAST", 16: "READ_RESP_ONLY",
    17: "ACK", 18: "ATOMIC_ACK", 19: "CMP_SWAP", 20: "FETCH_ADD", 22: "SEND_LAST_INV",
    23: "SEND_ONLY_INV", 0x64: "UD_SEND_ONLY", 0x65: "UD_SEND_ONLY_IMM",
}
# EQE types (ferroce-hw.rst, "Event queues").
EVENT_COMPLETION = 0x01
EVENT_NAMES = {
    0x01: "completion", 0x02: "command done", 0x10: "QP fatal", 0x11: "QP request error",
    0x12: "QP access error", 0x13: "last WQE reached", 0x14: "SQ drained", 0x15: "comm est",
    0x20: "CQ error", 0x30: "SRQ limit", 0x31: "SRQ error", 0x40: "port active",
    0x41: "port down", 0x50: "device fatal", 0x51: "doorbell error",
}
# Opcodes of a responder's answers: they go from B to A.
RESPONSES = {13, 14, 15, 16, 17, 18}

LANES = ("A host", "NIC A", "wire", "NIC B", "B host")
HOST, NIC, WIRE = 0, 1, 2


def lane(node: int, where: int) -> int:
    """The lane of `where` (HOST or NIC) of node 0 (A) or 1 (B)."""
    return where if node == 0 else len(LANES) - 1 - where


@dataclasses.dataclass
class Event:
    node: int  # 0: A, 1: B
    t: float  # microseconds on the common time base
    kind: str
    fields: dict


def load(path: Path, node: int) -> tuple[list[Event], float | None]:
    """The events of one trace, and the wall clock (µs) of its t_us 0 if it recorded one."""
    events: list[Event] = []
    zero = None
    with path.open() as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a trace cut short by a killed NIC ends with half a line
            kind = record.pop("ev", None)
            t = record.pop("t_us", None)
            if kind is None or t is None:
                continue
            if kind == "clock" and "unix_us" in record:
                zero = record["unix_us"] - t
                continue
            events.append(Event(node, float(t), kind, record))
    return events, zero


def load_all(paths: list[Path]) -> list[Event]:
    """Both traces on one time base: microseconds since the earliest trace started."""
    loaded = [load(p, i) for i, p in enumerate(paths)]
    zeros = [z for _, z in loaded]
    if all(z is not None for z in zeros):
        base = min(zeros)
        offsets = [z - base for z in zeros]
    else:
        if len(paths) > 1:
            print("trace: a trace has no clock record; assuming both started together",
                  file=sys.stderr)
        offsets = [0.0] * len(paths)
    events = []
    for (evs, _), off in zip(loaded, offsets):
        for e in evs:
            e.t += off
            events.append(e)
    events.sort(key=lambda e: e.t)
    return events


@dataclasses.dataclass
class Arrow:
    """One drawn event: from lane/time to lane/time, with a label."""
    kind: str
    node: int
    src: int
    t0: float
    dst: int
    t1: float
    label: str
    fields: dict

    def summary(self) -> dict:
        return {"kind": self.kind, "node": "ab"[self.node], "t_us": round(self.t0, 1),
                "label": self.label, **self.fields}


def frame_label(f: dict) -> str:
    name = OPCODES.get(f.get("opcode", -1), f"opcode {f.get('opcode')}")
    # An ACKNOWLEDGE whose AETH syndrome is not an ACK's (0b000xxxxx) is a NAK of its kind.
    if f.get("opcode") == 17 and f.get("syndrome", 0) & 0x60:
        name = nak_name(f["syndrome"])
    extra = " (retransmit)" if f.get("retransmit") else ""
    return f"{name} PSN {f.get('psn')} QP {f.get('qpn')}, {f.get('len')} B{extra}"


def nak_name(syndrome: int) -> str:
    """The kind of NAK an AETH syndrome says (IBA 9.7.5.2.1, table 44)."""
    if syndrome & 0x60 == 0x20:
        return "RNR NAK"
    return {0x60: "sequence NAK", 0x61: "invalid request NAK", 0x62: "remote access NAK",
            0x63: "remote operational NAK", 0x64: "invalid RD request NAK"}.get(syndrome, "NAK")


def match_frames(events: list[Event]) -> dict[int, Event | None]:
    """For each frame sent (by `id` of its event), the peer's receipt of it, or None: lost on the
    wire (fault injection), or still in flight when the trace ends. A receipt belongs to the
    last transmission of the same BTH opcode, PSN and destination QPN before it, so that a
    retransmission's receipt is not taken for the lost original's."""
    sent: dict[tuple, list[Event]] = {}
    got: dict[tuple, list[Event]] = {}
    for e in events:
        if e.kind != "frame" or e.fields.get("loopback"):
            continue
        key = (e.fields.get("opcode"), e.fields.get("psn"), e.fields.get("qpn"))
        if e.fields.get("dir") == "tx":
            sent.setdefault((e.node,) + key, []).append(e)
        elif e.fields.get("dir") == "rx":
            got.setdefault((1 - e.node,) + key, []).append(e)
    out: dict[int, Event | None] = {}
    for key, txs in sent.items():
        for tx in txs:
            out[id(tx)] = None
        for rx in got.get(key, []):
            before = [tx for tx in txs if tx.t <= rx.t + CLOCK_SLACK_US]
            if before and out[id(before[-1])] is None:
                out[id(before[-1])] = rx
    return out


# How far the two NICs' clocks may disagree: both read the host's wall clock when they start.
CLOCK_SLACK_US = 50.0


def arrows(events: list[Event], nodes: int,
           matched: dict[int, Event | None] | None = None) -> list[Arrow]:
    """The events worth drawing, as arrows; frames matched between A's tx and B's rx
    (`matched`: [`match_frames`] of all events, so that a frame received after the picture's
    end is not taken for lost)."""
    out: list[Arrow] = []
    if matched is None:
        matched = match_frames(events) if nodes > 1 else {}
    for e in events:
        f, n = e.fields, e.node
        host, nic = lane(n, HOST), lane(n, NIC)
        if e.kind == "doorbell":
            reg = DOORBELL_NAMES.get(f.get("reg"), f"reg {f.get('reg')}")
            index = f.get("value", 0) & 0xffff
            out.append(Arrow("doorbell", n, host, e.t, nic, e.t,
                             f"{reg} doorbell, QID {f.get('qid')}, index {index}",
                             {"reg": reg, "qid": f.get("qid"), "index": index,
                              "ctx": f.get("ctx")}))
        elif e.kind == "wqe":
            how = "push (no fetch)" if f.get("pushed") else "WQE fetch"
            op = f" ({f['name']})" if f.get("name") else ""
            out.append(Arrow("wqe_push" if f.get("pushed") else "wqe_fetch", n, host, e.t, nic, e.t,
                             f"{how}: QP {f.get('qpn')} WQE {f.get('index')}{op}",
                             {"qpn": f.get("qpn"), "index": f.get("index")}))
        elif e.kind == "dma" and f.get("what") == "payload":
            read = f.get("dir") == "read"
            out.append(Arrow("dma_" + f.get("dir", "?"), n, host if read else nic, e.t,
                             nic if read else host, e.t,
                             f"DMA {'read' if read else 'write'} {f.get('len')} B payload",
                             {"len": f.get("len")}))
        elif e.kind == "frame" and f.get("dir") == "tx":
            if nodes < 2 or f.get("loopback"):
                out.append(Arrow("frame", n, nic, e.t, WIRE, e.t, frame_label(f), dict(f)))
                continue
            rx = matched.get(id(e))
            peer = lane(1 - n, NIC)
            if rx is None:
                # Never received: dropped on the wire (fault injection) or still in flight.
                out.append(Arrow("frame_lost", n, nic, e.t, WIRE, e.t, frame_label(f) + " - lost",
                                 dict(f)))
            else:
                out.append(Arrow("frame", n, nic, e.t, peer, rx.t, frame_label(f),
                                 {**f, "rx_t_us": round(rx.t, 1)}))
        elif e.kind in ("ack", "nak") and f.get("dir") == "rx":
            syndrome = f.get("syndrome", 0)
            name = "ACK" if e.kind == "ack" else nak_name(syndrome)
            out.append(Arrow(e.kind, n, nic, e.t, nic, e.t,
                             f"{name} in: QP {f.get('qpn')} PSN {f.get('psn')}",
                             {"qpn": f.get("qpn"), "psn": f.get("psn"), "syndrome": syndrome}))
        elif e.kind == "retransmit":
            out.append(Arrow("retransmit", n, nic, e.t, nic, e.t,
                             f"retransmit from PSN {f.get('psn')} ({f.get('reason')})",
                             {"qpn": f.get("qpn"), "psn": f.get("psn")}))
        elif e.kind == "cqe":
            status = "" if f.get("status") == 0 else f", status {f.get('status')}"
            op = f" ({f['name']})" if f.get("name") else ""
            out.append(Arrow("cqe", n, nic, e.t, host, e.t,
                             f"CQE{op}: CQ {f.get('cqn')} QP {f.get('qpn')} wr_id {f.get('wr_id')}{status}",
                             {"cqn": f.get("cqn"), "qpn": f.get("qpn"),
                              "wqe_index": f.get("wqe_index"), "opcode": f.get("opcode"),
                              "wr_id": f.get("wr_id"), "status": f.get("status")}))
        elif e.kind == "eqe":
            out.append(Arrow("eqe", n, nic, e.t, host, e.t,
                             f"EQE on EQ {f.get('eqn')}: "
                             f"{EVENT_NAMES.get(f.get('type'), 'type %s' % f.get('type'))}",
                             {"eqn": f.get("eqn")}))
        elif e.kind == "irq":
            out.append(Arrow("irq", n, nic, e.t, host, e.t,
                             f"MSI-X vector {f.get('vector')} ({f.get('outcome')})",
                             {"vector": f.get("vector")}))
        elif e.kind == "cq_arm":
            out.append(Arrow("cq_arm", n, host, e.t, nic, e.t,
                             f"CQ {f.get('cqn')} armed{' (solicited)' if f.get('solicited') else ''}",
                             {"cqn": f.get("cqn")}))
        elif e.kind == "eq_doorbell":
            out.append(Arrow("eq_doorbell", n, host, e.t, nic, e.t,
                             f"EQ {f.get('eqn')} consumed to {f.get('ci')}{', armed' if f.get('arm') else ''}",
                             {"eqn": f.get("eqn")}))
    return out


def is_send_cqe_of(e: Event, qpn: int, wqe_index: int) -> bool:
    """Whether `e` is the CQE of send WQE `wqe_index` of QP `qpn` (receive CQEs have opcode
    bit 7 set, `CQE_OP_RECV*`)."""
    return (e.kind == "cqe" and e.fields.get("qpn") == qpn and e.fields.get("opcode", 0) < 0x80
            and e.fields.get("wqe_index") == wqe_index)


def after_mark(events: list[Event], name: str) -> list[Event]:
    """The events from A's mark `name` to A's next mark (B's events in the same span)."""
    marks = [e for e in events if e.kind == "mark" and e.node == 0]
    starts = [i for i, m in enumerate(marks) if m.fields.get("name") == name]
    if not starts:
        raise SystemExit(f"trace: A's trace has no mark {name!r} "
                         f"(it has {[m.fields.get('name') for m in marks]})")
    lo = marks[starts[0]].t
    hi = marks[starts[0] + 1].t if starts[0] + 1 < len(marks) else float("inf")
    return [e for e in events if lo <= e.t < hi]


def wqes_with(events: list[Event], fetches: list[Event], what: str) -> list[Event]:
    """The WQEs among `fetches` one of whose requests (the frames A first sent for it, until
    the next WQE was taken) was lost on the wire (`lost`), NAKed (`nak`) or retransmitted
    (`retransmit`)."""
    matched = match_frames(events) if what == "lost" else {}
    kind = {"nak": "nak", "retransmit": "retransmit"}.get(what)
    psns = {e.fields.get("psn") for e in events if e.node == 0 and e.kind == kind
            and (kind != "nak" or e.fields.get("dir") == "rx")}

    def hit(e: Event) -> bool:
        if what == "lost":
            return id(e) in matched and matched[id(e)] is None
        return e.fields.get("psn") in psns

    # The times of A's first transmissions of requests that were hit, in order.
    hits = sorted(e.t for e in events
                  if e.node == 0 and e.kind == "frame" and e.fields.get("dir") == "tx"
                  and not e.fields.get("retransmit") and e.fields.get("opcode") not in RESPONSES
                  and hit(e))
    out = []
    for i, w in enumerate(fetches):
        end = fetches[i + 1].t if i + 1 < len(fetches) else float("inf")
        k = bisect.bisect_left(hits, w.t)
        if k < len(hits) and hits[k] < end:
            out.append(w)
    return out


WITH = ("lost", "nak", "retransmit")


def select(events: list[Event], qp: int | None, skip: int, wrs: int | None,
           window: tuple[float, float] | None, with_: str | None = None) -> list[Event]:
    """The events in the chosen window: explicit, or from the doorbell before the first chosen
    WQE of A's QP `qp` to the CQE of the last one (on both nodes). With `with_` (one of
    [`WITH`]), only WQEs during which that happened count ([`wqes_with`])."""
    if window is not None:
        lo, hi = window
        return [e for e in events if lo <= e.t <= hi]
    if wrs is None:
        return events
    fetches = [e for e in events if e.node == 0 and e.kind == "wqe"
               and (qp is None or e.fields.get("qpn") == qp)]
    if with_ is not None:
        fetches = wqes_with(events, fetches, with_)
    chosen = fetches[skip:skip + wrs]
    if not chosen:
        raise SystemExit(f"trace: no WQE of {'QP %d' % qp if qp is not None else 'any QP'} "
                         f"on A to draw (A has {len(fetches)})")
    qpn = chosen[0].fields.get("qpn")
    first, last = chosen[0], chosen[-1]
    # Start at the doorbell that made the device take the first WQE.
    doorbells = [e for e in events if e.node == 0 and e.kind == "doorbell" and e.t <= first.t
                 and DOORBELL_NAMES.get(e.fields.get("reg")) in SQ_DOORBELLS]
    lo = doorbells[-1].t if doorbells else first.t
    cqes = [e for e in events if e.node == 0 and e.t >= last.t
            and is_send_cqe_of(e, qpn, last.fields.get("index"))]
    if not cqes:
        # Unsignaled (perftest signals every few WRs): the next send CQE of the QP covers it.
        cqes = [e for e in events if e.node == 0 and e.t >= last.t and e.kind == "cqe"
                and e.fields.get("qpn") == qpn and e.fields.get("opcode", 0) < 0x80]
    hi = cqes[0].t if cqes else last.t
    cqn = cqes[0].fields.get("cqn") if cqes else None
    # The interrupt and the consumer's re-arm that follow the last CQE belong to the picture:
    # the completion EQE of its CQ within 2 ms (not another EQ's event, such as a command's),
    # the interrupt that EQE raised, and the re-arm of the CQ before A's next WQE (the
    # consumer's wake-up under TCG can take milliseconds), 50 ms at most.
    def announces(e: Event) -> bool:
        return (e.kind == "eqe" and e.fields.get("type") == EVENT_COMPLETION
                and e.fields.get("data0") == cqn)
    soon = [e for e in events if hi < e.t <= hi + 2000 and e.node == 0]
    after = [e for e in soon if announces(e)][:1]
    if after:
        after += [e for e in soon if e.kind == "irq" and e.t >= after[0].t][:1]
    arm_end = hi + 2000
    if any(e.kind == "irq" for e in after):
        arm_end = min([hi + 50_000] + [e.t for e in fetches if e.t > hi][:1])
    after += [e for e in events if e.node == 0 and e.kind == "cq_arm" and hi < e.t <= arm_end
              and e.fields.get("cqn") == cqn][:1]
    hi = max([hi] + [e.t for e in after])
    return [e for e in events if lo <= e.t <= hi]


def draw(drawn: list[Arrow], nodes: int, title: str, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    # Text stays text in the SVG: smaller, and searchable.
    matplotlib.rcParams["svg.fonttype"] = "none"

    lanes = LANES if nodes > 1 else LANES[:3]
    t0 = drawn[0].t0 if drawn else 0.0
    # One row per arrow: real time decides the order, rows keep labels apart. The real time
    # of each row is printed on the left.
    rows = len(drawn)
    fig, ax = plt.subplots(figsize=(13, 1.2 + 0.32 * max(rows, 4)))
    for i, name in enumerate(lanes):
        ax.axvline(i, color="#bbbbbb", lw=1, zorder=0)
        ax.text(i, -1.2, name, ha="center", va="bottom", fontsize=10, fontweight="bold")
    colors = {"doorbell": "#1f77b4", "wqe_fetch": "#17becf", "wqe_push": "#17becf",
              "dma_read": "#9467bd", "dma_write": "#9467bd", "frame": "#2ca02c",
              "frame_lost": "#d62728", "ack": "#2ca02c", "nak": "#d62728",
              "retransmit": "#d62728", "cqe": "#ff7f0e", "eqe": "#8c564b", "irq": "#e377c2",
              "cq_arm": "#1f77b4", "eq_doorbell": "#7f7f7f"}
    for row, a in enumerate(drawn):
        y0 = row
        # A frame lands on the receiver's lane at the row of its receive time.
        y1 = row
        if a.kind == "frame" and a.t1 != a.t0:
            later = [r for r, b in enumerate(drawn) if b.t0 >= a.t1]
            y1 = later[0] - 0.5 if later else rows - 0.5
            y1 = max(y1, row + 0.3)
        color = colors.get(a.kind, "black")
        if a.src == a.dst:
            ax.plot([a.src], [y0], marker="o", color=color, ms=5)
            x_text, ha = a.src + 0.08, "left"
        else:
            ax.annotate("", xy=(a.dst, y1), xytext=(a.src, y0),
                        arrowprops={"arrowstyle": "->", "color": color, "lw": 1.3})
            x_text = (a.src + a.dst) / 2
            ha = "center"
        ax.text(x_text, y0 - 0.12, a.label, ha=ha, va="bottom", fontsize=7.5, color=color)
        ax.text(-0.45, y0, f"{a.t0 - t0:9.1f} µs", ha="right", va="center", fontsize=7,
                family="monospace", color="#555555")
    ax.set_xlim(-1.3, len(lanes) - 0.4)
    ax.set_ylim(rows + 0.5, -1.6)
    ax.axis("off")
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


STAGES = ("doorbell → fetch", "fetch → first frame", "first frame → last ACK",
          "last ACK → CQE", "CQE → interrupt")


def latencies(events: list[Event], qp: int | None) -> list[dict]:
    """Per WR of A's QP: the time of each stage (µs; None where the trace has no such event).
    Each WR looks only at the events between its doorbell and its CQE (found by index), so a
    long trace costs one pass, not one per WR."""
    a = [e for e in events if e.node == 0]
    at = [i for i, e in enumerate(a) if e.kind == "wqe"
          and (qp is None or e.fields.get("qpn") == qp)]
    # Send CQEs by (QP, WQE index), in trace order.
    cqes: dict[tuple, list[int]] = {}
    for i, e in enumerate(a):
        if e.kind == "cqe" and e.fields.get("opcode", 0) < 0x80:
            cqes.setdefault((e.fields.get("qpn"), e.fields.get("wqe_index")), []).append(i)
    out = []
    for n, p in enumerate(at):
        w = a[p]
        qpn, index = w.fields.get("qpn"), w.fields.get("index")
        candidates = cqes.get((qpn, index), [])
        k = bisect.bisect_left(candidates, p)
        if k == len(candidates):
            continue  # unsignaled, or the trace ends first
        c = candidates[k]
        cqe = a[c]
        doorbell = next((e for e in reversed(a[:p]) if e.kind == "doorbell"
                         and DOORBELL_NAMES.get(e.fields.get("reg")) in SQ_DOORBELLS), None)
        next_fetch = a[at[n + 1]].t if n + 1 < len(at) and a[at[n + 1]].t < cqe.t else cqe.t
        during = a[p:c + 1]
        frames = [e for e in during if e.kind == "frame" and e.fields.get("dir") == "tx"
                  and e.t <= next_fetch and e.fields.get("opcode") not in RESPONSES]
        acks = [e for e in during
                if e.kind == "ack" and e.fields.get("dir") == "rx" and e.fields.get("qpn") == qpn
                or e.kind == "frame" and e.fields.get("dir") == "rx"
                and e.fields.get("opcode") in RESPONSES]
        irq = next((e for e in itertools.takewhile(lambda e: e.t <= cqe.t + 2000, a[c:])
                    if e.kind == "irq"), None)
        first = frames[0].t if frames else None
        last_ack = acks[-1].t if acks else None

        def span(x, y):
            return None if x is None or y is None else max(y - x, 0.0)

        out.append({"qpn": qpn, "index": index, "wr_id": cqe.fields.get("wr_id"), "stages": [
            span(doorbell.t if doorbell else None, w.t), span(w.t, first), span(first, last_ack),
            span(last_ack, cqe.t), span(cqe.t, irq.t if irq else None)]})
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def latency_table(rows: list[dict]) -> str:
    lines = [f"{'stage':<24} {'WRs':>5} {'min µs':>9} {'median µs':>10} {'p99 µs':>9}"]
    for i, name in enumerate(STAGES):
        values = [r["stages"][i] for r in rows if r["stages"][i] is not None]
        if not values:
            lines.append(f"{name:<24} {0:>5} {'-':>9} {'-':>10} {'-':>9}")
            continue
        lines.append(f"{name:<24} {len(values):>5} {min(values):>9.1f} "
                     f"{statistics.median(values):>10.1f} {percentile(values, 99):>9.1f}")
    return "\n".join(lines)


def draw_latency(rows: list[dict], title: str, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = rows[:60]
    fig, ax = plt.subplots(figsize=(12, 5))
    bottoms = [0.0] * len(shown)
    for i, name in enumerate(STAGES):
        heights = [r["stages"][i] or 0.0 for r in shown]
        ax.bar(range(len(shown)), heights, bottom=bottoms, label=name)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    ax.set_xlabel("work request (in posting order)")
    ax.set_ylabel("µs")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parse_window(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition(":")
    return float(lo), float(hi)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+", type=Path, help="A's trace, then B's (optional)")
    p.add_argument("-o", "--output", type=Path, help="sequence picture (.svg or .png)")
    p.add_argument("--qp", type=int, help="A's QP whose work requests to draw")
    p.add_argument("--wrs", type=int, help="how many of its work requests to draw")
    p.add_argument("--skip", type=int, default=0, help="work requests to skip first")
    p.add_argument("--window", type=parse_window, help="START:END in µs of the common time base")
    p.add_argument("--after-mark", metavar="NAME", help="only what follows A's mark NAME")
    p.add_argument("--with", dest="with_", choices=WITH,
                   help="count only work requests during which a frame was lost, a NAK came "
                        "in or a retransmission went out")
    p.add_argument("--title", default=None)
    p.add_argument("--summary", type=Path, help="write what the picture shows as JSON")
    p.add_argument("--latency", action="store_true", help="print the per-stage latency table")
    p.add_argument("--latency-figure", type=Path, help="draw the latency breakdown (.svg/.png)")
    p.add_argument("--max-arrows", type=int, default=150, help="refuse to draw more arrows")
    args = p.parse_args(argv)
    if len(args.traces) > 2:
        p.error("at most two traces (A and B)")
    events = load_all(args.traces)
    if args.after_mark:
        events = after_mark(events, args.after_mark)
    nodes = len(args.traces)
    if args.output or args.summary:
        wrs = args.wrs if args.wrs is not None or args.window else 1
        chosen = select(events, args.qp, args.skip, wrs, args.window, args.with_)
        drawn = arrows(chosen, nodes, match_frames(events) if nodes > 1 else {})
        if args.output:
            if len(drawn) > args.max_arrows:
                raise SystemExit(f"trace: {len(drawn)} events to draw; pick fewer with --wrs, "
                                 "--window or --qp (or raise --max-arrows)")
            what = args.title or (f"{args.traces[0].name}"
                                  + (f" and {args.traces[1].name}" if nodes > 1 else ""))
            draw(drawn, nodes, what, args.output)
            print(f"trace: {args.output}: {len(drawn)} events")
        if args.summary:
            args.summary.write_text(json.dumps([a.summary() for a in drawn], indent=1) + "\n")
    if args.latency or args.latency_figure:
        rows = latencies(events, args.qp)
        if not rows:
            raise SystemExit("trace: no completed work request on A to measure")
        if args.latency:
            print(latency_table(rows))
        if args.latency_figure:
            draw_latency(rows, args.title or "where the microseconds go", args.latency_figure)
            print(f"trace: {args.latency_figure}: {len(rows)} work requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
