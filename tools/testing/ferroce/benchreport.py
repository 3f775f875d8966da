# SPDX-License-Identifier: GPL-2.0
"""make bench's report: one table, one figure and the raw numbers from one run.

    benchreport.py LOGS OUT [--engine FILE]

reads `LOGS/<kind>-mtu<mtu>/bench.json` (left by bench.py's benchmark scenarios) and, with
--engine, the NIC engine benchmark's criterion output (`cargo bench --bench engine`), and writes
OUT/bench.json (everything), OUT/bench.md (the tables, also printed), OUT/bench.svg and
OUT/bench.png (ferroce against rxe per test and MTU) and OUT/bench-latency.svg and .png
(ib_send_lat in its four modes, and the NIC's doorbell-to-wire clock against seed 1's). A
missing scenario leaves its cells empty; a figure that cannot be drawn is reported, never
fatal.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from bench import (COST_COUNTERS, COST_WRS, KINDS, MTUS, QP_SCALING, TESTS, cost_rows, marginal_cost,
                   qp_scaling)

# criterion's estimate line: "64KiB/rc_write/mtu4096   time:   [11.687 µs 11.801 µs 11.931 µs]".
ENGINE = re.compile(r"^(\w+)/(\w+)(?:/(mtu\d+|alone|among_\d+_idle))?\s+time:\s+\[\S+ \S+ ([\d.]+) (ns|µs|us|ms|s) ",
                    re.M)
UNIT_US = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
ENGINE_SIZES = {"4KiB": 4 << 10, "64KiB": 64 << 10, "1MiB": 1 << 20, "4KiB_idle": 4 << 10}


def load(logs: Path) -> dict[str, dict]:
    """`kind-mtuN` → that scenario's bench.json, for those that ran."""
    runs = {}
    for kind in KINDS:
        for mtu in MTUS:
            path = logs / f"{kind}-mtu{mtu}" / "bench.json"
            if path.exists():
                runs[f"{kind}-mtu{mtu}"] = json.loads(path.read_text())
    for name in (POLLED_RUN, *(shm_run(mtu) for mtu in MTUS)):
        if (path := logs / name / "bench.json").exists():
            runs[name] = json.loads(path.read_text())
    return runs


def shm_run(mtu: int) -> str:
    """The run of ferroce at `mtu` on the shared-memory cable."""
    return f"ferroce-shm-mtu{mtu}"


def shm_cable(runs: dict) -> tuple[list[str], dict]:
    """ferroce on the shared-memory cable beside itself on sockets and beside rxe, per test and
    MTU (a platform change: both ferroce runs are of the same NIC)."""
    mtus = [m for m in MTUS if shm_run(m) in runs]
    if not mtus:
        return [], {}
    lines = ["ferroce with its NICs' cable in shared memory (`--wire shm`, a platform change) beside "
             "ferroce on unix sockets and rxe (MiB/s average, µs typical; × is shm over rxe, as in "
             "the table above):", "",
             "| test | unit |" + "".join(f" shm {m} | sockets {m} | rxe {m} | × {m} |" for m in mtus),
             "| --- | --- |" + " --- | --- | --- | --- |" * len(mtus)]
    table = {}
    for test in TESTS:
        if test.wrs or not test.perftest or "rxe" not in test.kinds:
            continue
        cells, row = [], {}
        for mtu in mtus:
            shm = runs[shm_run(mtu)].get("tests", {}).get(test.name)
            shm = shm and (shm["t_typical_us"] if test.latency else shm["bw_avg_mib_s"])
            unix, rxe = value(runs, "ferroce", mtu, test), value(runs, "rxe", mtu, test)
            x = ratio(test, shm, rxe)
            row[str(mtu)] = {"shm": shm, "sockets": unix, "rxe": rxe, "times_better": x}
            cells += [fmt(shm), fmt(unix), fmt(rxe), fmt(x, 2)]
        table[test.name] = row
        lines.append(f"| {test.name} | {'us' if test.latency else 'MiB/s'} | " + " | ".join(cells) + " |")
    return [*lines, ""], table


def value(runs: dict, kind: str, mtu: int, test) -> float | None:
    figure = runs.get(f"{kind}-mtu{mtu}", {}).get("tests", {}).get(test.name)
    if figure is None:
        return None
    return figure["t_typical_us"] if test.latency else figure["bw_avg_mib_s"]


def fmt(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def ratio(test, ferroce: float | None, rxe: float | None) -> float | None:
    """How much better ferroce is: bandwidth ferroce ÷ rxe, latency rxe ÷ ferroce."""
    if not ferroce or not rxe:
        return None
    return rxe / ferroce if test.latency else ferroce / rxe


def comparison(runs: dict) -> tuple[list[str], list[dict]]:
    head = "| test | unit |" + "".join(f" ferroce {m} | rxe {m} | × {m} |" for m in MTUS)
    lines = [head, "| --- | --- |" + " --- | --- | --- |" * len(MTUS)]
    rows = []
    for test in TESTS:
        if test.wrs or test.name.startswith("write-bw-64KiB-q") or not test.perftest:
            continue  # (costs, qps, the looped-back rows)
        row = {"test": test.name, "unit": "us" if test.latency else "MiB/s"}
        cells = []
        for mtu in MTUS:
            f, r = value(runs, "ferroce", mtu, test), value(runs, "rxe", mtu, test)
            x = ratio(test, f, r)
            row[str(mtu)] = {"ferroce": f, "rxe": r, "times_better": x}
            cells += [fmt(f), fmt(r), fmt(x, 2)]
        rows.append(row)
        lines.append(f"| {test.name} | {row['unit']} | " + " | ".join(cells) + " |")
    return lines, rows


def costs(runs: dict) -> tuple[list[str], dict]:
    """Each cost row's counts per WR; the polled run's rows follow as "ROW, polled"."""
    mtu = next((m for m in MTUS if f"ferroce-mtu{m}" in runs), MTUS[0])
    lines = [f"| cost per WR (MTU {mtu}: 64 B WRITEs, ib_write_bw, the inline rows ferroce_chain "
             "looped back through the NIC; 8 B SENDs, ib_send_lat, the cost-lat rows; runs of "
             f"{COST_WRS[1]} less {COST_WRS[0]} WRs; polled: VM a's NIC polls on a core of its "
             "own) | " + " | ".join(COST_COUNTERS) + " |",
             "| --- |" + " --- |" * len(COST_COUNTERS)]
    table = {}
    for run, suffix in ((f"ferroce-mtu{mtu}", ""), (POLLED_RUN, ", polled")):
        tests = runs.get(run, {}).get("tests", {})
        for row in cost_rows():
            short, long = (tests.get(f"{row}-n{n}", {}).get("counts") for n in COST_WRS)
            if short is None or long is None:
                continue
            per_wr = table[row + suffix] = marginal_cost(short, long)
            lines.append(f"| {row}{suffix} | " + " | ".join(f"{per_wr[c]:g}" for c in COST_COUNTERS)
                         + " |")
    return lines, table


# Seed 1 §3.3/§5.3: doorbell-to-send of a 100 Gb/s NIC by how it notices the doorbell (µs).
SEED1 = {"event-driven": (1.2, 2.5), "polling": (0.6, 1.1), "push": (0.3, 0.8)}
# Which of ferroce's runs and samples stand for each mode.
MODES = {"event-driven": ("send-lat", "rung"), "polling": ("send-lat-record", "polled"),
         "push": ("send-lat-push", "pushed")}
# The polled run (bench.py's `polled_scenario`): its record-mode rows, polled on a core.
POLLED_RUN = "ferroce-polled"


def seed1(runs: dict) -> tuple[list[str], dict]:
    """Seed 1's table next to the NIC's own doorbell-to-wire figures (ib_send_lat 8 B)."""
    lines = ["| mode (seed 1) | seed avg µs | seed p99 µs | ferroce avg µs | ferroce p99 µs | samples | ÷ event-driven (avg, p99) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    table = {}
    mtu = next((m for m in MTUS if f"ferroce-mtu{m}" in runs), MTUS[0])
    tests = runs.get(f"ferroce-mtu{mtu}", {}).get("tests", {})
    for mode, where in MODES.items():
        got = {}
        if where is not None:
            got = tests.get(where[0], {}).get("nic_latency", {}).get(where[1], {}) or {}
        table[mode] = got
    base = table["event-driven"]
    for mode, (avg, p99) in SEED1.items():
        got = table[mode]
        rel = ""
        if got.get("avg_us") and base.get("avg_us"):
            rel = f"{got['avg_us'] / base['avg_us']:.2f}, {got['p99_us'] / base['p99_us']:.2f}"
        lines.append(f"| {mode} | {avg} | {p99} | {fmt(got.get('avg_us'))} | {fmt(got.get('p99_us'))} | "
                     f"{got.get('count', '')} | {rel} |")
    return lines, table


# The NIC's doorbell-to-wire samples of each cost mode (ctl latency's kinds).
NOTICED = {"push": "pushed", "nopush": "rung", "record": "polled"}


def looped(runs: dict) -> tuple[list[str], dict]:
    """One VM's WRITEs looped back through its NIC one at a time (the loop-lat rows), by how
    the NIC notices them: the time from post to completion, and the NIC's doorbell to wire."""
    lines = ["| mode | run | µs per WR, post to completion | NIC doorbell to wire avg µs | p99 µs | "
             "samples |", "| --- | --- | --- | --- | --- | --- |"]
    table = {}
    for mode, noticed in NOTICED.items():
        for run, label in (("ferroce-mtu1500", "two VMs, cores shared"),
                           (POLLED_RUN, "one VM, poller on a core of its own")):
            figure = runs.get(run, {}).get("tests", {}).get(f"loop-lat-{mode}")
            if figure is None:
                continue
            nic = figure.get("nic_latency", {}).get(noticed) or {}
            table[f"{mode}, {run}"] = {"us_per_wr": figure.get("us_per_chain"), "nic": nic}
            lines.append(f"| {mode} | {label} | {fmt(figure.get('us_per_chain'))} | "
                         f"{fmt(nic.get('avg_us'))} | {fmt(nic.get('p99_us'))} | {nic.get('count', '')} |")
    if not table:
        return [], {}
    return ["One VM's 64 B WRITEs looped back through its NIC one at a time (ferroce_chain WRS 1): "
            "the time from a post to its completion in the guest, and the NIC's doorbell to first "
            "frame by how it noticed the WR (a polled sample starts at the poll before).", "",
            *lines, ""], table


def wire(runs: dict) -> list[str]:
    lines = ["| run | frames sent | retransmitted | queue drops | switch congestion drops |",
             "| --- | --- | --- | --- | --- |"]
    for name, run in runs.items():
        w = run.get("wire") or {}
        nics = [n for n in w.get("nics", {}).values() if "error" not in n]
        congested = sum(s["congested"] for s in w.get("switches", {}).values())
        lines.append(f"| {name} | {sum(n['tx_packets'] for n in nics) if nics else ''} | "
                     f"{sum(n['retransmits'] for n in nics) if nics else ''} | "
                     f"{sum(n['queue_drops'] for n in nics) if nics else ''} | {congested} |")
    return lines


def engine(path: Path | None) -> dict | None:
    """criterion's median per benchmark of the engine's run: `{size: {name: µs}}`, where a
    name is `rc_write/mtu4096`, `memcpy` or `icrc`."""
    if path is None or not path.exists():
        return None
    times: dict[str, dict[str, float]] = {}
    for size, name, mtu, median, unit in ENGINE.findall(path.read_text()):
        key = f"{name}/{mtu}" if mtu else name
        times.setdefault(size, {})[key] = float(median) * UNIT_US[unit]
    return times or None


def engine_lines(times: dict) -> list[str]:
    """The engine table: each transfer's time and bandwidth, and its share of memcpy's
    bandwidth (both criterion's median, same run); memcpy's and the ICRC's own rows."""
    lines = ["NIC engine on the host (criterion, median; two in-process NICs, RC, one message at a "
             "time; share = engine bandwidth ÷ memcpy bandwidth of the same bytes):", "",
             "| size | test | µs | MiB/s | share of memcpy |", "| --- | --- | --- | --- | --- |"]
    for size, t in times.items():
        copy = t.get("memcpy")
        for name, us in t.items():
            mib = ENGINE_SIZES.get(size, 0) / us * 1e6 / (1 << 20) if us else 0
            share = f"{100 * copy / us:.1f} %" if copy and name != "memcpy" else ""
            lines.append(f"| {size} | {name} | {us:.3f} | {mib:.0f} | {share} |")
    lines.append("")
    # A QP's message costs the same however many idle QPs its NIC holds (issue 39: within 1.2×).
    for size, t in times.items():
        among = next((k for k in t if k.startswith("rc_write/among_")), None)
        if "rc_write/alone" in t and among:
            lines.append(f"- {size}: a WRITE among idle QPs ({among.split('/')[1]}) takes "
                         f"{t[among] / t['rc_write/alone']:.2f}× its time alone")
    # What any engine of this wire format and this emulation must spend: the ICRC at the
    # sender and again at the receiver, and three copies (guest memory into the frame, the
    # frame onto the cable, the frame into guest memory).
    for size, t in times.items():
        if "memcpy" in t and "icrc" in t:
            floor = 2 * t["icrc"] + 3 * t["memcpy"]
            lines.append(f"- {size}: two ICRCs and three copies take {floor:.3f} µs, "
                         f"{100 * t['memcpy'] / floor:.1f} % of memcpy at best")
    return lines + [""]


def pyplot():
    """matplotlib's pyplot, drawing to files (SVG text kept as text)."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt
    return plt


def save(plt, fig, out: Path, name: str) -> str:
    """Writes `fig` as OUT/NAME.svg and .png; says where."""
    fig.tight_layout()
    for ext in ("svg", "png"):
        fig.savefig(out / f"{name}.{ext}")
    plt.close(fig)
    return f"figure: {out / f'{name}.svg'}, {out / f'{name}.png'}"


def draw(rows: list[dict], out: Path) -> str:
    """Bars of ferroce's advantage (×) per test, one colour per MTU."""
    try:
        plt = pyplot()
    except ImportError as e:
        return f"no figure ({e})"
    shown = [r for r in rows if any(r[str(m)]["times_better"] for m in MTUS)]
    if not shown:
        return "no figure (no test ran on both devices)"
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(MTUS)
    for i, mtu in enumerate(MTUS):
        xs = [j + (i - (len(MTUS) - 1) / 2) * width for j in range(len(shown))]
        ax.bar(xs, [r[str(mtu)]["times_better"] or 0 for r in shown], width, label=f"MTU {mtu}")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.axhline(10, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(shown)), [r["test"] for r in shown], rotation=45, ha="right")
    ax.set_ylabel("ferroce vs rxe (×, higher is better)")
    ax.set_title("make bench: bandwidth ferroce ÷ rxe, latency rxe ÷ ferroce (same run)")
    ax.legend()
    return save(plt, fig, out, "bench")


# ib_send_lat 8 B on ferroce by how a WR reaches the NIC and its completion the process.
LATENCY_MODES = {"CQ events (-e)": "send-lat-events", "doorbell, polled CQ": "send-lat",
                 "pushed WQE": "send-lat-push", "doorbell record": "send-lat-record"}


def draw_latency(runs: dict, seed_table: dict, out: Path) -> str:
    """The four modes' latency bars: ib_send_lat 8 B on ferroce per mode and MTU (rxe's
    polled figure beside them), and the NIC's doorbell-to-wire average and p99 per seed 1
    mode next to the seed's own."""
    try:
        plt = pyplot()
    except ImportError as e:
        return f"no latency figure ({e})"
    tests = {m: runs.get(f"ferroce-mtu{m}", {}).get("tests", {}) for m in MTUS}
    if not any(tests.values()):
        return "no latency figure (ferroce did not run)"
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = [*LATENCY_MODES, "rxe, polled CQ"]
    width = 0.8 / len(MTUS)
    for i, mtu in enumerate(MTUS):
        rxe = runs.get(f"rxe-mtu{mtu}", {}).get("tests", {}).get("send-lat", {})
        figures = [tests[mtu].get(name, {}).get("t_typical_us") for name in LATENCY_MODES.values()]
        figures.append(rxe.get("t_typical_us"))
        xs = [j + (i - (len(MTUS) - 1) / 2) * width for j in range(len(labels))]
        left.bar(xs, [f or 0 for f in figures], width, label=f"MTU {mtu}")
    left.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    left.set_ylabel("µs typical (lower is better)")
    left.set_title("ib_send_lat 8 B")
    left.legend()
    modes = list(SEED1)
    for k, (name, pick) in enumerate([("ferroce avg", lambda m: seed_table.get(m, {}).get("avg_us")),
                                      ("ferroce p99", lambda m: seed_table.get(m, {}).get("p99_us")),
                                      ("seed 1 avg", lambda m: SEED1[m][0]),
                                      ("seed 1 p99", lambda m: SEED1[m][1])]):
        xs = [j + (k - 1.5) * 0.2 for j in range(len(modes))]
        right.bar(xs, [pick(m) or 0 for m in modes], 0.2, label=name)
    right.set_yscale("log")
    right.set_xticks(range(len(modes)), modes)
    right.set_ylabel("µs, doorbell to first frame (log)")
    right.set_title("the NIC's clock (ib_send_lat 8 B) against seed 1's 100 Gb/s NIC")
    right.legend()
    return save(plt, fig, out, "bench-latency")


def fairness(logs: Path) -> tuple[list[str], dict | None]:
    """The functions-fairness benchmark (two VFs' ib_write_bw while the PF floods
    doorbells), if it ran."""
    path = logs / "functions-fairness" / "bench.json"
    if not path.exists():
        return [], None
    f = json.loads(path.read_text())
    bw = f["write_bw_mib_s"]
    lines = ["One NIC, many functions: two VFs' ib_write_bw 64 KiB while the PF floods its doorbells "
             f"({f['flood_doorbells']} in {f['flood_secs']:g} s):", "",
             f"VF 1 {bw['b']:g} MiB/s, VF 2 {bw['c']:g} MiB/s: ratio {f['ratio']:.2f} (goal ≥ 0.80)", ""]
    lines += [f"- function {n}: {s['turns']} turns, {s['full_turns']} with work left, "
              f"{s['throttled']} sat out" for n, s in f["schedule"].items()]
    return lines + [""], f


def scaling(logs: Path) -> tuple[list[str], dict]:
    """How cost grows with work: two pairs on one segment at once (two-pairs) and the NIC's
    memory per QP and per MiB (nic-memory), for those that ran."""
    lines, figures = [], {}
    path = logs / "two-pairs" / "bench.json"
    if path.exists():
        f = figures["two_pairs"] = json.loads(path.read_text())
        t = f["together_mib_s"]
        lines += ["Two pairs of VMs on one segment (ib_write_bw 64 KiB, 10 s): one pair alone "
                  f"{f['alone_mib_s']:g} MiB/s; both at once {t['a-b']:g} + {t['c-d']:g} = "
                  f"{f['aggregate_mib_s']:g} MiB/s ({f['aggregate_over_alone']:.2f} of one pair alone).", ""]
    path = logs / "nic-memory" / "bench.json"
    if path.exists():
        f = figures["nic_memory"] = json.loads(path.read_text())
        anon = f["rss_anon_kib"]
        lines += ["The NIC process's own resident memory (RssAnon, KiB) while the guest holds objects:", "",
                  "| held | " + " | ".join(anon) + " |", "| --- |" + " --- |" * len(anon),
                  "| RssAnon KiB | " + " | ".join(str(v) for v in anon.values()) + " |", "",
                  f"- {f['kib_per_qp']:.2f} KiB per QP, {f['kib_per_mib']:.2f} KiB per MiB registered "
                  f"({f['translation_entries_per_mib']:g} page-list entries per MiB)", ""]
    return lines, figures


def qps(runs: dict) -> tuple[list[str], dict]:
    """Aggregate ib_write_bw 64 KiB over 1, 8 and 64 QPs on ferroce, per MTU: each count's
    median of its interleaved rounds, and the median over one QP's (goal ≥ 0.90)."""
    figures = {str(mtu): qp_scaling(runs[f"ferroce-mtu{mtu}"]["tests"])
               for mtu in MTUS if f"ferroce-mtu{mtu}" in runs}
    figures = {mtu: f for mtu, f in figures.items() if f}
    if not figures:
        return [], figures
    lines = ["Aggregate ib_write_bw 64 KiB over QPs on ferroce (MiB/s: median of the rounds, the "
             "rounds; × one QP's median, goal ≥ 0.90):", "",
             "| MTU |" + "".join(f" {q} QP{'s' if q > 1 else ''} |" for q in QP_SCALING),
             "| --- |" + " --- |" * len(QP_SCALING)]
    for mtu, f in figures.items():
        cells = []
        for q in QP_SCALING:
            if q not in f:
                cells.append("")
                continue
            runs_ = ", ".join(fmt(x) for x in f[q]["runs"])
            over = f"; × {f[q]['over_one']:.2f}" if q > 1 and f[q]["over_one"] is not None else ""
            cells.append(f"{fmt(f[q]['median'])} ({runs_}){over}")
        lines.append(f"| {mtu} | " + " | ".join(cells) + " |")
    return lines + [""], figures


def nic_cpu(runs: dict) -> tuple[list[str], dict]:
    """Both NICs' CPU seconds per GiB moved by ib_write_bw 64 KiB on ferroce, per MTU and cable."""
    figures = {}
    for mtu in MTUS:
        for run, label in ((f"ferroce-mtu{mtu}", str(mtu)), (shm_run(mtu), f"{mtu} on shm")):
            f = runs.get(run, {}).get("tests", {}).get("write-bw-64KiB", {}).get("nic_cpu")
            if f and f.get("cpu_s_per_gib") is not None:
                figures[label] = f
    if not figures:
        return [], figures
    return ["The NICs' CPU per GiB moved (ib_write_bw 64 KiB; both NIC processes, getrusage, the "
            "run's setup included): " + ", ".join(
                f"MTU {mtu} {f['cpu_s_per_gib']:g} s ({f['payload_bytes'] / (1 << 20):.0f} MiB moved)"
                for mtu, f in figures.items()), ""], figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--engine", type=Path, help="the engine benchmark's output")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = load(args.logs)
    table, rows = comparison(runs)
    cost_lines, cost_table = costs(runs)
    seed_lines, seed_table = seed1(runs)
    eng = engine(args.engine)
    fair_lines, fair = fairness(args.logs)
    scale_lines, scale = scaling(args.logs)
    qp_lines, qp_figures = qps(runs)
    cpu_lines, cpu_figures = nic_cpu(runs)
    loop_lines, loop_figures = looped(runs)
    shm_lines, shm_figures = shm_cable(runs)
    md = ["# make bench", "", "perftest, ferroce against rxe in the same run (bandwidth MiB/s average, "
          "latency µs typical; × is how many times better ferroce is).", "", *table, "", *shm_lines,
          *qp_lines,
          *cpu_lines,
          *cost_lines, "", "Doorbell to first frame on the wire, on the NIC's clock (ib_send_lat 8 B):", "",
          *seed_lines, "", *loop_lines, "Wire:", "", *wire(runs), "", *fair_lines, *scale_lines]
    if eng:
        md += engine_lines(eng)
    (args.out / "bench.md").write_text("\n".join(md))
    (args.out / "bench.json").write_text(json.dumps(
        {"comparison": rows, "cost_per_wr": cost_table, "doorbell_to_wire": seed_table, "engine": eng,
         "functions_fairness": fair, "scaling": scale, "qps": qp_figures,
         "nic_cpu": cpu_figures, "looped": loop_figures, "shm_cable": shm_figures,
         "runs": runs}, indent=1) + "\n")
    print("\n".join(md))
    for figure in (lambda: draw(rows, args.out), lambda: draw_latency(runs, seed_table, args.out)):
        try:
            print(figure())
        except Exception as e:  # a figure never fails the bench
            print(f"no figure ({type(e).__name__}: {e})")
    print(f"benchreport: {args.out / 'bench.md'}, {args.out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
