"""The NIC is each VM's converged port: IP traffic between two VMs passes through both NICs.

Each VM's virtio-net NIC connects to its ferroce-nic, not to the segment; the NIC steers RoCE
frames to its engine and passes everything else (ARP, IPv4, IPv6) both ways.
"""

from harness import Run, Scenario, Vm

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True), Vm("b", "10.0.0.2/24", nic=True)],
                    timeout=120)


@scenario.check
def ipv4_through_the_nics(run: Run) -> str:
    step = run.vm("a").step("ping")
    step.ok()
    m = step.expect(r"(\d+) packets transmitted, (\d+) packets received")
    return m.group(0)


@scenario.check
def ipv6_link_local_through_the_nics(run: Run) -> None:
    run.vm("a").step("ping6").ok()
