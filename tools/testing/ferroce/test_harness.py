# SPDX-License-Identifier: GPL-2.0
"""Unit tests for the VM harness (no VMs needed)."""

import fcntl
import io
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from pathlib import Path
from unittest import mock

import harness
import hosts
import ktap
import pcapcheck
import usage


def frame(dst: str, src: str, payload: bytes = b"x" * 46) -> bytes:
    mac = lambda s: bytes(int(x, 16) for x in s.split(":"))  # noqa: E731
    return mac(dst) + mac(src) + b"\x08\x00" + payload


class SwitchPorts(unittest.TestCase):
    """A switch of ports a, b and c (MIRRORS: its mirror ports), a socket on each."""

    MIRRORS: tuple[str, ...] = ()

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = Path(self.dir.name)
        self.switch = harness.Switch(d, ["a", "b", "c"], self.MIRRORS)
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


class SwitchTest(SwitchPorts):
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

    def test_a_slow_peer_loses_no_frame(self):
        """A burst far beyond the peer socket's queue (net.unix.max_dgram_qlen) arrives
        whole and in order once the peer reads (a lossless fabric, as RoCE expects)."""
        self.send("b", frame("ff:ff:ff:ff:ff:ff", "52:54:00:00:00:02"))
        self.received("a"), self.received("c")
        burst = [frame("52:54:00:00:00:02", "52:54:00:00:00:01", i.to_bytes(4, "big") * 12) for i in range(300)]
        for f in burst:
            self.send("a", f)
        time.sleep(0.3)  # the switch has all of them before b reads any
        got = []
        while (f := self.received("b")) is not None:
            got.append(f)
        self.assertEqual(len(got), len(burst))
        self.assertEqual(got, burst)
        self.assertEqual((self.switch.congested, self.switch.unplugged), (0, 0))

    def test_drops_runts_and_survives_a_missing_peer(self):
        self.send("a", b"short")
        self.ports["c"].close()
        Path(self.switch.port_path("c")).unlink()
        f = frame("ff:ff:ff:ff:ff:ff", "52:54:00:00:00:01")
        self.send("a", f)
        self.assertEqual(self.received("b"), f)
        time.sleep(0.1)
        self.assertTrue(self.switch._thread.is_alive())
        self.assertEqual((self.switch.congested, self.switch.unplugged), (0, 1))


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


def nic(tx: int, retransmits: int = 0, queue_drops: int = 0) -> dict:
    return {"tx_packets": tx, "rx_packets": tx, "retransmits": retransmits, "timeouts": 0,
            "queue_drops": queue_drops, "drops": 0, "port_lost": 0, "nak_retransmits": 0}


class MirrorTest(SwitchPorts):
    MIRRORS = ("c",)

    def test_the_mirror_sees_unicast_between_the_others(self):
        self.send("b", frame("ff:ff:ff:ff:ff:ff", "52:54:00:00:00:02"))
        self.assertIsNotNone(self.received("a"))
        self.assertIsNotNone(self.received("c"))
        f = frame("52:54:00:00:00:02", "52:54:00:00:00:01")
        self.send("a", f)
        self.assertEqual(self.received("b"), f)
        self.assertEqual(self.received("c"), f)

    def test_what_the_mirror_cannot_take_is_not_congestion(self):
        self.ports["c"].close()  # nobody reads: every copy is lost
        del self.ports["c"]
        f = frame("ff:ff:ff:ff:ff:ff", "52:54:00:00:00:01")
        self.send("a", f)
        self.assertEqual(self.received("b"), f)
        time.sleep(0.1)
        self.assertEqual((self.switch.congested, self.switch.mirror_dropped), (0, 1))

    def test_a_mirror_makes_two_ports_a_switch(self):
        self.assertIsInstance(harness.segment_for(Path(self.dir.name), ["x", "y"], ("y",)), harness.Switch)


class CableTest(unittest.TestCase):
    def test_two_ports_are_a_cable_more_are_a_switch(self):
        with tempfile.TemporaryDirectory() as name:
            d = Path(name)
            self.assertIsInstance(harness.segment_for(d, ["a", "b", "c"]), harness.Switch)
            cable = harness.segment_for(d, ["a", "b"])
            self.assertIsInstance(cable, harness.Cable)
            ends = {}
            for port in "ab":
                ends[port] = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                ends[port].bind(cable.port_path(port))
                ends[port].settimeout(2)
            f = frame("ff:ff:ff:ff:ff:ff", "52:54:00:00:00:01")
            ends["a"].sendto(f, cable.switch_path("a"))
            self.assertEqual(ends["b"].recv(65536), f)
            ends["b"].sendto(f, cable.switch_path("b"))
            self.assertEqual(ends["a"].recv(65536), f)
            for end in ends.values():
                end.close()
            self.assertEqual(harness.wire_report({"lan": cable}, {}), {"switches": {}, "nics": {}})

    def test_two_nics_may_share_memory_and_nothing_else_does(self):
        with tempfile.TemporaryDirectory() as name:
            d = Path(name)
            nics = frozenset({"a", "b", "c"})
            self.assertIsInstance(harness.segment_for(d, ["a", "x"], (), nics), harness.Cable,
                                  "a VM without a NIC (QEMU's virtio-net) needs sockets")
            for names, mirrors in ((["a", "b", "c"], ()), (["a", "b"], ("b",))):
                switch = harness.segment_for(d, names, mirrors, nics)
                self.assertIsInstance(switch, harness.Switch)
                switch.close()
                for port in names:
                    (d / f"{port}.switch").unlink()
            cable = harness.segment_for(d, ["a", "b"], (), nics)
            self.assertIsInstance(cable, harness.ShmCable)
            (wire_a, fds_a), (wire_b, fds_b) = cable.wire("a"), cable.wire("b")
            memfd = fds_a[0]
            self.assertEqual(wire_a, f"shm:{memfd},{fds_a[1]},a")
            self.assertEqual(wire_b, f"shm:{memfd},{fds_b[1]},b")
            self.assertEqual(fds_b[0], memfd)
            self.assertEqual(os.fstat(memfd).st_size, 0, "the NICs size it")
            self.assertFalse(os.get_inheritable(memfd), "only its NICs inherit it")
            cable.close()
            with self.assertRaises(OSError):
                os.fstat(memfd)

    def test_ferroce_cable_shm_puts_every_scenario_on_shared_memory(self):
        with mock.patch.dict(os.environ, {"FERROCE_CABLE": "shm"}):
            self.assertTrue(harness.shm_cables(False))
        with mock.patch.dict(os.environ, {"FERROCE_CABLE": ""}):
            self.assertFalse(harness.shm_cables(False))
            self.assertTrue(harness.shm_cables(True))


class WireCleanTest(unittest.TestCase):
    """The implicit wire-clean check of every scenario."""

    def report(self, congested: int = 0, **nics: dict) -> dict:
        return {"switches": {"lan": {"frames": 100, "congested": congested, "unplugged": 3}},
                "nics": nics}

    def test_a_clean_run_passes_with_its_figures(self):
        passed, text = harness.wire_clean(harness.Scenario([]), self.report(a=nic(5000, 5), b=nic(5000)))
        self.assertTrue(passed, text)
        self.assertIn("retransmitted 5 of 10000 frames (0.050 %; judged: only those", text)
        self.assertIn("switch lan: 100 frames, 0 lost to congestion, 3 to a port not up", text)

    def test_timer_retransmits_pass_reported_losses_fail_a_fault_free_run_only(self):
        # A cold CI run: 48 of 33967 frames sent again after 8 timer expiries, nothing lost.
        passed, text = harness.wire_clean(harness.Scenario([]), self.report(a=dict(nic(33967, 48), timeouts=8)))
        self.assertTrue(passed, text)
        self.assertIn("retransmitted 48 of 33967 frames (0.141 %; judged: only those", text)
        report = self.report(a=dict(nic(1000, 3), nak_retransmits=2))
        passed, text = harness.wire_clean(harness.Scenario([]), report)
        self.assertFalse(passed)
        self.assertIn("NIC a sent 2 packets again after its peer reported a loss, in a fault-free run", text)
        self.assertIn("NIC a: 1000 frames sent, 3 retransmitted (2 after a reported loss, 0 timer expiries)", text)
        self.assertTrue(harness.wire_clean(harness.Scenario([], faults=True), report)[0])

    def test_frames_sent_again_after_rnr_naks_are_not_losses(self):
        # tools-parity's ib_send_bw outran its receiver's reposting: 11 RNR NAKs, 337 frames again.
        report = self.report(a=dict(nic(213709), rnr_resends=337), b=nic(20634))
        passed, text = harness.wire_clean(harness.Scenario([]), report)
        self.assertTrue(passed, text)
        self.assertIn("NIC a: 213709 frames sent, 0 retransmitted (0 after a reported loss, 0 timer "
                      "expiries), 337 sent again after RNR NAKs", text)

    def test_queue_drops_fail_and_congestion_always_fails(self):
        self.assertFalse(harness.wire_clean(harness.Scenario([]), self.report(a=nic(10, 0, 1)))[0])
        faulty = harness.Scenario([], faults=True)
        self.assertTrue(harness.wire_clean(faulty, self.report(a=nic(10, 0, 1)))[0])
        passed, text = harness.wire_clean(faulty, self.report(congested=1))
        self.assertFalse(passed)
        self.assertIn("switch lan lost 1 frames to congestion", text)

    def test_a_shared_memory_cables_bad_slots_fail_even_a_run_with_faults(self):
        cable = {"wakeups": 12, "bad_indexes": 0, "bad_lengths": 0}
        passed, text = harness.wire_clean(harness.Scenario([]), self.report(a=dict(nic(10), cable=cable)))
        self.assertTrue(passed, text)
        self.assertIn("its shared-memory cable: 12 wake-ups sent, 0 bad slots (0 indexes, 0 lengths)", text)
        bad = dict(nic(10), cable=dict(cable, bad_lengths=2))
        passed, text = harness.wire_clean(harness.Scenario([], faults=True), self.report(a=bad))
        self.assertFalse(passed)
        self.assertIn("NIC a skipped 2 bad slots of its shared-memory cable", text)

    def test_a_dead_nic_is_reported(self):
        passed, text = harness.wire_clean(harness.Scenario([]), self.report(a={"error": "refused"}))
        self.assertTrue(passed)
        self.assertIn("NIC a: refused", text)

    def test_hosts_links_are_shown(self):
        report = self.report(a=nic(10))
        report["hosts"] = {"east": {"links": {"uplink": {"tx": 900, "rx": 800, "dropped": 0}},
                                    "udp_rcvbuf_errors": 0},
                           "west": {"error": "host west: gone"}}
        passed, text = harness.wire_clean(harness.Scenario([]), report)
        self.assertTrue(passed, text)
        self.assertIn("host east: uplink 900 out, 800 in, 0 dropped; UDP receive buffer overflows 0", text)
        self.assertIn("host west: gone", text)


class HostsTest(unittest.TestCase):
    """The wires of VMs placed on hosts (hosts.py), without making the namespaces."""

    VMS = [harness.Vm("a", "10.0.0.1/24", nic=True, host="east", wire="udp"),
           harness.Vm("b", "10.0.0.2/24", nic=True, host="west", wire="udp"),
           harness.Vm("c", "10.0.0.3/24", host="west"),
           harness.Vm("d", "10.0.0.4/24", nic=True, host="east")]

    def test_hosts_are_numbered_in_order_of_their_vms(self):
        h = hosts.Hosts(self.VMS)
        self.assertEqual(h.names, ["east", "west"])
        self.assertEqual((h.address("east"), h.address("west")), ("10.99.0.1", "10.99.0.2"))

    def test_a_udp_wire_points_at_the_other_end(self):
        h = hosts.Hosts(self.VMS)
        self.assertEqual(h.wire(self.VMS[0]), "udp:10.99.0.1:7000,10.99.0.2:7001")
        self.assertEqual(h.wire(self.VMS[1]), "udp:10.99.0.2:7001,10.99.0.1:7000")

    def test_taps_for_nics_and_for_qemu(self):
        h = hosts.Hosts(self.VMS)
        self.assertEqual(h.wire(self.VMS[3]), "tap:tap-d")
        # QEMU runs in the harness's namespace and gets the TAP open (Hosts.open_tap).
        self.assertEqual(h.netdev(self.VMS[2], 7), ["-netdev", "tap,id=net0,fd=7"])
        with self.assertRaisesRegex(hosts.HostError, "open_tap"):
            h.netdev(self.VMS[2])
        self.assertEqual(hosts.tap_name(harness.Vm("a-very-long-name", "10.0.0.9/24")), "tap-a-very-long")

    @unittest.skipUnless(os.geteuid() == 0, "namespaces need root")
    def test_two_hosts_bridges_reach_each_other_over_vxlan(self):
        h = hosts.Hosts(self.VMS[2:])
        try:
            h.start()
            for host, ip in [("west", "192.168.77.2"), ("east", "192.168.77.1")]:
                h.namespaces[host].run("ip", "addr", "add", f"{ip}/24", "dev", "br0")
            h.namespaces["east"].run("busybox", "ping", "-c", "2", "-W", "5", "192.168.77.2")
            report = h.report()
            east, west = report["east"]["links"], report["west"]["links"]
            self.assertGreaterEqual(east["vx0"]["tx"], 2, report)
            self.assertGreaterEqual(west["uplink"]["rx"], 2, report)
            self.assertIn("tap-c", west)
            self.assertIn("tap-d", east)
            self.assertEqual(report["east"]["udp_rcvbuf_errors"], 0)
            # QEMU's end of rxe VM c's TAP, opened from here: the TAP stays on west's bridge.
            fd = h.open_tap(self.VMS[2])
            try:
                name = fcntl.ioctl(fd, 0x800454D2, bytes(18))[:16].rstrip(b"\0")  # TUNGETIFF
                self.assertEqual(name, b"tap-c")
            finally:
                os.close(fd)
            self.assertIn("tap-c", h.namespaces["west"].run("ip", "link", "show", "master", "br0"))
        finally:
            h.close()
        self.assertTrue(all(ns.holder.poll() is not None for ns in h.namespaces.values()))

    def test_qemu_ends_a_udp_tunnel_with_its_dgram_netdev(self):
        vms = [harness.Vm("c", "10.0.0.3/24", host="west", wire="udp", segment="u2"),
               harness.Vm("d", "10.0.0.4/24", nic=True, host="east", wire="udp", segment="u2")]
        h = hosts.Hosts(vms)
        self.assertEqual(h.netdev(vms[0]), [
            "-netdev", "dgram,id=net0,local.type=inet,local.host=10.99.0.1,local.port=7000,"
                       "remote.type=inet,remote.host=10.99.0.2,remote.port=7001"])
        self.assertEqual(h.wire(vms[1]), "udp:10.99.0.2:7001,10.99.0.1:7000")

    def test_a_udp_segment_of_three_is_refused(self):
        vms = [*self.VMS[:2], harness.Vm("e", "10.0.0.5/24", nic=True, host="east", wire="udp")]
        with self.assertRaisesRegex(hosts.HostError, "a UDP tunnel joins two VMs"):
            hosts.Hosts(vms).wire(vms[0])


class BlockRdmaTest(unittest.TestCase):
    """The iser, srp and rnbd scenarios' scripts come from block_rdma.py's description."""

    def test_every_message_has_one_receiver_on_its_port(self):
        import block_rdma
        kinds = {"a": "ferroce", "b": "ferroce", "c": "rxe"}
        serves = {"b": ["a", "c"], "c": ["a"]}
        for kind in ("iser", "srp", "rnbd"):
            files = block_rdma.scripts(kind, kinds, serves)
            self.assertEqual(sorted(files), ["a.sh", "b.sh", "c.sh"])
            listens = {vm[0]: re.findall(r"^(?:await \S+|step srp-(?:accept|learn)-\w+ \d+ srp_\w+) (\d+)",
                                         text, re.M) for vm, text in files.items()}
            sends = {vm[0]: re.findall(r'^(?:signal "\$\(ip_of (\w)\)"|srp_(?:offer|reply) (\w)) (\d+)', text, re.M)
                     for vm, text in files.items()}
            for vm, ports in listens.items():
                self.assertEqual(len(ports), len(set(ports)), f"{kind}: {vm} listens twice on a port")
            sent = sorted((a or b, port) for messages in sends.values() for a, b, port in messages)
            heard = sorted((vm, port) for vm, ports in listens.items() for port in ports)
            self.assertEqual(sent, heard, kind)
            # Only SRP swaps port IDs and GUIDs; each initiator attaches each of its targets once.
            self.assertEqual("srp_offer" in files["a.sh"], kind == "srp")
            self.assertEqual(re.findall(r"^blk_client_run \w+ (\w)", files["a.sh"], re.M), ["b", "c"])
            self.assertEqual(re.findall(r"^blk_client_run \w+ (\w)", files["c.sh"], re.M), ["b"])


class BenchTest(unittest.TestCase):
    """make bench's scenarios come from bench.py's one table."""

    def test_client_and_server_run_the_same_tests_on_the_same_ports(self):
        import bench
        for kind in bench.KINDS:
            scenario = bench.scenario_for(kind, 9000)
            self.assertEqual({vm.mtu for vm in scenario.vms}, {9000})
            client, server = scenario.files["a.sh"], scenario.files["b.sh"]
            ports = [re.findall(r"^(?:RETRY_FOR=60 retry|step) (\S+) .* -p (\d+) ", text, re.M)
                     for text in (client, server)]
            self.assertEqual(ports[0], ports[1])
            self.assertEqual([name for name, _ in ports[0]],
                             [t.name for t in bench.tests_for(kind) if t.perftest])
            # A guest program (ferroce_chain) runs on the client's VM alone.
            self.assertNotIn("ferroce_chain", server)
            checks = [name for name, _ in scenario.checks]
            self.assertEqual(checks[-1], "figures-saved")

    def test_cost_rows_read_the_counters_around_the_run(self):
        import bench
        client = bench.scenario_for("ferroce", 1500).files["a.sh"]
        self.assertIn("step cost-chain32-push-n1024-before 15 hostctl nic counters\n"
                      "RETRY_FOR=60 retry cost-chain32-push-n1024 140 env FERROCE_PUSH=1 ib_write_bw", client)
        self.assertEqual(bench.cost_rows()[:2], ["cost-chain1-push", "cost-chain1-nopush"])
        short = dict.fromkeys(bench.COST_COUNTERS, 100)
        long = dict.fromkeys(bench.COST_COUNTERS, 100 + 768 // 32)
        self.assertEqual(bench.marginal_cost(short, long)["doorbells"], 0.0312)
        self.assertNotIn("cost-", bench.scenario_for("rxe", 1500).files["a.sh"])
        self.assertIn("step cost-chain8-inline-push-n256 140 env FERROCE_PUSH=1 ferroce_chain "
                      "ferroce0 3 256 8 inline < /dev/null\n", client)


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


# A VM's two streams: its output (hvc0) and its kernel log (ttyS0 and QEMU's messages).
OUTPUT = """\
=== FERROCE-BOOT vm=a uptime=1.00 kernel=7.3.4
=== STEP load begin
loaded
=== STEP load rc=0 secs=0.4
=== STEP dmesg begin
[    2.100000] ferroce: RoCEv2 RDMA driver loaded
[    2.300000] kmemleak: 1 new suspected memory leaks (see /sys/kernel/debug/kmemleak)
=== STEP dmesg rc=0 secs=0.1
=== FERROCE-EXIT rc=0
"""
KERNEL_LOG = """\
[    0.000000] Linux version 7.3.4
[    0.500000] ACPI: no
=== FERROCE-BOOT vm=a uptime=1.00 kernel=7.3.4
[    2.200000] WARNING: CPU: 0 PID: 42 at drivers/infiniband/hw/ferroce/qp.rs:10
[    2.200001] Call Trace:
qemu-system-x86_64: terminating on signal 15
"""


class ClockCmdlineTest(unittest.TestCase):
    def test_tcg_guests_skip_the_boot_timer_check(self):
        # A loaded run (a047e41) lost nvme-rdma-faults to "Kernel panic - not syncing: IO-APIC
        # + timer doesn't work!" in a TCG guest's boot.
        self.assertIn("no_timer_check", harness.clock_cmdline("tcg").split())
        self.assertEqual(harness.clock_cmdline("kvm"), "")


class StepCountersTest(unittest.TestCase):
    """Step.counters: the "name value" lines of lib.sh's hw_counters, and none is no counters."""

    def test_counters_are_read_and_a_missing_one_fails(self):
        step = harness.Step("c", 0, "doorbells 12\n  driver_bad_events 3\nlifespan\nnot a counter 1\n")
        self.assertEqual(step.counters("doorbells"), {"doorbells": 12, "driver_bad_events": 3})
        with self.assertRaisesRegex(harness.CheckFailed, "no cqes in hw_counters"):
            step.counters("cqes")


class SplitStreamsTest(unittest.TestCase):
    def result(self, output=OUTPUT, kernel_log=KERNEL_LOG):
        return harness.VmResult(harness.Vm("a", "10.0.0.1/24"), output, 0, 0, kernel_log)

    def test_steps_come_from_the_output_only(self):
        r = self.result()
        self.assertEqual(list(r.steps()), ["load", "dmesg"])
        self.assertEqual(r.step("load").output, "\nloaded\n")
        self.assertNotIn("WARNING", r.step("load").output)
        self.assertEqual(r.console, r.output)

    def test_a_step_marker_in_the_kernel_log_is_not_a_step(self):
        r = self.result(output="", kernel_log="=== STEP x begin\n=== STEP x rc=0\n")
        self.assertEqual(r.steps(), {})

    def test_kernel_trouble_reads_both_streams_once(self):
        r = self.result(output=OUTPUT + "[    2.200000] WARNING: CPU: 0 PID: 42 at drivers/infiniband/hw/ferroce/qp.rs:10\n")
        self.assertEqual(harness.kernel_trouble(r), [
            "[    2.200000] WARNING: CPU: 0 PID: 42 at drivers/infiniband/hw/ferroce/qp.rs:10",
            "[    2.300000] kmemleak: 1 new suspected memory leaks (see /sys/kernel/debug/kmemleak)",
        ])
        self.assertEqual(harness.kernel_trouble(self.result(OUTPUT.replace("1 new suspected memory leaks", ""), "")), [])

    def test_only_known_upstream_lockdep_reports_are_excused(self):
        def report(held, wanted, frame):
            return "".join(f"[   50.{i:06d}] {line}\n" for i, line in enumerate([
                "WARNING: possible circular locking dependency detected",
                f"rm/252 is trying to acquire lock: ({wanted}){{+.+.}}, at: {frame}+0x16/0x20",
                f"but task is already holding lock: ({held}){{++++}}",
                "stack backtrace:"]))
        upstream = report("nvmet_config_sem", "&id_priv->handler_mutex", "rdma_destroy_id")
        self.assertEqual(harness.kernel_trouble(self.result("", upstream)), [])
        ours = report("nvmet_config_sem", "&id_priv->handler_mutex", "destroy_qp [ferroce]")
        other = report("&xa->xa_lock#8", "ferroce::cq", "with")
        for log in (ours, other):
            self.assertEqual(harness.kernel_trouble(self.result("", log)),
                             ["[   50.000000] WARNING: possible circular locking dependency detected"])

    def test_a_hung_task_is_trouble(self):
        log = ("[  250.100000] INFO: task kworker/u8:3:77 blocked for more than 120 seconds.\n"
               "[  250.100100]       Not tainted 7.3.4 #1\n")
        self.assertEqual(harness.kernel_trouble(self.result("", log)),
                         ["[  250.100000] INFO: task kworker/u8:3:77 blocked for more than 120 seconds."])

    def test_the_first_report_comes_whole(self):
        log = ("[    1.300000] pci 0000:00:01.0: enabled\n"
               "[    1.339143] BUG: KASAN: wild-memory-access in do_raw_spin_lock+0xbc/0x1d0\n"
               "[    1.339200] Read of size 4 at addr 1fffffff00000004 by task swapper/1\n"
               "[    1.339300] Call Trace:\n"
               "[    1.339400]  pci_setup_device+0x10/0x20\n"
               "[    1.339500] WARNING: a second one\n")
        r = self.result("", log)
        self.assertEqual(harness.trouble_report(r, lines=3).splitlines(), log.splitlines()[1:5])
        self.assertEqual(harness.trouble_report(self.result(OUTPUT.replace("1 new suspected memory leaks", ""), "")), "")

    def test_kernel_trouble_needs_a_printk_timestamp(self):
        r = self.result(output="=== STEP s begin\ngrep WARNING: in a test's output\n=== STEP s rc=0\n",
                        kernel_log="no timestamp: BUG: not a kernel line\n")
        self.assertEqual(harness.kernel_trouble(r), [])

    def test_tails(self):
        r = self.result()
        self.assertEqual(r.tail(1), "=== FERROCE-EXIT rc=0")
        self.assertEqual(r.kernel_tail(2).splitlines(), ["[    2.200001] Call Trace:",
                                                         "qemu-system-x86_64: terminating on signal 15"])

    def test_qemu_output_console(self):
        args = harness.output_console(Path("/logs/a.log"))
        self.assertEqual(args, ["-device", "virtio-serial-pci,id=vser,max_ports=1",
                                "-chardev", "file,id=output,path=/logs/a.log",
                                "-device", "virtconsole,bus=vser.0,chardev=output"])
        machine = harness.Machine(Path("bzImage"), [], "tcg", Path("/tmp"))
        cmd = harness.qemu_command(machine, harness.Vm("a", "10.0.0.1/24"), 0, Path("initrd"),
                                   ["-netdev", "dgram,id=net0"], "console=ttyS0",
                                   ["-device", "vfio-user-pci"] + args)
        # ttyS0 is the kernel's; the virtio console comes after every other PCI device.
        self.assertEqual(cmd[cmd.index("-serial") + 1], "stdio")
        devices = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-device"]
        self.assertEqual([d.split(",")[0] for d in devices],
                         ["virtio-net-pci", "vfio-user-pci", "virtio-serial-pci", "virtconsole"])

    def test_disk_vm_boots_the_image_unchanged_with_its_kernel(self):
        machine = harness.Machine(Path("bzImage"), [], "tcg", Path("/tmp"),
                                  disk_image=Path("/cache/plain,1.raw"), disk_kernel=Path("/dist/vmlinuz"))
        disk = harness.qemu_command(machine, harness.Vm("a", "10.0.0.1/24", disk=True), 0,
                                    Path("initrd"), [], "console=ttyS0", [])
        self.assertNotIn("-initrd", disk)
        self.assertEqual(disk[disk.index("-kernel") + 1], "/dist/vmlinuz")
        self.assertEqual(disk[disk.index("-drive") + 1],
                         "file=/cache/plain,,1.raw,if=virtio,format=raw,snapshot=on,cache=unsafe")
        # The others boot our initramfs with the machine's kernel, as before.
        plain = harness.qemu_command(machine, harness.Vm("b", "10.0.0.2/24"), 1, Path("initrd"), [],
                                     "console=ttyS0", [])
        self.assertEqual(plain[plain.index("-kernel") + 1], "bzImage")
        self.assertEqual(plain[plain.index("-initrd") + 1], "initrd")
        self.assertNotIn("-drive", plain)
        without = harness.Machine(Path("bzImage"), [], "tcg", Path("/tmp"))
        with self.assertRaisesRegex(RuntimeError, "--disk-image"):
            harness.qemu_command(without, harness.Vm("a", "10.0.0.1/24", disk=True), 0, Path("initrd"),
                                 [], "", [])

    def test_disk_share_holds_the_runner_the_library_and_the_scenario(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "files").mkdir()
            (d / "files" / "a.sh").write_text("step x 1 true\n")
            share = harness.disk_share(d / "share", d / "files")
            self.assertEqual((share.tag, share.readonly), ("scenario", True))
            self.assertEqual(sorted(p.name for p in (d / "share").iterdir()), ["disk-run", "lib.sh", "scenario"])
            self.assertEqual((d / "share" / "scenario" / "a.sh").read_text(), "step x 1 true\n")

    def test_follow_shows_both_streams_prefixed(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            logs = {"a": d / "a.log", "b": d / "b.log"}
            kernel_logs = {"a": d / "a.kernel.log", "b": d / "b.kernel.log"}
            streams = harness.follow_streams(logs, kernel_logs)
            self.assertEqual(list(streams), ["a", "a kernel", "b", "b kernel"])
            follower = harness.Follower(streams)
            logs["a"].write_bytes(b"=== STEP one begin\r\nhal")
            kernel_logs["a"].write_bytes(b"[    1.000000] WARNING: x\r\n")
            printed = self.polled(follower)
            self.assertEqual(printed, ["[a] === STEP one begin", "[a kernel] [    1.000000] WARNING: x"])
            with open(logs["a"], "ab") as f:
                f.write(b"f\n")
            self.assertEqual(self.polled(follower), ["[a] half"])  # a line is shown once it is whole
            self.assertEqual(self.polled(follower), [])

    @staticmethod
    def polled(follower):
        import contextlib
        import io
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            follower.poll()
        return out.getvalue().splitlines()


class TimingTest(unittest.TestCase):
    RESULTS = [("module/vms-complete", True, ""), ("module/kernel-clean", False, "a: BUG:"),
               ("module/loads", True, "")]

    def test_line_at_the_end_of_a_scenario(self):
        import vmtest
        self.assertEqual(vmtest.timing("module", self.RESULTS, 14.25), "module: 2 passed, 1 failed, 14.2 s")

    def test_summary(self):
        import vmtest
        use = usage.Usage(170.0, qemu=200.5, nic=40.0, switch=0.5, boot=3.25, waiting=12.0)
        text = vmtest.summary([("module", self.RESULTS, 14.25, None), ("nvme-rdma", self.RESULTS[:1], 181.0, use)],
                              195.4)
        self.assertEqual(text.splitlines(), [
            "vmtest: seconds per scenario (wall; CPU of its QEMUs, NICs and switches; boot; waiting)",
            "  module       14.2 s  (1 failed)",
            "  nvme-rdma   181.0 s  cpu   241.0 s  boot   3.2 s  waiting   12.0 s",
            "vmtest: 2 scenario(s) in 195 s, their processes' CPU 241 s",
        ])

    def test_usage_line(self):
        use = usage.Usage(41.0, qemu=40.1, nic=12.0, switch=0.2, boot=3.1, waiting=5.0)
        self.assertEqual(use.line(), "41.0 s, CPU 52.3 s (QEMU 40.1, NIC 12.0, switch 0.2; 1.28 cores), "
                                     "boot 3.1 s, waiting 5.0 s")

    def test_usage_of_steps_and_processes(self):
        meter = usage.Meter(100.0)
        meter.cpu = {"a": 10.0, "b": 8.0, "a.nic": 3.0}
        meter.boot = {"a": 2.5, "b": 3.5}
        output = ("=== STEP server begin\n=== STEP server rc=0 secs=9.0\n"
                  "=== STEP client begin\n=== STEP client rc=0 tries=3 secs=7.5 waited=4.2\n"
                  "=== STEP await-ready begin\n=== STEP await-ready rc=0 secs=2.0\n")
        steps = {"a": list(harness.parse_steps(output).values())}
        use = usage.usage_of(20.0, meter, 0.5, steps, longest=2)
        self.assertEqual((use.qemu, use.nic, use.switch, use.boot), (18.0, 3.0, 0.5, 3.5))
        self.assertAlmostEqual(use.waiting, 6.2)
        self.assertEqual(use.steps, [("a:server", 9.0), ("a:client", 7.5)])
        self.assertAlmostEqual(use.load, 21.5 / 20.0)

    def test_cpu_seconds_of_a_process_and_of_one_gone(self):
        proc = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                                 "while time.process_time() - t < 0.3: pass"])
        meter = usage.Meter(time.monotonic())
        while proc.poll() is None:
            meter.sample({"a": proc})
            time.sleep(0.02)
        self.assertGreaterEqual(meter.cpu["a"], 0.2)
        self.assertIsNone(usage.cpu_seconds(proc.pid))

    def test_a_switch_reports_its_threads_cpu(self):
        with tempfile.TemporaryDirectory() as d:
            switch = harness.Switch(Path(d), ["a", "b", "c"])
            switch.start()
            switch.close()
            self.assertGreater(switch.cpu_seconds, 0.0)

    def test_readme_has_a_row_per_scenario(self):
        # The README's table of seconds per scenario lists exactly the scenarios there are.
        # (No docstring: unittest -v would print it where tools/ferroce reads the test's name.)
        readme = Path(__file__).resolve().parents[3] / "README.md"
        text = readme.read_text()
        table = text[text.index("## Time per scenario"):]
        table = table[:table.index("\n## ")]
        rows = re.findall(r"^\| `([\w-]+)` \| (\d+) \| (\d+) \| ([\d.]+|—) \| ([\d.]+|—) \|$", table, re.M)
        scenarios = sorted(p.parent.name for p in (Path(__file__).resolve().parent / "scenarios").glob("*/scenario.py"))
        self.assertEqual([name for name, *_ in rows], scenarios)
        # ... with the figures of usage.json, which the scheduler reads: vmtest --table made it.
        import json
        import vmtest
        measured = json.loads(vmtest.MEASURED.read_text())
        self.assertIn(vmtest.table(scenarios, measured), table)


def kunit_tool():
    """The kernel's KTAP parser (tools/testing/kunit) in the cached kernel tree, if there is one."""
    for cache in (os.environ.get("FERROCE_CACHE"), "/ferroce/cache", "/var/cache/ferroce"):
        if cache:
            for d in sorted(Path(cache).glob("src/linux-*/tools/testing/kunit")):
                if (d / "kunit_parser.py").exists():
                    return d
    return None


class KtapTest(unittest.TestCase):
    SCENARIO = [("vms-complete", True, ""), ("kernel-clean", False, "a: [    1.0] BUG: x\n\na: # not a directive"),
                ("loads", True, "ferroce: loaded")]

    def write(self):
        out = io.StringIO()
        earlier = ktap.parse_results("PASS cargo-fmt\nPASS cargo:nic::a\nFAIL cargo:nic::b\n"
                                     "PASS harness:test_x\nnot a result\n")
        writer = ktap.Writer(out, ktap.planned(earlier) + 2)
        writer.results(earlier)
        writer.suite("module", self.SCENARIO, 14.25)
        writer.suite("kunit", [("setup", False, "RuntimeError: no #kernel")], 1.0)
        return out.getvalue()

    def test_format(self):
        self.assertEqual(self.write(), textwrap.dedent("""\
            KTAP version 1
            1..5
            ok 1 cargo-fmt
              KTAP version 1
              # Subtest: cargo
              1..2
              ok 1 nic::a
              not ok 2 nic::b
            not ok 2 cargo
              KTAP version 1
              # Subtest: harness
              1..1
              ok 1 test_x
            ok 3 harness
              KTAP version 1
              # Subtest: module
              1..3
              ok 1 vms-complete
              # a: [    1.0] BUG: x
              #
              # a: # not a directive
              not ok 2 kernel-clean
              # ferroce: loaded
              ok 3 loads
            # module: 14.2 s
            not ok 4 module
              KTAP version 1
              # Subtest: kunit
              1..1
              # RuntimeError: no #kernel
              not ok 1 setup
            # kunit: 1.0 s
            not ok 5 kunit
            """))

    def test_a_suite_passes_when_all_its_checks_do(self):
        lines = ktap.suite_lines(3, "nic-port", [("ping", True, ""), ("ping6", True, "")], 2.0)
        self.assertEqual(lines[-1], "ok 3 nic-port")
        self.assertEqual(ktap.suite_lines(1, "empty", [])[-1], "not ok 1 empty")

    def test_descriptions_have_no_hash_or_newline(self):
        self.assertEqual(ktap.test_lines(1, "a#b\nc", True), ["ok 1 a_b c"])

    def test_grouping(self):
        self.assertEqual(ktap.split("module/loads"), ("module", "loads"))
        self.assertEqual(ktap.split("cargo:nic::engine::t"), ("cargo", "nic::engine::t"))
        self.assertEqual(ktap.split("cargo-fmt"), (None, "cargo-fmt"))
        tests = ktap.grouped([("a/x", True, ""), ("b", False, ""), ("a/y", False, "m")])
        self.assertEqual(tests, [("a", [("x", True, ""), ("y", False, "m")], None), ("b", None, ("b", False, ""))])

    @unittest.skipUnless(kunit_tool(), "no kernel tree with tools/testing/kunit in the cache")
    def test_the_kernels_parser_reads_it(self):
        sys.path.insert(0, str(kunit_tool()))
        try:
            import kunit_parser
            import kunit_printer
        finally:
            sys.path.pop(0)
        test = kunit_parser.parse_run_tests(self.write().splitlines(True), kunit_printer.null_printer)
        self.assertEqual(test.counts.errors, 0)
        self.assertEqual([(t.name, t.status.name, [(c.name, c.status.name) for c in t.subtests])
                          for t in test.subtests], [
            ("cargo-fmt", "SUCCESS", []),
            ("cargo", "FAILURE", [("nic::a", "SUCCESS"), ("nic::b", "FAILURE")]),
            ("harness", "SUCCESS", [("test_x", "SUCCESS")]),
            ("module", "FAILURE", [("vms-complete", "SUCCESS"), ("kernel-clean", "FAILURE"), ("loads", "SUCCESS")]),
            ("kunit", "FAILURE", [("setup", "FAILURE")]),
        ])


MODULE_OUTPUT = """\
=== FERROCE-BOOT vm=a uptime=0.90 kernel=7.3.4
=== STEP modprobe begin
=== STEP modprobe rc=0 secs=0.2
=== STEP lsmod begin
ferroce 16384 0 - Live 0x0000000000000000
=== STEP lsmod rc=0 secs=0.0
=== STEP dmesg-load begin
[    1.200000] ferroce: RoCEv2 RDMA driver loaded
=== STEP dmesg-load rc=0 secs=0.0
=== STEP rmmod begin
=== STEP rmmod rc=0 secs=0.1
=== STEP dmesg-unload begin
[    1.200000] ferroce: RoCEv2 RDMA driver loaded
[    1.400000] ferroce: RoCEv2 RDMA driver unloaded
=== STEP dmesg-unload rc=0 secs=0.0
=== STEP gone begin
=== STEP gone rc=0 secs=0.0
=== FERROCE-EXIT rc=0
"""


class VmtestMainTest(unittest.TestCase):
    """vmtest.py end to end with the VMs faked: both streams, results, KTAP and timings."""

    def run_main(self, kernel_log, scenarios=("module",), extra=(), machines=None):
        import contextlib
        import vmtest

        def fake_run(machine, scenario, log_dir, follow=False):
            if machines is not None:
                machines[scenario.name] = machine
            vm = scenario.vms[0]
            return harness.Run({vm.name: harness.VmResult(vm, MODULE_OUTPUT, 0, 0, kernel_log)}, False, 3.5, log_dir)

        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            results = d / "results"
            results.write_text("PASS cargo-fmt\nPASS harness:test_x\n")
            argv = ["vmtest.py", "--kernel", str(d / "bzImage"), "--initrd", str(d / "base.cpio"), "--accel", "tcg",
                    "--logs", str(d / "logs"), "--results", str(results), "--ktap", str(d / "results.ktap"),
                    *extra, *scenarios]
            saved = harness.run_scenario, harness.private_network, sys.argv
            harness.run_scenario, harness.private_network, sys.argv = fake_run, lambda: True, argv
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    rc = vmtest.main()
            finally:
                harness.run_scenario, harness.private_network, sys.argv = saved
            return rc, out.getvalue(), results.read_text(), (d / "results.ktap").read_text()

    def test_clean_run(self):
        rc, printed, results, kt = self.run_main("[    0.000000] Linux version 7.3.4\n")
        self.assertEqual(rc, 0)
        self.assertEqual(results.splitlines()[2:], ["PASS module/vms-complete", "PASS module/kernel-clean",
                                                    "PASS module/wire-clean", "PASS module/load",
                                                    "PASS module/log-line", "PASS module/unload"])
        self.assertRegex(printed, r"(?m)^--- module: 6 passed, 0 failed, \d+\.\d s$")
        self.assertRegex(printed, r"(?m)^vmtest: seconds per scenario .*\n  module +\d+\.\d s  cpu +0\.0 s  "
                                  r"boot +0\.0 s  waiting +0\.0 s\nvmtest: 1 scenario\(s\) in \d+ s, their "
                                  r"processes' CPU 0 s$")
        self.assertRegex(printed, r"(?m)^    \(longest steps: a:modprobe 0\.2 s, a:rmmod 0\.1 s, ")
        lines = kt.splitlines()
        self.assertEqual(lines[:4], ["KTAP version 1", "1..3", "ok 1 cargo-fmt", "  KTAP version 1"])
        self.assertEqual(lines[-1], "ok 3 module")
        self.assertRegex(lines[-2], r"^# module: \d+\.\d s \(VMs 3\.5 s, CPU 0\.0 s \(QEMU 0\.0, NIC 0\.0, "
                                    r"switch 0\.0; 0\.00 cores\), boot 0\.0 s, waiting 0\.0 s\)$")

    def test_side_by_side_the_results_are_the_same(self):
        rc, printed, results, kt = self.run_main("", ("module", "kunit", "ibv-devinfo"))
        rc2, printed2, results2, kt2 = self.run_main("", ("module", "kunit", "ibv-devinfo"), ("--jobs", "2"))
        self.assertEqual((rc, sorted(results.splitlines())), (rc2, sorted(results2.splitlines())))
        # The same tests in KTAP, numbered in the order they ended.
        unnumbered = lambda text: sorted(re.sub(r"^(\s*(?:not )?ok) \d+ ", r"\1 ", line)  # noqa: E731
                                         for line in text.splitlines())
        self.assertEqual(unnumbered(kt), unnumbered(kt2))
        # Each scenario's lines stay together: its header, then its results.
        for name in ("module", "kunit", "ibv-devinfo"):
            self.assertRegex(printed2, rf"(?m)^--- {name}: 1 VM\(s\).*\n    \(VMs .*\n    \(longest steps: .*\n"
                                       rf"PASS {name}/vms-complete$")

    def test_repeated_runs_count_each_checks_failures(self):
        rc, printed, results, kt = self.run_main("", ("module", "kunit"), ("--repeat", "3", "--jobs", "2"))
        self.assertEqual(rc, 1)
        self.assertEqual(len([line for line in results.splitlines() if line.startswith("PASS module/")]), 18)
        self.assertEqual(kt.splitlines()[1], "1..8")
        # kunit's checks do not match the module's output: each fails in every run.
        self.assertRegex(printed, r"(?m)^vmtest: 3 runs; checks that failed \(failures of 3\):\n  kunit/\S+ 3$")
        self.assertRegex(printed, r"(?m)^  module \d+\.\d s, timeout 120 s$")

    def test_a_warning_in_the_kernel_log_fails_kernel_clean_only(self):
        rc, printed, results, kt = self.run_main(
            "[    1.300000] WARNING: CPU: 0 PID: 1 at drivers/infiniband/hw/ferroce/lib.rs:1\n")
        self.assertEqual(rc, 1)
        self.assertIn("FAIL module/kernel-clean", results.splitlines())
        self.assertEqual(sum(line.startswith("FAIL") for line in results.splitlines()), 1)
        self.assertIn("  # a: [    1.300000] WARNING: CPU: 0 PID: 1 at drivers/infiniband/hw/ferroce/lib.rs:1\n"
                      "  # a's first report:\n"
                      "  # [    1.300000] WARNING: CPU: 0 PID: 1 at drivers/infiniband/hw/ferroce/lib.rs:1\n"
                      "  not ok 2 kernel-clean\n", kt)
        self.assertIn("not ok 3 module", kt)


    def test_the_debug_lane_runs_on_the_debug_kernel(self):
        machines = {}
        self.run_main("", ("module", "kverbs"), ("--debug-kernel", "/k/linux-7.3-debug/bzImage",
                                                 "--debug-initrd", "/k/modules-debug.cpio"), machines)
        self.assertEqual((machines["module"].kernel.name, machines["module"].slow), ("bzImage", 1.0))
        self.assertEqual((str(machines["kverbs"].kernel), machines["kverbs"].slow), ("/k/linux-7.3-debug/bzImage", harness.DEBUG_SLOW))
        self.assertEqual([str(i) for i in machines["kverbs"].initrds], ["/k/modules-debug.cpio"])
        machines.clear()
        self.run_main("", ("module", "kverbs"), ("--lane", "default"), machines)
        self.assertEqual(list(machines), ["module"])

    def test_one_time_factor_of_the_debug_kernel(self):
        """check-debug (--debug) and the debug lane take the same factor, harness.DEBUG_SLOW, unless told."""
        machines = {}
        self.run_main("", ("module",), ("--debug",), machines)
        self.assertEqual(machines["module"].slow, harness.DEBUG_SLOW)
        self.run_main("", ("module",), ("--debug", "--debug-slow", "4"), machines)
        self.assertEqual(machines["module"].slow, 4.0)
        self.run_main("", ("module",), ("--slow", "2"), machines)
        self.assertEqual(machines["module"].slow, 2.0)
        self.run_main("", ("kverbs",), ("--debug-kernel", "/k/bzImage", "--debug-slow", "5"), machines)
        self.assertEqual(machines["kverbs"].slow, 5.0)


class SchedulerTest(unittest.TestCase):
    """vmtest --jobs: which scenarios run side by side."""

    MEASURED = {"long": {"wall": 100.0, "cpu": 95.0}, "heavy": {"wall": 50.0, "cpu": 90.0},
                "light": {"wall": 30.0, "cpu": 9.0}, "short": {"wall": 5.0, "cpu": 5.0}}

    def jobs(self):
        import vmtest
        scenarios = {name: harness.Scenario(vms=[]) for name in [*self.MEASURED, "new"]}
        return vmtest.jobs_of([*scenarios], scenarios, self.MEASURED, 2)

    def test_longest_first_and_the_unmeasured_take_every_core(self):
        self.assertEqual([(j.name, j.cores) for j in self.jobs()],
                         [("long", 0.95), ("heavy", 1.8), ("light", 0.3), ("short", 1.0), ("new", 2.0)])

    def test_a_job_starts_where_its_cores_fit(self):
        import vmtest
        long, heavy, light, short, new = self.jobs()
        self.assertIs(vmtest.next_job([long, heavy, light], [], 2, 2), long)
        # Beside "long" (0.95 cores): not "heavy" (1.8), but "light" (0.3).
        self.assertIs(vmtest.next_job([heavy, light, short], [long], 2, 2), light)
        self.assertIsNone(vmtest.next_job([heavy, light], [long, short], 2, 2))  # --jobs 2
        self.assertIsNone(vmtest.next_job([light], [long], 2, 1))  # --jobs 1
        # Never beside anything: an unmeasured one; on an idle machine anything starts.
        self.assertIsNone(vmtest.next_job([new], [light], 2, 2))
        self.assertIs(vmtest.next_job([new], [], 2, 2), new)

    def test_two_multi_vm_scenarios_fill_two_cores_side_by_side(self):
        """Two scenarios that kept 1.3 cores busy each (two VMs that compute and wait by turns)
        run side by side in the cores a machine of two may fill (FILL), and not in two."""
        import vmtest
        scenarios = {name: harness.Scenario(vms=[]) for name in ("one", "two")}
        measured = {"one": {"wall": 20.0, "cpu": 26.0}, "two": {"wall": 10.0, "cpu": 13.0}}
        one, two = vmtest.jobs_of([*scenarios], scenarios, measured, 2 * vmtest.FILL)
        self.assertIs(vmtest.next_job([two], [one], 2 * vmtest.FILL, 2), two)
        self.assertIsNone(vmtest.next_job([two], [one], 2, 2))


    def test_work_beside_the_scenarios_holds_its_cores_until_its_marker_goes(self):
        """make check's lab checks run beside the VM scenarios (vmtest --beside): while the
        marker exists, its cores count as busy, so "heavy" (1.8 cores) waits for it to go, and
        "light" (0.3) starts beside it at once."""
        import threading
        import vmtest
        with tempfile.TemporaryDirectory() as work:
            marker = Path(work) / "lab-check.running"
            marker.write_text("")
            scenarios = {name: harness.Scenario(vms=[]) for name in ("heavy", "light")}
            started, gone = {}, threading.Event()

            def run_one(machine, scenario, logs, follow, printed=None):
                name = next(n for n, s in scenarios.items() if s is scenario)
                started[name] = gone.is_set()
                return [(f"{name}/ran", True, "")], None

            def remove_marker():
                time.sleep(0.3)
                gone.set()
                marker.unlink()

            with mock.patch.object(vmtest, "run_one", run_one), \
                    mock.patch.object(vmtest, "MEASURED", Path(work) / "usage.json"):
                (Path(work) / "usage.json").write_text(json.dumps(self.MEASURED))
                finished = []
                threading.Thread(target=remove_marker).start()
                vmtest.run_all(["heavy", "light"], scenarios, lambda s: None, Path(work), 2, 2.0, False,
                               lambda name, *_: finished.append(name),
                               [vmtest.Beside.parse(f"{marker}=1.0")])
            self.assertEqual(started, {"light": False, "heavy": True})
            self.assertEqual(sorted(finished), ["heavy", "light"])
            self.assertEqual(vmtest.Beside.parse("/out/x=1.5"), vmtest.Beside(Path("/out/x"), 1.5))


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


class PcapCheckTest(unittest.TestCase):
    # An ACK a NIC sent (RoCE v2 over IPv4, 10.0.0.2 -> 10.0.0.1), as its port captured it.
    ACK = bytes.fromhex("52540000000152540000000208004500003000004000401126bb0a0000020a000001"
                        "c00412b7001c00001100ffff0000000200fffff01f00000294ee6592")

    def test_the_icrc_of_a_captured_frame(self):
        frame = pcapcheck.Frame(1, self.ACK, False, None)
        self.assertEqual(pcapcheck.icrc_problems([frame]), (1, []))
        # What routers may change is not covered: TTL, DSCP/ECN, the checksums, FECN/BECN.
        routed = bytearray(self.ACK)
        routed[22] = 7
        routed[15] = 0xB8
        routed[24:26] = b"\x12\x34"
        routed[40:42] = b"\x55\x66"
        routed[46] |= 0xC0
        self.assertEqual(pcapcheck.icrc_problems([pcapcheck.Frame(1, bytes(routed), False, None)]), (1, []))
        # A bit of the BTH or of the addresses is.
        for at in (44, 30, 51):
            bad = bytearray(self.ACK)
            bad[at] ^= 0x01
            count, problems = pcapcheck.icrc_problems([pcapcheck.Frame(3, bytes(bad), False, None)])
            self.assertEqual((count, len(problems)), (1, 1), at)
            # Unless fault injection said it corrupted the frame.
            excused = pcapcheck.Frame(3, bytes(bad), False, "fault: corrupted")
            self.assertEqual(pcapcheck.icrc_problems([excused]), (1, []))
        # Frames that are not RoCE are not counted.
        arp = bytes(12) + b"\x08\x06" + bytes(46)
        self.assertEqual(pcapcheck.icrc_problems([pcapcheck.Frame(4, arp, False, None)]), (0, []))

    def test_reads_packets_with_direction_and_comment(self):
        def block(kind: int, body: bytes) -> bytes:
            body += bytes(-len(body) % 4)
            return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)

        def option(code: int, value: bytes) -> bytes:
            return struct.pack("<HH", code, len(value)) + value + bytes(-len(value) % 4)

        shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
        idb = block(1, struct.pack("<HHI", 1, 0, 0))
        epb = block(6, struct.pack("<IIIII", 0, 0, 1, len(self.ACK), len(self.ACK)) + self.ACK
                    + bytes(-len(self.ACK) % 4) + option(2, struct.pack("<I", 2))
                    + option(1, b"fault: delayed") + option(0, b""))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "a.pcapng"
            path.write_bytes(shb + idb + epb + epb)
            got = pcapcheck.frames(path)
            self.assertEqual([(f.number, f.data, f.outbound, f.comment) for f in got],
                             [(n, self.ACK, True, "fault: delayed") for n in (1, 2)])
            path.write_bytes(shb + idb + epb[:-8])
            with self.assertRaisesRegex(ValueError, "cut short"):
                pcapcheck.frames(path)


class HostControlTest(unittest.TestCase):
    """The host-control line relays a guest's `hostctl nic ...` only as far as it may go."""

    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.dir)
        # A stand-in for `ferroce-nic ctl --control SOCKET`: it records what it was asked.
        self.asked = self.dir / "asked"
        fake = self.dir / "ctl"
        fake.write_text(f"#!/bin/sh\necho \"$*\" >> {self.asked}\necho '{{\"ok\": true}}'\n")
        fake.chmod(0o755)
        self.ctl = [str(fake), "--control", "/nic.sock"]

    def line(self, steers=False):
        line = harness.HostControl(Path(tempfile.mktemp(dir=self.dir)), self.ctl, self.dir / "log", steers)
        self.addCleanup(line.stop)
        return line

    def asked_for(self):
        return self.asked.read_text().splitlines() if self.asked.exists() else []

    def test_a_guest_reads_its_nic_and_steers_its_own_wire_faults(self):
        line = self.line()
        for argv in (["counters"], ["latency", "reset"], ["trace", "mark", "x"], ["fault", "drop", "0.3"]):
            self.assertEqual(line.handle(["nic", *argv])[0], 0, argv)
        self.assertEqual(self.asked_for(), ["--control /nic.sock -- counters", "--control /nic.sock -- latency reset",
                                            "--control /nic.sock -- trace mark x",
                                            "--control /nic.sock -- fault drop 0.3"])

    def test_host_paths_other_functions_and_options_are_refused(self):
        line = self.line(steers=True)
        for argv, why in ((["pcap", "start", "/etc/passwd"], "nic pcap: not a guest's command"),
                          (["trace", "start", "/etc/passwd"], "nic trace: these arguments"),
                          (["counters", "--control", "/other.sock"], "an option is not"),
                          (["counters", "x"], "nic counters: these arguments"),
                          ([], "expected nic COMMAND")):
            rc, out = line.handle(["nic", *argv])
            self.assertEqual(rc, 2, argv)
            self.assertIn(why, out)
        self.assertEqual(self.asked_for(), [])

    def test_only_a_vm_that_steers_its_nic_makes_it_misbehave(self):
        for argv in (["stall", "on"], ["lie", "cqe-qpn", "1"], ["vf", "1", "fault", "drop", "1"], ["fatal"]):
            rc, out = self.line().handle(["nic", *argv])
            self.assertEqual(rc, 2, argv)
            self.assertIn("only a scenario's VM with steers_nic", out)
            self.assertEqual(self.line(steers=True).handle(["nic", *argv])[0], 0, argv)
        self.assertEqual(len(self.asked_for()), 4)


if __name__ == "__main__":
    unittest.main()
