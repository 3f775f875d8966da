// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The DMA_MAP table: guest memory regions QEMU shares with us as file descriptors.
//!
//! QEMU maps guest RAM in pieces split around the PC holes and remaps them during boot (an unmap,
//! then a map), and maps ROM/flash without a file descriptor. The table keeps every region, maps
//! read-only regions read-only, and reports fd-less regions as inaccessible (the NIC never needs
//! them). Like a VFIO IOMMU it refuses a map that overlaps a mapped region (a repeat of the same
//! map is accepted, as libvfio-user does) and an unmap that would cut one in two; and it holds at
//! most [`MAX_DMA_REGIONS`].

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Size zero, the range or the file range wraps, or neither readable nor writable.
    #[error("invalid DMA region {iova:#x} (+{size:#x})")]
    Invalid {
        /// Guest address.
        iova: u64,
        /// Size.
        size: u64,
    },
    /// The range overlaps a mapped region.
    #[error("DMA region {iova:#x} (+{size:#x}) overlaps a mapped one")]
    Overlap {
        /// Guest address.
        iova: u64,
        /// Size.
        size: u64,
    },
    /// The file is smaller than the file range (accesses past its end would raise SIGBUS).
    #[error("DMA region {iova:#x} (+{size:#x}) at file offset {offset:#x} is past the file's {file_size:#x} bytes")]
    PastFile {
        /// Guest address.
        iova: u64,
        /// Size.
        size: u64,
        /// File offset.
        offset: u64,
        /// File size.
        file_size: u64,
    },
    /// The file cannot be sealed against shrinking: whoever holds it could truncate the
    /// memory under the device's mapping, and the device's next access would raise SIGBUS in
    /// the NIC process, every function's device thread with it.
    #[error(
        "DMA region {iova:#x} (+{size:#x}): its file cannot be sealed against shrinking \
             (F_SEAL_SHRINK; QEMU's memory-backend-memfd can): {source}"
    )]
    Unsealed {
        /// Guest address.
        iova: u64,
        /// Size.
        size: u64,
        /// Why sealing failed.
        source: std::io::Error,
    },
    /// [`MAX_DMA_REGIONS`] are mapped.
    #[error("DMA region {iova:#x} (+{size:#x}): {MAX_DMA_REGIONS} regions are mapped already")]
    TooMany {
        /// Guest address.
        iova: u64,
        /// Size.
        size: u64,
    },
    /// An unmap that starts or ends inside a mapped region.
    #[error("DMA unmap {iova:#x} (+{size:#x}) would cut a mapped region")]
    Partial {
        /// Guest address.
        iova: u64,
        /// Size.
        size: u64,
    },
}

impl MapError {
    /// The errno for the vfio-user error reply.
    pub fn errno(&self) -> i32 {
        match self {
            MapError::Mmap { source, .. } => source.raw_os_error().unwrap_or(libc::EINVAL),
            MapError::Unsealed { .. } => libc::EPERM,
            MapError::Overlap { .. } => libc::EEXIST,
            MapError::TooMany { .. } => libc::ENOSPC,
            MapError::Invalid { .. } | MapError::PastFile { .. } | MapError::Partial { .. } => {
                libc::EINVAL
            }
        }
    }
}

/// Seals `file` against shrinking (`F_SEAL_SHRINK`) unless it is already: a memfd QEMU made
/// (`memory-backend-memfd`, sealed by default) or one that allows sealing. A file that cannot
/// be sealed (a memfd made without `MFD_ALLOW_SEALING`, a file of a file system without seals)
/// is an error: mapped, it could be truncated under the device.
fn seal_against_shrinking(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl with integer arguments on a descriptor `file` keeps open.
    let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    if seals < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if seals & libc::F_SEAL_SHRINK != 0 {
        return Ok(());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Most DMA regions mapped at once (QEMU maps a handful: RAM pieces, ROMs, flash).
pub const MAX_DMA_REGIONS: usize = 1024;

struct DmaRegion {
    iova: u64,
    size: u64,
    /// `None` for regions QEMU mapped without a file descriptor.
    map: Option<MmapRaw>,
    writable: bool,
    /// What the DMA_MAP asked for (a repeat of it is accepted).
    request: MapRequest,
}

/// The parameters of a DMA_MAP, to recognise a repeated one.
#[derive(Clone, Copy, PartialEq, Eq)]
struct MapRequest {
    file_offset: u64,
    /// Device and inode of the file.
    file: Option<(u64, u64)>,
    readable: bool,
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
pub struct DmaTable {
    regions: RwLock<Vec<DmaRegion>>,
    /// The PCI command register's Bus Master Enable: while it is clear the function reaches no
    /// memory, as a PCIe function must not.
    bus_master: AtomicBool,
    /// DMA attempts refused because bus mastering was off.
    blocked: AtomicU64,
}

impl Default for DmaTable {
    fn default() -> Self {
        Self {
            regions: RwLock::new(Vec::new()),
            // A table without a config space in front of it (tests) is always mastering; the
            // server follows the command register.
            bus_master: AtomicBool::new(true),
            blocked: AtomicU64::new(0),
        }
    }
}

impl DmaTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Follows the command register's Bus Master Enable.
    pub fn set_bus_master(&self, on: bool) {
        self.bus_master.store(on, Ordering::Release);
    }

    /// Whether bus mastering is on.
    pub fn bus_master(&self) -> bool {
        self.bus_master.load(Ordering::Acquire)
    }

    /// DMA attempts refused because bus mastering was off.
    pub fn blocked(&self) -> u64 {
        self.blocked.load(Ordering::Relaxed)
    }

    /// Refuses any access while bus mastering is off, counting it.
    fn check_master(&self, addr: u64, len: usize) -> Result<(), DmaError> {
        if self.bus_master() {
            return Ok(());
        }
        self.blocked.fetch_add(1, Ordering::Relaxed);
        Err(DmaError::BusMasterOff {
            addr,
            len: len as u64,
        })
    }

    /// Adds a region (DMA_MAP). Nothing changes if it is refused: size zero, a wrapping range,
    /// neither readable nor writable, a file range past the end of the file, an overlap with a
    /// mapped region, or too many regions.
    pub fn map(
        &self,
        iova: u64,
        size: u64,
        file_offset: u64,
        file: Option<&File>,
        readable: bool,
        writable: bool,
    ) -> Result<(), MapError> {
        let invalid = MapError::Invalid { iova, size };
        if size == 0 || iova.checked_add(size).is_none() || !(readable || writable) {
            return Err(invalid);
        }
        let len = usize::try_from(size).map_err(|_| MapError::Invalid { iova, size })?;
        let mut request = MapRequest {
            file_offset,
            file: None,
            readable,
            writable,
        };
        if let Some(file) = file {
            let file_end = file_offset.checked_add(size).ok_or(invalid)?;
            let meta = file
                .metadata()
                .map_err(|source| MapError::Mmap { iova, size, source })?;
            // Regular files (memfds, hugetlbfs, /dev/shm) have a size to check; other mappable
            // descriptors are left to mmap.
            if meta.is_file() && file_end > meta.len() {
                return Err(MapError::PastFile {
                    iova,
                    size,
                    offset: file_offset,
                    file_size: meta.len(),
                });
            }
            if meta.is_file() {
                seal_against_shrinking(file).map_err(|source| MapError::Unsealed {
                    iova,
                    size,
                    source,
                })?;
            }
            request.file = Some((meta.dev(), meta.ino()));
        }
        {
            let regions = self.regions.read().unwrap_or_else(|e| e.into_inner());
            if Self::is_repeat(&regions, iova, size, request) {
                return Ok(());
            }
            Self::check_free(&regions, iova, size)?;
        }
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
        // Again under the write lock (maps come from one thread, but the table does not rely
        // on it); the mapping is dropped if the range was taken meanwhile.
        if Self::is_repeat(&regions, iova, size, request) {
            return Ok(());
        }
        Self::check_free(&regions, iova, size)?;
        let writable = writable && map.is_some();
        let at = regions.partition_point(|r| r.iova < iova);
        regions.insert(
            at,
            DmaRegion {
                iova,
                size,
                map,
                writable,
                request,
            },
        );
        Ok(())
    }

    /// Whether exactly this region is mapped already, from the same file range with the same
    /// access (a repeated DMA_MAP, which libvfio-user accepts too).
    fn is_repeat(regions: &[DmaRegion], iova: u64, size: u64, request: MapRequest) -> bool {
        regions
            .iter()
            .any(|r| r.iova == iova && r.size == size && r.request == request)
    }

    /// Refuses `[iova, iova + size)` (not wrapping) if it overlaps a region or the table is full.
    fn check_free(regions: &[DmaRegion], iova: u64, size: u64) -> Result<(), MapError> {
        let end = iova + size;
        if regions.iter().any(|r| r.iova < end && iova < r.end()) {
            return Err(MapError::Overlap { iova, size });
        }
        if regions.len() >= MAX_DMA_REGIONS {
            return Err(MapError::TooMany { iova, size });
        }
        Ok(())
    }

    /// Removes the regions inside `[iova, iova + size)` (DMA_UNMAP) and returns how many (0 for a
    /// range with nothing mapped). Nothing changes if it is refused: size zero, a wrapping range,
    /// or a range that starts or ends inside a region (regions are unmapped whole, as mapped).
    pub fn unmap(&self, iova: u64, size: u64) -> Result<usize, MapError> {
        let end = iova
            .checked_add(size)
            .filter(|_| size != 0)
            .ok_or(MapError::Invalid { iova, size })?;
        let mut regions = self.regions.write().unwrap_or_else(|e| e.into_inner());
        let overlaps = |r: &DmaRegion| r.iova < end && iova < r.end();
        if regions
            .iter()
            .any(|r| overlaps(r) && (r.iova < iova || r.end() > end))
        {
            return Err(MapError::Partial { iova, size });
        }
        let before = regions.len();
        regions.retain(|r| !overlaps(r));
        Ok(before - regions.len())
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
        self.check_master(addr, len)?;
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
        self.check_master(addr, data.len())?;
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

    /// Guest memory as QEMU's memory-backend-memfd makes it: a memfd that allows sealing.
    fn memfd(size: usize) -> File {
        memfd_with(size, libc::MFD_ALLOW_SEALING)
    }

    fn memfd_with(size: usize, flags: libc::c_uint) -> File {
        use std::os::fd::FromRawFd;
        // SAFETY: the name is a valid C string; the result is checked.
        let fd = unsafe { libc::memfd_create(c"ferroce-dma-test".as_ptr(), flags) };
        assert!(fd >= 0, "memfd_create");
        // SAFETY: `fd` is a fresh descriptor we own.
        let mut file = unsafe { File::from_raw_fd(fd) };
        file.write_all(&vec![0u8; size]).expect("fill");
        file
    }

    /// A regular file, which no seal can keep from shrinking.
    fn tempfile(size: usize) -> File {
        let path = std::env::temp_dir().join(format!(
            "ferroce-dma-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("open");
        std::fs::remove_file(&path).expect("unlink");
        file.write_all(&vec![0u8; size]).expect("fill");
        file
    }

    /// Issue 36, defect 10: a client that shrank a mapped memfd made the device's next access
    /// raise SIGBUS, which killed the NIC process with every function it served. The file is
    /// sealed against shrinking when it is mapped; one that cannot be is refused.
    #[test]
    fn mapped_memory_cannot_shrink_under_the_device() {
        let table = DmaTable::new();
        let ram = memfd(0x4000);
        table
            .map(0x0, 0x4000, 0, Some(&ram), true, true)
            .expect("map");
        let shrunk = ram.set_len(0);
        assert!(shrunk.is_err(), "the client truncated mapped guest memory");
        table.write(0x3ff0, &[7; 16]).expect("write at the end");
        let mut buf = [0u8; 16];
        table.read(0x3ff0, &mut buf).expect("read at the end");
        assert_eq!(buf, [7; 16]);
        for file in [memfd_with(0x1000, 0), tempfile(0x1000)] {
            let refused = table.map(0x10000, 0x1000, 0, Some(&file), true, true);
            assert!(
                matches!(refused, Err(MapError::Unsealed { .. })),
                "{refused:?}"
            );
            assert_eq!(refused.expect_err("refused").errno(), libc::EPERM);
        }
        assert_eq!(table.regions().len(), 1, "nothing else was mapped");
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
        // A map over a mapped region is refused; a remap is an unmap, then a map.
        let other = memfd(0x1000);
        assert!(matches!(
            table.map(0x2000, 0x1000, 0, Some(&other), true, false),
            Err(MapError::Overlap { .. })
        ));
        assert_eq!(table.unmap(0x2000, 0x1000).expect("unmap high"), 1);
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
        // Regions go whole: cutting one is refused.
        assert!(matches!(
            table.unmap(0x1000, 0x2000),
            Err(MapError::Partial { .. })
        ));
        assert_eq!(table.unmap(0x0, 0x3000).expect("unmap RAM"), 2);
        assert_eq!(table.unmap_all(), 1);
    }
}
