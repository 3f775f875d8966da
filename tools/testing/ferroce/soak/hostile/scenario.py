"""The hostile campaign (make soak): 10^5 random verbs calls, 100 unplugs under a process and 100 under kernel verbs traffic.

The long form of verbs-hostile's random calls and unplug cycles and of kverbs' removals under
traffic (their scripts, copied here), on the kernel make soak runs (VARIANT=debug for the
debug kernel). Nothing may be left behind, the kernel log stays clean (the implicit
kernel-clean check) and a pingpong works afterwards.
"""

import re
from pathlib import Path

from harness import CheckFailed, Run, Scenario, Vm

SCENARIOS = Path(__file__).parents[2] / "scenarios"

# faults: random QPs talk to QPs that are gone, and their NIC retransmits until it gives up.
scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, capture=False, trace=False)], timeout=7200,
                    faults=True)
scenario.files = {"unplug.sh": (SCENARIOS / "verbs-hostile" / "unplug.sh").read_text(),
                  "unload.sh": (SCENARIOS / "kverbs" / "unload.sh").read_text()}


@scenario.check
def random_calls_leave_nothing(run: Run) -> str:
    vm = run.vm("a")
    step = vm.step("random")
    m = re.search(r"^random: (\d+) calls, (\d+) processes, (\d+) killed, (\d+) exited early, 0 failed$",
                  step.output, re.M)
    if not m or step.rc != 0 or int(m.group(1)) < 100000:
        raise CheckFailed(f"rc {step.rc}:\n{step.output[-3000:]}")
    before, after = vm.step("res-before").output, vm.step("res-after").output
    if before.strip() != after.strip():
        raise CheckFailed(f"rdma res show before:\n{before}\nafter:\n{after}")
    objects = vm.step("objects-random")
    left = [c for c in objects.json("contexts") if c["ctx"] != 0]
    if left:
        raise CheckFailed(f"user contexts left in the NIC: {left}")
    vm.step("pingpong-after").ok()
    return f"{m.group(1)} calls by {m.group(2)} processes, {m.group(3)} killed; nothing left; pingpong works"


@scenario.check
def unplug_cycles(run: Run) -> str:
    vm = run.vm("a")
    vm.step("rmmod").ok()
    vm.step("unplug").expect(r"^unplug cycles: 100, failed: 0$")
    return "100 removals under a process"


@scenario.check
def removals_under_traffic(run: Run) -> str:
    vm = run.vm("a")
    vm.step("load-kverbs").ok()
    vm.step("unload-under-traffic").expect(r"^unload cycles: 100, failed: 0$")
    vm.step("unload-kverbs").ok()
    vm.step("modules-gone").ok()
    return "100 removals under kernel verbs traffic"
