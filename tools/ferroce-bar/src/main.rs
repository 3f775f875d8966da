// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! `ferroce-bar`: read or write a 32-bit register of a PCI device's BAR through
//! `/sys/bus/pci/devices/<bdf>/resource<N>` (the minimal test guest has no /dev/mem).
//!
//! ```text
//! ferroce-bar find                      # BDFs of ferroce functions (vendor:device from hw.rs)
//! ferroce-bar read  0000:00:03.0 0x0    # prints 0x45435246
//! ferroce-bar write 0000:00:03.0 0x8c 0x1234
//! ferroce-bar info  0000:00:03.0        # identification registers, decoded
//! ```

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use memmap2::{MmapOptions, MmapRaw};

const SYSFS_PCI: &str = "/sys/bus/pci/devices";

#[derive(Parser)]
#[command(
    version,
    about = "Read or write 32-bit PCI BAR registers through sysfs"
)]
struct Cli {
    /// BAR index (the sysfs resourceN file).
    #[arg(long, default_value_t = 0)]
    bar: u8,
    /// Directory of PCI devices (tests point it at a fake tree).
    #[arg(long, default_value = SYSFS_PCI)]
    sysfs: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the BDFs of ferroce functions.
    Find,
    /// Read a 32-bit register and print it as hex.
    Read {
        /// PCI address, e.g. 0000:00:03.0.
        bdf: String,
        /// Register offset (hex with 0x, or decimal), 4-byte aligned.
        #[arg(value_parser = parse_number)]
        offset: u64,
    },
    /// Write a 32-bit register.
    Write {
        /// PCI address.
        bdf: String,
        /// Register offset, 4-byte aligned.
        #[arg(value_parser = parse_number)]
        offset: u64,
        /// Value.
        #[arg(value_parser = parse_number)]
        value: u64,
    },
    /// Print the ferroce identification registers.
    Info {
        /// PCI address.
        bdf: String,
    },
}

fn parse_number(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|e| format!("{text}: {e}"))
}

fn read_sysfs_hex(path: &Path) -> anyhow::Result<u32> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let text = text.trim();
    u32::from_str_radix(text.trim_start_matches("0x"), 16)
        .with_context(|| format!("{}: {text:?}", path.display()))
}

/// A mapped BAR.
struct Bar {
    map: MmapRaw,
}

impl Bar {
    fn open(sysfs: &Path, bdf: &str, bar: u8) -> anyhow::Result<Self> {
        if bdf.contains('/') {
            bail!("{bdf}: not a PCI address");
        }
        let path = sysfs.join(bdf).join(format!("resource{bar}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| path.display().to_string())?;
        let map = MmapOptions::new()
            .map_raw(&file)
            .with_context(|| format!("mmap {}", path.display()))?;
        Ok(Self { map })
    }

    fn check(&self, offset: u64) -> anyhow::Result<usize> {
        let offset = usize::try_from(offset)?;
        if offset % 4 != 0 || offset.checked_add(4).is_none_or(|end| end > self.map.len()) {
            bail!(
                "offset {offset:#x} is unaligned or beyond the BAR ({:#x} bytes)",
                self.map.len()
            );
        }
        Ok(offset)
    }

    fn read32(&self, offset: u64) -> anyhow::Result<u32> {
        let offset = self.check(offset)?;
        // SAFETY: `offset + 4` is inside the mapping (checked) and 4-byte aligned; MMIO must be
        // read with a single volatile 32-bit access.
        Ok(unsafe { std::ptr::read_volatile(self.map.as_ptr().add(offset).cast::<u32>()) })
    }

    fn write32(&self, offset: u64, value: u32) -> anyhow::Result<()> {
        let offset = self.check(offset)?;
        // SAFETY: as in `read32`, with a single volatile 32-bit store.
        unsafe { std::ptr::write_volatile(self.map.as_mut_ptr().add(offset).cast::<u32>(), value) };
        Ok(())
    }
}

fn find(sysfs: &Path) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(sysfs).with_context(|| sysfs.display().to_string())? {
        let path = entry?.path();
        let vendor = read_sysfs_hex(&path.join("vendor"))?;
        let device = read_sysfs_hex(&path.join("device"))?;
        if vendor == u32::from(ferroce_hw::PCI_VENDOR_ID)
            && device == u32::from(ferroce_hw::PCI_DEVICE_ID)
        {
            found.push(
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
        }
    }
    found.sort();
    Ok(found)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Find => {
            for bdf in find(&cli.sysfs)? {
                println!("{bdf}");
            }
        }
        Command::Read { bdf, offset } => {
            println!(
                "{:#010x}",
                Bar::open(&cli.sysfs, &bdf, cli.bar)?.read32(offset)?
            );
        }
        Command::Write { bdf, offset, value } => {
            let value = u32::try_from(value).context("value does not fit in 32 bits")?;
            let bar = Bar::open(&cli.sysfs, &bdf, cli.bar)?;
            bar.write32(offset, value)?;
            // A read flushes the posted write, as on real PCIe.
            bar.read32(ferroce_hw::REG_ID as u64)?;
        }
        Command::Info { bdf } => {
            use ferroce_hw::*;
            let bar = Bar::open(&cli.sysfs, &bdf, cli.bar)?;
            let id = bar.read32(REG_ID as u64)?;
            let version = bar.read32(REG_IF_VERSION as u64)?;
            println!(
                "id          {id:#010x} ({})",
                if id == ID_MAGIC { "ferroce" } else { "unknown" }
            );
            println!("if_version  {}.{}", version >> 16, version & 0xffff);
            println!("caps        {:#010x}", bar.read32(REG_CAPS as u64)?);
            println!("status      {:#010x}", bar.read32(REG_DEV_STATUS as u64)?);
            println!("num_msix    {}", bar.read32(REG_NUM_MSIX as u64)?);
            let writes = u64::from(bar.read32(counter_offset(COUNTER_MMIO_WRITES) as u64)?);
            println!("mmio_writes {writes}");
        }
    }
    Ok(())
}
