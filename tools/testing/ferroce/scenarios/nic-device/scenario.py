"""A guest sees the ferroce-nic PCI function and its BAR0 traps to the NIC.

No driver is bound: the guest pokes BAR0 through sysfs with ferroce-bar, and
the host reads the NIC's own counters (over the host-control line) to see
that every write arrived.
"""


from harness import CheckFailed, Run, Scenario, Vm

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True)], timeout=120)

WRITES = 10


def counters(run: Run, step: str) -> dict:
    return run.vm("a").step(step).json("counters")


@scenario.check
def pci_identity(run: Run) -> None:
    ids = run.vm("a").step("sysfs-ids")
    ids.ok()
    ids.expect(r"^vendor=0x1234$")
    ids.expect(r"^device=0xfe01$")
    ids.expect(r"^class=0x020700$")


@scenario.check
def identification_register(run: Run) -> None:
    run.vm("a").step("reg-id").expect(r"^0x45435246$")
    run.vm("a").step("reg-version").expect(r"^0x00010004$")  # REG_IF_VERSION: interface 1.4


@scenario.check
def bar_writes_reach_the_nic(run: Run) -> str:
    vm = run.vm("a")
    vm.step("writes").ok()
    vm.step("scratch").expect(rf"^0x0*{WRITES:x}$")
    before = counters(run, "counters-before")
    after = counters(run, "counters-after")
    key = "mmio_writes"
    if key not in after:
        raise CheckFailed(f"no {key} in the NIC counters: {sorted(after)}")
    grew = after[key] - before[key]
    if grew != WRITES:
        raise CheckFailed(f"{key} grew by {grew}, expected {WRITES}")
    return f"{key}: {before[key]} -> {after[key]}"
