"""One NIC, many functions: VM a has the physical function of a ferroce NIC, VMs b and c its
virtual functions 1 and 2 (`ferroce-nic --functions 2`, c with limits the host set), and VM d
a NIC of its own on the same segment. Traffic between functions of one NIC stays inside it (the
port's embedded switch); traffic to d crosses the wire. A hostile process in b that rings
doorbells for queue numbers it does not own reaches nothing of c's, and the counters prove it.
"""

from pathlib import Path

from harness import CheckFailed, Run, Scenario, Vm
from pingpong import pingpong, write_bw

C_LIMITS = {"qp": 16, "cq": 16, "mr": 64}
VMS = [
    Vm("a", "10.0.0.1/24", nic=True, steers_nic=True),  # the PF: vf N ...
    Vm("b", "10.0.0.2/24", function_of="a"),
    Vm("c", "10.0.0.3/24", function_of="a", vf_limits=",".join(f"{k}={v}" for k, v in C_LIMITS.items())),
    Vm("d", "10.0.0.4/24", nic=True),
]
scenario = Scenario(vms=VMS, timeout=120)


@scenario.check
def identity(run: Run) -> str:
    """The PF and the NIC of d are device 0xfe01, the VFs 0xfe02; the driver binds both."""
    lines = []
    for vm, device, kind in [("a", "0xfe01", "physical"), ("b", "0xfe02", "virtual"),
                             ("c", "0xfe02", "virtual"), ("d", "0xfe01", "physical")]:
        found = run.vm(vm).step("identity").expect(r"^function (\S+) device (\S+)$")
        if found.group(2) != device:
            raise CheckFailed(f"{vm}: {found.group(0)}, expected device {device}")
        probe = run.vm(vm).step("probe-log").expect(rf"ferroce {kind} function 1234:\w+ rev .* found")
        lines.append(f"{vm}: {found.group(0)}; {probe.group(0)}")
    return "\n".join(lines)


@scenario.check
def vf_limits(run: Run) -> str:
    """VF c reports the limits the host gave it, and the host cannot give more than its slice."""
    devinfo = run.vm("c").step("devinfo")
    devinfo.ok()
    for attr, key in [("max_qp", "qp"), ("max_cq", "cq"), ("max_mr", "mr")]:
        value = int(devinfo.expect(rf"^\s*{attr}:\s+(\d+)$").group(1))
        if value != C_LIMITS[key]:
            raise CheckFailed(f"c reports {attr} {value}; its limit is {C_LIMITS[key]}")
    over = run.vm("c").step("cqs-over-limit")
    over.ok()
    cqs = over.expect(r"^created (\d+) CQs, then errno (\d+) \((.*)\)$")
    if int(cqs.group(1)) >= C_LIMITS["cq"] or int(cqs.group(2)) == 0:
        raise CheckFailed(f"c: {cqs.group(0)}; its limit is {C_LIMITS['cq']} CQs")
    refused = run.vm("a").step("limits-over-slice")
    refused.ok()
    refused.expect(r"slice of the NIC holds")
    return (f"c: {', '.join(f'{k}={v}' for k, v in C_LIMITS.items())} reported; {cqs.group(0)}; "
            "qp=5000 refused")


def _delta(run: Run, before: str, after: str) -> dict[str, int]:
    """What function 0's `hostctl nic vf 0` counts grew by between two steps of VM a."""
    views = [run.vm("a").step(s).json("function") for s in (before, after)]
    return {key: views[1][group][key] - views[0][group][key]
            for group, key in [("counters", "tx_packets"), ("counters", "rx_packets"),
                               ("port", "switched"), ("port", "to_engine")]}


@scenario.check
def inside_the_nic(run: Run) -> str:
    """a <-> b (PF and VF 1) and b -> c (two VFs): every frame a sent to b was switched inside
    the NIC, none went to the wire."""
    figures = [pingpong(run, "pingpong-ab", ["a", "b"])]
    delta = _delta(run, "fn-before-b", "fn-after-b")
    if delta["tx_packets"] < 200 or delta["switched"] < delta["tx_packets"]:
        raise CheckFailed(f"a <-> b: {delta}: frames of a left the NIC")
    figures.append(f"a -> b: {delta['tx_packets']} frames sent, {delta['switched']} switched inside the NIC")
    figures.append("b -> c ib_write_bw 64 KiB: " + write_bw(run, "write-bw-bc", ["b", "c"], "b"))
    return "\n".join(figures)


@scenario.check
def over_the_wire(run: Run) -> str:
    """a <-> d (two NICs): nothing of it was switched inside a's NIC."""
    figure = pingpong(run, "pingpong-ad", ["a", "d"])
    delta = _delta(run, "fn-after-b", "fn-after-d")
    if delta["tx_packets"] < 200 or delta["switched"] != 0:
        raise CheckFailed(f"a <-> d: {delta}: expected frames on the wire only")
    return figure + f"\na -> d: {delta['tx_packets']} frames sent, none switched"


@scenario.check
def isolation(run: Run) -> str:
    """b's hostile process (unmapped queue numbers, bad producer indexes, unknown registers, a
    garbage push window, corrupt doorbell records) is refused by b's function; c's counters do
    not move while c holds live objects."""
    run.vm("b").step("hostile").ok()
    run.vm("c").step("holding").ok()
    counts = {}
    for vm in ("b", "c"):
        before, after = (run.vm(vm).step(s).json("counters") for s in ("counters-before", "counters-after"))
        counts[vm] = {k: after[k] - before[k] for k in ("doorbells", "bad_doorbells", "wqe_fetches",
                                                        "cqes", "dma_errors", "mmio_writes")}
    if counts["b"]["bad_doorbells"] == 0:
        raise CheckFailed(f"b: {counts['b']}: its hostile doorbells were not counted as refused")
    moved = {k: v for k, v in counts["c"].items() if v}
    if moved:
        raise CheckFailed(f"c's counters moved while b attacked: {moved}")
    return f"b: {counts['b']}\nc: {counts['c']}"


@scenario.check
def functions_view(run: Run) -> str:
    """The host's view (`ctl functions`): three functions in their slices of the NIC's
    numbers, c's limits, and each function's turns of the device thread; c's doorbells in the
    trace carry the function's number and the NIC's."""
    functions = run.vm("a").step("functions-after").json("functions")
    kinds = [(f["index"], f["kind"], f["device_id"]) for f in functions]
    if kinds != [(0, "pf", "0xfe01"), (1, "vf", "0xfe02"), (2, "vf", "0xfe02")]:
        raise CheckFailed(f"functions: {kinds}")
    bases = [f["slot"]["qpn_base"] for f in functions]
    limits = functions[2]["limits"]
    if any(limits[k] != v for k, v in C_LIMITS.items()) or not bases[0] < bases[1] < bases[2]:
        raise CheckFailed(f"c's limits {limits}, QP slices at {bases}")
    if any(f["schedule"]["turns"] == 0 for f in functions):
        raise CheckFailed(f"schedules: {[f['schedule'] for f in functions]}")
    slot = functions[2]["slot"]
    doorbells = [e for e in run.nic_trace("c") if e.get("ev") == "doorbell" and e.get("num") is not None]
    if not doorbells:
        raise CheckFailed("c's trace has no translated doorbell")
    wrong = [e for e in doorbells if e["fn"] != 2 or e["nic"] not in
             (e["num"] + slot["qpn_base"], e["num"] + slot["cqn_base"], e["num"] + slot["srqn_base"])]
    if wrong:
        raise CheckFailed(f"c's doorbells with the wrong translation: {wrong[:3]}")
    return "\n".join(f"fn {f['index']} {f['kind']} {f['mac']}: QPs from {f['slot']['qpn_base']}, "
                     f"schedule {f['schedule']}, port {f['port']}" for f in functions) + \
        f"\nc: {len(doorbells)} doorbells translated, e.g. {doorbells[0]}"


@scenario.check
def host_control_line(run: Run) -> str:
    """What VF b's guest may ask over the host-control line: its own function's wire faults;
    a host path, another function and a misbehaving device are refused, and nothing is done."""
    b = run.vm("b")
    b.step("relay-own-faults").ok()
    refusals = {"relay-host-path": "nic pcap: not a guest's command",
                "relay-other-function": "nic vf: only a scenario's VM with steers_nic",
                "relay-misbehave": "nic stall: only a scenario's VM with steers_nic"}
    for step, why in refusals.items():
        b.step(step).ok()
        if why not in b.step(step).output:
            raise CheckFailed(f"b: step {step} was not refused by the line:\n{b.step(step).output}")
    if Path("/tmp/ferroce-relay-probe").exists():
        raise CheckFailed("a guest's pcap path was opened on the host")
    return "own faults relayed; pcap, vf and stall refused"
