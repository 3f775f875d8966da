"""Two subnets joined by a router VM (seed 2 §5-§7): RoCE v2 with the IPv4 GID crosses it.

VM a (10.0.0.1/24) and VM b (10.0.1.1/24) have ferroce; r routes between them with two plain
virtio-net NICs. ibv_rc_pingpong -g 3 (::ffff:IPv4, RoCE v2) works: ib_core resolves the
destination MAC through the route to the gateway, so a's NIC sends to r's MAC and b receives
from r's other MAC (both read from the NICs' traces). With -g 0 (fe80:: link-local) the MAC is
derived from the GID itself, no such station is on a's segment, and the client fails with a
transport error instead of hanging.
"""

import re

from harness import CheckFailed, Run, Scenario, Vm, mac_of, second_mac_of
from pingpong import pingpong

VMS = [
    Vm("a", "10.0.0.1/24", nic=True, gateway="10.0.0.254"),
    Vm("r", "10.0.0.254/24", second=("wan", "10.0.1.254/24")),
    Vm("b", "10.0.1.1/24", nic=True, gateway="10.0.1.254", segment="wan"),
]
scenario = Scenario(vms=VMS, timeout=420, needs_all_exit_zero=False,
                    faults=True)  # -g 0 sends to a station that is not there
ROUTER_LAN, ROUTER_WAN, B_MAC = mac_of(1), second_mac_of(1), mac_of(2)


@scenario.check
def routed_path(run: Run) -> str:
    run.vm("r").step("forwarding").expect(r"^1$")
    route = run.vm("a").step("route")
    route.ok()
    return route.expect(r"10\.0\.1\.1 via 10\.0\.0\.254 dev eth0.*").group(0).strip()


@scenario.check
def rc_pingpong_routed(run: Run) -> str:
    return pingpong(run, "rc-pingpong-routed", ["a", "b"])


@scenario.check
def frames_go_through_the_gateway(run: Run) -> str:
    sent = [e for e in run.nic_trace("a") if e.get("ev") == "frame" and e.get("dir") == "tx"]
    received = [e for e in run.nic_trace("b") if e.get("ev") == "frame" and e.get("dir") == "rx"]
    if not sent or not received:
        raise CheckFailed(f"frames in the traces: a sent {len(sent)}, b received {len(received)}")
    # The routed pingpong's frames go to the gateway; the later link-local attempt's go to the
    # MAC in b's fe80:: GID, which is not on this segment.
    routed = [e["dmac"] for e in sent]
    first_direct = next((i for i, mac in enumerate(routed) if mac != ROUTER_LAN), len(routed))
    direct = set(routed[first_direct:])
    if first_direct == 0 or direct - {B_MAC}:
        raise CheckFailed(f"a's NIC sent to {sorted(set(routed))}: expected the gateway {ROUTER_LAN}, "
                          f"then (link-local GID) only {B_MAC}")
    came_from = {e["smac"] for e in received}
    if came_from != {ROUTER_WAN}:
        raise CheckFailed(f"b's NIC received from {sorted(came_from)}, expected only the router {ROUTER_WAN}")
    return (f"a → {ROUTER_LAN}: {first_direct} frames, then {len(routed) - first_direct} to {B_MAC} "
            f"(link-local); b ← {ROUTER_WAN}: {len(received)} frames")


@scenario.check
def link_local_gid_fails_cleanly(run: Run) -> str:
    step = run.vm("a").step("rc-pingpong-link-local")
    if step.rc == 0:
        raise CheckFailed(f"the link-local GID crossed the router:\n{step.output}")
    if step.rc in (124, 137, 143):
        raise CheckFailed(f"the client hung (killed by the step timeout):\n{step.output}")
    m = re.search(r"^Failed status (.*) for wr_id \d+$", step.output, re.M)
    if not m:
        raise CheckFailed(f"no completion error reported (rc {step.rc}):\n{step.output}")
    return f"rc {step.rc}: {m.group(0)}"
