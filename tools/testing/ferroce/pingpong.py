# SPDX-License-Identifier: GPL-2.0
"""The result of an ibv_*_pingpong run (rdma-core's examples), as every scenario that runs one
checks it."""

from collections.abc import Iterable

from harness import CheckFailed, Run


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
