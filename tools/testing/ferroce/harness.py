# SPDX-License-Identifier: GPL-2.0
"""Boot ferroce test VMs on one Ethernet segment and check what they print.

A scenario is a directory under scenarios/ with a ``scenario.py`` that
declares its VMs and its checks, and one shell script per VM (``<vm>.sh``)
that runs inside that VM (see guest/init and guest/lib.sh). The harness

* wires the VMs' virtio-net NICs (or ferroce NIC ports) of a segment
  together over unix datagram sockets (QEMU's ``-netdev dgram`` framing: one
  Ethernet frame per datagram): two of them by a cable, straight to each
  other, more through an L2 learning switch,
* boots them with guest RAM in a shared memfd (what the vfio-user NIC needs),
* keeps two streams per VM apart: what the guest's init and the scenario
  script print (the steps the checks parse) on a virtio console, hvc0, into
  ``<vm>.log``, and the kernel's messages on the serial console, ttyS0, into
  ``<vm>.kernel.log``, so that no printk lands in the middle of a step,
* waits for each to report ``=== FERROCE-EXIT rc=N`` on its output,
  killing the lot when the scenario's timeout passes,
* and hands both streams to the checks.

Runs inside the toolchain root, where qemu-system-x86_64 and cpio live.
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import hashlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import usage
from hosts import Hosts
from nics import ctl_reply, die_with_parent as _die_with_parent, mac_of, second_mac_of, start_nic


class Switch:
    """An L2 learning switch over unix datagram sockets.

    Port ``i`` binds ``<dir>/<name>.switch`` and sends to ``<dir>/<name>.port``,
    which is where the attached QEMU netdev (or NIC model) binds.

    Like a data-centre switch carrying RoCE (deep buffers, PFC), it does not drop
    a frame because its receiver is busy: a peer socket's queue is short
    (``net.unix.max_dgram_qlen``, 10 by default), so frames it cannot take now
    wait in the egress port's buffer, up to ``EGRESS_FRAMES``, and go out in
    order once the peer reads. Beyond that a frame is lost to congestion
    (``congested``, which a fault-free run never sees); towards a peer that is
    not there (a VM not up yet) it is lost as on an unplugged wire
    (``unplugged``).

    A ``mirror`` port (a switch's SPAN port, where an analyser or an eavesdropper sits) gets
    a copy of every frame the switch forwards between other ports. What a mirror port cannot
    take is dropped and counted apart (``mirror_dropped``): never congestion.
    """

    EGRESS_FRAMES = 4096

    def __init__(self, directory: Path, names: list[str], mirrors: tuple[str, ...] = ()) -> None:
        self.mirrors = mirrors
        self.mirror_dropped = 0
        self.ports: dict[str, socket.socket] = {}
        self.peers: dict[str, str] = {}
        self.fdb: dict[bytes, str] = {}
        self.backlog: dict[str, collections.deque[bytes]] = {}
        self.frames = 0
        self.cpu_seconds = 0.0
        """The CPU time of the switch's thread, once it has stopped."""
        self.congested = 0
        self.unplugged = 0
        self._selector = selectors.DefaultSelector()
        self._stop_r, self._stop_w = os.pipe()
        for name in names:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind(str(directory / f"{name}.switch"))
            sock.setblocking(False)
            self.ports[name] = sock
            self.peers[name] = str(directory / f"{name}.port")
            self.backlog[name] = collections.deque()
            self._selector.register(sock, selectors.EVENT_READ, name)
        self._selector.register(self._stop_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name="switch", daemon=True)

    def switch_path(self, name: str) -> str:
        return self.ports[name].getsockname()

    def port_path(self, name: str) -> str:
        return self.peers[name]

    def start(self) -> None:
        self._thread.start()

    def _send(self, name: str, frame: bytes) -> None:
        backlog = self.backlog[name]
        if name in self.mirrors:
            try:
                self.ports[name].sendto(frame, self.peers[name])
            except (BlockingIOError, FileNotFoundError, ConnectionRefusedError):
                self.mirror_dropped += 1
            return
        if backlog:
            if len(backlog) >= self.EGRESS_FRAMES:
                self.congested += 1
            else:
                backlog.append(frame)
            return
        try:
            self.ports[name].sendto(frame, self.peers[name])
        except BlockingIOError:
            # The peer's queue is full: wait for it to read (EVENT_WRITE).
            backlog.append(frame)
            self._selector.modify(self.ports[name], selectors.EVENT_READ | selectors.EVENT_WRITE, name)
        except (FileNotFoundError, ConnectionRefusedError):
            self.unplugged += 1  # that VM is not up (yet): a lost frame, as on an unplugged wire

    def _flush(self, name: str) -> None:
        """Sends what waits for port NAME until its peer's queue is full again."""
        backlog, sock = self.backlog[name], self.ports[name]
        while backlog:
            try:
                sock.sendto(backlog[0], self.peers[name])
            except BlockingIOError:
                return
            except (FileNotFoundError, ConnectionRefusedError):
                self.unplugged += len(backlog)
                backlog.clear()
                break
            backlog.popleft()
        self._selector.modify(sock, selectors.EVENT_READ, name)

    def _run(self) -> None:
        try:
            self._forward()
        finally:
            self.cpu_seconds = time.thread_time()

    def _forward(self) -> None:
        while True:
            for key, events in self._selector.select():
                ingress = key.data
                if ingress is None:
                    return
                if events & selectors.EVENT_WRITE:
                    self._flush(ingress)
                if not events & selectors.EVENT_READ:
                    continue
                try:
                    frame = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                if len(frame) < 14:
                    continue
                self.frames += 1
                dst, src = frame[0:6], frame[6:12]
                if not src[0] & 1:
                    self.fdb[src] = ingress
                egress = None if dst[0] & 1 else self.fdb.get(dst)
                if egress is not None:
                    if egress != ingress:
                        self._send(egress, frame)
                        for mirror in self.mirrors:
                            if mirror not in (ingress, egress):
                                self._send(mirror, frame)
                    continue
                for name in self.ports:
                    if name != ingress:
                        self._send(name, frame)

    def close(self) -> None:
        os.write(self._stop_w, b"x")
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for sock in self.ports.values():
            sock.close()
        os.close(self._stop_r)
        os.close(self._stop_w)


class Cable:
    """A segment of two ports is a cable, not a switch: each end sends straight to the other's
    socket (``<dir>/<name>.port``, where its QEMU netdev or NIC binds). No frame waits for a
    forwarding thread on the way, which under TCG, with the VMs' vCPUs taking the CPUs, is
    scheduled late: through the switch, a one-way trip took 4 ms and at times 20 ms, long
    enough to make RC retransmit. A full receiver queue blocks or back-pressures the sender (the
    NIC model's sockets block; QEMU queues the packet), so a cable loses nothing."""

    cpu_seconds = 0.0
    """No thread: the ends send to each other."""

    def __init__(self, directory: Path, names: list[str]) -> None:
        assert len(names) == 2, names
        self.peers = {names[0]: names[1], names[1]: names[0]}
        self.directory = directory

    def port_path(self, name: str) -> str:
        return str(self.directory / f"{name}.port")

    def switch_path(self, name: str) -> str:
        """Where port `name` sends: the other end."""
        return self.port_path(self.peers[name])

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass


class ShmCable:
    """A segment of two ferroce NICs' ports may be a shared-memory cable (`ferroce-nic --wire
    shm:MEMFD,NOTIFY,SIDE`, port/shm.rs): a memfd both NICs map (each sizes it, so that its
    layout is the NIC's alone) and a datagram socketpair, one end each, for wake-ups, handed to
    them as descriptors. No thread carries a frame and no system call is made per batch; a NIC
    that stops reading makes its peer lose frames (counted in its port's losses), never wait."""

    cpu_seconds = 0.0
    """No thread: the NICs pass frames to each other."""

    def __init__(self, names: list[str]) -> None:
        assert len(names) == 2, names
        self.memfd = os.memfd_create("ferroce-cable")  # close-on-exec: only its NICs get it
        ends = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.ends = dict(zip(names, ends))
        self.sides = dict(zip(names, "ab"))

    def wire(self, name: str) -> tuple[str, tuple[int, int]]:
        """NIC `name`'s `--wire` and the descriptors it must inherit."""
        end = self.ends[name].fileno()
        return f"shm:{self.memfd},{end},{self.sides[name]}", (self.memfd, end)

    def start(self) -> None:
        pass

    def close(self) -> None:
        for end in self.ends.values():
            end.close()
        if self.memfd >= 0:
            os.close(self.memfd)
            self.memfd = -1


def segment_for(directory: Path, names: list[str], mirrors: tuple[str, ...] = (),
                nics: frozenset[str] = frozenset()) -> "Switch | Cable | ShmCable":
    """Two ports are joined by a cable, more (or a mirror port) by a switch. A cable between
    two ports of `nics` (the ferroce NICs that are to share memory) is a shared-memory one."""
    if len(names) == 2 and not mirrors:
        if set(names) <= nics:
            return ShmCable(names)
        return Cable(directory, names)
    return Switch(directory, names, mirrors)


def shm_cables(scenario_wants: bool) -> bool:
    """Whether NIC-to-NIC cables are shared memory: the scenario's `shm_cables`, or every
    scenario's with FERROCE_CABLE=shm (to run them all on it)."""
    return scenario_wants or os.environ.get("FERROCE_CABLE", "") == "shm"


@dataclasses.dataclass(frozen=True)
class Share:
    """A directory a VM mounts over virtio-9p, by its tag (`share_args`)."""

    tag: str
    path: str
    """In the toolchain root, where QEMU runs."""
    readonly: bool = True


@dataclasses.dataclass
class Vm:
    """A VM of a scenario: its name, IPv4 address/prefix and options."""

    name: str
    ip: str
    mtu: int = 1500
    gateway: str | None = None
    memory_mib: int = 1024
    nic: bool = False
    """Attach a ferroce-nic function (vfio-user-pci)."""
    nic_args: list[str] = dataclasses.field(default_factory=list)
    """Extra `ferroce-nic serve` flags, e.g. ["--bogus-version"]."""
    capture: bool = True
    """Keep the NIC port's packet capture, `<vm>.pcapng` (a soak's would run to gigabytes)."""
    trace: bool = True
    """Keep the NIC's JSON-lines trace, `<vm>.nic-trace.jsonl` (an event per doorbell, DMA and
    frame: the benchmarks measure the NIC without it)."""
    cmdline: str = ""
    """Extra kernel parameters, e.g. of built-in modules ("nvmet_rdma.use_srq=1")."""
    segment: str = "lan"
    """The Ethernet segment (switch) of eth0."""
    toolroot: bool = False
    """Share the toolchain root read-only over virtio-9p (tag "toolroot"), for big guest
    userspace such as python3 and pyverbs (guest/lib.sh: toolroot_setup)."""
    shares: tuple["Share", ...] = ()
    """More directories shared over virtio-9p (the lab's guest root, its state, the user's
    working directory)."""
    ssh_forward: int | None = None
    """A port of 127.0.0.1 (in the harness's network namespace) forwarded to the guest's sshd
    through a user-mode NIC of its own (`ssh_forward_args`): the lab's way in."""
    mirror: bool = False
    """eth0 is its switch's mirror port: it sees a copy of every frame between the others."""
    second: tuple[str, str] | None = None
    """(segment, address/prefix) of a second virtio-net NIC, eth1; the VM then routes IPv4
    between its two segments."""
    boot_tests: bool = False
    """Run the kernel's built-in KUnit suites at boot (the Rust abstractions' and the kernel
    crate's examples: the kunit scenario). Other VMs run only ferroce's suites, at module load
    (`kunit.filter_glob=ferroce*`): 369 cases at each boot took 0.5 s, 4 s on the debug kernel."""
    host: str | None = None
    """The host (a network namespace with a bridge, `hosts.Hosts`) the VM's port is on; its
    segment is then that of the hosts' bridges and tunnels, not the harness's switch."""
    wire: str = "tap"
    """On a host: the NIC port's `--wire` kind, "tap" (the host's bridge, VXLAN between hosts)
    or "udp" (a UDP tunnel to the other VM of its segment)."""
    function_of: str | None = None
    """The VM (earlier in the scenario, with `nic`) whose NIC this VM's ferroce function is a
    virtual function of (`ferroce-nic --functions`): the VM's function and its virtio-net are
    on that NIC's port and switch, and it has no NIC of its own."""
    qemu_cpus: str = ""
    """Run QEMU (its vCPU and its other threads) on these host CPUs only (`taskset -c` list,
    "0" or "0-2,5"): the others stay free for a NIC's poller (`ferroce-nic --poll-cpu`)."""
    vf_limits: str = ""
    """With `function_of`: the VF's limits (`qp=N,cq=N,mr=N,srq=N,pages=N,db_rate=N`)."""
    disk: bool = False
    """Boot the machine's disk image (`Machine.disk_image`: a plain Debian with systemd,
    dist/mkimage) instead of our initramfs, root=/dev/vda with snapshot=on, so nothing the VM
    writes lasts. Its systemd runs the scenario's script (guest/disk-run) from a 9p share
    "scenario" holding lib.sh and the scenario's files: the dist scenario's user VM."""
    steers_nic: bool = False
    """Its guest may make its NIC misbehave over the host-control line (`STEERING_COMMANDS`:
    stall, hang, lie, port down, fatal, and as a PF its VFs): for the scenarios that test the
    driver against a broken device. Any guest may read its own NIC, mark its trace and inject
    wire faults into its own function (`GUEST_NIC_COMMANDS`)."""

    @property
    def address(self) -> str:
        return self.ip.split("/")[0]


@dataclasses.dataclass
class Step:
    name: str
    rc: int | None
    output: str
    tries: int = 1
    secs: float | None = None
    """How long the step took, from its end marker ("secs=")."""
    waited: float = 0.0
    """Of that, what a `retry` spent before its last try ("waited="): failed tries, pauses."""

    def ok(self) -> None:
        if self.rc != 0:
            tail = "\n".join(self.output.splitlines()[-15:])
            raise CheckFailed(f"step {self.name} exited with rc={self.rc}:\n{tail}")

    def json(self, key: str | None = None):
        """The JSON object the step printed (a `hostctl nic ...` reply), or its `key`."""
        text = self.output
        try:
            value = json.loads(text[text.find("{"):text.rfind("}") + 1])
            return value if key is None else value[key]
        except (ValueError, KeyError) as e:
            raise CheckFailed(f"step {self.name}: no JSON {key or 'object'} in {text!r}") from e

    def counters(self, needed: str) -> dict[str, int]:
        """The "name value" lines the step printed (lib.sh's `hw_counters`: the port's
        hw_counters in sysfs, the NIC's and the driver's); CheckFailed without `needed`."""
        values = {}
        for line in self.output.splitlines():
            m = re.fullmatch(r"(\w+) (\d+)", line.strip())
            if m:
                values[m.group(1)] = int(m.group(2))
        if needed not in values:
            raise CheckFailed(f"step {self.name}: no {needed} in hw_counters:\n{self.output}")
        return values

    def expect(self, pattern: str, flags: int = re.M) -> re.Match:
        match = re.search(pattern, self.output, flags)
        if not match:
            tail = "\n".join(self.output.splitlines()[-15:])
            raise CheckFailed(f"step {self.name}: no match for /{pattern}/ in:\n{tail}")
        return match


class CheckFailed(AssertionError):
    pass


STEP_BEGIN = re.compile(r"^=== STEP (\S+) begin\s*$", re.M)
STEP_END = re.compile(r"^=== STEP (\S+) rc=(\d+)(?: tries=(\d+))?.*$", re.M)
# Both markers in one pass: begin lines, then end lines with their rc, tries and secs.
STEP_MARKER = re.compile(r"^=== STEP (\S+) (?:begin\s*$|rc=(\d+)(?: tries=(\d+))?(.*)$)", re.M)
STEP_SECS = re.compile(r"\bsecs=([\d.]+)")
STEP_WAITED = re.compile(r"\bwaited=([\d.]+)")
EXIT = re.compile(r"^=== FERROCE-EXIT rc=(\d+)", re.M)


def parse_steps(text: str) -> dict[str, Step]:
    """Every step of a VM's output (guest/lib.sh's markers), in one pass over the text.

    A step's output runs from its begin marker to the first end marker of the same name after
    it; a step without one has rc None and the rest of the text. When a name is used twice,
    its last run counts.
    """
    open_: dict[str, list[int]] = {}  # name -> output start of each begin not ended yet
    done: dict[int, Step] = {}  # output start -> the step begun there
    for m in STEP_MARKER.finditer(text):
        name = m.group(1)
        if m.group(2) is None:
            open_.setdefault(name, []).append(m.end())
            continue
        secs, waited = STEP_SECS.search(m.group(4)), STEP_WAITED.search(m.group(4))
        for start in open_.pop(name, []):
            done[start] = Step(name, int(m.group(2)), text[start:m.start()], int(m.group(3) or 1),
                               float(secs.group(1)) if secs else None,
                               float(waited.group(1)) if waited else 0.0)
    for name, starts in open_.items():
        for start in starts:
            done[start] = Step(name, None, text[start:])
    return {step.name: step for _, step in sorted(done.items())}


@dataclasses.dataclass
class VmResult:
    """What a VM left: its output (hvc0: init's and the script's, with the steps) and its
    kernel log (ttyS0: the kernel's console, loglevel <= 4, and QEMU's own messages)."""

    vm: Vm
    output: str
    exit_rc: int | None
    qemu_rc: int | None
    kernel_log: str = ""

    def __post_init__(self) -> None:
        self._steps = parse_steps(self.output)  # once: checks look steps up by name

    @property
    def console(self) -> str:
        """The output stream (the name from when it shared the serial console with the kernel)."""
        return self.output

    def steps(self) -> dict[str, Step]:
        return dict(self._steps)

    def step(self, name: str) -> Step:
        step = self._steps.get(name)
        if step is None:
            raise CheckFailed(f"VM {self.vm.name} never ran step {name}")
        if step.rc is None:
            tail = "\n".join(step.output.splitlines()[-15:])
            raise CheckFailed(f"VM {self.vm.name}: step {name} never finished:\n{tail}")
        return step

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output.splitlines()[-lines:])

    def kernel_tail(self, lines: int = 15) -> str:
        return "\n".join(self.kernel_log.splitlines()[-lines:])


# Kernel messages only: they carry a printk timestamp (CONFIG_PRINTK_TIME).
KERNEL_TROUBLE = re.compile(r"^\[\s*\d+\.\d+\] .*\b(BUG:|WARNING:|Oops|Kernel panic|KASAN:|UBSAN:|"
                            r"new suspected memory leaks|"
                            r"possible recursive locking|circular locking|"
                            r"sleeping function called from invalid context|general protection fault|"
                            r"blocked for more than \d+ seconds)")


# Lockdep reports of upstream code that ferroce takes no part in, by the two locks they name;
# a report is excused only if it names both and no ferroce module. Each has its reason.
UPSTREAM_LOCKDEP = [
    # nvmet's configfs teardown destroys the port's rdma_cm ID (handler_mutex) under
    # nvmet_config_sem, which nvmet_execute_io_connect takes inside rdma_cm's handler: the
    # debug kernel reports it on any RDMA device (nvmet-rdma, Linux 7.3).
    ("nvmet_config_sem", "id_priv->handler_mutex"),
]
LOCKDEP_END = re.compile(r"^\[\s*\d+\.\d+\] (stack backtrace:|-+\[ end trace)")


def excused_lockdep(lines: list[str], start: int) -> tuple[str, str] | None:
    """The `UPSTREAM_LOCKDEP` entry the lockdep report at `lines[start]` is, if any."""
    report = []
    for line in lines[start:start + 200]:
        report.append(line)
        if LOCKDEP_END.search(line):
            break
    text = "\n".join(report)
    if re.search(r"\[ferroce(_kverbs_test)?\]", text):
        return None
    return next((pair for pair in UPSTREAM_LOCKDEP if all(lock in text for lock in pair)), None)


def kernel_trouble(result: VmResult) -> list[str]:
    """The kernel messages of a VM that mean trouble (the kernel-clean check), each once.

    Read from its kernel log (the console: loglevel <= 4, so warnings, KASAN, lockdep and
    WARN splats) and from its output, where steps that print dmesg put messages of every
    level (kmemleak reports at KERN_INFO, say): between them, what the shared console held.
    A lockdep report of upstream code alone (`UPSTREAM_LOCKDEP`) is not trouble.
    """
    seen: dict[str, None] = {}
    for text in (result.kernel_log, result.output):
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if KERNEL_TROUBLE.search(line) and not ("circular locking" in line and excused_lockdep(lines, i)):
                seen.setdefault(line.strip())
    return list(seen)


def trouble_report(result: VmResult, lines: int = 40) -> str:
    """The first kernel report of a VM, from its first line that means trouble
    (`kernel_trouble`) and up to `lines` lines after it, so that a failed kernel-clean check
    carries the report itself (its call trace) where only the output of the run is kept, as in
    CI. Empty if there is none."""
    for text in (result.kernel_log, result.output):
        log = text.splitlines()
        for i, line in enumerate(log):
            if KERNEL_TROUBLE.search(line) and not ("circular locking" in line and excused_lockdep(log, i)):
                return "\n".join(log[i:i + 1 + lines])
    return ""


class Run:
    """What a scenario run produced, as the checks see it."""

    def __init__(self, results: dict[str, VmResult], timed_out: bool, seconds: float,
                 log_dir: Path | None = None, wire: dict | None = None, slow: float = 1.0,
                 meter: usage.Meter | None = None, switch_cpu: float = 0.0) -> None:
        self.slow = slow
        """`Machine.slow` of the run: a check's bound on time is `bound * run.slow`."""
        self.results = results
        self.timed_out = timed_out
        self.seconds = seconds
        self.log_dir = log_dir
        self.wire = wire
        """`wire_report` at the end of the run (also `<log_dir>/wire.json`)."""
        self.usage = usage.usage_of(seconds, meter, switch_cpu,
                                    {name: list(r.steps().values()) for name, r in results.items()})
        """Where the run's time went: CPU of its processes, boot, waiting (`usage.Usage`)."""

    def vm(self, name: str) -> VmResult:
        return self.results[name]

    def pcap(self, name: str) -> Path:
        """The pcapng capture of VM `name`'s ferroce NIC port (`--pcap`)."""
        if self.log_dir is None:
            raise CheckFailed("no log directory: the capture is not available")
        path = self.log_dir / f"{name}.pcapng"
        if not path.exists():
            raise CheckFailed(f"VM {name}: no capture {path}")
        return path

    def nic_trace(self, name: str) -> list[dict]:
        """The JSON-lines trace of VM `name`'s ferroce NIC (`--trace`)."""
        if self.log_dir is None:
            raise CheckFailed("no log directory: the NIC trace is not available")
        path = self.log_dir / f"{name}.nic-trace.jsonl"
        try:
            lines = path.read_text().splitlines()
        except OSError as e:
            raise CheckFailed(f"VM {name}: no NIC trace ({e})") from e
        return [json.loads(line) for line in lines if line.strip()]


Check = Callable[[Run], None]


def wire_report(switches: dict[str, "Switch | Cable"], nic_ctls: dict[str, list[str]]) -> dict:
    """What the segments carried and lost: each switch's frames and losses, each NIC's engine
    counters (frames, retransmits, queue drops) and its port's losses. A NIC that does not
    answer (it died) has an "error"."""
    report: dict = {"switches": {}, "nics": {}}
    for segment, switch in switches.items():
        if isinstance(switch, Switch):
            report["switches"][segment] = {"frames": switch.frames, "congested": switch.congested,
                                           "unplugged": switch.unplugged,
                                           "mirror_dropped": switch.mirror_dropped}
    for name, ctl in nic_ctls.items():
        try:
            counters = ctl_reply(ctl, "counters")["counters"]
            port = ctl_reply(ctl, "status")["port"]
        except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
            report["nics"][name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        report["nics"][name] = {key: counters.get(key, 0) for key in (
            "tx_packets", "rx_packets", "retransmits", "timeouts", "rnr_resends", "queue_drops", "drops",
            "nak_retransmits")}
        report["nics"][name]["port_lost"] = port.get("lost", 0)
        report["nics"][name]["switched"] = port.get("switched", 0)
        if port.get("cable"):
            report["nics"][name]["cable"] = port["cable"]
    return report


def wire_clean(scenario: "Scenario", report: dict | None) -> tuple[bool, str]:
    """The implicit check of every scenario: nothing was lost on the wire. No switch lost a
    frame to congestion and, unless the scenario injects faults, no NIC queue dropped one and
    no requester sent a packet again because its peer reported a loss (`nak_retransmits`: a
    sequence NAK, an implied NAK, a gap in READ responses). Returns (passed, the figures).

    The other retransmits are shown, not judged: a timer expires when the peer's host was too
    busy to answer in time, which says how loaded the machine was, not that a frame was lost
    (and its peer answers the duplicates again). A frame really lost leaves a gap its receiver
    reports, or a drop counted where it happened."""
    if report is None:
        return True, "no wire report (the scenario did not run to its end)"
    problems, lines = [], []
    for segment, sw in report["switches"].items():
        lines.append(f"switch {segment}: {sw['frames']} frames, {sw['congested']} lost to "
                     f"congestion, {sw['unplugged']} to a port not up")
        if sw["congested"]:
            problems.append(f"switch {segment} lost {sw['congested']} frames to congestion")
    sent = retransmitted = 0
    for name, nic in report["nics"].items():
        if "error" in nic:
            lines.append(f"NIC {name}: {nic['error']}")
            continue
        sent += nic["tx_packets"]
        retransmitted += nic["retransmits"]
        # Frames sent again after an RNR NAK are the receiver's flow control, not loss.
        rnr = f", {nic['rnr_resends']} sent again after RNR NAKs" if nic.get("rnr_resends") else ""
        reported = nic.get("nak_retransmits", 0)
        lines.append(f"NIC {name}: {nic['tx_packets']} frames sent, {nic['retransmits']} "
                     f"retransmitted ({reported} after a reported loss, {nic['timeouts']} timer "
                     f"expiries){rnr}, {nic['queue_drops']} queue drops, {nic['port_lost']} lost by "
                     "the port"
                     + (f", {nic['switched']} switched to another function" if nic.get("switched") else ""))
        if cable := nic.get("cable"):
            # A shared-memory cable's slots come from a peer NIC of ours: a bad one is a
            # defect whether or not the scenario injects faults (those act in the engines).
            bad = cable["bad_indexes"] + cable["bad_lengths"]
            lines.append(f"    its shared-memory cable: {cable['wakeups']} wake-ups sent, {bad} bad slots "
                         f"({cable['bad_indexes']} indexes, {cable['bad_lengths']} lengths)")
            if bad:
                problems.append(f"NIC {name} skipped {bad} bad slots of its shared-memory cable")
        if not scenario.wire_judged:
            continue
        if nic["queue_drops"]:
            problems.append(f"NIC {name} dropped {nic['queue_drops']} frames: a queue was full")
        if reported:
            problems.append(f"NIC {name} sent {reported} packets again after its peer reported a "
                            "loss, in a fault-free run")
    if sent:
        lines.append(f"retransmitted {retransmitted} of {sent} frames ({100 * retransmitted / sent:.3f} %;"
                     " judged: only those after a reported loss)")
    for host, fabric in report.get("hosts", {}).items():
        if "error" in fabric:
            lines.append(f"host {host}: {fabric['error']}")
            continue
        lines.append(f"host {host}: " + ", ".join(
            f"{name} {link['tx']} out, {link['rx']} in, {link['dropped']} dropped"
            for name, link in fabric["links"].items())
            + f"; UDP receive buffer overflows {fabric['udp_rcvbuf_errors']}")
    if not scenario.wire_judged:
        why = scenario.unjudged_why or (
            "the scenario injects faults" if scenario.faults else "a benchmark judges no figure")
        lines.append(f"({why}: queue drops and retransmits are not judged)")
    return not problems, "\n".join(problems + lines)


class Scenario:
    """VMs, their scripts (scenarios/<name>/<vm>.sh) and the checks."""

    def __init__(self, vms: list[Vm], timeout: float = 600, needs_all_exit_zero: bool = True,
                 faults: bool = False, debug_lane: bool = False) -> None:
        self.vms = vms
        self.timeout = timeout
        self.needs_all_exit_zero = needs_all_exit_zero
        self.faults = faults
        self.debug_lane = debug_lane
        """Memory lifetime and DMA are what the scenario attacks: make check runs it on the
        debug kernel (KASAN, kmemleak, lockdep), and only there."""
        """The scenario loses frames or stalls a NIC on purpose: `wire_clean` only reports."""
        self.wire_judged = not faults
        """Whether `wire_clean` judges retransmits and queue drops (a benchmark only reports
        them: it judges no figure)."""
        self.unjudged_why = ""
        """Why `wire_judged` is off, if not for faults or a benchmark (a tool whose own races
        lose frames)."""
        self.files: dict[str, str] = {}
        """Files the scenario generates for its guests' /scenario, next to its directory's
        (a benchmark's scripts, made from its table)."""
        self.checks: list[tuple[str, Check]] = []
        self.shm_cables = False
        """A cable between two ferroce NICs is shared memory (`ShmCable`), not unix sockets."""
        self.name = "?"
        self.directory: Path | None = None

    def check(self, fn: Check) -> Check:
        self.checks.append((fn.__name__.replace("_", "-"), fn))
        return fn


DEBUG_SLOW = 3.0
"""How much slower the debug kernel (VARIANT=debug: KASAN, kmemleak, lockdep, under TCG) runs
scenarios than the default one: its `Machine.slow` unless vmtest is told otherwise."""


@dataclasses.dataclass
class Machine:
    """How VMs are booted: kernel, base initramfs pieces, accelerator."""

    kernel: Path
    initrds: list[Path]
    accel: str
    workdir: Path
    extra_cmdline: str = ""
    nic_binary: Path | None = None
    slow: float = 1.0
    """How much slower than the default kernel this one runs (the debug kernel's checkers):
    scenario timeouts, the guests' step timeouts (`ferroce_slow=`) and the checks' time bounds
    (`Run.slow`) scale with it."""
    disk_image: Path | None = None
    """The raw disk image that VMs with `Vm.disk` boot (vmtest --disk-image)."""
    disk_kernel: Path | None = None
    """The kernel they boot it with (vmtest --disk-kernel: make dist's), `kernel` if None."""

    def accel_args(self) -> list[str]:
        """The accelerator and CPU model. The CPU has no 5-level paging (la57=off): while
        Linux 7.3 identifies the boot CPU it clears its feature bits, LA57 with them, and an
        interrupt that comes then has KASAN judge the direct map by 4-level paging and report
        a wild access in every lock it takes (2 of 8 debug boots under load did)."""
        if self.accel == "kvm":
            return ["-accel", "kvm", "-cpu", "host,la57=off"]
        return ["-accel", "tcg", "-cpu", "max,la57=off"]


def host_tsc_khz() -> int | None:
    """The host's TSC rate; TCG guests see the host's TSC but cannot
    calibrate it without ACPI timers, so the command line tells them."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    m = re.search(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M)
    return int(float(m.group(1)) * 1000) if m else None


def clock_cmdline(accel: str) -> str:
    """What a guest's kernel is told about its clocks. Under TCG, a busy host can keep the
    timer interrupt from coming within the IO-APIC check's few ticks at boot, and the kernel
    then panics ("IO-APIC + timer doesn't work!", seen under load): no_timer_check skips
    that check, as cloud images do for VMs."""
    if accel != "tcg":
        return ""
    khz = host_tsc_khz()
    tsc = f"tsc_early_khz={khz} tsc=reliable " if khz else ""
    return tsc + "no_timer_check"


def make_cpio(directory: Path, out: Path) -> None:
    names = sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))
    with open(out, "wb") as f:
        subprocess.run(["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"], cwd=directory,
                       input="\n".join(names).encode(), stdout=f, check=True)


def eui64_link_local(mac: str) -> str:
    """The fe80:: address (and RoCE GID) derived from a MAC (RFC 4291 EUI-64)."""
    b = [int(x, 16) for x in mac.split(":")]
    b[0] ^= 0x02
    words = [b[0] << 8 | b[1], b[2] << 8 | 0xFF, 0xFE << 8 | b[3], b[4] << 8 | b[5]]
    return "fe80::" + ":".join(f"{w:x}" for w in words)


GUEST_NIC_COMMANDS: dict[str, Callable[[list[str]], bool]] = {
    "counters": lambda args: not args,
    "gids": lambda args: not args,
    "status": lambda args: not args,
    "objects": lambda args: not args,
    "memory": lambda args: not args,
    "cpu": lambda args: not args,
    "latency": lambda args: args in ([], ["reset"]),
    "trace": lambda args: len(args) == 2 and args[0] == "mark",
    # The NIC keeps each function's wire faults apart: these are the guest's own.
    "fault": lambda args: True,
}
"""What any guest may ask of its NIC over the host-control line (`hostctl nic ...`), by
command, with the arguments each takes: nothing names a host path (no `pcap`, no `trace
start`), another function (no `vf`) or the device's health."""

STEERING_COMMANDS = frozenset({"stall", "hang", "bogus-version", "lie", "port", "fatal", "vf", "functions"})
"""What only a VM with `Vm.steers_nic` may also ask: its scenario tests the driver against a
device that stalls, hangs, lies, loses its port or dies (and, as a PF, sets its VFs)."""


def refused_nic_command(args: list[str], steers: bool) -> str | None:
    """Why the host-control line refuses `hostctl nic ARGS...` from a guest, or None."""
    if not args:
        return "expected nic COMMAND [ARGS...]"
    if any(arg.startswith("-") and not _number(arg) for arg in args):
        return f"an option is not a NIC command argument: {' '.join(args)!r}"
    command, rest = args[0], args[1:]
    if command in GUEST_NIC_COMMANDS:
        if GUEST_NIC_COMMANDS[command](rest):
            return None
        return f"nic {command}: these arguments are not for a guest: {' '.join(rest)!r}"
    if command in STEERING_COMMANDS:
        return None if steers else (f"nic {command}: only a scenario's VM with steers_nic may make "
                                     "its NIC misbehave")
    return (f"nic {command}: not a guest's command; a guest may use "
            f"{', '.join(sorted(GUEST_NIC_COMMANDS))}")


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class HostControl(threading.Thread):
    """The guest's line to the host: a second serial port (ttyS1).

    The guest writes one command per line; the harness runs it and answers
    with its output and a line "=== HOSTCTL rc=N". Commands:

    * ``nic ARGS...``: ``ferroce-nic ctl`` on this VM's NIC (counters, gids,
      stall on, ...), so a scenario can read or steer its device mid-run. Only what
      `refused_nic_command` lets through: a guest reads its own function and injects faults
      into its own wire; only a VM with `steers_nic` makes its device misbehave.
    * ``echo-slowly WORDS...``: the words back on ten lines, sent a few bytes at a time, so
      the guest's reader waits in the middle of lines (a test of that reader: ibv-devinfo's
      replies.sh).
    """

    SLOW_CHUNK = 3
    """Bytes per write of an ``echo-slowly`` reply, SLOW_PAUSE_S apart."""
    SLOW_PAUSE_S = 0.004

    def __init__(self, path: Path, nic_ctl: list[str] | None, log: Path, steers: bool = False) -> None:
        super().__init__(name=f"hostctl-{path.name}", daemon=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(1)
        self.listener.settimeout(1)
        self.nic_ctl = nic_ctl
        self.steers = steers
        self.log = log
        self.stopping = False

    def run(self) -> None:
        conn = None
        while not self.stopping and conn is None:
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
        if conn is None:
            return
        with conn, conn.makefile("rwb", buffering=0) as f, open(self.log, "a") as log:
            for raw in f:
                line = raw.decode(errors="replace").strip()
                if not line:
                    continue
                argv = line.split()
                rc, output = self.handle(argv)
                log.write(f"$ {line}\n{output}rc={rc}\n")
                log.flush()
                reply = output.encode() + f"=== HOSTCTL rc={rc}\n".encode()
                if argv[0] != "echo-slowly":
                    f.write(reply)
                    continue
                for at in range(0, len(reply), self.SLOW_CHUNK):
                    f.write(reply[at:at + self.SLOW_CHUNK])
                    time.sleep(self.SLOW_PAUSE_S)

    def handle(self, argv: list[str]) -> tuple[int, str]:
        if argv[0] == "nic":
            if self.nic_ctl is None:
                return 2, "this VM has no ferroce-nic\n"
            if why := refused_nic_command(argv[1:], self.steers):
                return 2, why + "\n"
            try:
                # After "--", the guest's words are the command, never ctl's options.
                proc = subprocess.run([*self.nic_ctl, "--", *argv[1:]], capture_output=True,
                                      text=True, timeout=30)
            except subprocess.TimeoutExpired:
                return 124, "ferroce-nic ctl timed out\n"
            out = proc.stdout + proc.stderr
            return proc.returncode, out if out.endswith("\n") or not out else out + "\n"
        if argv[0] == "echo-slowly":
            return 0, (" ".join(argv[1:]) + "\n") * 10
        return 2, f"unknown host command {argv[0]!r}\n"

    def stop(self) -> None:
        self.stopping = True
        self.listener.close()


def output_console(path: Path) -> list[str]:
    """QEMU options for the guest's output stream: a virtio console (the guest's hvc0, where
    guest/init sends its and the script's output) written to `path`. One port only, so
    the device has no multiport feature and the guest adds hvc0 while probing it, before
    init runs. Last on the command line: the other PCI devices keep their addresses."""
    return ["-device", "virtio-serial-pci,id=vser,max_ports=1",
            "-chardev", "file,id=output,path=" + str(path).replace(",", ",,"),  # QEMU's escape
            "-device", "virtconsole,bus=vser.0,chardev=output"]


def qemu_command(machine: Machine, vm: Vm, index: int, initrd: Path, netdev: list[str],
                 cmdline: str, extra: list[str]) -> list[str]:
    """ttyS0 (-serial stdio) is the kernel's console; ttyS1 and hvc0 come with `extra`."""
    mac = mac_of(index)
    return [
        "qemu-system-x86_64", "-nodefaults", "-no-user-config", "-no-reboot",
        *machine.accel_args(),
        "-m", f"{vm.memory_mib}M", "-smp", "1",
        "-object", f"memory-backend-memfd,id=mem,size={vm.memory_mib}M,share=on",
        "-machine", "q35,memory-backend=mem",
        "-display", "none", "-serial", "stdio", "-monitor", "none",
        "-kernel", str(machine.disk_kernel if vm.disk and machine.disk_kernel else machine.kernel),
        *boot_disk_args(machine, vm, initrd),
        "-append", cmdline,
        *netdev,
        "-device", f"virtio-net-pci,netdev=net0,mac={mac},romfile=",
        *extra,
    ]


def boot_disk_args(machine: Machine, vm: Vm, initrd: Path) -> list[str]:
    """Our initramfs, or for a `Vm.disk` VM the machine's disk image as virtio-blk vda, with
    its writes kept apart (snapshot=on) and thrown away with the VM."""
    if not vm.disk:
        return ["-initrd", str(initrd)]
    if machine.disk_image is None:
        raise RuntimeError(f"VM {vm.name} boots a disk image, and vmtest was given none "
                           "(--disk-image: tools/ferroce makes it with dist/mkimage)")
    image = str(machine.disk_image).replace(",", ",,")  # QEMU's escape
    return ["-drive", f"file={image},if=virtio,format=raw,snapshot=on,cache=unsafe"]


def disk_share(directory: Path, scenario_files: Path) -> Share:
    """What a `Vm.disk` VM's systemd mounts at /ferroce (guest/disk-run): disk-run and lib.sh
    beside the scenario's files in scenario/."""
    guest = Path(__file__).resolve().parent / "guest"
    directory.mkdir(parents=True, exist_ok=True)
    for name in ["disk-run", "lib.sh"]:
        shutil.copy(guest / name, directory / name)
    shutil.copytree(scenario_files, directory / "scenario", dirs_exist_ok=True)
    return Share("scenario", str(directory))


class Follower:
    """Echo what new lines each stream has, prefixed with its label: "[a] " for VM a's output,
    "[a kernel] " for its kernel log."""

    def __init__(self, logs: dict[str, Path]) -> None:
        self.logs = logs
        self.offsets = {name: 0 for name in logs}
        self.partial = {name: b"" for name in logs}

    def poll(self) -> None:
        for name, path in self.logs.items():
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets[name])
                    data = f.read()
            except OSError:
                continue
            self.offsets[name] += len(data)
            *lines, self.partial[name] = (self.partial[name] + data).split(b"\n")
            for line in lines:
                text = line.decode(errors="replace").rstrip("\r")
                print(f"[{name}] {text}", flush=True)


class Testbed:
    """Machines while they run: the segments (cables, switches) and hosts of `vms`, their NICs
    and QEMUs, each VM's host-control line and its two streams (`logs`: hvc0, `kernel_logs`:
    ttyS0). `start` boots them all from `initrd`; `close` leaves nothing running. A scenario
    runs one to its end (`run_scenario`); the lab (lab.py) keeps one up for its user."""

    def __init__(self, machine: Machine, vms: list[Vm], work: Path, log_dir: Path, initrd: Path,
                 disk_share: Share | None = None, shm: bool = False) -> None:
        self.machine = machine
        self.disk_share = disk_share
        """What `Vm.disk` VMs mount at /ferroce (`disk_share`)."""
        self.vms = vms
        self.work = work
        self.log_dir = log_dir
        self.initrd = initrd
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.kernel_logs: dict[str, Path] = {}
        self.hostctls: list[HostControl] = []
        self.nic_ctls: dict[str, list[str]] = {}
        self.switch_cpu = 0.0
        """The CPU time of the switches' threads, once closed."""
        # One switch per segment; a VM's eth1 is port "<name>.1" of its second segment.
        ports: dict[str, list[str]] = {}
        for vm in vms:
            if not vm.host and not vm.function_of:
                ports.setdefault(vm.segment, []).append(vm.name)
            if vm.second:
                ports.setdefault(vm.second[0], []).append(f"{vm.name}.1")
        mirrors = tuple(vm.name for vm in vms if vm.mirror)
        # VMs whose own NIC is their port (not a VF's VM, not a second NIC's port).
        nics = frozenset(vm.name for vm in vms if vm.nic and not vm.host) if shm else frozenset()
        self.switches = {segment: segment_for(work, names, tuple(m for m in mirrors if m in names),
                                              nics)
                         for segment, names in ports.items()}
        self.hosts = Hosts(vms)

    def start(self) -> None:
        machine, work, log_dir = self.machine, self.work, self.log_dir
        for switch in self.switches.values():
            switch.start()
        self.hosts.start()
        hosts, functions = self.hosts, {}
        for index, vm in enumerate(self.vms):
            switch = self.switches.get(vm.segment)
            prefix, fds = [], []
            # The TAP descriptors QEMU inherits: closed here whatever happens.
            try:
                if vm.nic:
                    nic_fds: tuple[int, ...] = ()
                    if vm.host:
                        port = hosts.wire(vm)
                    elif isinstance(switch, ShmCable):
                        port, nic_fds = switch.wire(vm.name)
                    else:
                        port = f"unix:{switch.port_path(vm.name)},{switch.switch_path(vm.name)}"
                    vfs = [(i, v) for i, v in enumerate(self.vms) if v.function_of == vm.name]
                    functions.update(start_nic(machine, vm, index, work, log_dir, self.procs, port,
                                               hosts.prefix(vm), vfs, nic_fds))
                if vm.nic or vm.function_of:
                    if vm.name not in functions:
                        raise RuntimeError(f"VM {vm.name}: no VM before it has the NIC {vm.function_of}")
                    function = functions[vm.name]
                    extra, nic_ctl, remote = [*function.device], function.ctl, function.netdev_remote
                    self.nic_ctls[vm.name] = nic_ctl
                    local = str(work / f"{vm.name}.qemu-net")
                else:
                    extra, nic_ctl = [], None
                    if not vm.host:
                        local, remote = switch.port_path(vm.name), switch.switch_path(vm.name)
                    elif vm.wire == "tap":
                        fds.append(hosts.open_tap(vm))  # QEMU stays here, with its TAP's descriptor
                    else:
                        prefix = hosts.prefix(vm)  # its tunnel's end is an address of its host's
                netdev = (hosts.netdev(vm, *fds) if vm.host and not vm.nic else
                          ["-netdev", "dgram,id=net0,"
                           f"local.type=unix,local.path={local},remote.type=unix,remote.path={remote}"])
                if vm.second:
                    second = self.switches[vm.second[0]]
                    port = f"{vm.name}.1"
                    # After net0's device (in `extra`), so that it enumerates as eth1.
                    extra += ["-netdev", "dgram,id=net1,local.type=unix,"
                               f"local.path={second.port_path(port)},remote.type=unix,"
                               f"remote.path={second.switch_path(port)}",
                               "-device", f"virtio-net-pci,netdev=net1,mac={second_mac_of(index)},romfile="]
                extra += share_args(vm)
                if vm.disk:
                    if self.disk_share is None:
                        raise RuntimeError(f"VM {vm.name} boots a disk image: the testbed needs its share")
                    extra += share_args(dataclasses.replace(vm, toolroot=False, shares=(self.disk_share,)))
                if vm.ssh_forward is not None:
                    extra += ssh_forward_args(index, vm.ssh_forward)
                cmdline = " ".join(filter(None, [
                    # The kernel log: messages up to warnings (WARN splats) reach ttyS0.
                    "console=ttyS0 panic=-1 loglevel=5",
                    clock_cmdline(machine.accel), machine.extra_cmdline, vm.cmdline,
                    "" if vm.boot_tests else "kunit.filter_glob=ferroce*",
                    f"ferroce_vm={vm.name} ferroce_ip={vm.ip} ferroce_mtu={vm.mtu}",
                    f"ferroce_gw={vm.gateway}" if vm.gateway else "",
                    f"ferroce_ip1={vm.second[1]}" if vm.second else "",
                    f"ferroce_slow={machine.slow:g}" if machine.slow != 1 else "",
                    # A Debian image's systemd: the name, and eth0 named as the kernel names it.
                    f"root=/dev/vda rw net.ifnames=0 systemd.hostname={vm.name}" if vm.disk else "",
                ]))
                hostctl = HostControl(work / f"{vm.name}.hostctl", nic_ctl, log_dir / f"{vm.name}.hostctl.log",
                                      vm.steers_nic)
                hostctl.start()
                self.hostctls.append(hostctl)
                extra += ["-chardev", f"socket,id=hostctl,path={work / f'{vm.name}.hostctl'}",
                          "-serial", "chardev:hostctl"]
                self.logs[vm.name] = log_dir / f"{vm.name}.log"
                self.kernel_logs[vm.name] = log_dir / f"{vm.name}.kernel.log"
                self.logs[vm.name].unlink(missing_ok=True)  # QEMU makes it anew; never a former run's
                extra += output_console(self.logs[vm.name])
                self.procs[vm.name] = subprocess.Popen(
                    [*(["taskset", "-c", vm.qemu_cpus] if vm.qemu_cpus else []), *prefix,
                     *qemu_command(machine, vm, index, self.initrd, netdev, cmdline, extra)],
                    stdin=subprocess.DEVNULL, stdout=open(self.kernel_logs[vm.name], "wb"),
                    stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent,
                    pass_fds=fds,
                    # A disk VM's snapshot=on overlay goes to TMPDIR: the testbed's directory,
                    # gone with it even if QEMU is killed.
                    env={**os.environ, "TMPDIR": str(work)} if vm.disk else None)
            finally:
                for fd in fds:
                    os.close(fd)

    def exited(self) -> bool:
        """Whether every VM's QEMU has exited (reaping those that have)."""
        return all(self.procs[vm.name].poll() is not None for vm in self.vms if vm.name in self.procs)

    def wire_report(self) -> dict:
        """`wire_report` of the segments and NICs, with the hosts' links if any."""
        wire = wire_report(self.switches, self.nic_ctls)
        if self.hosts.names:
            wire["hosts"] = self.hosts.report()
        return wire

    def close(self) -> None:
        """Kills what still runs (QEMUs, NICs), stops the lines, switches and hosts."""
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for hostctl in self.hostctls:
            hostctl.stop()
        for switch in self.switches.values():
            switch.close()
            self.switch_cpu += switch.cpu_seconds
        self.hosts.close()

    def result(self, vm: Vm) -> "VmResult":
        """What VM `vm` left: its output, exit status and kernel log."""
        # Text mode: "\r\n" (the ttys' ONLCR) reads as "\n".
        output, kernel_log = (paths[vm.name].read_text(errors="replace")
                              if vm.name in paths and paths[vm.name].exists() else ""
                              for paths in (self.logs, self.kernel_logs))
        m = EXIT.search(output)
        return VmResult(vm, output, int(m.group(1)) if m else None,
                        self.procs[vm.name].returncode if vm.name in self.procs else None, kernel_log)


def share_args(vm: Vm) -> list[str]:
    """QEMU's options for the VM's virtio-9p shares (`Vm.shares`, and the toolchain root if
    `Vm.toolroot`). QEMU runs in the toolchain root: the paths are the root's."""
    shares = [*([Share("toolroot", "/")] if vm.toolroot else []), *vm.shares]
    args = []
    for share in shares:
        path = share.path.replace(",", ",,")  # QEMU's escape
        # A read-only share passes the host's files through as they are. A writable one keeps
        # what the guest asks of owners and modes in extended attributes (mapped-xattr): QEMU
        # runs as root, and passed through, a guest's chown, setuid bits and device nodes
        # would be the host's. The host sees the guest's files as QEMU's, 0644 (0755 for
        # directories), and no device nodes.
        model = ("security_model=none,readonly=on" if share.readonly else
                 "security_model=mapped-xattr,fmode=0644,dmode=0755")
        args += ["-fsdev", f"local,id={share.tag},path={path},{model}",
                 "-device", f"virtio-9p-pci,fsdev={share.tag},mount_tag={share.tag}"]
    return args


def ssh_forward_args(index: int, port: int) -> list[str]:
    """A user-mode (slirp) virtio-net NIC, `ctl`, restricted: the guest reaches nothing through
    it, and the host's 127.0.0.1:`port` (in the harness's network namespace) reaches the
    guest's sshd at 10.0.2.15 (the lab's way in). Its MAC is `ssh_mac_of(index)`."""
    return ["-netdev", f"user,id=ctl,restrict=on,ipv6=off,hostfwd=tcp:127.0.0.1:{port}-10.0.2.15:22",
            "-device", f"virtio-net-pci,netdev=ctl,mac={ssh_mac_of(index)},romfile="]


def ssh_mac_of(index: int) -> str:
    """The MAC of the index-th VM's user-mode NIC (`ssh_forward_args`)."""
    return f"52:54:00:fe:ff:{index + 1:02x}"


def run_scenario(machine: Machine, scenario: Scenario, log_dir: Path, follow: bool = False) -> Run:
    """Boot the scenario's VMs, wait for them (or the timeout), collect."""
    assert scenario.directory is not None
    work = Path(tempfile.mkdtemp(prefix=f"{scenario.name}.", dir=machine.workdir))
    wire = None
    timed_out = False
    start = time.monotonic()
    meter = usage.Meter(start)
    bed = None
    try:
        # The scenario's files go into /scenario as one more archive.
        files = work / "files" / "scenario"
        shutil.copytree(scenario.directory, files, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
        (files / "hosts").write_text("".join(f"{vm.address} {vm.name}\n" for vm in scenario.vms))
        for name, text in scenario.files.items():
            (files / name).write_text(text)
        make_cpio(work / "files", work / "scenario.cpio")
        initrd = join_initrds([*machine.initrds, work / "scenario.cpio"], work / "initrd.cpio")

        share = (disk_share(work / "disk-share", files) if any(vm.disk for vm in scenario.vms)
                 else None)
        bed = Testbed(machine, scenario.vms, work, log_dir, initrd, share,
                      shm_cables(scenario.shm_cables))
        bed.start()
        follower = Follower(follow_streams(bed.logs, bed.kernel_logs)) if follow else None
        deadline = start + scenario.timeout * machine.slow
        while True:
            # Before poll() reaps an exited QEMU: a zombie's CPU time is still in /proc.
            meter.sample(bed.procs)
            if bed.exited():
                break
            now = time.monotonic()
            meter.booted(bed.logs, now)
            if now > deadline:
                timed_out = True
                break
            if follower:
                follower.poll()
            time.sleep(0.2)
        if follower:
            follower.poll()
        # The VMs are gone, their NICs still answer: what the segments carried and lost.
        wire = bed.wire_report()
        (log_dir / "wire.json").write_text(json.dumps(wire, indent=1) + "\n")
        meter.sample(bed.procs)
    finally:
        if bed is not None:
            bed.close()
        shutil.rmtree(work, ignore_errors=True)

    results = {vm.name: bed.result(vm) for vm in scenario.vms}
    return Run(results, timed_out, time.monotonic() - start, log_dir, wire, machine.slow, meter,
               bed.switch_cpu)


def follow_streams(logs: dict[str, Path], kernel_logs: dict[str, Path]) -> dict[str, Path]:
    """What --follow shows, VM by VM: "a" (its output), "a kernel" (its kernel log), ..."""
    streams = {}
    for name, path in logs.items():
        streams[name] = path
        if name in kernel_logs:
            streams[f"{name} kernel"] = kernel_logs[name]
    return streams


def join_initrds(parts: list[Path], out: Path) -> Path:
    """Concatenate initramfs archives into one file (QEMU takes a single -initrd)."""
    with open(out, "wb") as joined:
        for part in parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, joined)
    return out


# Linux queues at most net.unix.max_dgram_qlen (10 by default) datagrams on a unix socket; the
# switch and the NICs send without blocking, so a burst longer than that (an RDMA READ response,
# a window of RC packets) is dropped and only retransmission timeouts recover it.
DGRAM_QUEUE = 1024


def private_network(queue: int = DGRAM_QUEUE) -> bool:
    """Moves this process (and the VMs, NICs and switch it starts) into a network namespace of
    its own whose unix datagram queues hold `queue` frames. Needs CAP_SYS_ADMIN; returns whether
    it worked (otherwise the host's setting applies and bursts may be lost)."""
    clone_newnet = 0x40000000  # os.CLONE_NEWNET from Python 3.12 on
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(clone_newnet) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET): " + os.strerror(ctypes.get_errno()))
        Path("/proc/sys/net/unix/max_dgram_qlen").write_text(f"{queue}\n")
        return True
    except OSError as e:
        print(f"harness: unix datagram queues stay at the host's length ({e})", flush=True)
        return False


def probe_accel(machine: Machine, timeout: float = 20) -> bool:
    """Does a VM under KVM reach /init? (A nested KVM may hang instead.)"""
    initrd = join_initrds(machine.initrds, machine.workdir / "probe.cpio")
    cmd = [
        "qemu-system-x86_64", "-nodefaults", "-no-user-config", "-no-reboot",
        "-accel", "kvm", "-cpu", "host", "-m", "512M", "-display", "none",
        "-serial", "stdio", "-monitor", "none", "-kernel", str(machine.kernel),
        "-initrd", str(initrd), "-append", "console=ttyS0 panic=-1 ferroce_probe=1",
    ]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, preexec_fn=_die_with_parent)
    except (subprocess.TimeoutExpired, OSError):
        return False
    return b"=== FERROCE-EXIT rc=0" in proc.stdout


def digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]
