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


if __name__ == "__main__":
    unittest.main()
