"""Two VMs with ferroce: rdma-core's example tools doing kernel-bypass I/O through
libferroce-rdmav34.so (WQEs into rings in the process's memory, doorbells through its own
doorbell page, CQEs polled in user memory, completion events through the kernel).

ibv_rc_pingpong with and without -e (completion channel events) at 1 B, 4 KiB, 64 KiB and
1 MiB, ibv_ud_pingpong, ibv_srq_pingpong and rping with 100 verified pings, all with the
RoCE v2 IPv4 GID (index 3).
"""

import re

from harness import CheckFailed, Run, Scenario, Vm
from pingpong import pingpong

VMS = [Vm("a", "10.0.0.1/24", nic=True), Vm("b", "10.0.0.2/24", nic=True)]
NAMES = [vm.name for vm in VMS]
scenario = Scenario(vms=VMS, timeout=120)
SIZES = [1, 4096, 65536, 1048576]


def sized(size: int) -> int:
    return 10 if size == 1048576 else 100


for _size in SIZES:
    def _rc(run: Run, size: int = _size) -> str:
        return pingpong(run, f"rc-pingpong-{size}", NAMES, size, sized(size))

    def _rc_events(run: Run, size: int = _size) -> str:
        return pingpong(run, f"rc-pingpong-events-{size}", NAMES, size, sized(size))

    _rc.__name__ = f"rc_pingpong_{_size}"
    _rc_events.__name__ = f"rc_pingpong_events_{_size}"
    scenario.check(_rc)
    scenario.check(_rc_events)


@scenario.check
def ud_pingpong(run: Run) -> str:
    return pingpong(run, "ud-pingpong", NAMES, 1024, 100)


@scenario.check
def srq_pingpong(run: Run) -> str:
    # ibv_srq_pingpong runs 16 QPs on one SRQ; each side counts every QP's messages.
    figures = []
    for vm in VMS:
        step = run.vm(vm.name).step("srq-pingpong")
        step.ok()
        m = step.expect(r"^(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec")
        step.expect(r"^100 iters in ")
        figures.append(f"{vm.name}: {m.group(0)}")
    return "\n".join(figures)


@scenario.check
def rping(run: Run) -> str:
    for vm in VMS:
        run.vm(vm.name).step("rping").ok()
    client = run.vm("a").step("rping")
    pings = re.findall(r"^ping data: rdma-ping-(\d+): ", client.output, re.M)
    if len(pings) != 100:
        raise CheckFailed(f"client printed {len(pings)} verified pings, expected 100")
    return "100 pings verified (-V)"


@scenario.check
def nic_counters(run: Run) -> str:
    """The NIC saw the traffic, and no doorbell of the processes was rejected."""
    lines = []
    for vm in VMS:
        counters = run.vm(vm.name).step("nic-counters").json("counters")
        if counters["bad_doorbells"] or counters["command_errors"] or counters["dma_errors"]:
            raise CheckFailed(f"{vm.name}: bad_doorbells {counters['bad_doorbells']}, "
                              f"command_errors {counters['command_errors']}, dma_errors {counters['dma_errors']}")
        lines.append(f"{vm.name}: " + " ".join(f"{k}={counters[k]}" for k in
                     ["doorbells", "wqe_fetches", "wqe_pushes", "cqes", "cq_arms", "interrupts",
                      "tx_packets", "rx_packets", "retransmits"]))
    return "\n".join(lines)
