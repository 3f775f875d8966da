# SPDX-License-Identifier: GPL-2.0
"""Unit tests of tools/kernel/patches' reading of build logs (--build-each)."""

import importlib.machinery
import importlib.util
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "kernel", "patches")


def load():
    loader = importlib.machinery.SourceFileLoader("kernel_patches", SCRIPT)
    spec = importlib.util.spec_from_loader("kernel_patches", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


patches = load()

OURS = {"rust/kernel/rdma/cq.rs", "drivers/infiniband/hw/ferroce/qp.rs", "rust/helpers/rdma.c"}

LOG = """\
  CC      drivers/infiniband/core/verbs.o
../rust/helpers/rdma.c:12:5: warning: unused variable 'x' [-Wunused-variable]
../drivers/net/foo.c:3:1: warning: not ours
warning: unused import: `Foo`
 --> rust/kernel/rdma/cq.rs:7:5
  |
7 | use crate::Foo;
  |     ^^^
  |
  = note: `#[warn(unused_imports)]` on by default

warning: this `if` has identical blocks
  --> drivers/infiniband/hw/ferroce/qp.rs:40:9
   |
   = help: for further information visit https://rust-lang.github.io/rust-clippy/master/index.html#if_same_then_else

warning: upstream's own lint
  --> rust/kernel/sync.rs:1:1
   |
   = help: for further information visit https://rust-lang.github.io/rust-clippy/master/index.html#x

error[E0308]: mismatched types
  --> drivers/infiniband/hw/ferroce/qp.rs:50:1
"""


class LogTest(unittest.TestCase):
    def test_only_diagnostics_in_our_files_count_and_clippy_is_told_apart(self):
        found = patches.our_locations(LOG, OURS)
        self.assertEqual(found, [
            ("warning", "rust/helpers/rdma.c:12", "cc"),
            ("warning", "rust/kernel/rdma/cq.rs:7", "rustc"),
            ("warning", "drivers/infiniband/hw/ferroce/qp.rs:40", "clippy"),
            ("error", "drivers/infiniband/hw/ferroce/qp.rs:50", "rustc"),
        ])

    def test_absolute_paths_are_read_relative_to_the_tree(self):
        text = ("/c/each/src/rust/helpers/rdma.c:3:1: warning: x\n"
                "warning: y\n --> /c/each/src/rust/kernel/rdma/cq.rs:9:1\n\n")
        self.assertEqual(patches.our_locations(text, OURS, "/c/each/src"), [
            ("warning", "rust/helpers/rdma.c:3", "cc"),
            ("warning", "rust/kernel/rdma/cq.rs:9", "rustc"),
        ])

    def test_a_clean_log_has_nothing(self):
        self.assertEqual(patches.our_locations("  RUSTC L rust/kernel.o\n  LD vmlinux\n", OURS), [])

    def test_rustfmt_names_our_unformatted_files(self):
        with tempfile.TemporaryDirectory() as src:
            text = (f"Diff in {src}/rust/kernel/rdma/cq.rs:12:\n-a\n+b\n"
                    f"Diff in {src}/rust/kernel/sync.rs:3:\n"
                    f"Diff in {src}/rust/kernel/rdma/cq.rs:40:\n")
            self.assertEqual(patches.rustfmt_files(text, src, OURS), ["rust/kernel/rdma/cq.rs"])


if __name__ == "__main__":
    unittest.main()
