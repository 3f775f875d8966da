"""A stalled NIC: the probe's first command times out after REG_CMD_TIMEOUT_MS
with a clear message, probe fails cleanly, nothing hangs, rmmod works.
"""

from harness import CheckFailed, Run, Scenario, Vm

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, nic_args=["--stall"])], timeout=120, faults=True, debug_lane=True)

DEV = r"ferroce [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: "
TIMEOUT_MS = 2000


def reply(run: Run, step: str) -> dict:
    return run.vm("a").step(step).json()


@scenario.check
def probe_times_out(run: Run) -> str:
    vm = run.vm("a")
    step = vm.step("modprobe")
    step.ok()
    secs = step.secs
    if secs is None:
        raise CheckFailed("no duration for step modprobe")
    # One command timeout, and the rest of modprobe (5 s, on a slower kernel more).
    if not TIMEOUT_MS / 1000 <= secs < TIMEOUT_MS / 1000 + 5 * run.slow:
        raise CheckFailed(f"modprobe took {secs} s; the command timeout is {TIMEOUT_MS} ms")
    log = vm.step("dmesg-probe")
    m = log.expect(DEV + rf"command nop timed out after {TIMEOUT_MS} ms \(index 0, device consumer index 0x0, "
                   r"device status 0x5\)$")
    log.expect(DEV + r"probe with driver ferroce failed with error -110$")
    if "ready: command queue" in log.output:
        raise CheckFailed("the driver claims it is ready")
    vm.step("unbound").ok()
    return f"{m.group(0)} (modprobe {secs} s)"


@scenario.check
def device_left_quiet(run: Run) -> None:
    counters = reply(run, "counters")["counters"]
    if counters["commands"] != 0 or counters["dma_errors"] != 0:
        raise CheckFailed(f"a stalled NIC executed {counters['commands']} commands, "
                          f"{counters['dma_errors']} DMA errors")
    objects = reply(run, "objects")
    if objects.get("cmdq") is not None or objects.get("eqs"):
        raise CheckFailed(f"queues left in the NIC after the failed probe: cmdq {objects.get('cmdq')}, "
                          f"eqs {objects.get('eqs')}")
    if objects.get("registers", {}).get("ctrl") != 0:
        raise CheckFailed(f"NIC left enabled: {objects.get('registers')}")


@scenario.check
def unload(run: Run) -> None:
    vm = run.vm("a")
    vm.step("rmmod").ok()
    vm.step("dmesg-unload").expect(r"ferroce: RoCEv2 RDMA driver unloaded$")
    vm.step("gone").ok()
