"""make run: two VMs doing RDMA through ferroce, printing what they do (vmtest --follow).

ibv_rc_pingpong and ib_write_bw between two ferroce VMs, kernel-bypass through the provider,
then the NIC's counters, where the capture of a's NIC port is, to open in Wireshark, and a
sequence picture of one pingpong SEND drawn from both NICs' traces. The checks are those of a
smoke test.
"""

import nictrace
import pcapcheck
import pingpong
from harness import CheckFailed, Run, Scenario, Vm

scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True), Vm("b", "10.0.0.2/24", nic=True)],
                    timeout=120)


@scenario.check
def rc_pingpong(run: Run) -> str:
    for vm in ("a", "b"):
        run.vm(vm).step("rc-pingpong").expect(r"^819200 bytes in ")
    return run.vm("a").step("rc-pingpong").expect(r"^819200 bytes in .*$").group(0)


@scenario.check
def write_bw(run: Run) -> str:
    return pingpong.write_bw(run, "write-bw", ("a", "b"), "a", iters=500)


@scenario.check
def counters_shown(run: Run) -> str:
    step = run.vm("a").step("nic-counters")
    step.ok()
    return step.expect(r"^doorbells [1-9]\d*$").group(0)


@scenario.check
def capture(run: Run) -> str:
    """a's port capture decodes (tshark, none malformed; every ICRC right): where it is."""
    path = run.pcap("a")
    summary, problems = pcapcheck.verify(path, ("bth", "reth", "aeth"))
    if problems:
        raise CheckFailed("\n".join(problems))
    shown = f"out/logs/{path.parent.name}/{path.name}"
    return f"{shown}: {summary}\nopen it in Wireshark, or: tshark -r {shown}"


@scenario.check
def sequence_picture(run: Run) -> str:
    """One 4 KiB SEND of the pingpong, doorbell to CQE, drawn from both NICs' traces."""
    traces = [run.log_dir / f"{vm}.nic-trace.jsonl" for vm in ("a", "b")]
    try:
        events = nictrace.after_mark(nictrace.load_all(traces), "rc-pingpong")
        drawn = nictrace.arrows(nictrace.select(events, None, 10, 1, None), 2,
                                nictrace.match_frames(events))
    except SystemExit as e:
        raise CheckFailed(str(e)) from e
    if not any(a.kind == "doorbell" for a in drawn) or not any(a.kind == "cqe" for a in drawn):
        raise CheckFailed("the picture has no doorbell or no CQE")
    path = run.log_dir / "pingpong.svg"
    nictrace.draw(drawn, 2, "ibv_rc_pingpong: one 4 KiB SEND from a to b, doorbell to CQE", path)
    shown = f"out/logs/{path.parent.name}"
    return (f"{shown}/{path.name}: {len(drawn)} events; draw others with: tools/ferroce trace "
            f"{shown}/a.nic-trace.jsonl {shown}/b.nic-trace.jsonl --after-mark rc-pingpong "
            "--skip N --wrs 1 -o FILE.svg (--help)")
