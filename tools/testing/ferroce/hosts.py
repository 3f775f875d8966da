# SPDX-License-Identifier: GPL-2.0
"""Hosts on one machine: each a network namespace with a Linux bridge, as each machine of a
cluster would have, joined by an underlay network and a VXLAN tunnel over it.

A VM placed on a host (``Vm(host=...)``) reaches its segment through the host's own networking,
not the harness's switch: a ferroce VM's NIC runs in the host's namespace with ``--wire
tap:NAME`` on the host's bridge (``wire="tap"``) or ``--wire udp:LOCAL,REMOTE`` to another
host's address (``wire="udp"``, a point-to-point tunnel, QEMU's ``-netdev dgram`` framing); a VM
without a NIC (rxe) gets QEMU's ``-netdev tap`` on the bridge, or QEMU's ``-netdev dgram`` with
inet addresses as its end of a UDP tunnel. Frames between hosts cross a
veth into the underlay namespace (a bridge of its own: the hosts' LAN, 10.99.0.0/24) and, for
the bridges, VXLAN VNI 42 with head-end replication to every other host. Nothing of it is
visible outside these namespaces, and all of it goes when the namespaces' holders are killed.

The same commands, run on two real machines, build the same fabric (Documentation/infiniband/
ferroce.rst, "Across hosts").
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import struct
import subprocess
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from harness import Vm

UNDERLAY = "10.99.0"
"""The hosts' own network: host i is UNDERLAY.(i + 1)."""
VNI = 42
VXLAN_PORT = 4789
UDP_WIRE_PORT = 7000
"""A UDP wire's port is UDP_WIRE_PORT + the VM's index."""
MTU = 9000
"""Bridges, TAPs and VXLAN carry jumbo frames; the underlay has room for VXLAN's 50 bytes."""
UNDERLAY_MTU = MTU + 100


class HostError(RuntimeError):
    pass


@dataclasses.dataclass
class Namespace:
    """A network namespace held by a sleeping process of its own."""

    name: str
    holder: subprocess.Popen

    @property
    def path(self) -> str:
        return f"/proc/{self.holder.pid}/ns/net"

    def prefix(self) -> list[str]:
        """A command line's prefix that runs it in the namespace."""
        return ["nsenter", f"--net={self.path}", "--"]

    def run(self, *cmd: str) -> str:
        proc = subprocess.run([*self.prefix(), *cmd], capture_output=True, text=True, timeout=20)
        if proc.returncode != 0:
            raise HostError(f"host {self.name}: {' '.join(cmd)}: "
                            f"{(proc.stderr or proc.stdout).strip()}")
        return proc.stdout


def _namespace(name: str) -> Namespace:
    holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"],
                              stdin=subprocess.DEVNULL, start_new_session=True)
    own = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + 10
    while True:
        try:
            if os.readlink(f"/proc/{holder.pid}/ns/net") != own:
                return Namespace(name, holder)
        except OSError:
            pass
        if holder.poll() is not None or time.monotonic() > deadline:
            raise HostError(f"host {name}: unshare --net failed (rc={holder.poll()}); "
                            "the harness needs CAP_SYS_ADMIN")
        time.sleep(0.01)


def _udp_rcvbuf_errors(ns: Namespace) -> int | None:
    """`RcvbufErrors` of the namespace's UDP statistics (/proc/net/snmp, per namespace)."""
    try:
        lines = [line.split() for line in ns.run("cat", "/proc/net/snmp").splitlines()
                 if line.startswith("Udp:")]
        return int(dict(zip(lines[0][1:], lines[1][1:]))["RcvbufErrors"])
    except (HostError, IndexError, KeyError, ValueError):
        return None


def tap_name(vm: "Vm") -> str:
    """The VM's TAP on its host's bridge (at most 15 bytes)."""
    return f"tap-{vm.name}"[:15]


TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000


def open_tap(ns: Namespace, name: str) -> int:
    """A file descriptor of TAP `name` of namespace `ns`, for a QEMU that runs outside it
    (`-netdev tap,fd=`): the TAP stays a port of the host's bridge, and QEMU stays in the
    harness's namespace, with the VMs' other NICs (the lab's ssh NIC). The TAP is opened from
    a thread that enters `ns` (a thread's network namespace is its own) and ends."""
    result: dict[str, int | OSError] = {}

    def attach() -> None:
        try:
            with open(ns.path) as f:
                os.setns(f.fileno(), os.CLONE_NEWNET)
            fd = os.open("/dev/net/tun", os.O_RDWR)
            try:
                fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI | IFF_VNET_HDR))
            except OSError:
                os.close(fd)
                raise
            result["fd"] = fd
        except OSError as e:
            result["error"] = e

    thread = threading.Thread(target=attach, name=f"tap {name}")
    thread.start()
    thread.join()
    if "error" in result:
        raise HostError(f"host {ns.name}: opening TAP {name}: {result['error']}")
    return int(result["fd"])


class Hosts:
    """The hosts of a scenario, built by `start` and torn down by `close`."""

    def __init__(self, vms: list["Vm"]) -> None:
        self.vms = vms
        self.names = list(dict.fromkeys(vm.host for vm in vms if vm.host))
        self.namespaces: dict[str, Namespace] = {}
        self.underlay: Namespace | None = None

    def address(self, host: str) -> str:
        return f"{UNDERLAY}.{self.names.index(host) + 1}"

    def start(self) -> None:
        if not self.names:  # no VM on a host: nothing to build
            return
        self.underlay = _namespace("underlay")
        u = self.underlay
        u.run("ip", "link", "add", "lan", "type", "bridge")
        u.run("ip", "link", "set", "lan", "up")
        for i, host in enumerate(self.names):
            ns = self.namespaces[host] = _namespace(host)
            # The host's uplink: a veth whose other end is a port of the underlay's bridge.
            u.run("ip", "link", "add", f"up{i}", "mtu", str(UNDERLAY_MTU), "type", "veth",
                  "peer", "name", "uplink", "netns", str(ns.holder.pid))
            u.run("ip", "link", "set", f"up{i}", "master", "lan", "up")
            ns.run("ip", "link", "set", "lo", "up")
            ns.run("ip", "addr", "add", f"{self.address(host)}/24", "dev", "uplink")
            ns.run("ip", "link", "set", "uplink", "mtu", str(UNDERLAY_MTU), "up")
            ns.run("ip", "link", "add", "br0", "mtu", str(MTU), "type", "bridge")
            ns.run("ip", "link", "add", "vx0", "mtu", str(MTU), "type", "vxlan", "id", str(VNI),
                   "local", self.address(host), "dstport", str(VXLAN_PORT), "dev", "uplink")
            ns.run("ip", "link", "set", "vx0", "master", "br0", "up")
            ns.run("ip", "link", "set", "br0", "up")
        for host in self.names:
            for other in self.names:
                if other != host:  # broadcast and unknown unicast go to every other host
                    self.namespaces[host].run("bridge", "fdb", "append", "00:00:00:00:00:00",
                                              "dev", "vx0", "dst", self.address(other))
        for vm in self.vms:
            if vm.host and vm.wire == "tap":
                ns = self.namespaces[vm.host]
                tap = tap_name(vm)
                ns.run("ip", "tuntap", "add", tap, "mode", "tap")
                ns.run("ip", "link", "set", tap, "mtu", str(MTU), "master", "br0", "up")

    def prefix(self, vm: "Vm") -> list[str]:
        """What a process of `vm` on its host runs under (nothing for a VM without a host)."""
        return self.namespaces[vm.host].prefix() if vm.host else []

    def udp_ends(self, vm: "Vm") -> tuple[tuple[str, int], tuple[str, int]]:
        """The (address, port) of `vm`'s end of its UDP tunnel, and of the other end."""
        peers = [p for p in self.vms if p.host and p.wire == "udp" and p.segment == vm.segment]
        if len(peers) != 2 or vm not in peers:
            raise HostError(f"segment {vm.segment}: a UDP tunnel joins two VMs, not "
                            f"{[p.name for p in peers]}")
        other = peers[1] if peers[0] is vm else peers[0]
        return ((self.address(vm.host), UDP_WIRE_PORT + self.vms.index(vm)),
                (self.address(other.host), UDP_WIRE_PORT + self.vms.index(other)))

    def wire(self, vm: "Vm") -> str:
        """The `--wire` of VM `vm`'s NIC."""
        if vm.wire == "tap":
            return f"tap:{tap_name(vm)}"
        (local, lport), (remote, rport) = self.udp_ends(vm)
        return f"udp:{local}:{lport},{remote}:{rport}"

    def open_tap(self, vm: "Vm") -> int:
        """A file descriptor of VM `vm`'s TAP on its host's bridge (`open_tap`)."""
        return open_tap(self.namespaces[vm.host], tap_name(vm))

    def netdev(self, vm: "Vm", tap_fd: int | None = None) -> list[str]:
        """QEMU's eth0 for a VM without a NIC: its TAP on its host's bridge (`tap_fd`, from
        `open_tap`), or its end of a UDP tunnel (`-netdev dgram` with inet addresses, the
        framing a NIC's udp wire shares; QEMU then runs in the host's namespace)."""
        if vm.wire == "tap":
            if tap_fd is None:
                raise HostError(f"VM {vm.name}: its TAP is passed to QEMU open (Hosts.open_tap)")
            return ["-netdev", f"tap,id=net0,fd={tap_fd}"]
        (local, lport), (remote, rport) = self.udp_ends(vm)
        return ["-netdev", f"dgram,id=net0,local.type=inet,local.host={local},local.port={lport},"
                           f"remote.type=inet,remote.host={remote},remote.port={rport}"]

    def report(self) -> dict:
        """Each host's links (bridge, tunnel, TAPs, uplink) with the frames they carried and
        dropped (`ip -s -j link`)."""
        out: dict = {}
        for host, ns in self.namespaces.items():
            try:
                links = json.loads(ns.run("ip", "-s", "-j", "link", "show"))
            except (HostError, ValueError) as e:
                out[host] = {"error": str(e)}
                continue
            out[host] = {
                # Datagrams the host's UDP sockets (a NIC's udp wire) dropped for want of room.
                "udp_rcvbuf_errors": _udp_rcvbuf_errors(ns),
                "links": {}}
            out[host]["links"] = {
                link["ifname"]: {
                    "rx": link["stats64"]["rx"]["packets"], "tx": link["stats64"]["tx"]["packets"],
                    "dropped": link["stats64"]["rx"]["dropped"] + link["stats64"]["tx"]["dropped"],
                } for link in links if link["ifname"] != "lo"}
        return out

    def close(self) -> None:
        for ns in [*self.namespaces.values(), *([self.underlay] if self.underlay else [])]:
            if ns.holder.poll() is None:
                ns.holder.kill()
            ns.holder.wait()
