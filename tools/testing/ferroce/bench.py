# SPDX-License-Identifier: GPL-2.0
"""make bench: perftest on ferroce and on rxe, side by side, at Ethernet MTU 1500 and 9000.

One table, `TESTS`, makes everything: the benchmark scenarios (benchmarks/<kind>-mtu<mtu>/,
each `scenario_for(kind, mtu)`), their guests' scripts (`Scenario.files`: VM a runs the clients,
VM b the servers) and the checks that read each client's result row. A check fails only when a
tool failed to run; the figures are recorded, never judged (TCG). Each scenario leaves its
figures in `<logs>/<scenario>/bench.json`; `report` (benchreport.py) joins the four into
out/bench/.

The counted cost of a WR (ferroce only, deterministic): ib_write_bw of 64 B in chains of 1, 8
and 32 WRs (`-l`), and ib_send_lat of 8 B (a ping-pong: the NIC idles between a WR and the
next), not pushed (the default), pushed (`FERROCE_PUSH=1`) or announced in doorbell
records the NIC polls (`FERROCE_DOORBELL=record`), with the NIC's counters read before and after (`hostctl nic
counters`) and divided by the WRs posted.

The polled run (benchmarks/ferroce-polled, `polled_scenario`): VM a alone, its looped-back
record-mode rows again, its NIC polling the records on a core of its own (`--poll-cpu`), its
QEMU on the other cores: one vCPU and one poller, neither waiting for a core.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
import statistics

from harness import CheckFailed, Run, Scenario, Vm
from perftest import ROW

KINDS = ("ferroce", "rxe")
MTUS = (1500, 9000)
# RDMA device, GID index (RoCE v2, IPv4-mapped) and setup command of each kind.
DEVICES = {
    "ferroce": ("ferroce0", 3, "modprobe ferroce"),
    "rxe": ("rxe0", 1, "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0"),
}
# The NIC counters of a WR's cost, per WR posted. mmio_writes and mmio_reads count BAR0
# accesses, each a vfio-user message (a trap under KVM): a pushed WQE's stores and its doorbell,
# a rung doorbell, and in record mode the doorbell rung because the NIC slept.
COST_COUNTERS = ("doorbells", "record_doorbells", "wqe_fetches", "wqe_pushes",
                 "payload_dma_reads", "cqes", "interrupts", "tx_packets", "mmio_writes",
                 "mmio_reads")


@dataclasses.dataclass(frozen=True)
class Test:
    """One perftest run: step `name`, client and server `tool ARGS`."""

    name: str
    tool: str
    args: str
    kinds: tuple[str, ...] = KINDS
    env: str = ""
    """The environment of client and server (FERROCE_PUSH=1, FERROCE_DOORBELL=record)."""
    wrs: int = 0
    """WRs the client posts, for a cost test (its NIC counters are read around it)."""
    nic_latency: bool = False
    """On ferroce, the client NIC's doorbell-to-wire intervals during the run (`ctl latency`)."""
    nic_cpu: bool = False
    """On ferroce, both NICs' CPU time during the run (`ctl cpu`) per GiB the client's NIC read
    as payload (its `payload_read_bytes`)."""

    @property
    def latency(self) -> bool:
        return self.tool.endswith("_lat")

    @property
    def perftest(self) -> bool:
        """A perftest tool (a client and a server, a result row); otherwise a guest program
        that runs alone on VM a (ferroce_chain)."""
        return self.tool.startswith("ib_")

    def command(self, dev: str, gid: int, port: int) -> str:
        if self.perftest:
            return f"{self.tool} -F -d {dev} -x {gid} -p {port} {self.args}"
        return f"{self.tool} {dev} {gid} {self.args}"


# The QP counts of the scaling rows, their rounds and each run's seconds (perftest's -D: it
# measures between its two 2 s margins).
QP_SCALING = (1, 8, 64)
QP_SCALING_ROUNDS = 3
QP_SCALING_SECONDS = 8
SIZES = [(64, "64B", 1000), (4096, "4KiB", 5000), (65536, "64KiB", 2000), (1 << 20, "1MiB", 128)]
# Each cost row runs twice, with these many WRs: the difference of the two runs' counts is what
# the extra WRs cost, without the run's setup (its commands, their interrupts, the QP's
# connection).
COST_WRS = (256, 1024)
# How the cost rows' WRs reach the NIC: push window and doorbell, doorbell only, doorbell record.
COST_MODES = {"push": "FERROCE_PUSH=1", "nopush": "", "record": "FERROCE_DOORBELL=record"}
TESTS = [
    *(Test(f"{op}-bw-{label}", f"ib_{op}_bw", f"-s {size} -n {n}",
           nic_cpu=(op, label) == ("write", "64KiB"))
      for op in ("write", "read", "send") for size, label, n in SIZES),
    Test("send-lat", "ib_send_lat", "-s 8 -n 5000", nic_latency=True),
    # Seed 1's table on the NIC's clock: the same run with every WQE pushed with its doorbell.
    Test("send-lat-push", "ib_send_lat", "-s 8 -n 5000", kinds=("ferroce",), env="FERROCE_PUSH=1",
         nic_latency=True),
    # ... and with doorbell records the NIC polls (seed 1's polling mode): no MMIO at all.
    Test("send-lat-record", "ib_send_lat", "-s 8 -n 5000", kinds=("ferroce",),
         env="FERROCE_DOORBELL=record", nic_latency=True),
    *(Test(f"write-bw-{label}-record", "ib_write_bw", f"-s {size} -n {n}", kinds=("ferroce",),
           env="FERROCE_DOORBELL=record")
      for size, label, n in SIZES),
    Test("write-lat", "ib_write_lat", "-s 8 -n 500"),
    Test("read-lat", "ib_read_lat", "-s 8 -n 500"),
    # Seed 2 §1: the completion side, CQ events and interrupts against polling.
    Test("send-lat-events", "ib_send_lat", "-s 8 -n 500 -e", kinds=("ferroce",)),
    Test("atomic-bw", "ib_atomic_bw", "-n 500"),
    # How cost grows with work: the aggregate of 64 KiB writes over 1, 8 and 64 QPs, each run
    # for a time (-D), the three interleaved, three rounds: the report takes each one's median
    # (`qp_scaling`). One round of fixed counts scattered by a third between runs, more than the
    # 90 % it is judged by. On ferroce only: on rxe (MTU 9000) the client failed its first try
    # and the server then waited.
    *(Test(f"write-bw-64KiB-q{q}-r{r}", "ib_write_bw", f"-s 65536 -D {QP_SCALING_SECONDS} -q {q}",
           kinds=("ferroce",))
      for r in range(1, QP_SCALING_ROUNDS + 1) for q in QP_SCALING),
    # (perftest posts inline only on devices it knows by name: "Device not recognized to
    # implement inline feature. Disabling it", so these WRs are not inline.)
    *(Test(f"cost-chain{chain}-{mode}-n{n}", "ib_write_bw", f"-s 64 -n {n} -l {chain}",
           kinds=("ferroce",), env=COST_MODES[mode], wrs=n)
      for chain in (1, 8, 32) for mode in COST_MODES for n in COST_WRS),
    # ... so inline WRs come from ferroce_chain: two QPs of VM a's NIC, connected through its
    # own GID (the NIC loops the frames back: its counts include the responder's ACKs and
    # payload writes, never payload reads).
    *(Test(f"cost-chain{chain}-inline-{mode}-n{n}", "ferroce_chain", f"{n} {chain} inline",
           kinds=("ferroce",), env=COST_MODES[mode], wrs=n)
      for chain in (1, 8, 32) for mode in COST_MODES for n in COST_WRS),
    # One VM's WRs looped back through its NIC, one at a time (post, then poll for its
    # completion): the same work in each mode, and the NIC's doorbell-to-wire by mode.
    *(Test(f"loop-lat-{mode}", "ferroce_chain", "5000 1", kinds=("ferroce",),
           env=COST_MODES[mode], nic_latency=True)
      for mode in COST_MODES),
    # A ping-pong's WRs: between one and the next the NIC waits for the peer's reply. In record
    # mode a NIC that slept meanwhile has its producer ring (mmio_writes), unless its poller
    # has a core of its own (the polled run).
    *(Test(f"cost-lat-{mode}-n{n}", "ib_send_lat", f"-s 8 -n {n}", kinds=("ferroce",),
           env=COST_MODES[mode], wrs=n)
      for mode in COST_MODES for n in COST_WRS),
]
# The tests of the polled run: one VM's WRs in doorbell records, looped back through its NIC,
# which polls them on a core of its own.
POLLED = ("loop-lat-record", "cost-chain*-inline-record-n*")
FIRST_PORT = 18700


def qp_scaling(tests: dict) -> dict:
    """From one scenario's figures (`bench.json`'s tests): per QP count, the rounds' aggregate
    MiB/s and their median, and each count's median over one QP's (the goal: ≥ 0.9)."""
    out = {}
    for q in QP_SCALING:
        runs = [tests[n]["bw_avg_mib_s"] for r in range(1, QP_SCALING_ROUNDS + 1)
                if (n := f"write-bw-64KiB-q{q}-r{r}") in tests]
        if runs:
            out[q] = {"runs": runs, "median": statistics.median(runs)}
    one = out.get(1, {}).get("median")
    for q, f in out.items():
        f["over_one"] = f["median"] / one if one else None
    return out


def selected(test: Test) -> bool:
    """Whether `BENCH_TESTS` (shell patterns of test names, blank-separated; all if unset)
    takes `test`: `BENCH_TESTS="write-bw-64KiB send-lat*" make bench`."""
    patterns = os.environ.get("BENCH_TESTS", "").split()
    return not patterns or any(fnmatch.fnmatchcase(test.name, p) for p in patterns)


def tests_for(kind: str, polled: bool = False) -> list[Test]:
    """The tests of a run of `kind`, or of the polled run."""
    return [t for t in TESTS if kind in t.kinds and selected(t)
            and (not polled or any(fnmatch.fnmatchcase(t.name, p) for p in POLLED))]


def _script(kind: str, mtu: int, client: bool, polled: bool = False) -> str:
    dev, gid, setup = DEVICES[kind]
    lines = [f"# make bench, {kind} at MTU {mtu}: perftest {'clients' if client else 'servers'} "
             "(generated by bench.py).",
             ". /ferroce/lib.sh",
             f"step rdma-setup 30 sh -c '{setup}'",
             f"wait_for_gid {dev} {gid}"]
    if client and not polled:
        lines.append('server=$(ip_of b)')
        lines.append('wait_for_ping "$server"')
    for port, t in enumerate(tests_for(kind, polled), FIRST_PORT):
        cmd = t.command(dev, gid, port)
        env = f"env {t.env} " if t.env else ""
        cpu = t.nic_cpu and kind == "ferroce"
        if not client:
            if t.perftest:
                if cpu:
                    lines.append(f"step {t.name}-cpu-before 15 hostctl nic cpu")
                lines.append(f"step {t.name} 150 {env}{cmd} < /dev/null")
                if cpu:
                    lines.append(f"step {t.name}-cpu-after 15 hostctl nic cpu")
            continue
        if cpu:
            lines.append(f"step {t.name}-cpu-before 15 hostctl nic cpu")
            lines.append(f"step {t.name}-counters-before 15 hostctl nic counters")
        if t.wrs:
            lines.append(f"step {t.name}-before 15 hostctl nic counters")
        if t.nic_latency and kind == "ferroce":
            lines.append(f"step {t.name}-latency-reset 15 hostctl nic latency reset")
        if t.perftest:
            lines.append(f'RETRY_FOR=60 retry {t.name} 140 {env}{cmd} "$server" < /dev/null')
        else:
            lines.append(f"step {t.name} 140 {env}{cmd} < /dev/null")
        if t.wrs:
            lines.append(f"step {t.name}-after 15 hostctl nic counters")
        if t.nic_latency and kind == "ferroce":
            lines.append(f"step {t.name}-latency 15 hostctl nic latency")
        if cpu:
            lines.append(f"step {t.name}-cpu-after 15 hostctl nic cpu")
            lines.append(f"step {t.name}-counters-after 15 hostctl nic counters")
    return "\n".join(lines) + "\n"


def _figure(test: Test, output: str) -> dict:
    """The client's result row as numbers (perftest's -F may print inf or nan); a guest
    program's last line."""
    if not test.perftest:
        last = output.strip().splitlines()[-1] if output.strip() else ""
        figure = {"output": last}
        if m := re.search(r"([\d.]+) us per chain$", last):
            figure["us_per_chain"] = float(m.group(1))
        return figure
    m = re.search(ROW["lat" if test.latency else "bw"], output, re.M)
    if m is None:
        raise CheckFailed(f"{test.name}: no result row in:\n{output[-1500:]}")
    f = [float(x) for x in m.groups()]
    if test.latency:  # bytes iterations t_min t_max t_typical t_avg t_stdev
        return {"bytes": int(f[0]), "iterations": int(f[1]), "t_typical_us": f[4], "t_avg_us": f[5]}
    return {"bytes": int(f[0]), "iterations": int(f[1]), "bw_avg_mib_s": f[3], "mpps": f[4]}


def cpu_seconds(before: dict, after: dict) -> float:
    """The CPU seconds a NIC used between two `ctl cpu` readings ({"user_us", "system_us"})."""
    return (after["user_us"] + after["system_us"] - before["user_us"] - before["system_us"]) / 1e6


def nic_cpu_per_gib(cpu_us: dict, payload_bytes: int) -> float | None:
    """Both NICs' CPU seconds per GiB moved, from each VM's NIC's `ctl cpu` before and after a
    run ({vm: (before, after)}) and the bytes moved."""
    if payload_bytes <= 0:
        return None
    used = sum(cpu_seconds(before, after) for before, after in cpu_us.values())
    return round(used / (payload_bytes / (1 << 30)), 3)


def _nic_cpu(run: Run, test: Test) -> dict:
    """Both NICs' CPU during the run and what it moved (setup and teardown included)."""
    cpu = {vm: (run.vm(vm).step(f"{test.name}-cpu-before").json("cpu"),
                run.vm(vm).step(f"{test.name}-cpu-after").json("cpu")) for vm in ("a", "b")}
    moved = (run.vm("a").step(f"{test.name}-counters-after").json("counters")["payload_read_bytes"]
             - run.vm("a").step(f"{test.name}-counters-before").json("counters")["payload_read_bytes"])
    return {"payload_bytes": moved,
            "cpu_s": {vm: round(cpu_seconds(*used), 3) for vm, used in cpu.items()},
            "cpu_s_per_gib": nic_cpu_per_gib(cpu, moved)}


def _counts(run: Run, test: Test) -> dict:
    """What the NIC counted during the run (setup included)."""
    before = run.vm("a").step(f"{test.name}-before").json("counters")
    after = run.vm("a").step(f"{test.name}-after").json("counters")
    return {c: after[c] - before[c] for c in COST_COUNTERS}


def marginal_cost(short: dict, long: dict) -> dict:
    """Per WR, from the counts of the runs with `COST_WRS` WRs: (long - short) / (difference)."""
    extra = COST_WRS[1] - COST_WRS[0]
    return {c: round((long[c] - short[c]) / extra, 4) for c in COST_COUNTERS}


def cost_rows() -> list[str]:
    """The cost rows' names without their WR count ("cost-chain8-push")."""
    return list(dict.fromkeys(t.name.rsplit("-n", 1)[0] for t in TESTS if t.wrs))


def poller_cpus(allowed: set[int]) -> tuple[int, str] | None:
    """Of the CPUs the harness may use, the one for a NIC's poller (the last) and the others for
    the QEMUs (a `taskset -c` list); None with fewer than two."""
    if len(allowed) < 2:
        return None
    *others, last = sorted(allowed)
    return last, ",".join(map(str, others))


def polled_scenario() -> Scenario:
    """The polled run: ferroce at MTU 1500, VM a alone, its NIC polling doorbell records on a
    core of its own, its QEMU on the others."""
    cpus = poller_cpus(os.sched_getaffinity(0))
    return scenario_for("ferroce", 1500, polled=cpus or (None, ""))


def scenario_for(kind: str, mtu: int, polled: tuple[int | None, str] | None = None,
                 shm: bool = False) -> Scenario:
    """The benchmark of device `kind` ("ferroce" or "rxe") between two VMs at Ethernet `mtu`;
    with `polled` (the poller's CPU and the QEMUs' CPUs), the polled run; with `shm`, the two
    NICs' cable is shared memory (a platform change: benchmarks/ferroce-shm-mtu*)."""
    # The NIC without its instruments: no trace, no capture (each costs the NIC a write per
    # frame; `make check` keeps both).
    poll_cpu, qemu_cpus = polled or (None, "")
    vms = [Vm(name, ip, mtu=mtu, nic=kind == "ferroce", trace=False, capture=False,
              nic_args=["--poll-cpu", str(poll_cpu)] if name == "a" and poll_cpu is not None else [],
              qemu_cpus=qemu_cpus)
           for name, ip in [("a", "10.0.0.1/24"), ("b", "10.0.0.2/24")][:1 if polled else 2]]
    scenario = Scenario(vms=vms, timeout=2400)
    scenario.shm_cables = shm
    scenario.wire_judged = False  # retransmits are figures here (bench.json), not a verdict
    scenario.files = {"a.sh": _script(kind, mtu, True, polled is not None)}
    if not polled:
        scenario.files["b.sh"] = _script(kind, mtu, False)
    figures: dict[str, dict] = {}

    def result(run: Run, test: Test) -> str:
        for vm in vms if test.perftest else vms[:1]:
            step = run.vm(vm.name).step(test.name)
            step.ok()
            if re.search(r"Couldn't|failed|Failed|Incompatibility", step.output):
                raise CheckFailed(f"{vm.name}: {test.name} reported an error:\n{step.output[-1500:]}")
        figure = _figure(test, run.vm("a").step(test.name).output)
        if test.wrs:
            figure["counts"] = _counts(run, test)
        if test.nic_latency and kind == "ferroce":
            figure["nic_latency"] = run.vm("a").step(f"{test.name}-latency").json("latency")
        if test.nic_cpu and kind == "ferroce":
            figure["nic_cpu"] = _nic_cpu(run, test)
        figures[test.name] = figure
        if test.wrs:
            return (f"{test.wrs} WRs (setup included): "
                    + ", ".join(f"{c} {v}" for c, v in figure["counts"].items()))
        if test.latency:
            return f"{figure['t_typical_us']:g} us typical, {figure['t_avg_us']:g} us average"
        if not test.perftest:
            return figure["output"]
        cpu = figure.get("nic_cpu")
        per_gib = f"; the NICs' CPU {cpu['cpu_s_per_gib']} s per GiB moved" if cpu else ""
        return f"{figure['bytes']} B: {figure['bw_avg_mib_s']:g} MiB/s average{per_gib}"

    if polled is not None:
        @scenario.check
        def poller(run: Run) -> str:
            """The polled run needs a core for the poller and one for the QEMUs."""
            if poll_cpu is None:
                raise CheckFailed("fewer than two CPUs: no core of its own for the NIC's poller")
            return f"VM a's NIC polls on CPU {poll_cpu}, the QEMUs run on CPUs {qemu_cpus}"

    for test in tests_for(kind, polled is not None):
        def check(run: Run, test: Test = test) -> str:
            return result(run, test)
        check.__name__ = test.name.replace("-", "_")
        scenario.check(check)

    @scenario.check
    def figures_saved(run: Run) -> str:
        """Last: what the checks measured, with the wire's counts, for benchreport.py."""
        if run.log_dir is None:
            raise CheckFailed("no log directory")
        path = run.log_dir / "bench.json"
        path.write_text(json.dumps({"kind": kind, "mtu": mtu, "tests": figures, "wire": run.wire,
                                    "poll_cpu": poll_cpu, "qemu_cpus": qemu_cpus,
                                    "cable": "shm" if shm else "unix"},
                                   indent=1) + "\n")
        return f"{len(figures)} figures in {path}"

    return scenario
