// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Compiles the hardware interface for userspace: `cfg(userspace)` turns on the items only the
//! device side (the NIC model) and the provider use, which the kernel driver does not compile.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(userspace)");
    println!("cargo::rustc-cfg=userspace");
    // Nothing else decides the cfg: without this, cargo runs the script again whenever any
    // file of the package changes.
    println!("cargo::rerun-if-changed=build.rs");
}
