// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Guest memory as the device sees it: DMA by guest physical (I/O virtual) address.

use std::sync::Mutex;

/// Why a DMA access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DmaError {
    /// No mapped region covers the address range.
    #[error("DMA to unmapped guest memory at {addr:#x} (+{len:#x})")]
    Unmapped {
        /// First unmapped address.
        addr: u64,
        /// Remaining length.
        len: u64,
    },
    /// A write hit a read-only region.
    #[error("DMA write to read-only guest memory at {addr:#x}")]
    ReadOnly {
        /// Address of the read-only region.
        addr: u64,
    },
    /// Bus mastering is off (the PCI command register's Bus Master Enable is clear).
    #[error("DMA at {addr:#x} (+{len:#x}) while bus mastering is off")]
    BusMasterOff {
        /// Start address.
        addr: u64,
        /// Length.
        len: u64,
    },
    /// The range wraps around the address space.
    #[error("DMA range at {addr:#x} (+{len:#x}) overflows")]
    Overflow {
        /// Start address.
        addr: u64,
        /// Length.
        len: u64,
    },
}

/// Byte-granular access to guest memory. Implemented by the DMA_MAP table in production and by
/// [`VecMemory`] in tests. Methods take `&self`: the memory is shared with the guest anyway.
pub trait GuestMemory: Send + Sync {
    /// Reads `buf.len()` bytes at `addr`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError>;
    /// Writes `data` at `addr`.
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError>;
}

/// Checks that `[addr, addr + len)` does not wrap.
pub fn checked_range(addr: u64, len: u64) -> Result<u64, DmaError> {
    addr.checked_add(len)
        .ok_or(DmaError::Overflow { addr, len })
}

/// Guest memory backed by a `Vec`, based at a guest address (tests, fuzzing).
pub struct VecMemory {
    base: u64,
    bytes: Mutex<Vec<u8>>,
}

impl VecMemory {
    /// Memory of `size` zero bytes at guest address `base`.
    pub fn new(base: u64, size: usize) -> Self {
        Self {
            base,
            bytes: Mutex::new(vec![0; size]),
        }
    }

    fn range(
        &self,
        addr: u64,
        len: usize,
        size: usize,
    ) -> Result<std::ops::Range<usize>, DmaError> {
        let len64 = len as u64;
        checked_range(addr, len64)?;
        let start = addr
            .checked_sub(self.base)
            .filter(|off| off.checked_add(len64).is_some_and(|end| end <= size as u64))
            .ok_or(DmaError::Unmapped { addr, len: len64 })?;
        let start = usize::try_from(start).map_err(|_| DmaError::Unmapped { addr, len: len64 })?;
        Ok(start..start + len)
    }
}

impl GuestMemory for VecMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        let range = self.range(addr, buf.len(), bytes.len())?;
        buf.copy_from_slice(&bytes[range]);
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        let range = self.range(addr, data.len(), bytes.len())?;
        bytes[range].copy_from_slice(data);
        Ok(())
    }
}
