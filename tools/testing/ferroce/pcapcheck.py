"""Reading and checking the NIC ports' captures (`<vm>.pcapng`, `ferroce-nic serve --pcap`).

`frames` reads a pcapng file; `icrc_problems` recomputes the ICRC of every RoCE frame from the
specification (IBA annex A16 for RoCE v1, A17 for RoCE v2: the CRC-32 of the packet from the
network header on, with the fields routers may change masked to ones, behind 64 one-bits that
stand in for the LRH), independently of the NIC's own code; `tshark_summary` lets Wireshark's
dissector decode every frame and counts the InfiniBand headers it found and the malformed
frames.
"""

from __future__ import annotations

import dataclasses
import struct
import subprocess
import zlib
from pathlib import Path

ROCE_V2_PORT = 4791
ROCE_V1_ETHERTYPE = 0x8915
# The InfiniBand headers tshark must find in a capture, by their field names.
HEADERS = ("bth", "reth", "aeth", "atomiceth", "deth", "immdt")


@dataclasses.dataclass
class Frame:
    number: int
    data: bytes
    outbound: bool
    comment: str | None


def frames(path: Path) -> list[Frame]:
    """The Enhanced Packet Blocks of a pcapng file (one section, little- or big-endian)."""
    raw = path.read_bytes()
    out: list[Frame] = []
    at, order = 0, "<"
    while at + 12 <= len(raw):
        if raw[at:at + 4] == b"\x0a\x0d\x0d\x0a":  # section header: its byte-order magic
            order = "<" if raw[at + 8:at + 12] == b"\x4d\x3c\x2b\x1a" else ">"
        kind, length = struct.unpack_from(order + "II", raw, at)
        if length < 12 or at + length > len(raw):
            raise ValueError(f"{path}: block at {at} runs past the end (cut short?)")
        if kind == 6:
            _, _, _, caplen, _ = struct.unpack_from(order + "IIIII", raw, at + 8)
            data = raw[at + 28:at + 28 + caplen]
            opts = at + 28 + (caplen + 3) // 4 * 4
            outbound, comment = False, None
            while opts + 4 <= at + length - 4:
                code, olen = struct.unpack_from(order + "HH", raw, opts)
                value = raw[opts + 4:opts + 4 + olen]
                if code == 0:
                    break
                if code == 1:
                    comment = value.decode(errors="replace")
                if code == 2:
                    outbound = struct.unpack(order + "I", value)[0] & 3 == 2
                opts += 4 + (olen + 3) // 4 * 4
            out.append(Frame(len(out) + 1, data, outbound, comment))
        at += length
    return out


def _icrc_input(frame: bytes) -> tuple[bytes, bytes] | None:
    """The masked bytes the ICRC covers and the ICRC itself, or None for a non-RoCE frame."""
    at, ethertype = 12, struct.unpack_from("!H", frame, 12)[0]
    if ethertype == 0x8100:  # one VLAN tag
        at, ethertype = 16, struct.unpack_from("!H", frame, 16)[0]
    l3 = bytearray(frame[at + 2:])
    if ethertype == 0x0800 and len(l3) >= 28 and l3[9] == 17:
        ihl = (l3[0] & 0x0F) * 4
        if struct.unpack_from("!H", l3, ihl + 2)[0] != ROCE_V2_PORT:
            return None
        total = struct.unpack_from("!H", l3, 2)[0]
        l3 = l3[:total]
        l3[1] = 0xFF              # DSCP, ECN
        l3[8] = 0xFF              # TTL
        l3[10:12] = b"\xff\xff"   # header checksum
        l3[ihl + 6:ihl + 8] = b"\xff\xff"  # UDP checksum
        bth = ihl + 8
    elif ethertype == 0x86DD and len(l3) >= 48 and l3[6] == 17:
        if struct.unpack_from("!H", l3, 42)[0] != ROCE_V2_PORT:
            return None
        l3 = l3[:40 + struct.unpack_from("!H", l3, 4)[0]]
        l3[0] |= 0x0F             # traffic class, flow label
        l3[1:4] = b"\xff\xff\xff"
        l3[7] = 0xFF              # hop limit
        l3[46:48] = b"\xff\xff"   # UDP checksum
        bth = 48
    elif ethertype == ROCE_V1_ETHERTYPE and len(l3) >= 52:
        l3 = l3[:40 + struct.unpack_from("!H", l3, 4)[0]]
        l3[0] |= 0x0F             # GRH traffic class, flow label
        l3[1:4] = b"\xff\xff\xff"
        l3[7] = 0xFF              # hop limit
        bth = 40
    else:
        return None
    if len(l3) < bth + 12 + 4:
        return None
    l3[bth + 4] = 0xFF            # BTH: FECN, BECN, reserved
    return b"\xff" * 8 + bytes(l3[:-4]), bytes(l3[-4:])


def icrc_problems(capture: list[Frame]) -> tuple[int, list[str]]:
    """How many RoCE frames the capture holds, and those whose ICRC is wrong (but the frames
    fault injection corrupted, whose comment says so)."""
    roce, bad = 0, []
    for f in capture:
        covered = _icrc_input(f.data)
        if covered is None:
            continue
        roce += 1
        data, icrc = covered
        if zlib.crc32(data) != int.from_bytes(icrc, "little") and "corrupted" not in (f.comment or ""):
            bad.append(f"frame {f.number}: ICRC {icrc.hex()}, computed {zlib.crc32(data):08x}")
    return roce, bad


def _payload_heuristics() -> list[str]:
    """The heuristic dissectors tshark tries on InfiniBand payloads (RPC-over-RDMA, SMB Direct,
    NVMe, iSER, ...), by the short names `--disable-heuristic` takes."""
    out = subprocess.run(["tshark", "-G", "heuristic-decodes"], capture_output=True, text=True,
                         check=False)
    rows = (line.split("\t") for line in out.stdout.splitlines())
    return [row[4] for row in rows if len(row) > 4 and row[0] == "infiniband.payload"]


def tshark_summary(path: Path) -> tuple[dict[str, int], list[str]]:
    """Decodes the capture with tshark: how many frames carry each InfiniBand header, and the
    malformed frames (number and protocol column). Payload heuristics are off: test payloads
    are not RPC-over-RDMA, whatever their first bytes say."""
    fields = ["frame.number", "_ws.malformed", "_ws.col.protocol"] + [f"infiniband.{h}" for h in HEADERS]
    cmd = ["tshark", "-n", "-r", str(path),
           "-Y", f"udp.port == {ROCE_V2_PORT} || eth.type == {ROCE_V1_ETHERTYPE:#x}",
           "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]
    for heuristic in _payload_heuristics():
        cmd += ["--disable-heuristic", heuristic]
    for field in fields:
        cmd += ["-e", field]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"tshark failed ({out.returncode}): {out.stderr.strip()}")
    counts = dict.fromkeys(HEADERS, 0)
    counts["frames"] = 0
    malformed = []
    for line in out.stdout.splitlines():
        cols = line.split("\t")
        cols += [""] * (len(fields) - len(cols))
        counts["frames"] += 1
        if cols[1]:
            malformed.append(f"frame {cols[0]} ({cols[2]})")
        for header, value in zip(HEADERS, cols[3:]):
            counts[header] += bool(value)
    return counts, malformed


def verify(path: Path, want: tuple[str, ...]) -> tuple[str, list[str]]:
    """Checks a capture: every RoCE frame's ICRC is right, tshark decodes every RoCE frame with
    no malformed one, and frames with each header of `want` are among them. Returns a summary
    line and the problems."""
    capture = frames(path)
    roce, bad = icrc_problems(capture)
    counts, malformed = tshark_summary(path)
    problems = bad[:5] + [f"{len(bad)} frames with a wrong ICRC"] * bool(bad)
    problems += [f"tshark: malformed {m}" for m in malformed[:5]]
    if counts["frames"] != roce:
        problems.append(f"tshark decoded {counts['frames']} RoCE frames, the capture has {roce}")
    problems += [f"no frame with {h.upper()}" for h in want if counts[h] == 0]
    if roce == 0:
        problems.append("no RoCE frame captured")
    headers = ", ".join(f"{h.upper()} {counts[h]}" for h in HEADERS)
    return f"{len(capture)} frames, {roce} RoCE with a right ICRC; tshark: {headers}", problems
