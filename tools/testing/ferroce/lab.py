#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The lab: ferroce VMs kept up for their user (tools/ferroce lab; Documentation/.../lab.rst).

    lab.py up --state DIR --labroot ROOT --workdir DIR --kernel BZIMAGE --initrd I... [VM...]
    lab.py status --state DIR
    lab.py down --state DIR

`up` boots the VMs the way a scenario's are booted (harness.Testbed: the same NICs, segments,
captures and traces), each with the lab's Debian guest root (lab/mkroot, shared read-only over
virtio-9p under an overlay of its own), the user's working directory (read-write, at the same
path) and a user-mode NIC that forwards a port of 127.0.0.1 to its sshd. A daemon keeps them:
it lives in a network namespace of its own (as vmtest does: unix datagram queues long enough
for RoCE bursts), where those ports are; `tools/ferroce lab shell|exec|cp` enter it to reach
them with ssh. `up` returns once every VM said it is ready (lab/setup), or failed. `down`
stops the daemon, which leaves nothing running.

A VM is NAME[:KIND][@HOST]: KIND is ferroce (the default: a ferroce NIC of its own), rxe (rdma_rxe
on its virtio-net) or vf:PF (a virtual function of VM PF's NIC). HOST puts it on a host (hosts.py:
a network namespace with a Linux bridge, the hosts joined by VXLAN over an underlay, as machines
of a cluster are) instead of the one segment; a lab has hosts for all its VMs or for none, and a
VF is on its PF's host. The default lab is "a b".

DIR holds the lab's state: pid (the daemon's), lab.json (the VMs, how to reach them), ssh/
(the ssh client's config and keys), guest/ (what the VMs read: the names of the VMs, the keys,
the working directory, the environment of lab/environment), daemon.log. The VMs' logs, captures, traces and NIC control sockets are
in LOGS (out/logs/lab), as a scenario's are in out/logs/<scenario>.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import hosts as hostsmod  # noqa: E402
import vmtest  # noqa: E402

HERE = Path(__file__).resolve().parent
SSH_PORT = 2200
"""VM i's sshd is at 127.0.0.1:SSH_PORT+1+i in the daemon's network namespace."""
BOOT_TIMEOUT = 300
"""Seconds a lab's VMs have to say they are ready (times Machine.slow)."""
READY = re.compile(r"^=== FERROCE-LAB-(READY|FAILED) vm=([^\s:]+):?(.*)$", re.M)
NAME = re.compile(r"^[a-z][a-z0-9-]{0,14}$")
KINDS = ("ferroce", "rxe", "vf")
MAX_VMS = 8


class LabError(Exception):
    """What the user is told, on one line, when the lab cannot do what was asked."""


@dataclasses.dataclass
class LabVm:
    """A VM of the lab as the user named it: NAME[:KIND][@HOST]."""

    name: str
    kind: str = "ferroce"
    pf: str | None = None
    """For a VF: the VM whose NIC it is a function of."""
    host: str | None = None
    """The host it is on (`harness.Vm.host`), if the lab has hosts."""


def parse_vms(specs: list[str]) -> list[LabVm]:
    """The lab's VMs from NAME[:KIND][@HOST] words (ferroce, rxe or vf:PF); LabError if one is
    wrong."""
    vms: list[LabVm] = []
    for spec in specs or ["a", "b"]:
        spec, at, host = spec.partition("@")
        name, _, kind = spec.partition(":")
        kind, _, pf = (kind or "ferroce").partition(":")
        if not NAME.match(name):
            raise LabError(f"{name!r} is not a VM name (a lowercase letter, then letters, digits or -)")
        if at and not NAME.match(host):
            raise LabError(f"VM {name}: {host!r} is not a host name (a lowercase letter, then letters, "
                           "digits or -)")
        if kind not in KINDS:
            raise LabError(f"VM {name}: unknown kind {kind!r} (ferroce, rxe or vf:PF)")
        if any(v.name == name for v in vms):
            raise LabError(f"two VMs are named {name}")
        if kind == "vf":
            owner = next((v for v in vms if v.name == pf), None)
            if owner is None or owner.kind != "ferroce":
                raise LabError(f"VM {name}: a VF needs an earlier ferroce VM as its PF (vf:NAME), not {pf!r}")
            if at and host != owner.host:
                raise LabError(f"VM {name}: a VF is on its PF's host ({owner.host or 'none'}), not {host}")
            host = owner.host or ""
        elif pf:
            raise LabError(f"VM {name}: only a VF names another VM ({spec!r})")
        vms.append(LabVm(name, kind, pf or None, host or None))
    if len({vm.host is None for vm in vms}) > 1:
        raise LabError("either every VM is on a host (NAME@HOST) or none is: VMs on hosts and VMs "
                       "on the plain segment would not reach each other")
    if len(vms) > MAX_VMS:
        raise LabError(f"at most {MAX_VMS} VMs in a lab, not {len(vms)}")
    return vms


def harness_vms(vms: list[LabVm], state: Path, labroot: str, workdir: str, memory_mib: int) -> list[harness.Vm]:
    """The harness's VMs for the lab's: on one segment, 10.0.0.<i+1>/24, each with the shares
    and ssh port of the lab; `Vm.cmdline` tells lab/boot it is the lab's, and of what kind."""
    shares = (harness.Share("labroot", labroot), harness.Share("labstate", str(state / "guest")),
              harness.Share("work", workdir, readonly=False))
    return [harness.Vm(vm.name, f"10.0.0.{i + 1}/24", memory_mib=memory_mib,
                       nic=vm.kind == "ferroce", function_of=vm.pf, shares=shares,
                       host=vm.host if vm.kind != "vf" else None,  # a VF's port is its PF's
                       ssh_forward=SSH_PORT + 1 + i, cmdline=f"ferroce_lab={vm.kind}")
            for i, vm in enumerate(vms)]


def daemon_pid(state: Path) -> int | None:
    """The pid of the lab's daemon if it runs, else None (a stale pid file is removed)."""
    try:
        pid = int((state / "pid").read_text())
    except (OSError, ValueError):
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        argv = []
    if not (len(argv) > 2 and argv[1].endswith(b"/lab.py") and argv[2] == b"up"):
        (state / "pid").unlink(missing_ok=True)
        return None
    return pid


def write_guest_state(state: Path, vms: list[harness.Vm], workdir: str, labroot: Path) -> None:
    """What the VMs read at boot (tag labstate): the VMs' names, the working directory's
    path, ssh's keys and known hosts. The client's config goes to ssh/config."""
    guest = state / "guest"
    (guest / "ssh").mkdir(parents=True, exist_ok=True)
    (guest / "hosts").write_text("".join(f"{vm.address} {vm.name}\n" for vm in vms))
    (guest / "workdir").write_text(workdir + "\n")
    (guest / "environment").write_text((HERE / "lab" / "environment").read_text())
    for name in ("id_ed25519", "id_ed25519.pub"):
        (guest / "ssh" / name).write_bytes((state / "ssh" / name).read_bytes())
    host_key = (labroot / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()
    names = ",".join(n for vm in vms for n in (vm.name, vm.address))
    (guest / "ssh" / "known_hosts").write_text(f"{names} {host_key[0]} {host_key[1]}\n")
    # The host's side: each VM by its name, through its forwarded port.
    config = ["# tools/ferroce lab shell|exec|cp: ssh -F this file, in the lab's network namespace."]
    for vm in vms:
        config += [f"Host {vm.name}", "    HostName 127.0.0.1", f"    Port {vm.ssh_forward}"]
    config += ["Host *", "    User root", "    IdentityFile /ferroce/lab/ssh/id_ed25519",
               "    IdentitiesOnly yes", "    HostKeyAlias ferroce-lab",
               "    UserKnownHostsFile /ferroce/lab/ssh/known_hosts", "    StrictHostKeyChecking yes",
               "    LogLevel ERROR", "    ServerAliveInterval 30", "    SendEnv LANG LC_* TERM"]
    (state / "ssh" / "config").write_text("\n".join(config) + "\n")
    (state / "ssh" / "known_hosts").write_text(f"ferroce-lab {host_key[0]} {host_key[1]}\n")


def wait_ready(bed: harness.Testbed, deadline: float, stopping=lambda: False) -> list[str]:
    """Waits until every VM said it is ready (lab/setup), or one failed, its QEMU exited, the
    deadline passed or `stopping()` (lab down); returns the problems (none: all ready)."""
    pending = {vm.name for vm in bed.vms}
    problems: list[str] = []
    while pending:
        if stopping():
            return ["lab down came before the VMs were ready"]
        for name in sorted(pending):
            text = bed.logs[name].read_text(errors="replace") if bed.logs[name].exists() else ""
            m = next((m for m in READY.finditer(text) if m.group(2) == name), None)
            if m and m.group(1) == "READY":
                pending.discard(name)
            elif m:
                problems.append(f"VM {name} failed to set up:{m.group(3)} (its log: {bed.logs[name]})")
                pending.discard(name)
            elif bed.procs[name].poll() is not None:
                problems.append(f"VM {name}: QEMU exited with {bed.procs[name].returncode} "
                                f"(its kernel log: {bed.kernel_logs[name]})")
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            problems += [f"VM {name} was not ready in time (its log: {bed.logs[name]})" for name in sorted(pending)]
            break
        if pending:
            time.sleep(0.2)
    return problems


def record_gids(state: Path, bed: harness.Testbed) -> None:
    """Adds to lab.json each VM's RoCE v2 GID index of its address, from its ready line
    ("gid=N"): what `ibv_rc_pingpong -g` and perftest's -x want."""
    lab = json.loads((state / "lab.json").read_text())
    for vm in lab["vms"]:
        text = bed.logs[vm["name"]].read_text(errors="replace")
        m = next((m for m in READY.finditer(text) if m.group(2) == vm["name"]), None)
        gid = re.search(r"\bgid=(\d+)", m.group(3)) if m else None
        vm["gid"] = int(gid.group(1)) if gid else None
    (state / "lab.json").write_text(json.dumps(lab, indent=1) + "\n")


def up(args: argparse.Namespace) -> int:
    state = Path(args.state)
    if (pid := daemon_pid(state)) is not None:
        vms = " ".join(vm["name"] for vm in json.loads((state / "lab.json").read_text())["vms"])
        raise LabError(f"a lab is up already (VMs {vms}, daemon {pid}): `tools/ferroce lab down` first")
    lab_vms = parse_vms(args.vms)
    logs = Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    for old in logs.iterdir():
        if old.is_file() or old.is_socket():
            old.unlink()
    work = Path(tempfile.mkdtemp(prefix="lab.", dir=state))
    machine = harness.Machine(kernel=Path(args.kernel), initrds=[Path(i) for i in args.initrd],
                              accel="tcg", workdir=work, nic_binary=Path(args.nic) if args.nic else None)
    machine.accel = vmtest.choose_accel(args.accel, machine, Path(args.cache) if args.cache else None)
    if machine.accel == "tcg":
        print("lab: no usable KVM on this host: the VMs run under TCG (emulated CPUs, several times "
              "slower)", flush=True)
    else:
        print("lab: the VMs run under KVM", flush=True)
    vms = harness_vms(lab_vms, state, args.labroot, args.workdir, args.memory)
    write_guest_state(state, vms, args.workdir, Path(args.labroot))
    initrd = harness.join_initrds(machine.initrds, work / "initrd.cpio")
    (state / "lab.json").write_text(json.dumps({
        "vms": [{"name": vm.name, "kind": lv.kind, "pf": lv.pf, "host": lv.host, "address": vm.address,
                 "ssh_port": vm.ssh_forward} for lv, vm in zip(lab_vms, vms)],
        "accel": machine.accel, "labroot": args.labroot, "workdir": args.workdir,
        "logs": str(logs), "started": time.time()}, indent=1) + "\n")

    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        rc = 1
        try:
            rc = serve(machine, vms, state, logs, work, initrd, ready_w)
        except BaseException:  # noqa: BLE001: into daemon.log, then out
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(rc)
    os.close(ready_w)
    with os.fdopen(ready_r) as ready:
        said = ready.read()
    if not said.startswith("ready"):
        print(said.rstrip() or f"lab: the daemon died at boot (see {state / 'daemon.log'})", file=sys.stderr)
        return 1
    print(status_text(state), end="")
    return 0


def serve(machine: harness.Machine, vms: list[harness.Vm], state: Path, logs: Path, work: Path,
          initrd: Path, ready_w: int) -> int:
    """The daemon: its own session, network namespace and log; boots the VMs, tells `up` (on
    `ready_w`) once they are ready or not, then keeps them until SIGTERM (`down`)."""
    os.setsid()
    log = os.open(state / "daemon.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = sys.stdout
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    (state / "pid").write_text(f"{os.getpid()}\n")
    bed = None
    try:
        if not harness.private_network():
            raise LabError("could not make the lab's network namespace (needs root)")
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        bed = harness.Testbed(machine, vms, work, logs, initrd)
        bed.start()
        problems = wait_ready(bed, time.monotonic() + BOOT_TIMEOUT * machine.slow, lambda: bool(stopping))
        if problems:
            tell(ready_w, "\n".join(f"lab: {p}" for p in problems) + "\n")
            return 1
        record_gids(state, bed)
        if not tell(ready_w, "ready\n"):
            return 1
        os.close(ready_w)
        ready_w = -1
        print(f"lab: {len(vms)} VMs ready", flush=True)
        gone: set[str] = set()
        while not stopping:
            for vm in vms:
                if vm.name not in gone and bed.procs[vm.name].poll() is not None:
                    gone.add(vm.name)
                    print(f"lab: VM {vm.name} stopped (QEMU exit status {bed.procs[vm.name].returncode})", flush=True)
            time.sleep(0.5)
        print("lab: stopping", flush=True)
        return 0
    except Exception as e:  # noqa: BLE001: the user reads it from `up`
        if ready_w >= 0:
            tell(ready_w, f"lab: {type(e).__name__}: {e}\n")
        raise
    finally:
        if bed is not None:
            bed.close()
        (state / "pid").unlink(missing_ok=True)
        subprocess.run(["rm", "-rf", str(work)], check=False)


def tell(ready_w: int, text: str) -> bool:
    """Tells `up` (waiting on the pipe) how the boot went; False if `up` is gone (Ctrl-C): then
    nobody is told the lab is up, and the daemon stops it (its log says why)."""
    try:
        os.write(ready_w, text.encode())
        return True
    except BrokenPipeError:
        print("lab: lab up is gone (interrupted) before the VMs were ready: stopping", flush=True)
        return False


def host_path(path: str) -> str:
    """A path in the toolchain root as the host's user sees it (out/... for /ferroce/out/...)."""
    return "out/" + path[len("/ferroce/out/"):] if path.startswith("/ferroce/out/") else path


def status_text(state: Path) -> str:
    pid = daemon_pid(state)
    if pid is None:
        return "lab: no lab is up\n"
    lab = json.loads((state / "lab.json").read_text())
    logs = host_path(lab["logs"])
    up_for = time.time() - lab["started"]
    hosts = sorted({vm["host"] for vm in lab["vms"] if vm.get("host")})
    lines = [f"lab: {len(lab['vms'])} VMs up for {up_for / 60:.0f} min under {lab['accel'].upper()}, "
             f"daemon {pid}; your directory {lab['workdir']} is shared at the same path",
             *([f"lab: hosts {', '.join(hosts)}, each a bridge, joined by VXLAN (VNI {hostsmod.VNI})"]
               if hosts else []),
             f"{'VM':<6} {'RDMA device':<22} {'address':<10} {'GID':<4} {'host  ' if hosts else ''}log"]
    for vm in lab["vms"]:
        dev = {"ferroce": "ferroce0", "rxe": "rxe0 (rdma_rxe)", "vf": f"ferroce0 (VF of {vm['pf']})"}[vm["kind"]]
        gid = "?" if vm.get("gid") is None else vm["gid"]
        host = f"{vm.get('host') or '':<6}" if hosts else ""
        lines.append(f"{vm['name']:<6} {dev:<22} {vm['address']:<10} {gid:<4} {host}{logs}/{vm['name']}.log")
    nics = [vm["name"] for vm in lab["vms"] if vm["kind"] != "rxe"]
    lines += ["",
              "  tools/ferroce lab shell VM          a shell (tools/ferroce lab exec VM -- CMD: a command)",
              *([f"  {logs}/VM.pcapng             each ferroce port's capture (Wireshark, tshark -r)",
                 f"  tools/ferroce top {Path(lab['logs']).name} VM            the NIC's counters, per second",
                 f"  tools/ferroce trace {' '.join(f'{logs}/{n}.nic-trace.jsonl' for n in nics[:2])} -o run.svg",
                 "                                      a sequence picture from the NICs' traces (--help)"]
                if nics else []),
              "  tools/ferroce lab down              stop the lab"]
    return "\n".join(lines) + "\n"


def down(args: argparse.Namespace) -> int:
    state = Path(args.state)
    pid = daemon_pid(state)
    if pid is None:
        print("lab: no lab is up")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if Path(f"/proc/{pid}").exists():
        # Its VMs and NICs die with it (PR_SET_PDEATHSIG).
        os.kill(pid, signal.SIGKILL)
        print(f"lab: the daemon {pid} did not stop in 30 s: killed")
    (state / "pid").unlink(missing_ok=True)
    print("lab: down")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up")
    p.add_argument("--state", required=True)
    p.add_argument("--logs", required=True)
    p.add_argument("--labroot", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--kernel", required=True)
    p.add_argument("--initrd", action="append", default=[])
    p.add_argument("--nic")
    p.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto")
    p.add_argument("--cache")
    p.add_argument("--memory", type=int, default=2048, help="MiB per VM")
    p.add_argument("vms", nargs="*", help="NAME[:ferroce|:rxe|:vf:PF][@HOST] (default: a b)")
    for name in ("status", "down"):
        sub.add_parser(name).add_argument("--state", required=True)
    args = parser.parse_args()
    try:
        if args.command == "up":
            return up(args)
        if args.command == "status":
            print(status_text(Path(args.state)), end="")
            return 0
        return down(args)
    except LabError as e:
        print(f"lab: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
