"""A NIC with the fewest MSI-X vectors it offers (2): EQ 0 and EQ 1, no completion EQ."""

from harness import CheckFailed, Run, Scenario, Vm

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, nic_args=["--msix-vectors", "2"])],
                    timeout=120)


@scenario.check
def registered_with_two_vectors(run: Run) -> str:
    vm = run.vm("a")
    vm.step("modprobe").ok()
    vm.step("rdma-link").expect(r"link ferroce0/1 state ACTIVE .*netdev eth0")
    eqs = vm.step("nic-objects").json("eqs")
    if sorted((e["eqn"], e["vector"]) for e in eqs) != [(0, 0), (1, 1)]:
        raise CheckFailed(f"EQs and vectors {eqs}, expected EQ 0 on vector 0 and EQ 1 on vector 1")
    lines = [line.split() for line in vm.step("interrupts").output.splitlines() if "ferroce" in line]
    counts = [int(f[1]) for f in lines if len(f) > 1 and f[1].isdigit()]
    # Vector 1 (commands) must have fired: probe and GID programming wait for its events.
    if len(counts) != 2 or counts[1] == 0:
        raise CheckFailed(f"expected two ferroce vectors, the command one with interrupts: {lines}")
    vm.step("rmmod").ok()
    return f"interrupts per vector: {counts}"
