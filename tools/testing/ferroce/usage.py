# SPDX-License-Identifier: GPL-2.0
"""Where a scenario's time goes: its wall time, the CPU time of the processes that ran it
(each VM's QEMU, each ferroce-nic, the harness's switch threads), how long its VMs took to
boot, and how much of its steps was spent waiting (failed tries of a `retry`, `await`s).

A scenario whose CPU time is near its wall time (times the cores it can use) computes; one
whose CPU time is far below it waits. vmtest prints the figures when a scenario ends, in its
summary and in the KTAP file, and writes them to `<logs>/usage.json` (`--usage`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

BOOT = re.compile(r"^=== FERROCE-BOOT ", re.M)


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process `pid` so far (a zombie's too), or None if it is
    gone (proc(5): utime and stime are fields 14 and 15 of /proc/PID/stat)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Meter:
    """Reads a scenario's processes while they run: their CPU time (the last reading of each
    is kept, so read them before they are reaped) and when each VM's script began (its output
    shows `=== FERROCE-BOOT`)."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.cpu: dict[str, float] = {}
        """Process label (a VM's name for its QEMU, "<vm>.nic" for its NIC) -> CPU seconds."""
        self.boot: dict[str, float] = {}
        """VM -> seconds from the scenario's start until its script began."""

    def sample(self, procs: dict[str, subprocess.Popen]) -> None:
        for label, proc in procs.items():
            if proc.returncode is None:
                seconds = cpu_seconds(proc.pid)
                if seconds is not None:
                    self.cpu[label] = seconds

    def booted(self, logs: dict[str, Path], now: float) -> None:
        for name, path in logs.items():
            if name in self.boot:
                continue
            try:
                with open(path, "rb") as f:
                    head = f.read(4096).decode(errors="replace")
            except OSError:
                continue
            if BOOT.search(head):
                self.boot[name] = now - self.start


@dataclasses.dataclass
class Usage:
    """A scenario's time: wall, CPU by kind of process, boot, waiting."""

    wall: float
    qemu: float = 0.0
    nic: float = 0.0
    switch: float = 0.0
    boot: float = 0.0
    """The longest time any VM took from the scenario's start to its script."""
    waiting: float = 0.0
    """Seconds of steps spent waiting for a peer: the failed tries of `retry` steps (with the
    pauses between them) and `await` steps, summed over the VMs."""
    steps: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    """The longest steps, "vm:step" and seconds, longest first."""

    @property
    def cpu(self) -> float:
        return self.qemu + self.nic + self.switch

    @property
    def load(self) -> float:
        """Cores used on average: CPU time over wall time."""
        return self.cpu / self.wall if self.wall > 0 else 0.0

    def line(self) -> str:
        """"41.0 s, CPU 52.3 s (QEMU 40.1, NIC 12.0, switch 0.2; 1.28 cores), boot 3.1 s,
        waiting 5.0 s"."""
        return (f"{self.wall:.1f} s, CPU {self.cpu:.1f} s (QEMU {self.qemu:.1f}, NIC {self.nic:.1f}, "
                f"switch {self.switch:.1f}; {self.load:.2f} cores), boot {self.boot:.1f} s, "
                f"waiting {self.waiting:.1f} s")

    def json(self) -> dict:
        return {"wall": round(self.wall, 1), "cpu": round(self.cpu, 1), "qemu": round(self.qemu, 1),
                "nic": round(self.nic, 1), "switch": round(self.switch, 1), "boot": round(self.boot, 1),
                "waiting": round(self.waiting, 1),
                "steps": [[name, round(secs, 1)] for name, secs in self.steps]}


def usage_of(wall: float, meter: Meter | None, switch_cpu: float, vm_steps: dict[str, list],
             longest: int = 5) -> Usage:
    """A scenario's `Usage` from its meter and the steps of each VM (`harness.Step`s)."""
    usage = Usage(wall, switch=switch_cpu)
    if meter:
        usage.qemu = sum(s for label, s in meter.cpu.items() if not label.endswith(".nic"))
        usage.nic = sum(s for label, s in meter.cpu.items() if label.endswith(".nic"))
        usage.boot = max(meter.boot.values(), default=0.0)
    timed = []
    for vm, steps in vm_steps.items():
        for step in steps:
            if step.secs is None:
                continue
            timed.append((f"{vm}:{step.name}", step.secs))
            if step.name.startswith("await-"):
                usage.waiting += step.secs
            elif step.waited:
                usage.waiting += step.waited
    usage.steps = sorted(timed, key=lambda t: -t[1])[:longest]
    return usage


def write(path: Path, usages: dict[str, Usage]) -> None:
    """A scenario a line (vmtest's usage.json, which the scheduler reads, is committed)."""
    lines = [f" {json.dumps(name)}: {json.dumps(u.json())}" for name, u in sorted(usages.items())]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
