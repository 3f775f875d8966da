"""The scenarios' ferroce-nic processes: a VM's NIC (its converged port on the VM's segment)
and the virtual functions other VMs have on it (`Vm.function_of`: one NIC, many functions)."""
from __future__ import annotations

import ctypes
import dataclasses
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness import Machine, Vm

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child: be killed when the harness dies, however it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def ctl_reply(ctl: list[str], command: str, timeout: float = 10) -> dict:
    """The JSON reply of `ferroce-nic ctl ... COMMAND` (`ctl`: a `Function.ctl`)."""
    proc = subprocess.run([*ctl, *command.split()], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise OSError(f"ctl {command}: rc={proc.returncode}: {(proc.stderr or proc.stdout).strip()}")
    return json.loads(proc.stdout)


def mac_of(index: int) -> str:
    """The MAC of the index-th VM of a scenario (also its NIC's MAC)."""
    return f"52:54:00:fe:00:{index + 1:02x}"


def second_mac_of(index: int) -> str:
    """The MAC of the index-th VM's eth1 (`Vm.second`)."""
    return f"52:54:00:fe:01:{index + 1:02x}"


@dataclasses.dataclass
class Function:
    """What a VM's QEMU needs of its ferroce function, and how the host controls it."""

    device: list[str]
    """QEMU's `-device vfio-user-pci` arguments."""
    ctl: list[str]
    """`ferroce-nic ctl --control SOCKET`, the function's own control socket."""
    netdev_remote: str
    """The NIC's netdev socket, where the VM's virtio-net `-netdev dgram` sends."""


def start_nic(machine: Machine, vm: Vm, index: int, work: Path, log_dir: Path,
              procs: dict[str, subprocess.Popen], wire: str, prefix: list[str],
              vfs: list[tuple[int, Vm]] = (), fds: tuple[int, ...] = ()) -> dict[str, Function]:
    """Start the VM's ferroce-nic, the VM's converged port: the NIC owns the VM's place on the
    segment (`wire`, its `--wire`) and passes non-RoCE frames to and from the virtio-net NIC.
    `prefix` runs it in its host's network namespace; it inherits `fds` (a shared-memory
    cable's, which `wire` names). `vfs` (index in the scenario, VM) are
    the VMs with a virtual function of this NIC (`--functions`), VF 1 first; each has its own
    vfio-user socket, MAC, netdev sockets, control socket, trace and capture, named by the VM.

    Returns each function's `Function`, by VM name (`vm` and every VF's VM).
    """
    if machine.nic_binary is None:
        raise RuntimeError(f"VM {vm.name} wants a ferroce-nic but none was built (--nic)")

    def files(v: Vm) -> dict[str, Path]:
        # The control socket sits with the logs, where `tools/ferroce top SCENARIO VM` finds it
        # from another shell while the scenario runs.
        return {"socket": work / f"{v.name}.vfio-user", "control": log_dir / f"{v.name}.nic-ctl",
                "netdev-socket": work / f"{v.name}.nic-netdev", "netdev-peer": work / f"{v.name}.qemu-net",
                **({"trace": log_dir / f"{v.name}.nic-trace.jsonl"} if v.trace else {}),
                **({"pcap": log_dir / f"{v.name}.pcapng"} if v.capture else {})}

    mine = files(vm)
    cmd = [*prefix, str(machine.nic_binary), "serve", "--mac", mac_of(index),
           *(arg for key, path in mine.items() for arg in (f"--{key}", str(path))),
           "--wire", wire, *vm.nic_args]
    if vfs:
        cmd += ["--functions", str(len(vfs))]
        for k, (vf_index, vf) in enumerate(vfs, 1):
            spec = [f"{key}={path}" for key, path in files(vf).items()]
            cmd += ["--vf", f"{k}:" + ",".join([*spec, f"mac={mac_of(vf_index)}",
                                                *filter(None, [vf.vf_limits])])]
    procs[f"{vm.name}.nic"] = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=open(log_dir / f"{vm.name}.nic.log", "wb"),
        stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent,
        pass_fds=fds)
    functions = {v.name: files(v) for v in [vm, *(v for _, v in vfs)]}
    deadline = time.monotonic() + 10
    while not all(f["socket"].exists() and f["control"].exists() for f in functions.values()):
        if procs[f"{vm.name}.nic"].poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ferroce-nic for VM {vm.name} did not come up; see its log")
        time.sleep(0.05)
    return {name: Function(
        device=["-device", json.dumps({"driver": "vfio-user-pci",
                                       "socket": {"path": str(f["socket"]), "type": "unix"}})],
        ctl=[str(machine.nic_binary), "ctl", "--control", str(f["control"])],
        netdev_remote=str(f["netdev-socket"])) for name, f in functions.items()}
