"""Multicast between three VMs: rdma-core's mckey on ferroce0 and on rxe0 in the same VMs, VM a
sending to a group, VMs b and c receiving; ferroce must work wherever rxe does.

Each VM has a ferroce NIC on eth0 (segment "lan", group 239.1.1.1) and a plain virtio-net eth1
(segment "rxe", rxe0, group 239.1.2.1), as in tools-parity. rdma_cm joins a RoCE v2 group by its
IPv4-mapped GID (::ffff:239.1.1.1); librdmacm attaches the UD QP (ibv_attach_mcast:
CMD_ATTACH_MCAST) and the kernel's IP stack joins the group on eth0, which sends an IGMP report
through the NIC. A sends three rounds of 10 datagrams to QPN 0xffffff and the group's MAC
01:00:5e:01:01:01; the switch floods them, and each receiver's NIC delivers them to its attached
QP. The checks read the NIC traces: the datagrams on the wire, once each, and the IGMP joins.
"""

import pcapcheck
from harness import CheckFailed, Run, Scenario, Vm

VMS = [
    Vm("a", "10.0.0.1/24", nic=True, second=("rxe", "10.0.1.1/24")),
    Vm("b", "10.0.0.2/24", nic=True, second=("rxe", "10.0.1.2/24")),
    Vm("c", "10.0.0.3/24", nic=True, second=("rxe", "10.0.1.3/24")),
]
RECEIVERS = ("b", "c")
scenario = Scenario(vms=VMS, timeout=120)
GROUP_MAC = "01:00:5e:01:01:01"
MCAST_QPN = 0xFFFFFF
ROUNDS, COUNT = 3, 10


def received(run: Run, vm: str, kind: str) -> str:
    """VM `vm` got the 10 datagrams of mckey on `kind`: its figures line, or why not."""
    step = run.vm(vm).step(f"mckey-{kind}")
    step.ok()
    step.expect(r"^mckey: joined dgid: ")
    step.expect(r"^data transfers complete$")
    step.expect(r"^return status 0$")
    return f"{vm}: {step.expect(r'^mckey: joined dgid: .*$').group(0)}"


@scenario.check
def mckey_ferroce(run: Run) -> str:
    run.vm("a").step("mckey-send-ferroce").ok()
    return "\n".join(received(run, vm, "ferroce") for vm in RECEIVERS)


@scenario.check
def ferroce_against_rxe(run: Run) -> str:
    """Wherever rxe receives, ferroce does (rxe's result recorded, not required)."""
    lines = []
    for vm in RECEIVERS:
        try:
            rxe = received(run, vm, "rxe")
        except CheckFailed as e:
            rxe = f"{vm}: rxe failed: {str(e).splitlines()[0]}"
        lines.append(rxe)
        received(run, vm, "ferroce")
    return "\n".join(lines)


def group_frames(run: Run, vm: str, direction: str) -> list[dict]:
    return [e for e in run.nic_trace(vm)
            if e.get("ev") == "frame" and e.get("dir") == direction and e.get("qpn") == MCAST_QPN]


@scenario.check
def datagrams_on_the_wire_once(run: Run) -> str:
    """A's NIC sent every datagram once, to the group's MAC; every receiver's NIC took them."""
    sent = [e for e in group_frames(run, "a", "tx") if not e.get("loopback")]
    if len(sent) != ROUNDS * COUNT or {e["dmac"] for e in sent} != {GROUP_MAC}:
        raise CheckFailed(f"a sent {len(sent)} datagrams to {sorted({e['dmac'] for e in sent})}: "
                          f"expected {ROUNDS * COUNT} to {GROUP_MAC}")
    lines = [f"a: sent {len(sent)} to {GROUP_MAC}"]
    for vm in RECEIVERS:
        got = [e for e in group_frames(run, vm, "rx") if e.get("dmac") == GROUP_MAC]
        if len(got) < COUNT:
            raise CheckFailed(f"{vm}: {len(got)} datagrams for the group arrived, expected >= {COUNT}")
        lines.append(f"{vm}: received {len(got)}")
    return "\n".join(lines)


@scenario.check
def igmp_joins_on_the_wire(run: Run) -> str:
    """Each VM's kernel reported its join of 239.1.1.1 through the NIC (IGMP, traced)."""
    lines = []
    for vm in ("a",) + RECEIVERS:
        joins = [e for e in run.nic_trace(vm) if e.get("ev") == "membership"
                 and e.get("dir") == "tx" and e.get("proto") == "igmp"
                 and "239.1.1.1" in e.get("groups", [])]
        if not joins:
            raise CheckFailed(f"{vm}: no IGMP report of 239.1.1.1 left through the NIC")
        lines.append(f"{vm}: {len(joins)} IGMP messages naming 239.1.1.1 (type {joins[0]['type']:#x})")
    for vm in RECEIVERS:
        run.vm(vm).step("igmp").ok()
    return "\n".join(lines)


@scenario.check
def captures_decode(run: Run) -> str:
    """tshark decodes the group's datagrams (BTH, DETH, ImmDt: mckey sends SEND with immediate)
    in every port's capture, none malformed, each with a right ICRC."""
    lines, problems = [], []
    for vm in VMS:
        summary, wrong = pcapcheck.verify(run.pcap(vm.name), ("bth", "deth", "immdt"))
        lines.append(f"{vm.name}: {summary}")
        problems += [f"{vm.name}: {p}" for p in wrong]
    if problems:
        raise CheckFailed("\n".join(problems + lines))
    return "\n".join(lines)
