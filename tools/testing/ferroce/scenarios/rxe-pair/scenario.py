"""Two VMs with rxe: GID table, rc/ud pingpong, rping, ib_write_bw, ib_send_lat.

Proves the harness with the kernel's software RoCE device until ferroce can
do the same itself. rxe in 7.3 is RoCE v2 only: GID 0 is the fe80:: EUI-64
of the MAC, GID 1 the IPv4-mapped address.
"""

import re

from harness import CheckFailed, Run, Scenario, Vm, eui64_link_local, mac_of
from perftest import NUM
from pingpong import pingpong

VMS = [Vm("a", "10.0.0.1/24"), Vm("b", "10.0.0.2/24")]
scenario = Scenario(vms=VMS, timeout=120)


@scenario.check
def port_active(run: Run) -> None:
    for vm in VMS:
        info = run.vm(vm.name).step("devinfo")
        info.ok()
        info.expect(r"hca_id:\s+rxe0")
        info.expect(r"state:\s+PORT_ACTIVE \(4\)")
        run.vm(vm.name).step("rdma-link").expect(r"link rxe0/1 state ACTIVE .*netdev eth0")


@scenario.check
def gid_table(run: Run) -> None:
    for index, vm in enumerate(VMS):
        info = run.vm(vm.name).step("devinfo")
        gids = {int(i): (gid, kind) for i, gid, kind in
                re.findall(r"GID\[\s*(\d+)\]:\s+(\S+), (RoCE v\d)", info.output)}
        want = {
            0: (eui64_link_local(mac_of(index)), "RoCE v2"),
            1: (f"::ffff:{vm.address}", "RoCE v2"),
        }
        if gids != want:
            raise CheckFailed(f"VM {vm.name}: GID table {gids}, expected {want}")


@scenario.check
def rc_pingpong(run: Run) -> str:
    return pingpong(run, "rc-pingpong", [vm.name for vm in VMS], 4096)


@scenario.check
def ud_pingpong(run: Run) -> str:
    return pingpong(run, "ud-pingpong", [vm.name for vm in VMS], 1024)


@scenario.check
def rping(run: Run) -> None:
    for vm in VMS:
        step = run.vm(vm.name).step("rping")
        step.ok()
    client = run.vm("a").step("rping")
    pings = re.findall(r"^ping data: rdma-ping-(\d+): ", client.output, re.M)
    if len(pings) != 10:
        raise CheckFailed(f"client printed {len(pings)} verified pings, expected 10")


def perftest(run: Run, name: str, pattern: str) -> str:
    for vm in VMS:
        run.vm(vm.name).step(name).ok()
    m = run.vm("a").step(name).expect(pattern)
    return f"{name}: " + " ".join(m.group(0).split())


@scenario.check
def write_bw(run: Run) -> str:
    # #bytes #iterations BW peak[MiB/sec] BW average[MiB/sec] MsgRate[Mpps]
    return perftest(run, "write-bw", rf"^\s*65536\s+\d+\s+{NUM}\s+{NUM}\s+{NUM}\s*$")


@scenario.check
def send_lat(run: Run) -> str:
    # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    return perftest(run, "send-lat", rf"^\s*8\s+\d+\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}.*$")
