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


if __name__ == "__main__":
    unittest.main()


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
