"""Your own VM: make dist's kernel, modules and provider in a plain Debian trixie.

Two VMs boot a disk image made by mmdebstrap (dist/mkimage: systemd, udev, Debian's own
rdma-core 56.1 and ibverbs-utils, nothing of ferroce's) with out/dist's kernel, as a user's VM
would (-kernel, root=/dev/vda). Each installs out/dist's two packages with dpkg (the modules
and the provider), udev then loads ferroce for the NIC's PCI function, and Debian's
ibv_rc_pingpong runs between them.
"""

import re

from harness import CheckFailed, Run, Scenario, Share, Vm
from pingpong import pingpong

DIST = Share("dist", "/ferroce/out/dist")
VMS = [Vm("a", "10.0.0.1/24", nic=True, disk=True, shares=(DIST,)),
       Vm("b", "10.0.0.2/24", nic=True, disk=True, shares=(DIST,))]
NAMES = [vm.name for vm in VMS]
scenario = Scenario(vms=VMS, timeout=120)


@scenario.check
def plain_debian(run: Run) -> str:
    """systemd is init, the kernel is make dist's, rdma-core is Debian's and none of ours."""
    lines = []
    for name in NAMES:
        system = run.vm(name).step("system")
        system.ok()
        system.expect(r"^init: systemd$")
        system.expect(r"^debian: 13\.")
        kernel = system.expect(r"^kernel: (\S+)$").group(1)
        if not re.search(rf"^dist: .*\bvmlinuz-{re.escape(kernel)}\b", system.output, re.M):
            raise CheckFailed(f"{name} runs {kernel}, which is not out/dist's kernel:\n{system.output}")
        rdma = system.expect(r"^rdma-core (\S+)$").group(1)
        system.expect(r"^ferroce packages before: 0$")
        lines.append(f"{name}: systemd, kernel {kernel}, Debian's rdma-core {rdma}")
    return "\n".join(lines)


@scenario.check
def packages_install(run: Run) -> None:
    for name in NAMES:
        step = run.vm(name).step("install")
        step.ok()
        step.expect(r"^Setting up ibverbs-provider-ferroce ")
        step.expect(r"^Setting up ferroce-modules-")


@scenario.check
def udev_loads_the_driver(run: Run) -> None:
    for name in NAMES:
        run.vm(name).step("autoload").ok()


@scenario.check
def device(run: Run) -> str:
    """The device has the name Debian's udev rules give an RNIC by its PCI place, and its
    port is active on eth0, the virtio-net NIC whose MAC the NIC reported."""
    a = run.vm("a")
    name = a.step("name")
    name.ok()
    dev = name.expect(r"^device: (rocep\d+s\d+)$").group(1)
    name.expect(rf"^link {dev}/1 state ACTIVE .*netdev eth0")
    info = a.step("devinfo")
    info.ok()
    info.expect(rf"^hca_id:\s+{dev}$")
    info.expect(r"state:\s+PORT_ACTIVE")
    return f"{dev}: " + info.expect(r"link_layer:\s+\S+").group(0)


@scenario.check
def rc_pingpong(run: Run) -> str:
    return pingpong(run, "rc-pingpong", NAMES)
