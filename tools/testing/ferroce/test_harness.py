# SPDX-License-Identifier: GPL-2.0
"""Unit tests for the VM harness (no VMs needed)."""

import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import harness


def frame(dst: str, src: str, payload: bytes = b"x" * 46) -> bytes:
    mac = lambda s: bytes(int(x, 16) for x in s.split(":"))  # noqa: E731
    return mac(dst) + mac(src) + b"\x08\x00" + payload


class SwitchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = Path(self.dir.name)
        self.switch = harness.Switch(d, ["a", "b", "c"])
        self.ports = {}
        for name in "abc":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(self.switch.port_path(name))
            s.settimeout(2)
            self.ports[name] = s
        self.switch.start()

    def tearDown(self):
        self.switch.close()
        for s in self.ports.values():
            s.close()
        self.dir.cleanup()

    def send(self, port, data):
        self.ports[port].sendto(data, self.switch.switch_path(port))

    def received(self, port):
        self.ports[port].settimeout(0.3)
        try:
            return self.ports[port].recv(65536)
        except TimeoutError:
            return None
        except socket.timeout:
            return None

    def test_floods_broadcast_to_other_ports_only(self):
        f = frame("ff:ff:ff:ff:ff:ff", "52:54:00:00:00:01")
        self.send("a", f)
        self.assertEqual(self.received("b"), f)
        self.assertEqual(self.received("c"), f)
        self.assertIsNone(self.received("a"))

    def test_learns_and_unicasts(self):
        self.send("b", frame("ff:ff:ff:ff:ff:ff", "52:54:00:00:00:02"))
        self.received("a"), self.received("c")
        f = frame("52:54:00:00:00:02", "52:54:00:00:00:01")
        self.send("a", f)
        self.assertEqual(self.received("b"), f)
        self.assertIsNone(self.received("c"))

    def test_drops_runts_and_survives_a_missing_peer(self):
        self.send("a", b"short")
        self.ports["c"].close()
        Path(self.switch.port_path("c")).unlink()
        f = frame("ff:ff:ff:ff:ff:ff", "52:54:00:00:00:01")
        self.send("a", f)
        self.assertEqual(self.received("b"), f)
        time.sleep(0.1)
        self.assertTrue(self.switch._thread.is_alive())


CONSOLE = """\
noise
=== STEP one begin
hello
=== STEP one rc=0 secs=0.1
=== STEP two begin
partial
=== STEP retry begin
attempt
=== STEP retry rc=1 tries=3 secs=9.0
=== FERROCE-EXIT rc=1
"""


class ConsoleTest(unittest.TestCase):
    def result(self):
        return harness.VmResult(harness.Vm("a", "10.0.0.1/24"), CONSOLE, 1, 0)

    def test_steps(self):
        steps = self.result().steps()
        self.assertEqual(steps["one"].rc, 0)
        self.assertEqual(steps["one"].output.strip(), "hello")
        self.assertIsNone(steps["two"].rc)
        self.assertEqual(steps["retry"].tries, 3)

    def test_failures_are_reported(self):
        r = self.result()
        with self.assertRaises(harness.CheckFailed):
            r.step("two")
        with self.assertRaises(harness.CheckFailed):
            r.step("missing")
        with self.assertRaises(harness.CheckFailed):
            r.step("retry").ok()
        with self.assertRaises(harness.CheckFailed):
            r.step("one").expect("absent")
        r.step("one").ok()
        self.assertEqual(r.step("one").expect(r"hel+o").group(0), "hello")

    def test_exit_marker(self):
        self.assertEqual(harness.EXIT.search(CONSOLE).group(1), "1")

    def test_step_secs(self):
        steps = harness.parse_steps(CONSOLE)
        self.assertEqual(steps["one"].secs, 0.1)
        self.assertEqual(steps["retry"].secs, 9.0)
        self.assertIsNone(steps["two"].secs)


class StepIndexTest(unittest.TestCase):
    """parse_steps: one pass over the output, the same steps the old per-name search found."""

    @staticmethod
    def per_name_search(text):
        """The former VmResult.steps(): for each begin, a search for its name's end marker."""
        found = {}
        for begin in harness.STEP_BEGIN.finditer(text):
            name = begin.group(1)
            end = harness.re.compile(rf"^=== STEP {harness.re.escape(name)} rc=(\d+)(?: tries=(\d+))?.*$",
                                     harness.re.M)
            m = end.search(text, begin.end())
            if m:
                found[name] = (int(m.group(1)), text[begin.end():m.start()], int(m.group(2) or 1))
            else:
                found[name] = (None, text[begin.end():], 1)
        return found

    def assert_same_as_before(self, text):
        steps = harness.parse_steps(text)
        self.assertEqual({n: (s.rc, s.output, s.tries) for n, s in steps.items()}, self.per_name_search(text))
        self.assertEqual(list(steps), list(self.per_name_search(text)))
        return steps

    def test_console(self):
        self.assert_same_as_before(CONSOLE)

    def test_nested_and_repeated_names(self):
        text = ("=== STEP outer begin\n=== STEP inner begin\nx\n=== STEP inner rc=0 secs=0.0\n"
                "=== STEP outer rc=2 secs=1.5\n=== STEP again begin\nfirst\n=== STEP again rc=1 secs=0.1\n"
                "=== STEP again begin\nsecond\n=== STEP again rc=0 secs=0.2\n")
        steps = self.assert_same_as_before(text)
        self.assertIn("=== STEP inner rc=0", steps["outer"].output)
        self.assertEqual((steps["outer"].rc, steps["outer"].secs), (2, 1.5))
        self.assertEqual((steps["again"].output.strip(), steps["again"].rc), ("second", 0))

    def test_a_rerun_that_never_ended_counts(self):
        text = "=== STEP s begin\na\n=== STEP s rc=0 secs=1.0\n=== STEP s begin\nb\n"
        steps = self.assert_same_as_before(text)
        self.assertIsNone(steps["s"].rc)

    def test_markers_must_start_a_line(self):
        text = "=== STEP s begin\nsaid === STEP s rc=0\n=== STEP s rc=3 secs=0.5\n"
        steps = self.assert_same_as_before(text)
        self.assertEqual(steps["s"].rc, 3)

    def test_parsed_once(self):
        r = harness.VmResult(harness.Vm("a", "10.0.0.1/24"), CONSOLE, 1, 0)
        calls = []
        real = harness.parse_steps
        harness.parse_steps = lambda text: calls.append(text) or real(text)
        try:
            for _ in range(5):
                r.step("one"), r.steps(), r.step("retry")
        finally:
            harness.parse_steps = real
        self.assertEqual(calls, [])  # parsed when the result was made
        self.assertIsNot(r.steps(), r.steps())  # callers get their own dict


class PrivateNetworkTest(unittest.TestCase):
    @unittest.skipUnless(os.geteuid() == 0, "needs root (CAP_SYS_ADMIN) for a network namespace")
    def test_deep_datagram_queues_in_a_namespace_of_our_own(self):
        script = ("import harness; ok = harness.private_network(512); "
                  "print(ok, open('/proc/sys/net/unix/max_dgram_qlen').read().strip())")
        out = subprocess.run([sys.executable, "-c", script], cwd=os.path.dirname(harness.__file__),
                             capture_output=True, text=True, check=True).stdout.split()
        self.assertEqual(out, ["True", "512"])
        # The host's namespace is untouched.
        with open("/proc/sys/net/unix/max_dgram_qlen") as f:
            self.assertNotEqual(f.read().strip(), "512")


if __name__ == "__main__":
    unittest.main()
