"""make bench: fairness between functions of one NIC. VFs b and c of VM a's NIC run
ib_write_bw (64 KiB, 15 s each, at the same time) to VM d on another NIC, once quietly and
once while the PF's VM a floods its function's doorbells (`ferroce_hostile flood`). The
figures: b's and c's bandwidth in both rounds, their ratio under the flood (the goal: within
20 % of each other), the flood's doorbell rate and each function's turns of the NIC's device
thread (`ctl functions`). Recorded, not judged.
"""

import json

from harness import CheckFailed, Run, Scenario, Vm

VMS = [Vm("a", "10.0.0.1/24", nic=True, trace=False, capture=False, steers_nic=True),
       Vm("b", "10.0.0.2/24", function_of="a", trace=False, capture=False),
       Vm("c", "10.0.0.3/24", function_of="a", trace=False, capture=False),
       Vm("d", "10.0.0.4/24", nic=True, trace=False, capture=False)]
scenario = Scenario(vms=VMS, timeout=900)
scenario.wire_judged = False


@scenario.check
def fairness(run: Run) -> str:
    bw, quiet = {}, {}
    for vm in ("b", "c"):
        for figures_of, step_name in ((quiet, "write-bw-quiet"), (bw, "write-bw-flood")):
            step = run.vm(vm).step(step_name)
            step.ok()
            row = step.expect(r"^\s*65536\s+\d+\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s*$")
            figures_of[vm] = float(row.group(1))
    flood = run.vm("a").step("flood").expect(r"flood: (\d+) doorbells in ([\d.]+) s")
    functions = run.vm("a").step("functions").json("functions")
    ratio = min(bw.values()) / max(bw.values()) if max(bw.values()) else 0.0
    figures = {"write_bw_mib_s": bw, "quiet_write_bw_mib_s": quiet, "ratio": ratio, "flood_doorbells": int(flood.group(1)),
               "flood_secs": float(flood.group(2)),
               "schedule": {f["index"]: f["schedule"] for f in functions}}
    if run.log_dir is None:
        raise CheckFailed("no log directory")
    (run.log_dir / "bench.json").write_text(json.dumps(figures, indent=1) + "\n")
    return (f"b {bw['b']:g} MiB/s, c {bw['c']:g} MiB/s (ratio {ratio:.2f}; goal >= 0.80) while a "
            f"rang {flood.group(1)} doorbells in {flood.group(2)} s; quiet: b {quiet['b']:g}, "
            f"c {quiet['c']:g} MiB/s\n"
            + "\n".join(f"fn {f['index']}: {f['schedule']}" for f in functions))
