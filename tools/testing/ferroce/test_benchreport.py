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


if __name__ == "__main__":
    unittest.main()
