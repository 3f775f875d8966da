"""ibv_devices and ibv_devinfo -v on ferroce0, through libibverbs and our Rust provider.

ibv_open_device() goes through the provider's alloc_context: the driver allocates a NIC context
and the provider maps its doorbell page; the queries then go through ibv_cmd_*. The output must
show the device as ferroce0 with the NIC's limits, PORT_ACTIVE on Ethernet, and the GID table of
seed 2 §4 (fe80:: EUI-64 at 0/1, the IPv4-mapped address at 2/3, RoCE v1/v2).
"""

import ipaddress
import re

from harness import CheckFailed, Run, Scenario, Vm, eui64_link_local, mac_of

# in-flight.sh keeps commands waiting on a stalled NIC: a longer command timeout than the 2 s
# default. The QID table is short, so that qid-table can fill it.
CMD_TIMEOUT_MS = 20000
QID_TABLE_LEN = 8
scenario = Scenario(vms=[Vm("a", "10.0.0.1/24", nic=True, steers_nic=True,
                            nic_args=["--cmd-timeout-ms", str(CMD_TIMEOUT_MS),
                                      "--qid-table-len", str(QID_TABLE_LEN)])],
                    timeout=120, faults=True)  # in-flight.sh stalls the NIC


@scenario.check
def provider_installed(run: Run) -> None:
    step = run.vm("a").step("provider")
    step.ok()
    step.expect(r"^driver ferroce$")


@scenario.check
def listed(run: Run) -> str:
    step = run.vm("a").step("ibv-devices")
    step.ok()
    m = step.expect(r"^\s+ferroce0\s+([0-9a-f]{16})$")
    # The EUI-64 of the MAC, as rdma_cm needs a node GUID to find the device.
    b = [int(x, 16) for x in mac_of(0).split(":")]
    want = bytes([b[0] ^ 2, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]]).hex()
    if m.group(1) != want:
        raise CheckFailed(f"node GUID {m.group(1)}, expected {want} (EUI-64 of {mac_of(0)})")
    return f"node GUID {m.group(1)}"


@scenario.check
def device_attributes(run: Run) -> str:
    step = run.vm("a").step("ibv-devinfo")
    step.ok()
    if "couldn't load driver" in step.output or "Failed to open" in step.output:
        raise CheckFailed(f"the provider did not open the device:\n{step.output}")
    step.expect(r"^hca_id:\s+ferroce0$")
    step.expect(r"^\s+vendor_id:\s+0x1234$")
    step.expect(r"^\s+vendor_part_id:\s+65025$")
    step.expect(r"^\s+phys_port_cnt:\s+1$")
    qps = step.expect(r"^\s+max_qp:\s+(\d+)$")
    srqs = step.expect(r"^\s+max_srq:\s+(\d+)$")
    if int(srqs.group(1)) == 0:
        raise CheckFailed("max_srq is 0: SRQs are not offered")
    step.expect(r"^\s+max_srq_wr:\s+\d+$")
    # The hardware interface's version, as rxe prints its own (rdma-core's major.minor.sub).
    fw = step.expect(r"^\s+fw_ver:\s+(\d+\.\d+\.\d+)$").group(1)
    if fw != "1.4.0":
        raise CheckFailed(f"fw_ver {fw}, expected the interface version 1.4.0")
    res = int(step.expect(r"^\s+max_res_rd_atom:\s+(\d+)$").group(1))
    per_qp = int(step.expect(r"^\s+max_qp_rd_atom:\s+(\d+)$").group(1))
    if res != int(qps.group(1)) * per_qp:
        raise CheckFailed(f"max_res_rd_atom {res}: not max_qp x max_qp_rd_atom ({per_qp})")
    flags = int(step.expect(r"^\s+device_cap_flags:\s+(0x[0-9a-f]+)$").group(1), 16)
    # RC_RNR_NAK_GEN, PORT_ACTIVE_EVENT, SYS_IMAGE_GUID, MEM_MGT_EXTENSIONS, MEM_WINDOW,
    # MEM_WINDOW_TYPE_2B, XRC.
    wanted = (1 << 12) | (1 << 10) | (1 << 11) | (1 << 21) | (1 << 17) | (1 << 24) | (1 << 20)
    if flags & wanted != wanted:
        raise CheckFailed(f"device_cap_flags {flags:#x} lacks {wanted & ~flags:#x}")
    # Windows share the MR table; the multicast limits are the hardware interface's.
    mrs = step.expect(r"^\s+max_mr:\s+(\d+)$").group(1)
    step.expect(rf"^\s+max_mw:\s+{mrs}$")
    step.expect(r"^\s+max_mcast_grp:\s+1024$")
    step.expect(r"^\s+max_mcast_qp_attach:\s+32$")
    step.expect(r"^\s+max_total_mcast_qp_attach:\s+4096$")
    return (f"max_qp {qps.group(1)}, max_srq {srqs.group(1)}, max_mw {mrs}, fw_ver {fw}, "
            f"max_res_rd_atom {res}")


@scenario.check
def port_and_gids(run: Run) -> None:
    step = run.vm("a").step("ibv-devinfo")
    step.expect(r"^\s+state:\s+PORT_ACTIVE \(4\)$")
    step.expect(r"^\s+link_layer:\s+Ethernet$")
    # ibv_devinfo prints RoCE v1 GIDs uncompressed and v2 GIDs compressed: compare addresses.
    got = {int(i): (ipaddress.IPv6Address(gid), kind)
           for i, gid, kind in re.findall(r"^\s+GID\[\s*(\d+)\]:\s+(\S+), (RoCE v[12])$", step.output, re.M)}
    link_local = ipaddress.IPv6Address(eui64_link_local(mac_of(0)))
    ipv4 = ipaddress.IPv6Address("::ffff:10.0.0.1")
    want = {0: (link_local, "RoCE v1"), 1: (link_local, "RoCE v2"),
            2: (ipv4, "RoCE v1"), 3: (ipv4, "RoCE v2")}
    if got != want:
        raise CheckFailed(f"GID table {got}, expected {want}")


@scenario.check
def commands_in_flight(run: Run) -> str:
    """Four opens at once on a stalled NIC: four commands posted together, all completed."""
    step = run.vm("a").step("in-flight")
    step.ok()
    posted = int(step.expect(r"^commands posted while stalled: (\d+)$").group(1))
    if posted != 4:
        raise CheckFailed(f"{posted} commands were posted while the NIC was stalled, expected 4 "
                          "(each caller takes its own slot)")
    opens = re.findall(r"^open \d: rc=(\d+) (\d+) device$", step.output, re.M)
    if len(opens) != 4 or any(rc != "0" or n != "1" for rc, n in opens):
        raise CheckFailed(f"not every open completed:\n{step.output}")
    if f"command timeout {CMD_TIMEOUT_MS} ms" not in step.output:
        raise CheckFailed(f"the driver did not take the NIC's command timeout of {CMD_TIMEOUT_MS} ms")
    return "4 commands in flight at once, all completed"


@scenario.check
def qid_table_from_the_device(run: Run) -> str:
    """A context gets as many queues as the device's QID table has, then ENOSPC; the driver
    never asks the device to map a QID past its table."""
    step = run.vm("a").step("qid-table")
    step.ok()
    m = step.expect(r"^created (\d+) CQs, then errno (\d+) \((.*)\)$")
    if (int(m.group(1)), int(m.group(2))) != (QID_TABLE_LEN, 28):
        raise CheckFailed(f"{m.group(0)}; expected {QID_TABLE_LEN} CQs, then errno 28 (ENOSPC)")
    refused = [line for line in run.vm("a").kernel_log.splitlines() if "map_qid" in line]
    if refused:
        raise CheckFailed("the device was asked to map QIDs past its table:\n" + "\n".join(refused))
    return m.group(0)


@scenario.check
def contexts_freed(run: Run) -> None:
    """Every ibv_open_device made a NIC context; none is left once the tools exited."""
    objects = run.vm("a").step("nic-objects")
    objects.ok()
    contexts = [c for c in objects.json("contexts") if c["ctx"] != 0]  # 0 is the kernel's
    if contexts:
        raise CheckFailed(f"NIC contexts left after the tools exited: {contexts}")
    run.vm("a").step("rmmod").ok()


@scenario.check
def host_replies_whole(run: Run) -> str:
    """The guest's host-control reader loses no byte of a reply when the shell's children exit
    as it reads (busybox ash's read builtin drops the part of a line it had read when a signal
    interrupts it: the reply's last line then never matches and the reader waits for ever)."""
    step = run.vm("a").step("replies")
    step.ok()
    return step.expect(r"^whole replies: 3 of 3$").group(0)
