# SPDX-License-Identifier: GPL-2.0
"""RDMA between VMs on different hosts (the multi-host* scenarios): NVMe over RDMA from VM a
to VM b as in nvme_rdma.py, preceded by ibv_rc_pingpong and ib_write_bw between them, and
ibv_rc_pingpong from ferroce to an rxe VM c across the hosts: from a over the bridges, or,
over UDP tunnels, from a fourth VM d whose NIC's tunnel ends at c's plain QEMU NIC (`-netdev
dgram` with inet addresses), which proves the two share one framing.

The hosts are network namespaces (hosts.py); the guest scripts are the same whatever carries
the frames (guest/lib.sh: across_hosts_client, across_hosts_server).
"""

from harness import CheckFailed, Run, Scenario, Vm
from nvme_rdma import scenario_for
from pingpong import pingpong, write_bw

HOSTS = {"a": "east", "b": "west", "c": "west", "d": "east"}


def scenario_across(wire: str, timeout: float) -> Scenario:
    """VM a on host east, VM b and rxe VM c on host west (and, over UDP, VM d on host east);
    ferroce ports on `wire` ("tap": the hosts' bridges and VXLAN; "udp": UDP tunnels, a's NIC
    to b's and d's to c's QEMU)."""
    scenario = scenario_for({"a": "ferroce", "b": "ferroce"}, mibs=16, hosts=HOSTS, wire=wire,
                            timeout=timeout)
    # A new list: the NVMe checks go over the two VMs they were made with.
    if wire == "tap":
        scenario.vms = [*scenario.vms, Vm("c", "10.0.0.3/24", host=HOSTS["c"])]
    else:  # c and d: a tunnel of their own
        scenario.vms = [*scenario.vms,
                        Vm("c", "10.0.0.3/24", host=HOSTS["c"], wire="udp", segment="rxe"),
                        Vm("d", "10.0.0.4/24", nic=True, host=HOSTS["d"], wire="udp", segment="rxe")]
    rxe_client = "a" if wire == "tap" else "d"

    @scenario.check
    def ports_on_their_wires(run: Run) -> str:
        """Each NIC's port has the wire it was given, in its host's namespace."""
        said = []
        for name in [vm.name for vm in scenario.vms if vm.nic]:
            status = run.vm(name).step("nic-wire").json("port")
            want = "tap:tap-" + name if wire == "tap" else "udp:"
            if not str(status.get("wire", "")).startswith(want):
                raise CheckFailed(f"VM {name}: the port's wire is {status.get('wire')!r}, not {want}...")
            said.append(f"{name}: {status['wire']}")
        return ", ".join(said)

    @scenario.check
    def rc_pingpong_across_hosts(run: Run) -> str:
        return pingpong(run, "rc-pingpong", ("a", "b"))

    @scenario.check
    def write_bw_across_hosts(run: Run) -> str:
        return write_bw(run, "write-bw", ("a", "b"), "a")

    @scenario.check
    def rc_pingpong_ferroce_to_rxe_across_hosts(run: Run) -> str:
        return pingpong(run, "rc-pingpong-rxe", (rxe_client, "c"))

    @scenario.check
    def frames_crossed_the_hosts(run: Run) -> str:
        """The frames went through the hosts' own networking: each host's uplink carried them
        and, over TAPs, its VXLAN tunnel and the VMs' TAPs. Loss is judged by wire-clean (the
        NICs' retransmits); a link's drops are shown (a TAP drops what the bridge floods to
        it before its VM opens it)."""
        hosts = (run.wire or {}).get("hosts")
        if not hosts:
            raise CheckFailed("no host report in wire.json")
        said = []
        for host, fabric in hosts.items():
            if "error" in fabric:
                raise CheckFailed(f"host {host}: {fabric['error']}")
            links = fabric["links"]
            names = ["uplink"] + (["vx0"] + [n for n in links if n.startswith("tap-")]
                                  if wire == "tap" else [])
            for name in names:
                if links.get(name, {}).get("tx", 0) < 500:
                    raise CheckFailed(f"host {host}: {name} sent {links.get(name)}: too few frames")
            # A UDP wire's socket has no back-pressure: a full receive buffer is a lost frame.
            if fabric["udp_rcvbuf_errors"]:
                raise CheckFailed(f"host {host}: {fabric['udp_rcvbuf_errors']} datagrams dropped "
                                  "by full UDP receive buffers")
            said.append(f"{host}: " + ", ".join(
                f"{n} {links[n]['tx']} out {links[n]['rx']} in {links[n]['dropped']} dropped"
                for n in names) + f", UDP receive buffer overflows {fabric['udp_rcvbuf_errors']}")
        return "\n".join(said)

    return scenario
