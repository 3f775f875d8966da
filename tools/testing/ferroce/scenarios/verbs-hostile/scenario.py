"""A hostile process (tools/testing/ferroce/hostile/ferroce_hostile.c) against ferroce0.

It builds uverbs commands by hand: every malformed request of the ferroce user ABI must fail
with the errno it names, its doorbells with unmapped queue numbers, out-of-range producer
indexes and unknown registers must be rejected by the NIC (bad_doorbells), its garbage push
and doorbell records must not hurt anything, and after it exits without cleaning up, the
kernel must have freed its context and queues. Then ferroce_random makes 10^4 random and
hostile verbs calls from 4 processes killed at random, after which nothing of theirs may be
left. Then two processes run an RC pingpong on the same device, and the kernel log shows no
warning. On the debug kernel in make check.
"""

import re

from harness import CheckFailed, Run, Scenario, Vm

# faults: ferroce_random's QPs send to QPs that do not exist or whose process was killed, and
# their NIC retransmits until it gives up.
scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True)], timeout=240, faults=True, debug_lane=True)


@scenario.check
def malformed_requests_refused(run: Run) -> str:
    step = run.vm("a").step("hostile")
    failed = re.findall(r"^FAIL .*$", step.output, re.M)
    if failed or step.rc != 0:
        raise CheckFailed(f"rc {step.rc}:\n" + ("\n".join(failed) or step.output))
    cases = re.findall(r"^ok ", step.output, re.M)
    if len(cases) < 40:
        raise CheckFailed(f"only {len(cases)} cases ran:\n{step.output}")
    return f"{len(cases)} cases as expected"


@scenario.check
def hostile_doorbells_rejected(run: Run) -> str:
    before = run.vm("a").step("counters-before").json("counters")
    after = run.vm("a").step("counters-after").json("counters")
    rejected = after["bad_doorbells"] - before["bad_doorbells"]
    if rejected < 5:
        raise CheckFailed(f"the NIC rejected {rejected} doorbells, expected at least the 5 bad ones")
    if after["dma_errors"] != before["dma_errors"]:
        raise CheckFailed(f"DMA errors: {before['dma_errors']} -> {after['dma_errors']}")
    return f"bad_doorbells +{rejected}"


@scenario.check
def doorbell_flood_contained(run: Run) -> str:
    """20000 garbage doorbells: all counted by the NIC, the async EQ not overrun (errors are
    reported only while it is half empty), the kernel log noted a bounded few."""
    vm = run.vm("a")
    vm.step("hostile").expect(r"^rang 20000 garbage doorbells$")
    before = vm.step("counters-before").json("counters")
    after = vm.step("counters-after").json("counters")
    rejected = after["bad_doorbells"] - before["bad_doorbells"]
    if rejected < 20000:
        raise CheckFailed(f"the NIC rejected {rejected} doorbells, expected at least 20000")
    eqs = vm.step("objects-after").json("eqs")
    overruns = {eq["eqn"]: eq["overruns"] for eq in eqs if eq["overruns"]}
    if overruns:
        raise CheckFailed(f"EQ overruns: {overruns}")
    log = vm.step("dmesg").output
    notes = [line for line in log.splitlines() if re.search(r"doorbell 0x[0-9a-f]+ of context \d+ rejected", line)]
    # The first ten, then every power of two of the count: far fewer than 40 for 20005.
    if not 1 <= len(notes) <= 40:
        raise CheckFailed(f"{len(notes)} rejected-doorbell notes in the kernel log")
    return f"bad_doorbells +{rejected}, no EQ overrun, {len(notes)} log notes"


@scenario.check
def crashed_process_cleaned_up(run: Run) -> str:
    objects = run.vm("a").step("objects-after")
    objects.ok()
    contexts = [c for c in objects.json("contexts") if c["ctx"] != 0]
    qps = [q for q in objects.json("qps") if q.get("qpn") != 1]
    srqs = objects.json("srqs")
    if contexts or qps or srqs:
        raise CheckFailed(f"left behind: contexts {contexts}, QPs {qps}, SRQs {srqs}")
    return f"no user context, QP or SRQ left; {len(objects.json('cqs'))} CQs (the kernel's)"


def resources(run: Run, step: str) -> dict[str, int]:
    """ferroce0's line of `rdma res show`: "0: ferroce0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 0 srq 0"."""
    out = run.vm("a").step(step)
    out.ok()
    m = out.expect(r"^\d+: ferroce0: (.*)$")
    return {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", m.group(1))}


@scenario.check
def random_calls_leave_nothing(run: Run) -> str:
    """10^4 random and hostile verbs calls from 4 processes killed at random (ferroce_random):
    no process died of anything but our SIGKILL or hung in the kernel, and afterwards the
    device holds what it held before (`rdma res show`), the NIC no user context, QP or SRQ,
    and no DMA went astray."""
    vm = run.vm("a")
    step = vm.step("random")
    failed = re.findall(r"^FAIL .*$", step.output, re.M)
    m = re.search(r"^random: (\d+) calls, (\d+) processes, (\d+) killed, (\d+) exited early, (\d+) failed$",
                  step.output, re.M)
    if failed or not m or step.rc != 0 or m.group(5) != "0":
        raise CheckFailed(f"rc {step.rc}:\n" + ("\n".join(failed) or step.output[-3000:]))
    if int(m.group(1)) < 10000:
        raise CheckFailed(f"only {m.group(1)} calls made")
    before, after = resources(run, "res-before"), resources(run, "res-after")
    if before != after:
        raise CheckFailed(f"rdma res show: {before} before, {after} after")
    objects = vm.step("objects-random")
    objects.ok()
    left = ([c for c in objects.json("contexts") if c["ctx"] != 0], [q for q in objects.json("qps") if q.get("qpn") != 1],
            objects.json("srqs"))
    if any(left):
        raise CheckFailed(f"left in the NIC: contexts {left[0]}, QPs {left[1]}, SRQs {left[2]}")
    c0 = vm.step("counters-after").json("counters")
    c1 = vm.step("counters-random").json("counters")
    if c1["dma_errors"] != c0["dma_errors"]:
        raise CheckFailed(f"DMA errors during the random calls: {c0['dma_errors']} -> {c1['dma_errors']}")
    ops = re.findall(r"^op (\w+) +(\d+)", step.output, re.M)
    untried = [name for name, n in ops if n == "0" and name != "exit"]
    if untried:
        raise CheckFailed(f"operations never made: {untried}")
    return (f"{m.group(1)} calls by {m.group(2)} processes, {m.group(3)} killed, {m.group(4)} exited early; "
            f"resources as before ({after}); NIC: bad_doorbells +{c1['bad_doorbells'] - c0['bad_doorbells']}, "
            f"commands +{c1['commands'] - c0['commands']}, command_errors +{c1['command_errors'] - c0['command_errors']}, "
            f"frames sent +{c1['tx_packets'] - c0['tx_packets']}, CQEs +{c1['cqes'] - c0['cqes']}")


@scenario.check
def device_still_works(run: Run) -> str:
    client = run.vm("a").step("pingpong-after")
    client.ok()
    m = client.expect(r"^819200 bytes in [\d.]+ seconds = [\d.]+ Mbit/sec")
    run.vm("a").step("pingpong-server").expect(r"^819200 bytes in ")
    run.vm("a").step("rmmod").ok()
    return m.group(0)


@scenario.check
def no_kernel_warning(run: Run) -> str:
    log = run.vm("a").step("dmesg").output
    bad = [line for line in log.splitlines() if re.search(r"WARNING|BUG|Oops", line, re.I)]
    if bad:
        raise CheckFailed("\n".join(bad))
    notes = [line for line in log.splitlines() if "rejected" in line]
    return f"{len(notes)} rejected-doorbell notes, no warning"


@scenario.check
def unplug_under_a_process(run: Run) -> str:
    """rmmod with a process holding a context, 20 times: rmmod does not wait for the process
    (disassociate_ucontext), which gets IB_EVENT_DEVICE_FATAL and exits; the kernel stays clean."""
    vm = run.vm("a")
    step = vm.step("unplug")
    step.expect(r"^unplug cycles: 20, failed: 0$")
    cycles = re.findall(r"^cycle \d+: rmmod rc=0 in ([\d.]+) s; process rc=0: event 8 IB_EVENT_DEVICE_FATAL$",
                        step.output, re.M)
    if len(cycles) != 20:
        raise CheckFailed(f"{len(cycles)} clean cycles of 20:\n{step.output}")
    slowest = max(float(t) for t in cycles)
    # Removal waits for no process; a command timeout (2 s) is the most any step of it may
    # take, the rest of the work (2 s) on a slower kernel more.
    if slowest >= 2.0 + 2.0 * run.slow:
        raise CheckFailed(f"an rmmod under a process took {slowest} s")
    bad = vm.step("dmesg-unplug").output.strip()
    if bad:
        raise CheckFailed("kernel log:\n" + bad)
    vm.step("modules-gone").ok()
    return f"20 cycles, slowest rmmod {slowest:.2f} s, every process got IB_EVENT_DEVICE_FATAL"
