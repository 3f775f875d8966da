"""ferroce.ko loads, logs its line and unloads cleanly (no device present)."""

from harness import Run, Scenario, Vm

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24")], timeout=120)


@scenario.check
def load(run: Run) -> None:
    run.vm("a").step("modprobe").ok()
    run.vm("a").step("lsmod").expect(r"^ferroce ")


@scenario.check
def log_line(run: Run) -> None:
    run.vm("a").step("dmesg-load").expect(r"ferroce: RoCEv2 RDMA driver loaded")


@scenario.check
def unload(run: Run) -> None:
    vm = run.vm("a")
    vm.step("rmmod").ok()
    vm.step("dmesg-unload").expect(r"ferroce: RoCEv2 RDMA driver unloaded")
    vm.step("gone").ok()
