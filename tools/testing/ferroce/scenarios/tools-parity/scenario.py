"""Tool parity: the rdma-core tools, perftest modes and rdmacm examples on ferroce0 and on rxe0
in the same two VMs; ferroce must work wherever rxe does.

Each VM has a ferroce NIC on eth0 (segment "lan", ferroce0, GID 3) and a plain virtio-net eth1
(segment "rxe", rxe0, GID 1): the ferroce NIC steers every RoCE frame for its MAC to its engine,
as a converged RNIC does, so rxe needs a port of its own. VM b serves, VM a connects.

tools.list holds the tools both VMs run (guest: common.sh run_tools) and what the client must
print; a check per tool compares the devices (exit status, no error, the figures row recorded,
not compared). Among them the ones that broke on ferroce:

- ib_send_lat -e: perftest's ctx_notify_events waits for the event, re-arms, then polls once:
  an arm that fires for a CQE already in the ring throws it out of step (a hang, or "Couldn't
  post send: scnt=8" with its 1-deep SQ);
- UC (-c UC), which needs a lossless segment (the harness's switch buffers, as a RoCE fabric).

Scripted apart: ib_write_lat -e (perftest refuses events on WRITE on every device: the check is
that both devices refuse it the same way); ucmatose -c 16 (the client starts once the server
listens and is never retried: a retried client makes the server see more than 16 connect
requests; it rejects the extra ones, which the client reports as "RDMA_CM_EVENT_REJECTED, error:
28", IB_CM_REJ_CONSUMER_DEFINED); then both segments go to MTU 9000 at run time (the GID tables
must not change) and ib_write_bw runs with -x and without it (perftest's own GID choice).

The queries are compared too: ibv_devinfo -v field by field (every field, limit and capability
rxe reports, ferroce reports, but the capabilities NOT_OFFERED, each with its reason), and the
fields of rdma res show.

Small iteration counts; every tool runs under a timeout (guest/lib.sh: step, retry).
"""

import re
from pathlib import Path

import pcapcheck
from harness import CheckFailed, Run, Scenario, Vm
from perftest import NUM

VMS = [
    Vm("a", "10.0.0.1/24", nic=True, second=("rxe", "10.0.1.1/24")),
    Vm("b", "10.0.0.2/24", nic=True, second=("rxe", "10.0.1.2/24")),
]
scenario = Scenario(vms=VMS, timeout=540)
KINDS = ("ferroce", "rxe")
# What perftest and ucmatose print when something went wrong.
ERRORS = re.compile(r"Couldn't|[Ff]ailed|[Ee]rror|Incompatibility|REJECTED|UNREACHABLE|"
                    r"failing connection|return status [1-9-]")


def tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.splitlines()[-lines:])


def outcome(run: Run, name: str) -> tuple[bool, str]:
    """Whether step NAME worked on both VMs, and what went wrong if not."""
    problems = []
    for vm in VMS:
        step = run.vm(vm.name).step(name)
        if step.rc != 0:
            problems.append(f"{vm.name}: rc={step.rc}\n{tail(step.output)}")
        elif ERRORS.search(step.output):
            problems.append(f"{vm.name}: {ERRORS.search(step.output).group(0)}\n{tail(step.output)}")
    return not problems, "\n".join(problems)


def parity(run: Run, test: str, row: str | None = None) -> str:
    """ferroce works wherever rxe does; rxe must work for the comparison to mean anything."""
    ok = {kind: outcome(run, f"{test}-{kind}") for kind in KINDS}
    if not ok["rxe"][0]:
        raise CheckFailed(f"{test}: rxe failed too, nothing to compare:\n{ok['rxe'][1]}")
    if not ok["ferroce"][0]:
        raise CheckFailed(f"{test}: works on rxe, fails on ferroce:\n{ok['ferroce'][1]}")
    if row is None:
        return "both work"
    figures = []
    for kind in KINDS:
        m = run.vm("a").step(f"{test}-{kind}").expect(row)
        figures.append(f"{kind}: {' '.join(m.group(0).split())}")
    return "; ".join(figures)


# NUM: a figure, or what perftest prints for one when its clock fit failed (common.sh: -F).
BW = rf"^\s*\d+\s+\d+\s+{NUM}\s+{NUM}\s+{NUM}\s*$"
LAT = rf"^\s*\d+\s+\d+\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}.*$"


@scenario.check
def setup(run: Run) -> str:
    tables = []
    for vm in VMS:
        v = run.vm(vm.name)
        v.step("rdma-setup").ok()
        for kind in KINDS:
            step = v.step(f"gids-{kind}")
            step.ok()
            tables.append(f"{vm.name} {kind}:\n{step.output.strip()}")
    return "\n".join(tables)


# device_cap_flags rxe reports and ferroce does not, each with its reason.
NOT_OFFERED = {
    "BAD_PKEY_CNTR": "one P_Key and no violation counter",
    "BAD_QKEY_CNTR": "no Q_Key violation counter (bad Q_Keys are dropped and counted as drops)",
    "AUTO_PATH_MIG": "no alternate paths (automatic path migration)",
    "CHANGE_PHY_PORT": "one port",
    "UD_AV_PORT_ENFORCE": "one port: no address vector names another",
}
# Fields both report whose value may be 0 on ferroce where rxe's is not: the next issue's.
LATER = {"rc_odp_caps", "ud_odp_caps", "general_odp_caps"}
DEVINFO_FIELD = re.compile(r"^\t+(\w+):[ \t]*(.*)$", re.M)
DEVINFO_FLAG = re.compile(r"^\t{5}([A-Z0-9_]+)$", re.M)


def devinfo(text: str) -> tuple[dict[str, str], set[str]]:
    """The fields of `ibv_devinfo -v` (device and port) and its device_cap_flags names."""
    fields = {k: v for k, v in DEVINFO_FIELD.findall(text) if not k.startswith("GID")}
    start = text.find("device_cap_flags:")
    end = text.find("max_sge:", start)
    return fields, set(DEVINFO_FLAG.findall(text[start:end]))


RES_PAIR = re.compile(r"(?:^|\s)([a-z][a-z_-]*) (\S+)")


@scenario.check
def rdma_res_against_rxe(run: Run) -> str:
    """`rdma res show` (summary, qp, cq, pd, mr) names the same fields for both devices (ib_core
    fills them; neither driver adds its own), for the kernel's objects both have."""
    step = run.vm("a").step("rdma-res")
    step.ok()
    problems, shown = [], []
    for part in step.output.split("=== res ")[1:]:
        kind, _, text = part.partition("\n")
        kind = kind.strip() or "summary"
        keys = {dev: set() for dev in ("ferroce0", "rxe0")}
        for line in text.splitlines():
            for dev in keys:
                if re.search(rf"\b{dev}\b", line):
                    keys[dev] |= {k for k, _ in RES_PAIR.findall(line)} - {dev}
        if keys["rxe0"] - keys["ferroce0"]:
            problems.append(f"{kind}: ferroce0 lacks {sorted(keys['rxe0'] - keys['ferroce0'])}")
        shown.append(f"{kind}: {' '.join(sorted(keys['ferroce0'])) or '(none)'}")
    if problems or not shown:
        raise CheckFailed("\n".join(problems) or f"no rdma res output:\n{step.output}")
    return "\n".join(shown)


@scenario.check
def devinfo_against_rxe(run: Run) -> str:
    """ibv_devinfo -v on both devices, field by field: every field rxe reports ferroce reports,
    every limit rxe has ferroce has (not 0), every capability flag rxe has ferroce has, but
    those NOT_OFFERED; the values that differ are listed."""
    v = run.vm("a")
    (ours, our_flags), (theirs, their_flags) = (
        devinfo(v.step(f"devinfo-{kind}").output) for kind in KINDS)
    problems = [f"ferroce lacks the field {k}" for k in theirs if k not in ours]
    problems += [f"{k}: ferroce 0, rxe {theirs[k]}" for k in theirs
                 if k.startswith("max_") and ours.get(k) == "0" and theirs[k] != "0" and k not in LATER]
    problems += [f"ferroce lacks the capability {f}" for f in sorted(their_flags - our_flags)
                 if f not in NOT_OFFERED]
    if problems:
        raise CheckFailed("\n".join(problems))
    differ = [f"{k}: {ours[k]} (rxe {theirs[k]})" for k in theirs if ours.get(k) != theirs[k]]
    missing = [f"{f} ({NOT_OFFERED[f]})" for f in sorted(their_flags - our_flags)]
    return ("capabilities rxe has and ferroce does not: " + ", ".join(missing)
            + "\nvalues that differ:\n  " + "\n  ".join(differ))




PINGPONG = r"^\d+ bytes in [\d.]+ seconds = [\d.]+ Mbit/sec$"
ROWS = {"bw": BW, "lat": LAT, "pingpong": PINGPONG, "none": None}


def tool_list(path: Path = Path(__file__).parent / "tools.list") -> list[tuple[str, str, str]]:
    """A tools.list: (name, row, command) per tool, as the guests run them (common.sh)."""
    tools = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, row, command = line.split(maxsplit=2)
            tools.append((name, row, command))
    return tools


def tool_check(name: str, row: str, command: str):
    def check(run: Run) -> str:
        return parity(run, name, ROWS[row])

    check.__name__ = name.replace("-", "_")
    check.__doc__ = f"{command}: works on ferroce wherever it works on rxe."
    return check


for _name, _row, _command in tool_list():
    scenario.check(tool_check(_name, _row, _command))


@scenario.check
def write_lat_events_refused_alike(run: Run) -> str:
    """perftest has no events on WRITE: both devices must end the same way."""
    refusal = "Events feature not available on WRITE verb"
    ok = {kind: outcome(run, f"write-lat-ev-{kind}") for kind in KINDS}
    if ok["rxe"][0]:
        # A perftest that does events on WRITE: then ferroce must do them too.
        if not ok["ferroce"][0]:
            raise CheckFailed(f"works on rxe, fails on ferroce:\n{ok['ferroce'][1]}")
        return "both work (this perftest does events on WRITE)"
    for kind in KINDS:
        for vm in VMS:
            step = run.vm(vm.name).step(f"write-lat-ev-{kind}")
            if refusal not in step.output:
                raise CheckFailed(f"{vm.name} {kind}: not refused by perftest itself:\n{tail(step.output)}")
    return f"both refused: {refusal}"















@scenario.check
def ucmatose_16(run: Run) -> str:
    for kind in KINDS:
        run.vm("b").step(f"ucmatose-listen-{kind}").ok()
    result = parity(run, "ucmatose")
    for kind in KINDS:
        for vm in VMS:
            run.vm(vm.name).step(f"ucmatose-{kind}").expect(r"^return status 0$")
    return result + " (16 connections each)"


@scenario.check
def gids_unchanged_by_mtu(run: Run) -> str:
    """The GID tables (index, GID, RoCE type, netdev) are the same before and after MTU 9000."""
    for vm in VMS:
        v = run.vm(vm.name)
        v.step("mtu-9000").ok()
        before, after = v.step("gids-before-mtu"), v.step("gids-after-mtu")
        before.ok()
        after.ok()
        if before.output.strip() != after.output.strip():
            raise CheckFailed(f"{vm.name}: GID table changed with the MTU:\nbefore:\n{before.output}\n"
                              f"after:\n{after.output}")
    return "GID tables unchanged; both ports at active MTU 4096"


@scenario.check
def write_bw_mtu_9000(run: Run) -> str:
    result = parity(run, "write-bw-9000", BW)
    for kind in KINDS:
        run.vm("a").step(f"write-bw-9000-{kind}").expect(r"Mtu\s*:\s*4096\[B\]")
    return result


@scenario.check
def write_bw_mtu_9000_own_gid(run: Run) -> str:
    """No -x: perftest chooses the GID; both sides must choose the same family."""
    return parity(run, "write-bw-9000-auto", BW)


@scenario.check
def no_doorbell_rejected(run: Run) -> str:
    figures = []
    for vm in VMS:
        counters = run.vm(vm.name).step("nic-counters").json("counters")
        if counters["bad_doorbells"] or counters["icrc_errors"]:
            raise CheckFailed(f"{vm.name}: bad_doorbells {counters['bad_doorbells']}, "
                              f"icrc_errors {counters['icrc_errors']}")
        figures.append(f"{vm.name}: cq_arms {counters.get('cq_arms')}, eqes {counters.get('eqes')}")
    return "; ".join(figures)


@scenario.check
def captures_decode(run: Run) -> str:
    """Each NIC port's capture (`<vm>.pcapng`): tshark decodes every RoCE frame as InfiniBand,
    none malformed, with the headers the tools use (RETH, AETH, AtomicETH, DETH and, of the UC
    and imm tests, ImmDt), and every ICRC is right (pcapcheck computes it, not the NIC)."""
    lines, problems = [], []
    for vm in VMS:
        summary, wrong = pcapcheck.verify(run.pcap(vm.name), ("bth", "reth", "aeth", "atomiceth", "deth"))
        lines.append(f"{vm.name}: {summary}")
        problems += [f"{vm.name}: {p}" for p in wrong]
    if problems:
        raise CheckFailed("\n".join(problems + lines))
    return "\n".join(lines)
