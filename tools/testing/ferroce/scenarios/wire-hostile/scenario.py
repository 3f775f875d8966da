"""A hostile host on the wire: NVMe over RDMA between a and b stays intact while m forges responses.

VM m sits on the switch's mirror port (it sees every frame between a and b) and runs
ferroce_forge (tools/testing/ferroce/hostile): it learns the RC connections of NVMe/RDMA from
the responses crossing the wire and sends their requesters ACKs, NAKs (PSN sequence, remote
access) and READ responses with PSNs far outside the window from the responder's address, the
same inside the window from its own address, and in-window ACKs with a wrong ICRC. None may be
believed: the data is read back bit-exact, nvme-rdma never goes into error recovery, no NAK
reaches a requester and none resends but after a timer expiry (the NIC traces say why each
resend went), and the NICs counted what they dropped.
Checks on the NVMe part: nvme_rdma.py.
"""

import re

from harness import CheckFailed, Run, Vm
from nvme_rdma import scenario_for

MIBS = 16
KINDS = ["ack-ahead", "nak-ahead", "access-ahead", "read-ahead", "ack-stranger", "access-stranger",
         "read-stranger", "bad-icrc"]

scenario = scenario_for({"a": "ferroce", "b": "ferroce"}, timeout=120, mibs=MIBS)
scenario.vms = [*scenario.vms, Vm("m", "10.0.0.3/24", memory_mib=512, mirror=True)]


def forged(run: Run) -> dict[str, int]:
    step = run.vm("m").step("forge")
    step.ok()
    counts = {k: int(v) for k, v in re.findall(r"^forged (\S+) +(\d+)$", step.output, re.M)}
    if sorted(counts) != sorted(KINDS):
        raise CheckFailed(f"forge printed kinds {sorted(counts)}:\n{step.output}")
    return counts


@scenario.check
def responses_forged(run: Run) -> str:
    """m learnt connections of both directions (the host's SENDs, the target's READs and
    WRITEs) and forged every kind at them, enough of each to matter."""
    counts = forged(run)
    step = run.vm("m").step("forge")
    conns = re.findall(r"^connection (\S+) QP (\d+)", step.output, re.M)
    requesters = {ip for ip, _ in conns}
    if requesters != {"10.0.0.1", "10.0.0.2"}:
        raise CheckFailed(f"connections learnt of requesters {sorted(requesters)}, expected both VMs:\n{step.output}")
    # The forger keeps pace with the traffic it sees: fewer frames on a slower kernel.
    least = max(3, int(10 / run.slow))
    few = {k: n for k, n in counts.items() if n < least}
    if few:
        raise CheckFailed(f"fewer than {least} frames forged of {few}:\n{step.output}")
    return f"{sum(counts.values())} frames against {len(conns)} connections: " + ", ".join(
        f"{k} {n}" for k, n in counts.items())


@scenario.check
def nothing_believed(run: Run) -> str:
    """No forged frame was believed: nvme-rdma never recovered from an error (a believed NAK
    ends a QP, a believed ACK or READ response completes what the responder never answered),
    and what the NICs dropped covers every frame from the stranger's address and with a bad
    ICRC."""
    counts = forged(run)
    recovery = run.vm("a").step("recovery")
    recovery.ok()
    if recovery.output.strip():
        raise CheckFailed("nvme-rdma went into error recovery:\n" + recovery.output.strip())
    nics = [run.vm(vm).step("nic-counters").json("counters") for vm in ("a", "b")]
    drops = sum(c["drops"] for c in nics)
    icrc = sum(c["icrc_errors"] for c in nics)
    strangers = counts["ack-stranger"] + counts["access-stranger"] + counts["read-stranger"]
    if drops < strangers:
        raise CheckFailed(f"the NICs dropped {drops} frames, {strangers} came from the stranger's address")
    if icrc < counts["bad-icrc"]:
        raise CheckFailed(f"the NICs counted {icrc} ICRC errors, {counts['bad-icrc']} frames had one")
    # A believed NAK makes its requester resend (or end the QP: error recovery above); so would
    # a believed ACK of a PSN not sent. Resends after a timer expiry ("rto", "timeout") are not
    # judged: they happen without any forgery, when a peer's vCPU is starved (nvme-rdma's NICs
    # see some in a fault-free run).
    naks = sum(c["naks_received"] for c in nics)
    moved = [e for vm in ("a", "b") for e in run.nic_trace(vm)
             if e.get("ev") == "retransmit" and e.get("reason") not in ("rto", "timeout")]
    if naks or moved:
        raise CheckFailed(f"forged frames moved the requesters: naks_received {naks}, "
                          f"retransmissions not after a timer: {moved[:5]}")
    errors = {k: sum(c[k] for c in nics) for k in ("naks_received", "retransmits")}
    timeouts = sum(c["timeouts"] for c in nics)
    return (f"drops {drops} (>= {strangers} from the stranger), icrc_errors {icrc} (>= {counts['bad-icrc']}), "
            f"{errors}, timer expiries {timeouts}")
