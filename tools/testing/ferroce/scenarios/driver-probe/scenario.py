"""ferroce.ko probes the NIC: version, caps, port and MAC; commands reach the
NIC; an async event is drained at unbind; rmmod stops the device; 20 more
load/unload cycles are clean.
"""

import re
from pathlib import Path

from harness import CheckFailed, Run, Scenario, Vm, mac_of

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, steers_nic=True)], timeout=120, faults=True)  # port down

RELOADS = 20
# Commands the driver posts per probe: NOP and QUERY_PORT.
# Probe: NOP, QUERY_PORT; registering ferroce0: SET_PORT (active MTU) and SET_GID for the four
# default entries (fe80:: EUI-64 and the IPv4 address, each as RoCE v1 and v2).
GID_ENTRIES = 4
# CREATE_EQ for a completion EQ on each MSI-X vector after the first two (the NIC has 8; the
# driver uses up to 4 completion EQs).
COMPLETION_EQS = 4
# ferroce0 is a kernel verbs provider, so ib_core's MAD agent sets up QP1 on it: CREATE_MR (the
# PD's DMA MR), CREATE_CQ, CREATE_QP (GSI) and MODIFY_QP to INIT, RTR and RTS.
MAD_AGENT_COMMANDS = 6
PROBE_COMMANDS = 2 + COMPLETION_EQS + 1 + GID_ENTRIES + MAD_AGENT_COMMANDS
# Unbind: DESTROY_QP, DESTROY_CQ and DESTROY_MR of the MAD agent and CLEAR_GID for each entry as
# ferroce0 unregisters, DESTROY_EQ for the completion EQs.
MAD_AGENT_TEARDOWN = 3
REMOVE_COMMANDS = MAD_AGENT_TEARDOWN + GID_ENTRIES + COMPLETION_EQS
# Words no line of a clean probe, removal or reload has.
TROUBLES = ("timed out", "bogus", "failed", "refused")
DEV = r"ferroce [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: "
# The device's counters, as the hardware interface defines them (hw/counters.rs).
NUM_COUNTERS = int(re.search(r"^pub const NUM_COUNTERS: usize = (\d+);$", (
    Path(__file__).resolve().parents[5] / "drivers/infiniband/hw/ferroce/hw/counters.rs").read_text(), re.M).group(1))


def reply(run: Run, step: str) -> dict:
    return run.vm("a").step(step).json()


def counters(run: Run, step: str) -> dict:
    return run.vm("a").step(step).json("counters")


def grew(before: dict, after: dict, names: list[str]) -> dict:
    return {name: after[name] - before[name] for name in names}


@scenario.check
def probe_log(run: Run) -> str:
    vm = run.vm("a")
    vm.step("modprobe").ok()
    vm.step("bound").ok()
    log = vm.step("dmesg-probe")
    log.expect(DEV + r"ferroce physical function 1234:fe01 rev 0x01 found$")
    log.expect(DEV + r"hardware interface 1\.4, capabilities 0x1fffff \[roce_v1 roce_v2 rc ud srq atomic "
               r"inline wqe_push cq_moderation qid_translation fast_reg uc cq_resize srq_resize mw mcast "
               r"db_record atomic_write flush xrc odp\]$")
    limits = log.expect(DEV + r"limits: \d+ QPs, \d+ CQs, \d+ MRs, \d+ SRQs, \d+ AHs, \d+ EQs, "
                        r"8 MSI-X vectors, 128 GIDs, 64 contexts, queues of 2\^15, 16 SGEs, "
                        rf"256 inline bytes, 262144 MR pages, {NUM_COUNTERS} counters; command timeout 2000 ms$")
    port = log.expect(DEV + rf"port 1: ACTIVE, active MTU 1024, max MTU 4096, companion MAC {mac_of(0)}$")
    log.expect(DEV + r"ready: command queue of 64 entries \(timeout 2000 ms\), EQ 0 async, EQ 1 command$")
    troubles = [line for line in log.output.splitlines() if any(bad in line for bad in TROUBLES)]
    if troubles:
        raise CheckFailed("unexpected lines in the probe log:\n" + "\n".join(troubles))
    return "\n".join(m.group(0) for m in (limits, port))


@scenario.check
def nic_saw_the_commands(run: Run) -> str:
    before = counters(run, "counters-before")
    after = counters(run, "counters-probe")
    delta = grew(before, after, ["commands", "command_errors", "eqes", "bad_doorbells", "dma_errors"])
    want = {"commands": PROBE_COMMANDS, "command_errors": 0, "eqes": PROBE_COMMANDS,
            "bad_doorbells": 0, "dma_errors": 0}
    if delta != want:
        raise CheckFailed(f"NIC counters grew by {delta}, expected {want}")
    return f"probe: {delta}"


@scenario.check
def queues_exist_while_bound(run: Run) -> None:
    objects = reply(run, "objects-probe")
    cmdq = objects.get("cmdq")
    if not cmdq or cmdq.get("error") or cmdq.get("log_size") != 6:
        raise CheckFailed(f"NIC command queue while bound: {cmdq}")
    if cmdq.get("ci") != PROBE_COMMANDS or cmdq.get("pi") != PROBE_COMMANDS:
        raise CheckFailed(f"NIC command queue indexes: {cmdq}, expected {PROBE_COMMANDS} commands")
    eqs = objects.get("eqs")
    numbers = sorted(int(e.get("eqn", e.get("number", -1))) for e in eqs) if isinstance(eqs, list) else eqs
    if numbers != list(range(2 + COMPLETION_EQS)):
        raise CheckFailed(f"NIC EQs while bound: {eqs}")
    vectors = sorted(int(e.get("vector", -1)) for e in eqs)
    if vectors != [0, 1, *range(2, 2 + COMPLETION_EQS)]:
        raise CheckFailed(f"NIC EQ vectors while bound: {vectors}")


@scenario.check
def async_event_and_unbind(run: Run) -> None:
    vm = run.vm("a")
    vm.step("port-down").ok()
    vm.step("async-posted").ok()
    vm.step("rmmod").ok()
    log = vm.step("dmesg-remove")
    log.expect(DEV + r"port 1 is DOWN$")
    log.expect(DEV + rf"stopped \(1 async and {PROBE_COMMANDS + REMOVE_COMMANDS} command events handled\)$")
    log.expect(r"ferroce: RoCEv2 RDMA driver unloaded$")


@scenario.check
def device_stopped_after_unbind(run: Run) -> None:
    objects = reply(run, "objects-remove")
    if objects.get("cmdq") is not None:
        raise CheckFailed(f"NIC still has a command queue after rmmod: {objects.get('cmdq')}")
    if objects.get("eqs"):
        raise CheckFailed(f"NIC still has EQs after rmmod: {objects.get('eqs')}")
    regs = objects.get("registers", {})
    if regs.get("ctrl") != 0:
        raise CheckFailed(f"NIC still enabled after rmmod: {regs}")
    probe = counters(run, "counters-probe")
    removed = counters(run, "counters-remove")
    if removed["commands"] != probe["commands"] + REMOVE_COMMANDS:
        raise CheckFailed(f"commands after probe {probe['commands']}, after rmmod {removed['commands']}, "
                          f"expected {REMOVE_COMMANDS} more (CLEAR_GID)")


@scenario.check
def reload_cycles(run: Run) -> str:
    vm = run.vm("a")
    step = vm.step("reload")
    step.ok()
    step.expect(rf"^{RELOADS} cycles done$")
    log = vm.step("dmesg-reload").output
    ready = len(re.findall(DEV + r"ready: command queue", log))
    stopped = len(re.findall(DEV + r"stopped \(", log))
    if ready != RELOADS + 1 or stopped != RELOADS + 1:
        raise CheckFailed(f"{ready} probes and {stopped} removals logged, expected {RELOADS + 1} each")
    troubles = [line for line in log.splitlines() if any(bad in line for bad in TROUBLES)]
    if troubles:
        raise CheckFailed("unexpected lines in the log:\n" + "\n".join(troubles))
    before = counters(run, "counters-remove")
    after = counters(run, "counters-reload")
    delta = grew(before, after, ["commands", "command_errors", "eqes", "bad_doorbells", "dma_errors"])
    cycle = PROBE_COMMANDS + REMOVE_COMMANDS
    want = {"commands": RELOADS * cycle, "command_errors": 0, "eqes": RELOADS * cycle,
            "bad_doorbells": 0, "dma_errors": 0}
    if delta != want:
        raise CheckFailed(f"NIC counters grew by {delta} over {RELOADS} cycles, expected {want}")
    vm.step("gone").ok()
    return f"{RELOADS} cycles: {delta}"
