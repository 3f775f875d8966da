"""Unit tests of nictrace.py (sequence pictures from NIC traces), on hand-made traces."""

import json
import tempfile
import unittest
from pathlib import Path

import nictrace


def trace(directory: Path, name: str, unix_us: int, records: list[dict]) -> Path:
    """A trace file as ferroce-nic writes it: the clock record first, then `records`."""
    path = directory / name
    lines = [{"ev": "clock", "t_us": 0, "unix_us": unix_us}] + records
    # A trace cut short by a killed NIC ends with half a line.
    path.write_text("\n".join(json.dumps(r) for r in lines) + '\n{"ev": "fr')
    return path


def frame(t: int, direction: str, psn: int, opcode: int = 4, qpn: int = 2, **more) -> dict:
    return {"ev": "frame", "t_us": t, "dir": direction, "psn": psn, "opcode": opcode,
            "qpn": qpn, "len": 122, **more}


class NictraceTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        d = Path(self.dir.name)
        # a: one SEND (PSN 7) lost, retransmitted, ACKed; b started 1000 µs after a.
        self.a = trace(d, "a.jsonl", 5_000_000, [
            {"ev": "mark", "t_us": 10, "name": "go"},
            {"ev": "doorbell", "t_us": 100, "ctx": 1, "reg": 0x010, "qid": 1, "value": 1 << 16 | 1},
            {"ev": "wqe", "t_us": 110, "qpn": 2, "index": 0, "pushed": True, "opcode": 0,
             "name": "send"},
            frame(120, "tx", 7, retransmit=False),
            {"ev": "retransmit", "t_us": 2000, "qpn": 2, "psn": 7, "reason": "rto"},
            frame(2010, "tx", 7, retransmit=True),
            frame(2290, "rx", 7, opcode=17),
            {"ev": "ack", "t_us": 2300, "dir": "rx", "qpn": 2, "psn": 7},
            {"ev": "cqe", "t_us": 2310, "cqn": 1, "index": 0, "qpn": 2, "wqe_index": 0,
             "opcode": 0, "name": "send", "status": 0, "wr_id": 9},
        ])
        self.b = trace(d, "b.jsonl", 5_001_000, [
            frame(1020, "rx", 7),  # the retransmission, 2020 µs on a's clock
            frame(1100, "tx", 7, opcode=17, qpn=2),
        ])

    def tearDown(self) -> None:
        self.dir.cleanup()

    def test_both_traces_on_one_time_base(self) -> None:
        events = nictrace.load_all([self.a, self.b])
        rx = [e for e in events if e.node == 1 and e.kind == "frame" and e.fields["dir"] == "rx"]
        self.assertEqual(rx[0].t, 2020.0)

    def test_a_retransmission_is_not_taken_for_the_lost_original(self) -> None:
        events = nictrace.load_all([self.a, self.b])
        drawn = nictrace.arrows(nictrace.select(events, None, 0, 1, None), 2)
        kinds = [a.kind for a in drawn]
        self.assertEqual(kinds, ["doorbell", "wqe_push", "frame_lost", "retransmit", "frame",
                                 "frame", "ack", "cqe"])
        # The WQE and the CQE say what they are, in the hardware's names.
        self.assertEqual(drawn[1].label, "push (no fetch): QP 2 WQE 0 (send)")
        self.assertEqual(drawn[7].label, "CQE (send): CQ 1 QP 2 wr_id 9")
        self.assertEqual(drawn[4].fields["rx_t_us"], 2020.0)
        self.assertEqual(drawn[5].label, "ACK PSN 7 QP 2, 122 B")

    def test_lost_selects_the_work_request_with_a_lost_frame(self) -> None:
        events = nictrace.after_mark(nictrace.load_all([self.a, self.b]), "go")
        chosen = nictrace.select(events, None, 0, 1, None, "lost")
        self.assertEqual(chosen[0].kind, "doorbell")
        self.assertEqual(chosen[-1].kind, "cqe")

    def test_latency_stages(self) -> None:
        rows = nictrace.latencies(nictrace.load_all([self.a, self.b]), None)
        self.assertEqual(len(rows), 1)
        # doorbell → push, push → first frame, first frame → last ACK, ACK → CQE, no interrupt.
        self.assertEqual(rows[0]["stages"], [10.0, 10.0, 2180.0, 10.0, None])
        self.assertIn("first frame → last ACK", nictrace.latency_table(rows))

    def test_a_nak_frame_is_named_by_its_syndrome(self) -> None:
        self.assertEqual(nictrace.frame_label(frame(0, "tx", 5, opcode=17, syndrome=0x1f)),
                         "ACK PSN 5 QP 2, 122 B")
        self.assertEqual(nictrace.frame_label(frame(0, "tx", 5, opcode=17, syndrome=0x2e)),
                         "RNR NAK PSN 5 QP 2, 122 B")
        self.assertEqual(nictrace.frame_label(frame(0, "tx", 5, opcode=17, syndrome=0x60)),
                         "sequence NAK PSN 5 QP 2, 122 B")

    def test_the_window_ends_with_the_completion_event_of_the_cqe(self) -> None:
        # After the CQE (2310): a command-done EQE on EQ 1 (CI run of adf7e52: it pulled the
        # next receive CQE into a pingpong iteration), a's receive CQE, then the completion EQE
        # of CQ 1, its interrupt and the re-arm.
        more = [
            {"ev": "cqe", "t_us": 2400, "cqn": 1, "index": 1, "qpn": 2, "wqe_index": 0,
             "opcode": 128, "status": 0, "wr_id": 1},
            {"ev": "eqe", "t_us": 2500, "eqn": 1, "index": 0, "type": 2, "data0": 0},
        ]
        with self.a.open("a") as f:
            f.write("\n" + "\n".join(json.dumps(r) for r in more))
        evs = nictrace.load_all([self.a, self.b])
        self.assertEqual(nictrace.select(evs, None, 0, 1, None)[-1].t, 2310.0)
        more = [
            {"ev": "eqe", "t_us": 2600, "eqn": 2, "index": 0, "type": 1, "data0": 1},
            {"ev": "irq", "t_us": 2601, "vector": 1, "outcome": "sent"},
            {"ev": "cq_arm", "t_us": 2700, "cqn": 1, "solicited": False},
        ]
        with self.a.open("a") as f:
            f.write("\n" + "\n".join(json.dumps(r) for r in more))
        kinds = [e.kind for e in nictrace.select(nictrace.load_all([self.a, self.b]), None, 0, 1,
                                                  None)]
        self.assertEqual(kinds[-3:], ["eqe", "irq", "cq_arm"])
        self.assertEqual(kinds.count("eqe"), 2)

    def test_a_missing_mark_is_refused(self) -> None:
        with self.assertRaises(SystemExit):
            nictrace.after_mark(nictrace.load_all([self.a]), "nope")


if __name__ == "__main__":
    unittest.main()
