// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! `ferroce-bar` against a fake sysfs tree whose resource0 is a plain file.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fake_sysfs() -> PathBuf {
    let root = std::env::temp_dir().join(format!("ferroce-bar-test-{}", std::process::id()));
    let dev = root.join("0000:00:03.0");
    std::fs::create_dir_all(&dev).expect("mkdir");
    std::fs::write(
        dev.join("vendor"),
        format!("{:#06x}\n", ferroce_hw::PCI_VENDOR_ID),
    )
    .expect("vendor");
    std::fs::write(
        dev.join("device"),
        format!("{:#06x}\n", ferroce_hw::PCI_DEVICE_ID),
    )
    .expect("device");
    let mut bar = vec![0u8; 0x2000];
    bar[..4].copy_from_slice(&ferroce_hw::ID_MAGIC.to_le_bytes());
    std::fs::write(dev.join("resource0"), bar).expect("resource0");
    let other = root.join("0000:00:04.0");
    std::fs::create_dir_all(&other).expect("mkdir");
    std::fs::write(other.join("vendor"), "0x8086\n").expect("vendor");
    std::fs::write(other.join("device"), "0x100e\n").expect("device");
    root
}

fn run(root: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferroce-bar"))
        .arg("--sysfs")
        .arg(root)
        .args(args)
        .output()
        .expect("run ferroce-bar");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

#[test]
fn find_read_write() {
    let root = fake_sysfs();
    assert_eq!(run(&root, &["find"]), (true, "0000:00:03.0".to_string()));
    assert_eq!(
        run(&root, &["read", "0000:00:03.0", "0x0"]),
        (true, "0x45435246".to_string())
    );
    assert!(run(&root, &["write", "0000:00:03.0", "0x8c", "0xcafe"]).0);
    assert_eq!(
        run(&root, &["read", "0000:00:03.0", "0x8c"]),
        (true, "0x0000cafe".to_string())
    );
    assert!(!run(&root, &["read", "0000:00:03.0", "0x2"]).0, "unaligned");
    assert!(
        !run(&root, &["read", "0000:00:03.0", "0x2000"]).0,
        "beyond the BAR"
    );
    assert!(!run(&root, &["read", "../x", "0x0"]).0, "not a BDF");
    let (ok, info) = run(&root, &["info", "0000:00:03.0"]);
    assert!(ok && info.contains("ferroce"), "{info}");
    std::fs::remove_dir_all(&root).expect("cleanup");
}
