# SPDX-License-Identifier: GPL-2.0
"""Unit tests for the lab (lab.py) and what it adds to the harness (no VMs needed)."""

import json
import os
import re
import tempfile
import time
import types
import unittest
from pathlib import Path

import harness
import lab


class Vms(unittest.TestCase):
    def test_the_default_lab_is_two_ferroce_vms(self):
        self.assertEqual(lab.parse_vms([]), [lab.LabVm("a"), lab.LabVm("b")])

    def test_kinds_and_virtual_functions(self):
        self.assertEqual(lab.parse_vms(["a", "b:rxe", "c:vf:a"]),
                         [lab.LabVm("a"), lab.LabVm("b", "rxe"), lab.LabVm("c", "vf", "a")])

    def test_hosts_across_a_bridge(self):
        vms = lab.parse_vms(["a@east", "b:rxe@west", "c:vf:a", "d:vf:a@east"])
        self.assertEqual(vms, [lab.LabVm("a", host="east"), lab.LabVm("b", "rxe", host="west"),
                               lab.LabVm("c", "vf", "a", "east"), lab.LabVm("d", "vf", "a", "east")])
        harness_vms = lab.harness_vms(vms, Path("/s"), "/r", "/w", 1024)
        # A VF's port is its PF's NIC's: the harness puts only the others on hosts.
        self.assertEqual([v.host for v in harness_vms], ["east", "west", None, None])

    def test_wrong_vms_get_one_line_that_says_why(self):
        for specs, why in ((["A"], "not a VM name"), (["a", "a"], "two VMs are named a"),
                           (["a:ib"], "unknown kind 'ib'"), (["b:rxe", "c:vf:b"], "needs an earlier ferroce VM"),
                           (["c:vf:a", "a"], "needs an earlier ferroce VM"), (["a:rxe:b"], "only a VF names"),
                           ([f"v{i}" for i in range(9)], "at most 8 VMs"),
                           (["a@East"], "not a host name"), (["a@east", "b"], "every VM is on a host"),
                           (["a@east", "c:vf:a@west"], "on its PF's host")):
            with self.subTest(specs=specs), self.assertRaisesRegex(lab.LabError, why):
                lab.parse_vms(specs)

    def test_harness_vms_share_the_root_state_and_work_directory_and_forward_ssh(self):
        vms = lab.harness_vms(lab.parse_vms(["a", "b:rxe", "c:vf:a"]), Path("/ferroce/out/lab"),
                              "/ferroce/cache/labroot-x", "/home/u/proj", 2048)
        self.assertEqual([(v.name, v.ip, v.nic, v.function_of, v.ssh_forward) for v in vms],
                         [("a", "10.0.0.1/24", True, None, 2201), ("b", "10.0.0.2/24", False, None, 2202),
                          ("c", "10.0.0.3/24", False, "a", 2203)])
        self.assertEqual([v.cmdline for v in vms], ["ferroce_lab=ferroce", "ferroce_lab=rxe", "ferroce_lab=vf"])
        self.assertEqual(vms[0].shares, (harness.Share("labroot", "/ferroce/cache/labroot-x"),
                                         harness.Share("labstate", "/ferroce/out/lab/guest"),
                                         harness.Share("work", "/home/u/proj", readonly=False)))


class QemuOptions(unittest.TestCase):
    def test_shares_are_virtio_9p_read_only_unless_said_and_writable_ones_keep_modes_apart(self):
        vm = harness.Vm("a", "10.0.0.1/24", toolroot=True,
                        shares=(harness.Share("work", "/home/u/a,b", readonly=False),))
        self.assertEqual(harness.share_args(vm), [
            "-fsdev", "local,id=toolroot,path=/,security_model=none,readonly=on",
            "-device", "virtio-9p-pci,fsdev=toolroot,mount_tag=toolroot",
            "-fsdev", "local,id=work,path=/home/u/a,,b,security_model=mapped-xattr,fmode=0644,dmode=0755",
            "-device", "virtio-9p-pci,fsdev=work,mount_tag=work"])

    def test_the_ssh_nic_forwards_one_port_and_reaches_nothing(self):
        args = harness.ssh_forward_args(1, 2202)
        self.assertIn("user,id=ctl,restrict=on,ipv6=off,hostfwd=tcp:127.0.0.1:2202-10.0.2.15:22", args)
        self.assertIn(f"virtio-net-pci,netdev=ctl,mac={harness.ssh_mac_of(1)},romfile=", args)
        self.assertEqual(harness.ssh_mac_of(1), "52:54:00:fe:ff:02")


class State(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = Path(self.dir.name)
        self.state, self.root = d / "lab", d / "root"
        (self.state / "ssh").mkdir(parents=True)
        (self.state / "ssh" / "id_ed25519").write_text("PRIVATE\n")
        (self.state / "ssh" / "id_ed25519.pub").write_text("ssh-ed25519 USER ferroce-lab\n")
        (self.root / "etc/ssh").mkdir(parents=True)
        (self.root / "etc/ssh/ssh_host_ed25519_key.pub").write_text("ssh-ed25519 HOSTKEY root@build\n")

    def tearDown(self):
        self.dir.cleanup()

    def test_what_the_guests_and_the_ssh_client_read(self):
        vms = lab.harness_vms(lab.parse_vms(["a", "b"]), self.state, "/r", "/home/u/proj", 1024)
        lab.write_guest_state(self.state, vms, "/home/u/proj", self.root)
        guest = self.state / "guest"
        self.assertEqual((guest / "hosts").read_text(), "10.0.0.1 a\n10.0.0.2 b\n")
        self.assertEqual((guest / "workdir").read_text(), "/home/u/proj\n")
        self.assertEqual((guest / "ssh/known_hosts").read_text(), "a,10.0.0.1,b,10.0.0.2 ssh-ed25519 HOSTKEY\n")
        self.assertEqual((guest / "ssh/id_ed25519").read_text(), "PRIVATE\n")
        # The environment of lab/environment: NAME=VALUE lines (sshd's SetEnv takes no spaces).
        env = [line for line in (guest / "environment").read_text().splitlines()
               if line and not line.startswith("#")]
        self.assertIn("UCX_UD_ETH_DGID_CHECK=n", env)
        self.assertTrue(all(re.fullmatch(r"[A-Za-z_]+=\S+", line) for line in env), env)
        config = (self.state / "ssh/config").read_text()
        self.assertIn("Host b\n    HostName 127.0.0.1\n    Port 2202\n", config)
        self.assertIn("    HostKeyAlias ferroce-lab\n", config)
        self.assertEqual((self.state / "ssh/known_hosts").read_text(), "ferroce-lab ssh-ed25519 HOSTKEY\n")

    def test_no_lab_is_up_without_a_live_daemon(self):
        self.assertIsNone(lab.daemon_pid(self.state))
        self.assertEqual(lab.status_text(self.state), "lab: no lab is up\n")
        # A pid file of a process that is not the lab's daemon is stale, and goes.
        (self.state / "pid").write_text(f"{os.getpid()}\n")
        self.assertIsNone(lab.daemon_pid(self.state))
        self.assertFalse((self.state / "pid").exists())

    def test_status_names_each_vm_its_device_and_where_to_look(self):
        (self.state / "lab.json").write_text(json.dumps({
            "vms": [{"name": "a", "kind": "ferroce", "pf": None, "address": "10.0.0.1", "ssh_port": 2201, "gid": 3},
                    {"name": "b", "kind": "rxe", "pf": None, "address": "10.0.0.2", "ssh_port": 2202, "gid": 1},
                    {"name": "c", "kind": "vf", "pf": "a", "address": "10.0.0.3", "ssh_port": 2203}],
            "accel": "tcg", "labroot": "/r", "workdir": "/home/u/proj", "logs": "/ferroce/out/logs/lab",
            "started": time.time() - 120}))
        saved = lab.daemon_pid
        lab.daemon_pid = lambda state: 4242
        try:
            text = lab.status_text(self.state)
        finally:
            lab.daemon_pid = saved
        self.assertIn("lab: 3 VMs up for 2 min under TCG, daemon 4242", text)
        self.assertRegex(text, r"(?m)^a +ferroce0 +10\.0\.0\.1 +3 +out/logs/lab/a\.log$")
        self.assertRegex(text, r"(?m)^b +rxe0 \(rdma_rxe\) +10\.0\.0\.2 +1 ")
        self.assertRegex(text, r"(?m)^c +ferroce0 \(VF of a\) +10\.0\.0\.3 +\? ")
        self.assertIn("tools/ferroce trace out/logs/lab/a.nic-trace.jsonl out/logs/lab/c.nic-trace.jsonl", text)


class Ready(unittest.TestCase):
    """`wait_ready` reads each VM's ready or failed line (lab/setup) from its log."""

    class Proc:
        returncode = None

        def poll(self):
            return None

    def bed(self, texts: dict[str, str]):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        logs = {}
        for name, text in texts.items():
            logs[name] = Path(self.dir.name) / f"{name}.log"
            logs[name].write_text(text)
        return types.SimpleNamespace(vms=[harness.Vm(n, "10.0.0.1/24") for n in texts], logs=logs,
                                     kernel_logs=logs, procs={n: self.Proc() for n in texts})

    def test_ready_vms(self):
        bed = self.bed({"a": "=== FERROCE-LAB-READY vm=a dev=ferroce0 gid=3\n",
                        "b": "x\n=== FERROCE-LAB-READY vm=b dev=rxe0 gid=1\n"})
        self.assertEqual(lab.wait_ready(bed, time.monotonic() + 5), [])

    def test_a_vm_that_failed_is_named_at_once_with_why(self):
        bed = self.bed({"a": "=== FERROCE-LAB-READY vm=a dev=ferroce0 gid=3\n",
                        "b": "=== FERROCE-LAB-FAILED vm=b: rxe0 did not come up\n"})
        start = time.monotonic()
        problems = lab.wait_ready(bed, start + 5)
        self.assertEqual(len(problems), 1)
        self.assertRegex(problems[0], r"^VM b failed to set up: rxe0 did not come up \(its log: ")
        self.assertLess(time.monotonic() - start, 1)

    def test_lab_down_while_the_vms_boot_ends_the_wait_at_once(self):
        bed = self.bed({"a": "=== FERROCE-BOOT vm=a\n"})
        start = time.monotonic()
        self.assertEqual(lab.wait_ready(bed, start + 5, lambda: True), ["lab down came before the VMs were ready"])
        self.assertLess(time.monotonic() - start, 1)

    def test_the_daemon_is_known_by_its_arguments_not_by_a_name_in_them(self):
        state = Path(self.dir.name) if hasattr(self, "dir") else Path(tempfile.mkdtemp())
        (state / "pid").write_text(f"{os.getpid()}\n")  # this test's process: "lab.py" is in no argv[1] here
        self.assertIsNone(lab.daemon_pid(state))

    def test_a_vm_that_says_nothing_is_not_ready_in_time(self):
        bed = self.bed({"a": "=== FERROCE-BOOT vm=a\n"})
        self.assertRegex(lab.wait_ready(bed, time.monotonic() + 0.3)[0], r"^VM a was not ready in time")


if __name__ == "__main__":
    unittest.main()
