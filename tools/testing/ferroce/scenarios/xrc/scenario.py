"""XRC (extended reliable connection) on ferroce, two VMs, through libferroce-rdmav34.so.

ferroce_xrc on VM a alone, its pairs looped back through the NIC's own GID: SENDs from XRC_SEND
QPs naming an XRC SRQ (ibv_post_send's remote_srqn and ibv_wr_set_xrc_srqn) arrive through
XRC_RECV QPs with the target's number in wc.qp_num; a child process opens the XRC domain through
the same file and a target QP by number, which outlives its creator's handle while the child
holds it and is gone after; a SEND into another domain's SRQ completes with REM_ACCESS_ERR and
the target's creator gets IBV_EVENT_QP_ACCESS_ERR (Linux gives a QP a process opened no async
events); ibv_open_qp of what is no target QP of the domain is refused.

Then between the VMs, GID 3 (RoCE v2 IPv4): ibv_xsrq_pingpong, its server on b serving three
clients on a at once (-c 3: the clients share /tmp/xrc_domain, and the server answers each
through another client's target QP into its SRQ), with and without -e (completion events); and
perftest with -c XRC: ib_send_bw, ib_write_bw, ib_read_bw (4 KiB) and ib_send_lat (2 B), 100
iterations each. Each pair starts when a signals b (guest/lib.sh: signal, await), so that a
failed pair leaves the next in step; a client runs again only while its server does not listen
yet (clients.sh), so that the step shows the client's own error; every step has a timeout.
"""

import re

from harness import CheckFailed, Run, Scenario, Vm
from perftest import ROW

VMS = [Vm("a", "10.0.0.1/24", nic=True), Vm("b", "10.0.0.2/24", nic=True)]
scenario = Scenario(vms=VMS, timeout=120)
# ibv_xsrq_pingpong's server sends to every client's target QP as soon as it has connected the
# last client (xsrq_pingpong.c: pp_server_connect, then main's pp_post_send), while that client
# may still be moving its target to RTR (pp_client_connect: connect_qps after recv_remote_dest):
# the NIC drops what reaches a target in INIT ("QP type or state"), as hardware does, and the
# sender recovers it after the target's first sequence NAK.
scenario.wire_judged = False
scenario.unjudged_why = ("ibv_xsrq_pingpong sends before its clients' targets are in RTR, "
                         "and the first frames are sent again")
CLIENTS = 3
ITERS = 100
# ibv_xsrq_pingpong's address lines (ADDR_FORMAT, "%8s: LID %04x, QPN RECV %06x SEND %06x, PSN
# %06x, SRQN %06x, GID %s") and the line it ends a successful run with.
ADDRESS = re.compile(r"^\s*(local|remote): LID [0-9a-f]+, QPN RECV ([0-9a-f]+) SEND ([0-9a-f]+), "
                     r"PSN [0-9a-f]+, SRQN ([0-9a-f]+), GID (\S+)\s*$", re.M)
SUCCESS = re.compile(r"^success\s*$", re.M)
# What perftest prints when something went wrong (as perftest.py's checks).
ERRORS = re.compile(r"Couldn't|failed|Failed")


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.splitlines()[-lines:])


def xsrq(run: Run, name: str) -> str:
    """Step `name`: the server on b served its three clients and printed "success"; each of
    the three clients on a (clients.sh) exited 0 and printed "success"."""
    server = run.vm("b").step(name)
    clients = run.vm("a").step(name)
    problems = []
    if server.rc != 0 or not SUCCESS.search(server.output):
        missing = "" if SUCCESS.search(server.output) else ', no "success" line'
        problems.append(f"b (server, -c {CLIENTS}): rc={server.rc}{missing}:\n{tail(server.output)}")
    peers = [m for m in ADDRESS.finditer(server.output) if m.group(1) == "remote"]
    if len(peers) != CLIENTS:
        problems.append(f"b (server): {len(peers)} clients connected, expected {CLIENTS}")
    ended = re.findall(r"^=== client (\d+) rc=(\S+) tries=(\d+)$", clients.output, re.M)
    done = sum(1 for _, rc, _ in ended if rc == "0")
    successes = len(SUCCESS.findall(clients.output))
    if clients.rc != 0 or done != CLIENTS or successes != CLIENTS:
        status = ", ".join(f"client {i}: rc={rc} after {tries} runs" for i, rc, tries in ended)
        problems.append(f"a (clients): rc={clients.rc}, {successes} of {CLIENTS} printed "
                        f"\"success\" ({status or 'no client reported'}):\n{tail(clients.output, 30)}")
    if problems:
        raise CheckFailed("\n".join(problems))
    srqns = ", ".join(m.group(4) for m in peers)
    return f"server served {CLIENTS} clients (their SRQNs {srqns}); all printed \"success\""


@scenario.check
def xsrq_pingpong(run: Run) -> str:
    return xsrq(run, "xsrq-pingpong")


@scenario.check
def xsrq_pingpong_events(run: Run) -> str:
    return xsrq(run, "xsrq-pingpong-events")


def xrc_perftest(run: Run, name: str, size: int, kind: str) -> str:
    """perftest step `name` (-c XRC) exited 0 on both VMs without an error, the client ran
    XRC ("Connection type : XRC") and printed its row of `ITERS` messages of `size` bytes."""
    for vm in VMS:
        step = run.vm(vm.name).step(name)
        if step.rc != 0:
            raise CheckFailed(f"{vm.name}: {name} exited with rc={step.rc}:\n{tail(step.output)}")
        if ERRORS.search(step.output):
            raise CheckFailed(f"{vm.name}: {name} reported an error:\n{tail(step.output)}")
    client = run.vm("a").step(name)
    if not re.search(r"Connection type\s*:\s*XRC\b", client.output):
        raise CheckFailed(f"a: {name} does not say \"Connection type : XRC\":\n{tail(client.output)}")
    fields = client.expect(ROW[kind]).group(0).split()
    if int(fields[0]) != size or int(fields[1]) != ITERS:
        raise CheckFailed(f"a: {name}'s row is {fields[0]} B x {fields[1]}, expected {size} B x {ITERS}")
    if kind == "lat":
        return f"{fields[0]} B x {fields[1]}: t_typical {fields[4]} us, t_avg {fields[5]} us"
    return f"{fields[0]} B x {fields[1]}: {fields[3]} MiB/s average, {fields[4]} Mpps"


@scenario.check
def xrc_send_bw(run: Run) -> str:
    return xrc_perftest(run, "xrc-send-bw", 4096, "bw")


@scenario.check
def xrc_write_bw(run: Run) -> str:
    return xrc_perftest(run, "xrc-write-bw", 4096, "bw")


@scenario.check
def xrc_read_bw(run: Run) -> str:
    return xrc_perftest(run, "xrc-read-bw", 4096, "bw")


@scenario.check
def xrc_send_lat(run: Run) -> str:
    return xrc_perftest(run, "xrc-send-lat", 2, "lat")


@scenario.check
def xrc_verbs(run: Run) -> str:
    """ferroce_xrc (verbs/ferroce_xrc.c) passed its four parts and used the ibv_wr_* API too
    (ferroce offers it for XRC_SEND QPs, and perftest posts with it by default)."""
    step = run.vm("a").step("xrc-verbs")
    failure = re.search(r"^xrc: FAIL: .*$", step.output, re.M)
    if step.rc != 0 or failure:
        raise CheckFailed(f"ferroce_xrc exited with rc={step.rc}"
                          + (f": {failure.group(0)}" if failure else "") + f"\n{tail(step.output, 25)}")
    for part in "abcd":
        if not re.search(rf"^xrc {part}: ok$", step.output, re.M):
            raise CheckFailed(f"ferroce_xrc never printed \"xrc {part}: ok\":\n{tail(step.output, 25)}")
    skipped = re.search(r"^xrc a: ibv_wr_\*: skipped.*$", step.output, re.M)
    if skipped:
        raise CheckFailed(f"the ibv_wr_* API was not tried: {skipped.group(0)}")
    return step.expect(r"^xrc ok: .*$").group(0)


@scenario.check
def nic_counters(run: Run) -> str:
    """The NICs saw the traffic, and no doorbell of the processes was rejected."""
    lines = []
    for vm in VMS:
        counters = run.vm(vm.name).step("nic-counters").json("counters")
        if counters["bad_doorbells"] or counters["command_errors"] or counters["dma_errors"]:
            raise CheckFailed(f"{vm.name}: bad_doorbells {counters['bad_doorbells']}, "
                              f"command_errors {counters['command_errors']}, dma_errors {counters['dma_errors']}")
        lines.append(f"{vm.name}: " + " ".join(f"{k}={counters[k]}" for k in
                     ["doorbells", "wqe_fetches", "cqes", "interrupts", "tx_packets", "rx_packets",
                      "retransmits"]))
    return "\n".join(lines)
