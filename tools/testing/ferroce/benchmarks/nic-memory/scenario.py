"""make bench: what the NIC process holds per QP and per MiB of registered memory. VM a's
ferroce_objects holds 0, then 64 and 256 MiB of registered memory, then 64 and 256 RC QPs
(each with 128 send and 128 receive WQEs, in INIT, on one CQ), and the NIC answers `ctl
memory` while each set lives: its resident memory of its own (RssAnon: heap, not the guest's
RAM it maps) and the objects it holds. The figures, from the differences between the two sizes
of each series: KiB per QP and per MiB. The goal: memory linear in what the guest created.
Recorded, not judged.
"""

import json

from harness import CheckFailed, Run, Scenario, Vm

HOLDS = {"base": (0, 0), "mr64": (0, 64), "mr256": (0, 256), "qp64": (64, 0), "qp256": (256, 0)}
scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, trace=False, capture=False)], timeout=600)
scenario.wire_judged = False


@scenario.check
def memory(run: Run) -> str:
    a = run.vm("a")
    held = {}
    for name, (qps, mib) in HOLDS.items():
        a.step(f"hold-{name}").expect(rf"holding {qps} QPs, {mib} MiB")
        held[name] = a.step(f"memory-{name}").json("process_kib")
        held[name]["objects"] = a.step(f"memory-{name}").json("objects")
    anon = {name: h["rss_anon"] for name, h in held.items()}
    per_mib = (anon["mr256"] - anon["mr64"]) / 192
    per_qp = (anon["qp256"] - anon["qp64"]) / 192
    entries = held["mr256"]["objects"]["translation_entries"] - held["mr64"]["objects"]["translation_entries"]
    figures = {"rss_anon_kib": anon, "held": held, "kib_per_mib": per_mib, "kib_per_qp": per_qp,
               "translation_entries_per_mib": entries / 192}
    if run.log_dir is None:
        raise CheckFailed("no log directory")
    (run.log_dir / "bench.json").write_text(json.dumps(figures, indent=1) + "\n")
    return (f"NIC RssAnon {anon} KiB: {per_qp:.2f} KiB per QP, {per_mib:.2f} KiB per MiB registered "
            f"({entries / 192:g} page-list entries per MiB)")
