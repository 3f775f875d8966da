#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Run ferroce VM scenarios and report each check as PASS or FAIL.

    vmtest.py --kernel BZIMAGE --initrd BASE --initrd MODULES [SCENARIO...]

Without SCENARIO, runs them all (scenarios/*/scenario.py, sorted). What each
VM printed goes to --logs/<scenario>/<vm>.log, its kernel log (the serial
console) to <vm>.kernel.log; --results gets one "PASS name" or "FAIL name"
line per check, --ktap the same results as KTAP (with the results --results
already held first: make check's cargo and harness tests). Each scenario's wall
time is printed at its end and in the summary. Exit status 0 when every check
passed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import io
import json
import os
import queue
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import ktap  # noqa: E402
import usage  # noqa: E402

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"


def load(name: str) -> harness.Scenario:
    path = SCENARIOS / name / "scenario.py"
    if not path.exists():
        raise SystemExit(f"vmtest: no scenario {name} (looked for {path})")
    spec = importlib.util.spec_from_file_location(f"scenario_{name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scenario = module.scenario
    scenario.name = name
    scenario.directory = path.parent
    scenario.doc = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
    return scenario


def choose_accel(requested: str, machine: harness.Machine, cache: Path | None) -> str:
    if requested != "auto":
        return requested
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    key = f"{boot_id}-{harness.digest(machine.kernel)}"
    memo = cache / "accel-probe" if cache else None
    if memo and memo.exists():
        saved_key, _, saved = memo.read_text().partition(" ")
        if saved_key == key:
            return saved.strip()
    accel = "tcg"
    if Path("/dev/kvm").exists():
        print("vmtest: probing KVM (a nested KVM may hang the guest; then TCG is used)", flush=True)
        accel = "kvm" if harness.probe_accel(machine) else "tcg"
    if memo:
        memo.write_text(f"{key} {accel}\n")
    return accel


def report(results: list[tuple[str, bool, str]], out) -> None:
    for name, passed, message in results:
        print(f"{'PASS' if passed else 'FAIL'} {name}", flush=True)
        if message:
            print(textwrap.indent(message.rstrip(), "    "), flush=True)
        if out:
            out.write(f"{'PASS' if passed else 'FAIL'} {name}\n")
            out.flush()


def tails(result: harness.VmResult) -> str:
    return ("output tail:\n" + textwrap.indent(result.tail(), "  ")
            + "\nkernel log tail:\n" + textwrap.indent(result.kernel_tail(), "  "))


def run_one(machine: harness.Machine, scenario: harness.Scenario, logs: Path,
            follow: bool, out: TextIO | None = None) -> tuple[list[tuple[str, bool, str]], usage.Usage | None]:
    """The scenario's results, and where its time went (None if it could not start). What it
    has to say goes to `out` (stdout by default)."""
    out = out or sys.stdout
    log_dir = logs / scenario.name
    log_dir.mkdir(parents=True, exist_ok=True)
    build = next((p.name for p in machine.kernel.parents if p.name.startswith("linux-")), str(machine.kernel))
    kernel = f"{build} (time x{machine.slow:g})" if machine.slow != 1 else "default kernel"
    print(f"--- {scenario.name}: {len(scenario.vms)} VM(s), {machine.accel}, {kernel}, "
          f"timeout {scenario.timeout * machine.slow:.0f} s, logs in {log_dir}", file=out, flush=True)
    try:
        run = harness.run_scenario(machine, scenario, log_dir, follow)
    except Exception as e:  # a scenario that cannot even start fails, the others still run
        return [(f"{scenario.name}/setup", False, f"{type(e).__name__}: {e}")], None
    results = []

    # The implicit first check: every VM booted, ran its script and exited.
    problems = []
    for name, result in run.results.items():
        if result.exit_rc is None:
            why = "timed out" if run.timed_out else f"QEMU exited with {result.qemu_rc}"
            problems.append(f"VM {name} never finished ({why}); {tails(result)}")
        elif result.exit_rc != 0 and scenario.needs_all_exit_zero:
            problems.append(f"VM {name}: script exited with rc={result.exit_rc}; {tails(result)}")
    results.append((f"{scenario.name}/vms-complete", not problems, "\n".join(problems)))

    # The second: no VM's kernel complained (its kernel log gets loglevel <= 4).
    complaints = [f"{name}: {line}" for name, result in run.results.items()
                  for line in harness.kernel_trouble(result)]
    reports = [f"{name}'s first report:\n{report}" for name, result in run.results.items()
               if (report := harness.trouble_report(result))]
    results.append((f"{scenario.name}/kernel-clean", not complaints, "\n".join(complaints[:20] + reports[:1])))

    # The third: nothing was lost on the wire, and a fault-free run hardly retransmitted.
    passed, figures = harness.wire_clean(scenario, run.wire)
    results.append((f"{scenario.name}/wire-clean", passed, figures))

    for check_name, check in scenario.checks:
        try:
            info = check(run)
        except harness.CheckFailed as e:
            results.append((f"{scenario.name}/{check_name}", False, str(e)))
        except Exception as e:  # a broken check is a failed check, not a crash
            results.append((f"{scenario.name}/{check_name}", False, f"{type(e).__name__}: {e}"))
        else:
            results.append((f"{scenario.name}/{check_name}", True, info or ""))
    print(f"    (VMs {run.usage.line()})", file=out, flush=True)
    if run.usage.steps:
        print("    (longest steps: " + ", ".join(f"{name} {secs:.1f} s" for name, secs in run.usage.steps)
              + ")", file=out, flush=True)
    return results, run.usage


def timing(name: str, results: list[tuple[str, bool, str]], seconds: float) -> str:
    """The line at a scenario's end: "name: N passed, N failed, S s"."""
    failed = sum(1 for _, passed, _ in results if not passed)
    return f"{name}: {len(results) - failed} passed, {failed} failed, {seconds:.1f} s"


Row = tuple[str, list[tuple[str, bool, str]], float, "usage.Usage | None"]
"""A scenario's name, results, seconds and usage."""


def summary(rows: list[Row], seconds: float) -> str:
    """Seconds per scenario, the order they ran in, with the CPU seconds of their processes
    (QEMU, NIC, switch), boot and waiting, then the total."""
    width = max((len(name) for name, *_ in rows), default=0)
    lines = ["vmtest: seconds per scenario (wall; CPU of its QEMUs, NICs and switches; boot; waiting)"]
    for name, results, secs, use in rows:
        failed = sum(1 for _, passed, _ in results if not passed)
        figures = f"  cpu {use.cpu:7.1f} s  boot {use.boot:5.1f} s  waiting {use.waiting:6.1f} s" if use else ""
        lines.append(f"  {name:<{width}} {secs:7.1f} s{figures}" + (f"  ({failed} failed)" if failed else ""))
    cpu = sum(use.cpu for *_, use in rows if use)
    lines.append(f"vmtest: {len(rows)} scenario(s) in {seconds:.0f} s, their processes' CPU {cpu:.0f} s")
    return "\n".join(lines)


MEASURED = HERE / "usage.json"
"""Each scenario's figures from a whole `make check` (vmtest --usage, committed): what the
scheduler knows of a scenario before it runs."""


FILL = 1.3
"""How far past the machine's cores the measured cores of the scenarios side by side may add up
(vmtest --fill). A scenario's measured cores are an average over a run that computes and waits
by turns, most of all the multi-VM ones: where they had to add up to the machine's cores, the
last half of make check ran one scenario at a time (at 2c5dd17, 592 of the VM scenarios' 1203 s,
1.43 of 2 cores busy on average). make check passes under a CPU hog on one core, which is more
load than this adds."""


@dataclasses.dataclass
class Job:
    """A scenario to run and what the scheduler knows of it from an earlier run."""

    name: str
    scenario: harness.Scenario | None
    """None: work beside the scenarios (Beside), which the scheduler does not run."""
    seconds: float
    """Its wall time then (0 if never measured)."""
    cores: float
    """The cores it kept busy then, on average (its processes' CPU over its wall time)."""


def jobs_of(names: list[str], scenarios: dict[str, harness.Scenario], measured: dict, cores: float) -> list[Job]:
    """The scenarios as jobs, longest first (then by name), so that the long ones start early and the
    short ones fill in beside them. A scenario never measured (a new one, or a benchmark: usage.json
    holds make check's) takes all the `cores` the jobs may fill, so it runs alone."""
    jobs = []
    for name in names:
        figures = measured.get(name)
        scenario = scenarios[name]
        if figures and figures.get("wall"):
            jobs.append(Job(name, scenario, figures["wall"], figures["cpu"] / figures["wall"]))
        else:
            jobs.append(Job(name, scenario, figures["wall"] if figures else 0.0, float(cores)))
    return sorted(jobs, key=lambda j: (-j.seconds, j.name))


def next_job(pending: list[Job], running: list[Job], cores: float, limit: int) -> Job | None:
    """The first pending job that fits beside the running ones: at most `limit` at once, and the
    cores they kept busy when measured add up to at most `cores` (any job fits an idle machine)."""
    if len(running) >= limit:
        return None
    busy = sum(job.cores for job in running)
    for job in pending:
        if not running or busy + job.cores <= cores:
            return job
    return None


@dataclasses.dataclass
class Beside:
    """Work someone else runs beside the scenarios (vmtest --beside; make check's lab checks):
    the scheduler counts its `cores` as busy while its `marker` file exists."""

    marker: Path
    cores: float

    @classmethod
    def parse(cls, text: str) -> "Beside":
        marker, _, cores = text.rpartition("=")
        if not marker or not cores:
            raise argparse.ArgumentTypeError(f"--beside wants FILE=CORES, not {text!r}")
        return cls(Path(marker), float(cores))


def run_all(names: list[str], scenarios: dict[str, harness.Scenario], machine_for, logs: Path, jobs: int,
            cores: float, follow: bool, finish, beside: list[Beside] = ()) -> None:
    """Runs the scenarios, one at a time or (`jobs` > 1) side by side as their measured cores
    fit in `cores` (the machine's, times FILL), with the cores of the work `beside` them
    counted while it runs, calling `finish(name, results, usage, seconds)` as each ends. What a
    scenario printed is printed whole when it ends, so that its lines stay together."""
    if jobs <= 1:
        for name in names:
            began = time.monotonic()
            results, use = run_one(machine_for(scenarios[name]), scenarios[name], logs, follow)
            finish(name, results, use, time.monotonic() - began)
        return
    measured = json.loads(MEASURED.read_text()) if MEASURED.exists() else {}
    pending = jobs_of(names, scenarios, measured, cores)
    # Work beside the scenarios is a running job without a scenario until its marker goes.
    outside = [(Job(b.marker.name, None, 0.0, b.cores), b.marker) for b in beside if b.marker.exists()]
    running: list[Job] = [job for job, _ in outside]
    done: queue.Queue = queue.Queue()

    def run(job: Job) -> None:
        began, printed = time.monotonic(), io.StringIO()
        try:
            results, use = run_one(machine_for(job.scenario), job.scenario, logs, False, printed)
        except Exception as e:  # noqa: BLE001 -- a harness bug fails the scenario, not the run
            results, use = [(f"{job.name}/setup", False, f"{type(e).__name__}: {e}")], None
        done.put((job, results, use, time.monotonic() - began, printed.getvalue()))

    while pending or any(job.scenario is not None for job in running):
        for job, marker in outside:
            if job in running and not marker.exists():
                running.remove(job)
                print(f"--- {job.name}: gone (beside the scenarios)", flush=True)
        while (job := next_job(pending, running, cores, jobs)) is not None:
            pending.remove(job)
            running.append(job)
            print(f"--- {job.name}: started beside {', '.join(j.name for j in running[:-1]) or 'nothing'}",
                  flush=True)
            threading.Thread(target=run, args=(job,), name=job.name, daemon=True).start()
        try:
            # While work beside them runs, look for its marker every second.
            job, results, use, seconds, printed = done.get(
                timeout=1.0 if any(job.scenario is None for job in running) else None)
        except queue.Empty:
            continue
        running.remove(job)
        sys.stdout.write(printed)
        finish(job.name, results, use, seconds)


def flakiness(rows: list[Row], runs: int, timeouts: dict[str, float]) -> str:
    """After --repeat: each check that failed, and how often; each scenario's slowest run
    against its timeout (`timeouts`, scaled as it ran), which should be three times that."""
    failures: dict[str, int] = {}
    slowest: dict[str, float] = {}
    for name, results, seconds, _ in rows:
        slowest[name] = max(slowest.get(name, 0.0), seconds)
        for check, passed, _ in results:
            failures[check] = failures.get(check, 0) + (not passed)
    lines = [f"vmtest: {runs} runs; checks that failed (failures of {runs}):"]
    lines += [f"  {check} {n}" for check, n in failures.items() if n] or ["  none"]
    lines.append("vmtest: each scenario's slowest run and its timeout (at least three times it)")
    lines += [f"  {name} {secs:.1f} s, timeout {timeouts[name]:.0f} s"
              + ("" if timeouts[name] >= 3 * secs else "  (less than three times the slowest run)")
              for name, secs in slowest.items()]
    return "\n".join(lines)


def table(names: list[str], measured: dict) -> str:
    """The README's table of time per scenario: VMs, timeout, and the wall and CPU seconds of
    `measured` (usage.json), "—" where a scenario was not measured."""
    lines = ["| scenario | VMs | timeout (s) | seconds | CPU seconds |", "| --- | --- | --- | --- | --- |"]
    for name in names:
        scenario, figures = load(name), measured.get(name)
        wall, cpu = (f"{figures['wall']:.0f}", f"{figures['cpu']:.0f}") if figures else ("—", "—")
        lines.append(f"| `{name}` | {len(scenario.vms)} | {scenario.timeout:.0f} | {wall} | {cpu} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", type=Path, required=True)
    parser.add_argument("--initrd", type=Path, action="append", required=True,
                        help="initramfs piece (newc cpio); repeat, concatenated in order")
    parser.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto")
    parser.add_argument("--logs", type=Path, default=Path("out/logs"))
    parser.add_argument("--cache", type=Path, help="where to remember the KVM probe")
    parser.add_argument("--results", type=Path)
    parser.add_argument("--ktap", type=Path, help="write the results as KTAP here too")
    parser.add_argument("--cmdline", default="", help="extra kernel command line")
    parser.add_argument("--nic", type=Path, help="the ferroce-nic binary, for VMs with a NIC")
    parser.add_argument("--suite", choices=["scenarios", "benchmarks", "soak"], default="scenarios",
                        help="scenarios (make check), benchmarks (make bench) or soak (make soak)")
    parser.add_argument("--lane", choices=["default", "debug", "all"], default="all",
                        help="of the scenarios named (or all), those make check runs on the default "
                             "kernel, those it runs on the debug kernel (Scenario.debug_lane), or all")
    parser.add_argument("--slow", type=float,
                        help="time factor of --kernel (timeouts scale): 1, or with --debug the debug kernel's")
    parser.add_argument("--debug", action="store_true",
                        help="--kernel is the debug kernel (make check-debug): it runs --debug-slow times slower")
    parser.add_argument("--debug-kernel", type=Path,
                        help="the debug kernel: the debug lane's scenarios (Scenario.debug_lane) run on it")
    parser.add_argument("--debug-initrd", type=Path, action="append", default=[],
                        help="initramfs piece for the debug kernel (its modules); repeat")
    parser.add_argument("--debug-slow", type=float, default=harness.DEBUG_SLOW,
                        help=f"the debug kernel's time factor (default {harness.DEBUG_SLOW:g})")
    parser.add_argument("--disk-image", type=Path,
                        help="the raw disk image VMs with Vm.disk boot (dist/mkimage: the dist scenario)")
    parser.add_argument("--disk-kernel", type=Path,
                        help="the kernel VMs with Vm.disk boot (make dist's); default --kernel")
    parser.add_argument("--usage", type=Path,
                        help="write each scenario's wall and CPU seconds, boot, waiting and longest steps "
                             "here (JSON)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="scenarios run at once, at most (a scenario starts only if the cores the running "
                             "ones kept busy when measured, in usage.json, leave room for its own)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                        help="the cores --jobs may fill (default: this machine's)")
    parser.add_argument("--fill", type=float, default=FILL,
                        help=f"the measured cores of the scenarios side by side add up to at most this many "
                             f"times --cores (default {FILL:g})")
    parser.add_argument("--beside", type=Beside.parse, action="append", default=[], metavar="FILE=CORES",
                        help="work that runs beside the scenarios while FILE exists (make check's lab "
                             "checks): --jobs counts CORES of the machine as busy until then")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the scenarios this many times (logs in --logs/run-K/), then print how "
                             "often each check failed and each scenario's slowest time (make check-flaky)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--table", action="store_true",
                        help="print the README's table of time per scenario from usage.json")
    parser.add_argument("--follow", action="store_true", help="echo the VMs' output and kernel logs while they run")
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args()
    if args.slow is None:
        args.slow = args.debug_slow if args.debug else 1.0
    global SCENARIOS
    SCENARIOS = HERE / args.suite

    names = args.scenarios or sorted(p.parent.name for p in SCENARIOS.glob("*/scenario.py"))
    if args.lane != "all":
        names = [name for name in names if load(name).debug_lane == (args.lane == "debug")]
    if args.list:
        for name in names:
            print(f"{name}: {load(name).doc}")
        return 0
    if args.table:
        print(table(names, json.loads(MEASURED.read_text()) if MEASURED.exists() else {}))
        return 0

    harness.private_network()
    with tempfile.TemporaryDirectory(prefix="vmtest.") as work:
        machine = harness.Machine(args.kernel, args.initrd, "tcg", Path(work), args.cmdline, args.nic,
                                  args.slow, args.disk_image, args.disk_kernel)
        machine.accel = choose_accel(args.accel, machine, args.cache)
        debug_machine = machine
        if args.debug_kernel:
            debug_machine = dataclasses.replace(machine, kernel=args.debug_kernel,
                                                initrds=args.debug_initrd or args.initrd, slow=args.debug_slow)
        earlier = ktap.parse_results(args.results.read_text()) if args.results and args.results.exists() else []
        out = open(args.results, "a") if args.results else None
        kt = None
        if args.ktap:
            kt = ktap.Writer(open(args.ktap, "w"), ktap.planned(earlier) + len(names) * args.repeat)
            kt.results(earlier)
        scenarios = {name: load(name) for name in names}
        rows: list[Row] = []
        start = time.monotonic()
        for k in range(1, args.repeat + 1):
            if args.repeat > 1:
                print(f"=== run {k} of {args.repeat}", flush=True)

            def finish(name: str, results, use: usage.Usage | None, seconds: float) -> None:
                report(results, out)
                print(f"--- {timing(name, results, seconds)}", flush=True)
                if kt:
                    kt.suite(name, [(check.split("/", 1)[-1], passed, message)
                                    for check, passed, message in results],
                             seconds, f"{seconds:.1f} s (VMs {use.line()})" if use else None)
                rows.append((name, results, seconds, use))

            logs = args.logs if args.repeat == 1 else args.logs / f"run-{k}"
            run_all(names, scenarios, lambda s: debug_machine if s.debug_lane else machine, logs,
                    args.jobs if not args.follow else 1, args.cores * args.fill, args.follow, finish,
                    args.beside)
        print(summary(rows, time.monotonic() - start), flush=True)
        if args.repeat > 1:
            timeouts = {name: scenario.timeout * (debug_machine if scenario.debug_lane else machine).slow
                        for name, scenario in scenarios.items()}
            print(flakiness(rows, args.repeat, timeouts), flush=True)
        if args.usage:
            usage.write(args.usage, {name: use for name, _, _, use in rows if use})
        for f in (out, kt and kt.out):
            if f:
                f.close()
    return 1 if any(not passed for _, results, _, _ in rows for _, passed, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
