"""Two VMs with ferroce: rdma-core's tools doing kernel-bypass I/O through libferroce-rdmav34.so."""

from harness import CheckFailed, Run, Scenario, Vm

VMS = [Vm("a", "10.0.0.1/24", nic=True), Vm("b", "10.0.0.2/24", nic=True)]
scenario = Scenario(vms=VMS, timeout=600)


def pingpong(run: Run, name: str, size: int) -> str:
    figures = []
    for vm in VMS:
        step = run.vm(vm.name).step(name)
        step.ok()
        m = step.expect(r"^(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec")
        iters = step.expect(r"^(\d+) iters in ")
        if int(m.group(1)) != size * int(iters.group(1)) * 2:
            raise CheckFailed(f"{vm.name}: {m.group(0)} does not match {iters.group(1)} iterations of {size} B")
        figures.append(f"{vm.name}: {m.group(0)}")
    return "\n".join(figures)


@scenario.check
def rc_pingpong(run: Run) -> str:
    return pingpong(run, "rc-pingpong", 4096)
