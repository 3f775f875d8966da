# SPDX-License-Identifier: GPL-2.0
"""benchreport.py's reading of the engine benchmark (criterion's output)."""

import tempfile
import unittest
from pathlib import Path

import benchreport

CRITERION = """\
4KiB/rc_write/mtu4096   time:   [2.7315 µs 2.7413 µs 2.7517 µs]
4KiB/memcpy             time:   [199.1 ns 200.0 ns 201.2 ns]
4KiB_idle/rc_write/alone
                        time:   [2.7315 µs 2.7413 µs 2.7517 µs]
4KiB_idle/rc_write/among_4096_idle
                        time:   [2.9010 µs 2.9079 µs 2.9165 µs]
"""


class EngineReport(unittest.TestCase):
    def test_the_idle_group_is_read_and_its_ratio_reported(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "engine.txt"
            path.write_text(CRITERION)
            times = benchreport.engine(path)
        self.assertEqual(times, {
            "4KiB": {"rc_write/mtu4096": 2.7413, "memcpy": 0.2},
            "4KiB_idle": {"rc_write/alone": 2.7413, "rc_write/among_4096_idle": 2.9079},
        })
        lines = benchreport.engine_lines(times)
        self.assertIn("- 4KiB_idle: a WRITE among idle QPs (among_4096_idle) takes 1.06× its time alone",
                      lines)
        self.assertIn("| 4KiB | rc_write/mtu4096 | 2.741 | 1425 | 7.3 % |", lines)


class QpsReport(unittest.TestCase):
    def test_each_count_is_the_median_of_its_rounds_over_one_qps(self):
        bw = {1: (200, 300, 250), 8: (240, 100, 260), 64: (225, 230, 900)}
        tests = {f"write-bw-64KiB-q{q}-r{r}": {"bw_avg_mib_s": float(x)}
                 for q, xs in bw.items() for r, x in enumerate(xs, 1)}
        lines, figures = benchreport.qps({"ferroce-mtu1500": {"tests": tests}})
        f = figures["1500"]
        self.assertEqual([f[q]["median"] for q in (1, 8, 64)], [250, 240, 230])
        self.assertAlmostEqual(f[8]["over_one"], 0.96)
        self.assertAlmostEqual(f[64]["over_one"], 0.92)
        self.assertIn("| 1500 | 250.0 (200.0, 300.0, 250.0) | 240.0 (240.0, 100.0, 260.0); × 0.96 "
                      "| 230.0 (225.0, 230.0, 900.0); × 0.92 |", lines)

    def test_no_rounds_no_section(self):
        self.assertEqual(benchreport.qps({"rxe-mtu1500": {"tests": {}}}), ([], {}))


class NicCpuReport(unittest.TestCase):
    def test_both_nics_cpu_over_the_gib_moved(self):
        from bench import nic_cpu_per_gib
        cpu = {"a": ({"user_us": 1_000_000, "system_us": 500_000}, {"user_us": 2_000_000, "system_us": 1_000_000}),
               "b": ({"user_us": 0, "system_us": 0}, {"user_us": 250_000, "system_us": 250_000})}
        self.assertEqual(nic_cpu_per_gib(cpu, 1 << 29), 4.0)  # 2 s over half a GiB
        self.assertIsNone(nic_cpu_per_gib(cpu, 0))
        runs = {"ferroce-mtu9000": {"tests": {"write-bw-64KiB": {"nic_cpu": {
            "payload_bytes": 1 << 29, "cpu_s": {"a": 3.0, "b": 1.0}, "cpu_s_per_gib": 4.0}}}}}
        lines, figures = benchreport.nic_cpu(runs)
        self.assertEqual(list(figures), ["9000"])
        self.assertIn("MTU 9000 4 s (512 MiB moved)", lines[0])


class PolledRun(unittest.TestCase):
    def test_the_poller_gets_the_last_cpu_and_the_qemus_the_others(self):
        from bench import poller_cpus
        self.assertEqual(poller_cpus({0, 1}), (1, "0"))
        self.assertEqual(poller_cpus({3, 0, 2}), (3, "0,2"))
        self.assertIsNone(poller_cpus({0}), "one CPU: no core of the poller's own")

    def test_the_polled_run_has_the_record_rows_only(self):
        from bench import tests_for
        names = [t.name for t in tests_for("ferroce", polled=True)]
        self.assertEqual(names, [*(f"cost-chain{c}-inline-record-n{n}" for c in (1, 8, 32)
                                   for n in (256, 1024)), "loop-lat-record"])
        self.assertIn("cost-lat-push-n256", [t.name for t in tests_for("ferroce")])

    def test_the_looped_back_rows_by_mode_and_run(self):
        runs = {"ferroce-mtu1500": {"tests": {"loop-lat-nopush": {
                    "us_per_chain": 80.0, "nic_latency": {"rung": {"avg_us": 20.0, "p99_us": 40.0, "count": 5}}}}},
                benchreport.POLLED_RUN: {"tests": {"loop-lat-record": {
                    "us_per_chain": 30.5, "nic_latency": {"polled": {"avg_us": 2.0, "p99_us": 4.0, "count": 5}}}}}}
        lines, table = benchreport.looped(runs)
        self.assertEqual(table["record, ferroce-polled"]["us_per_wr"], 30.5)
        self.assertIn("| nopush | two VMs, cores shared | 80.0 | 20.0 | 40.0 | 5 |", lines)
        self.assertIn("| record | one VM, poller on a core of its own | 30.5 | 2.0 | 4.0 | 5 |", lines)
        self.assertEqual(benchreport.looped({}), ([], {}))

    def test_polled_rows_follow_the_others_in_the_cost_table(self):
        from bench import COST_COUNTERS
        def counts(n, writes):
            return {"counts": {c: (writes if c == "mmio_writes" else n) for c in COST_COUNTERS}}
        tests = {"cost-lat-record-n256": counts(256, 300), "cost-lat-record-n1024": counts(1024, 1068)}
        polled = {"cost-lat-record-n256": counts(256, 44), "cost-lat-record-n1024": counts(1024, 44)}
        runs = {"ferroce-mtu1500": {"tests": tests}, benchreport.POLLED_RUN: {"tests": polled}}
        lines, table = benchreport.costs(runs)
        self.assertEqual(table["cost-lat-record"]["mmio_writes"], 1.0)
        self.assertEqual(table["cost-lat-record, polled"]["mmio_writes"], 0.0)
        self.assertEqual(table["cost-lat-record, polled"]["cqes"], 1.0)
        self.assertTrue(any(line.startswith("| cost-lat-record, polled | ") for line in lines))


class ShmCableReport(unittest.TestCase):
    def test_the_shm_runs_stand_beside_sockets_and_rxe(self):
        runs = {"ferroce-mtu1500": {"tests": {"write-bw-64KiB": {"bw_avg_mib_s": 200.0},
                                              "send-lat": {"t_typical_us": 70.0}}},
                "rxe-mtu1500": {"tests": {"write-bw-64KiB": {"bw_avg_mib_s": 20.0},
                                          "send-lat": {"t_typical_us": 280.0}}},
                benchreport.shm_run(1500): {"tests": {
                    "write-bw-64KiB": {"bw_avg_mib_s": 400.0, "nic_cpu": {
                        "payload_bytes": 1 << 30, "cpu_s": {"a": 1.0, "b": 1.0}, "cpu_s_per_gib": 2.0}},
                    "send-lat": {"t_typical_us": 56.0}}}}
        lines, table = benchreport.shm_cable(runs)
        self.assertEqual(table["write-bw-64KiB"]["1500"],
                         {"shm": 400.0, "sockets": 200.0, "rxe": 20.0, "times_better": 20.0})
        self.assertEqual(table["send-lat"]["1500"]["times_better"], 5.0)
        self.assertIn("| write-bw-64KiB | MiB/s | 400.0 | 200.0 | 20.0 | 20.00 |", lines)
        self.assertNotIn("cost-chain1-push", table, "ferroce-only rows are not compared")
        _, cpu = benchreport.nic_cpu(runs)
        self.assertEqual(list(cpu), ["1500 on shm"])
        self.assertEqual(benchreport.shm_cable({"ferroce-mtu1500": {"tests": {}}}), ([], {}))


if __name__ == "__main__":
    unittest.main()
