// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Finds the rdma-core bindings made by `gen-bindings` (in the toolchain root, with the exact
//! rdma-core source of the pinned userspace) and links the cdylib against that libibverbs.
//!
//! The bindings live in `$FERROCE_CACHE/provider/bindings-<key>/`; the right directory is the
//! one whose `inputs/` copies of `wrapper.h`, `ferroce-abi.h` and `gen-bindings` equal this
//! tree's files, so a changed user ABI never builds against stale bindings.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let inputs = [
        manifest.join("wrapper.h"),
        manifest.join("gen-bindings"),
        manifest.join("../../include/uapi/rdma/ferroce-abi.h"),
    ];
    let cache = env::var("FERROCE_CACHE").unwrap_or_else(|_| "/var/cache/ferroce".into());
    let provider = Path::new(&cache).join("provider");
    println!("cargo:rerun-if-env-changed=FERROCE_CACHE");
    println!("cargo:rerun-if-changed={}", provider.display());
    for input in &inputs {
        println!("cargo:rerun-if-changed={}", input.display());
    }

    let Some(dir) = find_bindings(&provider, &inputs) else {
        println!(
            "cargo:warning=no rdma-core bindings for this ferroce-abi.h in {}",
            provider.display()
        );
        eprintln!(
            "error: the ferroce provider needs rdma-core's driver.h bindings; run\n  \
             tools/ferroce-provider/gen-bindings\n(as root: it uses the toolchain root) and build again"
        );
        std::process::exit(1);
    };
    println!(
        "cargo:rerun-if-changed={}",
        dir.join("bindings.rs").display()
    );
    println!(
        "cargo:rustc-env=FERROCE_PROVIDER_BINDINGS={}",
        dir.join("bindings.rs").display()
    );
    // Only the cdylib links libibverbs (the unit tests call no rdma-core function and run
    // on hosts without it); -z defs proves every symbol resolves against that library.
    println!("cargo:rustc-link-arg-cdylib=-L{}", dir.display());
    println!("cargo:rustc-link-arg-cdylib=-libverbs");
    println!("cargo:rustc-link-arg-cdylib=-Wl,-z,defs");
    println!("cargo:rustc-link-arg-cdylib=-Wl,-soname,libferroce-rdmav34.so");
}

/// The newest `bindings-*` directory under `provider` whose inputs equal `inputs`.
fn find_bindings(provider: &Path, inputs: &[PathBuf]) -> Option<PathBuf> {
    let want: Vec<(String, Vec<u8>)> = inputs
        .iter()
        .map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            Some((name, fs::read(p).ok()?))
        })
        .collect::<Option<_>>()?;
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(provider)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("bindings-"))
                && d.join("bindings.rs").is_file()
                && d.join("libibverbs.so").is_file()
                && want.iter().all(|(name, bytes)| {
                    fs::read(d.join("inputs").join(name)).ok().as_ref() == Some(bytes)
                })
        })
        .filter_map(|d| Some((fs::metadata(&d).ok()?.modified().ok()?, d)))
        .collect();
    found.sort();
    found.pop().map(|(_, d)| d)
}
