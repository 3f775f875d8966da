"""ferroce in RDMA network namespaces, as containers use it.

VM a puts ib_core in exclusive mode (`rdma system set netns exclusive`) and moves ferroce0, with
its netdev, into the namespace "tenant" (`rdma dev set ferroce0 netns tenant`): a process there
sees the device and runs ibv_rc_pingpong; a process in the initial namespace no longer sees it,
and one that had it open when it moved loses its objects (ib_core's disassociation).
Deleting the namespace brings both home, where the device works again. VM b stays in shared mode
(the default): its eth0 moves into a namespace of its own, ferroce0 is seen in both, and the
process in the namespace is the server of both pingpongs.
"""

import re

from harness import CheckFailed, Run, Scenario, Vm
from pingpong import pingpong

VMS = [Vm("a", "10.0.0.1/24", nic=True), Vm("b", "10.0.0.2/24", nic=True)]
NAMES = [vm.name for vm in VMS]
scenario = Scenario(vms=VMS, timeout=120)


def lists_device(text: str) -> bool:
    return re.search(r"^\d+: ferroce0:|^\s+ferroce0\s", text, re.M) is not None


@scenario.check
def modes(run: Run) -> str:
    a, b = run.vm("a"), run.vm("b")
    a.step("exclusive").ok()
    a.step("mode").expect(r"netns exclusive")
    b.step("mode").expect(r"netns shared")
    return "a: exclusive, b: shared"


@scenario.check
def device_moves_with_its_netdev(run: Run) -> str:
    """Exclusive mode: in its namespace, ferroce0 has eth0 as its netdev and its GIDs again."""
    a = run.vm("a")
    for step in ["netns-add", "move-netdev", "tenant-net"]:
        a.step(step).ok()
    inside = a.step("tenant-device")
    inside.ok()
    link = inside.expect(r"^link ferroce0/1 state ACTIVE .*netdev eth0.*$")
    if not lists_device(inside.output.split("link ferroce0/1", 1)[1]):
        raise CheckFailed(f"ibv_devices in the namespace does not list ferroce0:\n{inside.output}")
    return link.group(0)


@scenario.check
def moves_from_under_a_process(run: Run) -> str:
    """A process held ferroce0 open (a QP of its own) when it moved: the move went on, and
    the process's objects were taken from it (ib_core's disassociation of its context)."""
    a = run.vm("a")
    held = a.step("holder-open")
    held.ok()
    held.expect(r"comm ibv_rc_pingpong")
    a.step("move-device").ok()
    left = a.step("holder-objects")
    left.ok()
    counts = left.expect(r"^\d+: ferroce0: .*$")
    if "ibv_rc_pingpong" in left.output:
        raise CheckFailed(f"the process's objects outlived the move:\n{left.output}")
    # It was still there to be killed (SIGTERM, 143): it lost its objects, not its life.
    if not re.search(r"^=== holder exited: rc=143$", a.output, re.M):
        raise CheckFailed("the process that held ferroce0 was gone before it was killed: "
                          + "; ".join(re.findall(r"^=== holder exited: .*$", a.output, re.M)))
    return counts.group(0)


@scenario.check
def hidden_outside_in_exclusive_mode(run: Run) -> None:
    a = run.vm("a")
    outside = a.step("outside-device")
    outside.ok()
    outside.expect(r"^\s+device\s+node GUID")  # ibv_devices ran, and listed nothing of ours
    if "ferroce0" in outside.output:
        raise CheckFailed(f"the initial namespace still sees ferroce0:\n{outside.output}")
    attempt = a.step("outside-pingpong")
    if attempt.rc == 0:
        raise CheckFailed("ibv_rc_pingpong found ferroce0 outside its namespace")
    attempt.expect(r"IB device ferroce0 not found")


@scenario.check
def shared_mode_seen_everywhere(run: Run) -> None:
    b = run.vm("b")
    for step in ["netns-add", "move-netdev", "tenant-net"]:
        b.step(step).ok()
    for step in ["tenant-device", "outside-device"]:
        seen = b.step(step)
        seen.ok()
        seen.expect(r"^\d+: ferroce0: ")
        if not lists_device(seen.output.split("ferroce0:", 1)[1]):
            raise CheckFailed(f"{step}: ibv_devices does not list ferroce0:\n{seen.output}")


@scenario.check
def pingpong_between_namespaces(run: Run) -> str:
    return pingpong(run, "tenant-pingpong", NAMES)


@scenario.check
def home_when_the_namespace_ends(run: Run) -> str:
    """`ip netns del`: ferroce0 and eth0 return to the initial namespace, and work there."""
    a = run.vm("a")
    a.step("netns-del").ok()
    home = a.step("home")
    home.ok()
    home.expect(r"^link ferroce0/1 .*netdev eth0")
    a.step("home-net").ok()
    a.step("home-gid").ok()
    return pingpong(run, "home-pingpong", NAMES)


@scenario.check
def nic_counters(run: Run) -> str:
    lines = []
    for name in NAMES:
        counters = run.vm(name).step("nic-counters").json("counters")
        bad = {k: counters[k] for k in ["bad_doorbells", "command_errors", "dma_errors"] if counters[k]}
        if bad:
            raise CheckFailed(f"{name}: {bad}")
        lines.append(f"{name}: doorbells={counters['doorbells']} cqes={counters['cqes']} "
                     f"retransmits={counters['retransmits']}")
    return "\n".join(lines)


@scenario.check
def unloads(run: Run) -> None:
    run.vm("a").step("rmmod").ok()
