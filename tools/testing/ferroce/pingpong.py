# SPDX-License-Identifier: GPL-2.0
"""The results of an ibv_*_pingpong run (rdma-core's examples) and of an ib_write_bw run
(perftest), as every scenario that runs one checks them."""

from collections.abc import Iterable

from harness import CheckFailed, Run
from perftest import NUM


def pingpong(run: Run, step: str, vms: Iterable[str], size: int = 4096, iters: int = 100) -> str:
    """Both sides (`vms`) of step `step` exited 0 and report `iters` round trips of `size`
    bytes; their throughput lines."""
    figures = []
    for name in vms:
        s = run.vm(name).step(step)
        s.ok()
        m = s.expect(r"^(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec")
        done = s.expect(r"^(\d+) iters in ")
        if int(done.group(1)) != iters or int(m.group(1)) != size * iters * 2:
            raise CheckFailed(f"{name}: {m.group(0)}, {done.group(0)}: expected {iters} "
                              f"iterations of {size} B")
        figures.append(f"{name}: {m.group(0)}")
    return "\n".join(figures)


def write_bw(run: Run, step: str, vms: Iterable[str], client: str, size: int = 65536,
             iters: int = 200) -> str:
    """Both sides (`vms`) of ib_write_bw step `step` exited 0, and the client printed the row of
    `iters` messages of `size` bytes; its average."""
    for name in vms:
        run.vm(name).step(step).ok()
    row = run.vm(client).step(step).expect(
        rf"^\s*{size}\s+{iters}\s+{NUM}\s+({NUM})\s+{NUM}\s*$")
    return f"{row.group(1)} MiB/s average"
