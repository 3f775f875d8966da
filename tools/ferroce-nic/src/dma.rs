// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The DMA_MAP table: guest memory regions QEMU shares with us as file descriptors.
//!
//! QEMU maps guest RAM in pieces split around the PC holes and remaps them during boot, and maps
//! ROM/flash without a file descriptor. The table keeps every region, replaces overlapping ones on
//! remap, maps read-only regions read-only, and reports fd-less regions as inaccessible (the NIC
//! never needs them).

use std::fs::File;
use std::sync::RwLock;

use memmap2::{MmapOptions, MmapRaw};

use crate::memory::{checked_range, DmaError, GuestMemory};

/// Why a DMA_MAP request could not be honoured.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// mmap of the region failed.
    #[error("mmap of DMA region at {iova:#x} (+{size:#x}) failed: {source}")]
    Mmap {
        /// Guest address.
        iova: u64,
        /// Size.
        size: u64,
        /// The OS error.
        source: std::io::Error,
    },
    /// Size zero, or the range wraps.
    #[error("invalid DMA region {iova:#x} (+{size:#x})")]
    Invalid {
        /// Guest address.
        iova: u64,
        /// Size.
        size: u64,
    },
}

struct DmaRegion {
    iova: u64,
    size: u64,
    /// `None` for regions QEMU mapped without a file descriptor.
    map: Option<MmapRaw>,
    writable: bool,
}

impl DmaRegion {
    fn end(&self) -> u64 {
        self.iova + self.size
    }
}

/// Description of one region, for the control interface.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RegionInfo {
    /// Guest address.
    pub iova: u64,
    /// Size in bytes.
    pub size: u64,
    /// Backed by a file descriptor (accessible).
    pub mapped: bool,
    /// Writable by the device.
    pub writable: bool,
}

/// The table of DMA regions.
#[derive(Default)]
pub struct DmaTable {
    regions: RwLock<Vec<DmaRegion>>,
}

impl DmaTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a region (DMA_MAP), replacing any region it overlaps.
    pub fn map(
        &self,
        iova: u64,
        size: u64,
        file_offset: u64,
        file: Option<&File>,
        readable: bool,
        writable: bool,
    ) -> Result<(), MapError> {
        if size == 0 || iova.checked_add(size).is_none() {
            return Err(MapError::Invalid { iova, size });
        }
        let len = usize::try_from(size).map_err(|_| MapError::Invalid { iova, size })?;
        let map = match file {
            Some(file) if readable || writable => {
                let mut options = MmapOptions::new();
                options.offset(file_offset).len(len);
                // The mapping is guest RAM shared with QEMU and the guest, which may change it
                // at any time: it is only ever accessed through raw copies below, never through
                // Rust references.
                let mapped = if writable {
                    options.map_raw(file)
                } else {
                    options.map_raw_read_only(file)
                };
                Some(mapped.map_err(|source| MapError::Mmap { iova, size, source })?)
            }
            _ => None,
        };
        let mut regions = self.regions.write().unwrap_or_else(|e| e.into_inner());
        self.remove_locked(&mut regions, iova, size);
        let writable = writable && map.is_some();
        let at = regions.partition_point(|r| r.iova < iova);
        regions.insert(
            at,
            DmaRegion {
                iova,
                size,
                map,
                writable,
            },
        );
        Ok(())
    }

    fn remove_locked(&self, regions: &mut Vec<DmaRegion>, iova: u64, size: u64) -> usize {
        let end = iova.saturating_add(size);
        let before = regions.len();
        regions.retain(|r| !(r.iova < end && iova < r.end()));
        before - regions.len()
    }

    /// Removes all regions overlapping `[iova, iova + size)` (DMA_UNMAP); returns how many.
    pub fn unmap(&self, iova: u64, size: u64) -> usize {
        let mut regions = self.regions.write().unwrap_or_else(|e| e.into_inner());
        self.remove_locked(&mut regions, iova, size)
    }

    /// Removes every region.
    pub fn unmap_all(&self) -> usize {
        let mut regions = self.regions.write().unwrap_or_else(|e| e.into_inner());
        let count = regions.len();
        regions.clear();
        count
    }

    /// The regions, in address order.
    pub fn regions(&self) -> Vec<RegionInfo> {
        let regions = self.regions.read().unwrap_or_else(|e| e.into_inner());
        regions
            .iter()
            .map(|r| RegionInfo {
                iova: r.iova,
                size: r.size,
                mapped: r.map.is_some(),
                writable: r.writable,
            })
            .collect()
    }

    /// Calls `copy(region, offset_in_region, range_of_buffer)` for each piece of
    /// `[addr, addr + len)`, which may span adjacent regions.
    fn for_each_piece(
        &self,
        addr: u64,
        len: usize,
        write: bool,
        mut copy: impl FnMut(&MmapRaw, usize, std::ops::Range<usize>),
    ) -> Result<(), DmaError> {
        checked_range(addr, len as u64)?;
        let regions = self.regions.read().unwrap_or_else(|e| e.into_inner());
        let mut done = 0usize;
        while done < len {
            let cur = addr + done as u64;
            let remaining = (len - done) as u64;
            let region = regions
                .iter()
                .find(|r| r.iova <= cur && cur < r.end())
                .ok_or(DmaError::Unmapped {
                    addr: cur,
                    len: remaining,
                })?;
            let map = region.map.as_ref().ok_or(DmaError::Unmapped {
                addr: cur,
                len: remaining,
            })?;
            if write && !region.writable {
                return Err(DmaError::ReadOnly { addr: cur });
            }
            let chunk = remaining.min(region.end() - cur) as usize;
            copy(map, (cur - region.iova) as usize, done..done + chunk);
            done += chunk;
        }
        Ok(())
    }
}

impl GuestMemory for DmaTable {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let len = buf.len();
        self.for_each_piece(addr, len, false, |map, offset, range| {
            let dst = &mut buf[range];
            // SAFETY: `offset + dst.len()` lies inside the mapping (checked against the region's
            // size, which is the mapping's length), the mapping stays alive while the table's
            // read lock is held, and `dst` is a distinct buffer of ours.
            unsafe {
                std::ptr::copy_nonoverlapping(map.as_ptr().add(offset), dst.as_mut_ptr(), dst.len())
            }
        })
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.for_each_piece(addr, data.len(), true, |map, offset, range| {
            let src = &data[range];
            // SAFETY: as in `read`; the region is mapped writable (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), map.as_mut_ptr().add(offset), src.len())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn memfd(size: usize) -> File {
        let mut file = tempfile_in_shm();
        file.write_all(&vec![0u8; size]).expect("fill");
        file
    }

    fn tempfile_in_shm() -> File {
        let path = std::env::temp_dir().join(format!(
            "ferroce-dma-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("open");
        std::fs::remove_file(&path).expect("unlink");
        file
    }

    #[test]
    fn regions_split_remap_and_fdless() {
        let table = DmaTable::new();
        let low = memfd(0x2000);
        let high = memfd(0x1000);
        table
            .map(0x0, 0x2000, 0, Some(&low), true, true)
            .expect("map low");
        table
            .map(0x2000, 0x1000, 0, Some(&high), true, true)
            .expect("map high");
        table
            .map(0x10000, 0x1000, 0, None, true, false)
            .expect("map rom");
        // A write spanning the two adjacent pieces lands in both files.
        table.write(0x1ffe, &[1, 2, 3, 4]).expect("span write");
        let mut buf = [0u8; 4];
        table.read(0x1ffe, &mut buf).expect("span read");
        assert_eq!(buf, [1, 2, 3, 4]);
        // fd-less and hole accesses fail.
        assert!(matches!(
            table.read(0x10000, &mut buf),
            Err(DmaError::Unmapped { .. })
        ));
        assert!(matches!(
            table.read(0x3000, &mut buf),
            Err(DmaError::Unmapped { .. })
        ));
        assert!(matches!(
            table.read(u64::MAX - 1, &mut buf),
            Err(DmaError::Overflow { .. })
        ));
        // Remap replaces the overlapped region.
        let other = memfd(0x1000);
        table
            .map(0x2000, 0x1000, 0, Some(&other), true, false)
            .expect("remap ro");
        assert_eq!(table.regions().len(), 3);
        table.read(0x2000, &mut buf).expect("read new");
        assert_eq!(buf, [0, 0, 0, 0]);
        assert!(matches!(
            table.write(0x2000, &buf),
            Err(DmaError::ReadOnly { .. })
        ));
        assert_eq!(table.unmap(0x0, 0x3000), 2);
        assert_eq!(table.unmap_all(), 1);
    }
}
