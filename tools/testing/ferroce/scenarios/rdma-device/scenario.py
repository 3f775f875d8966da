"""ferroce0 registers with ib_core, takes eth0 as its netdev and mirrors its GID table into the NIC.

Seed 2 §4's layout: GIDs 0/1 are the fe80:: EUI-64 of the MAC as RoCE v1/v2, 2/3 the
IPv4-mapped address as v1/v2, further IPv6 addresses after. The NIC's own table (read from the
host) must hold the same entries, and follow `ip addr add`/`del`; link down/up moves the port.
"""

import ipaddress
import re

from harness import CheckFailed, Run, Scenario, Vm, eui64_link_local, mac_of

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, steers_nic=True)], timeout=120, faults=True)  # port down

TYPES = {"IB/RoCE v1": "RoCEv1", "RoCE v1": "RoCEv1", "RoCE v2": "RoCEv2"}
ZERO = ipaddress.IPv6Address("::")


def kernel_gids(run: Run, step: str) -> dict[int, tuple[ipaddress.IPv6Address, str]]:
    out = run.vm("a").step(step).output
    table = {}
    for index, gid, kind in re.findall(r"^gid (\d+) (\S+) ?(.*)$", out, re.M):
        addr = ipaddress.IPv6Address(gid)
        if addr != ZERO:
            table[int(index)] = (addr, TYPES.get(kind.strip(), kind.strip()))
    return table


def nic_gids(run: Run, step: str) -> dict[int, tuple[ipaddress.IPv6Address, str]]:
    entries = run.vm("a").step(step).json("gids")
    return {e["index"]: (ipaddress.IPv6Address(e["gid"]), e["type"]) for e in entries}


def expected() -> dict[int, tuple[ipaddress.IPv6Address, str]]:
    link_local = ipaddress.IPv6Address(eui64_link_local(mac_of(0)))
    ipv4 = ipaddress.IPv6Address("::ffff:10.0.0.1")
    return {0: (link_local, "RoCEv1"), 1: (link_local, "RoCEv2"),
            2: (ipv4, "RoCEv1"), 3: (ipv4, "RoCEv2")}


def same_entries(got: dict, want_addrs: set) -> None:
    addrs = {(a, t) for a, t in got.values()}
    if addrs != want_addrs:
        raise CheckFailed(f"GID entries {sorted(map(str, addrs))}, expected {sorted(map(str, want_addrs))}")


@scenario.check
def registered_on_eth0(run: Run) -> None:
    vm = run.vm("a")
    vm.step("modprobe").ok()
    vm.step("rdma-link").expect(r"link ferroce0/1 state ACTIVE physical_state LINK_UP netdev eth0")
    vm.step("rdma-dev").expect(r"^\d+: ferroce0: node_type ca")
    vm.step("port-state").expect(r"^4: ACTIVE$")


@scenario.check
def gid_table_layout(run: Run) -> None:
    got = kernel_gids(run, "gids")
    want = expected()
    if got != want:
        raise CheckFailed(f"GID table {got}, expected {want}")


@scenario.check
def nic_gid_table_matches(run: Run) -> None:
    for kernel_step, nic_step in [("gids", "nic-gids"), ("gids-added", "nic-gids-added"),
                                  ("gids-removed", "nic-gids-removed")]:
        k, n = kernel_gids(run, kernel_step), nic_gids(run, nic_step)
        if k != n:
            raise CheckFailed(f"after {kernel_step}: ib_core has {k}, the NIC has {n}")


@scenario.check
def addresses_follow(run: Run) -> None:
    base = {(a, t) for a, t in expected().values()}
    v4 = ipaddress.IPv6Address("::ffff:10.0.9.1")
    v6 = ipaddress.IPv6Address("2001:db8::1")
    added = base | {(a, t) for a in (v4, v6) for t in ("RoCEv1", "RoCEv2")}
    same_entries(kernel_gids(run, "gids-added"), added)
    same_entries(kernel_gids(run, "gids-removed"), base)


@scenario.check
def link_down_up(run: Run) -> None:
    vm = run.vm("a")
    vm.step("port-down").expect(r"^1: DOWN$")
    vm.step("port-up").expect(r"^4: ACTIVE$")
    log = vm.step("log")
    log.expect(r"ferroce0: port 1 down")
    log.expect(r"ferroce0: port 1 active")
    # ib_core's cache is a consumer of the events: it logs the state it was told.
    down = log.expect(r"ferroce0: Port: 1 Link DOWN")
    if not re.search(r"ferroce0: Port: 1 Link ACTIVE", log.output[down.end():]):
        raise CheckFailed("no IB_EVENT_PORT_ACTIVE reached ib_core after the link came back")


@scenario.check
def nic_port_down_up(run: Run) -> None:
    vm = run.vm("a")
    vm.step("nic-port-down").expect(r"^1: DOWN$")
    vm.step("nic-port-up").expect(r"^4: ACTIVE$")


@scenario.check
def msix_interrupts(run: Run) -> str:
    out = run.vm("a").step("interrupts").output
    lines = [line for line in out.splitlines() if "PCI-MSIX" in line or "MSI" in line]
    counts = [int(line.split()[1]) for line in lines if len(line.split()) > 1 and line.split()[1].isdigit()]
    if not counts or sum(counts) == 0:
        raise CheckFailed(f"no MSI-X interrupts counted for ferroce:\n{out}")
    return f"{len(counts)} vectors, {sum(counts)} interrupts"


@scenario.check
def device_fatal_reaches_ib_core(run: Run) -> None:
    step = run.vm("a").step("fatal")
    step.expect(r"device fatal error 4 \(injected\); the device stopped")
    step.expect(r"ferroce0: device fatal error reported to ib_core")


@scenario.check
def unloads(run: Run) -> None:
    run.vm("a").step("rmmod").ok()
