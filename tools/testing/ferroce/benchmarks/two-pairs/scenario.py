"""make bench: two pairs of VMs on one segment at once. a→b runs ib_write_bw 64 KiB for 10 s
alone, then again at the same time as c→d (c starts on a's signal), all four VMs on ferroce
and on one segment (the harness's switch). The figures: the pair alone, each pair together,
their sum and its ratio to the pair alone (the goal: aggregate throughput that does not fall as
work grows; on a machine whose two cores run all four vCPUs, CPU bounds it). Recorded, not
judged.
"""

import json

from harness import CheckFailed, Run, Scenario, Vm

ROW = r"^\s*65536\s+\d+\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s*$"
VMS = [Vm(name, f"10.0.0.{i}/24", nic=True, trace=False, capture=False)
       for i, name in enumerate("abcd", 1)]
scenario = Scenario(vms=VMS, timeout=900)
scenario.wire_judged = False


@scenario.check
def two_pairs(run: Run) -> str:
    def mib_s(vm: str, step: str) -> float:
        s = run.vm(vm).step(step)
        s.ok()
        return float(s.expect(ROW).group(1))

    alone = mib_s("a", "alone")
    together = {"a-b": mib_s("a", "together"), "c-d": mib_s("c", "together")}
    total = sum(together.values())
    figures = {"alone_mib_s": alone, "together_mib_s": together, "aggregate_mib_s": total,
               "aggregate_over_alone": total / alone if alone else None, "wire": run.wire}
    if run.log_dir is None:
        raise CheckFailed("no log directory")
    (run.log_dir / "bench.json").write_text(json.dumps(figures, indent=1) + "\n")
    return (f"a-b alone {alone:g} MiB/s; together a-b {together['a-b']:g} and c-d "
            f"{together['c-d']:g}: {total:g} MiB/s in all ({total / alone if alone else 0:.2f} of one pair alone)")
