// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The vfio-user front end: serves a function's config space, BAR0, DMA_MAP/UNMAP, SET_IRQS
//! and reset to QEMU on the `vfio_user` crate's thread (the device runs on the device thread,
//! [`crate::device_thread`]).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use vfio_bindings::bindings::vfio::*;
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, Server, ServerBackend, ServerRegion};

use crate::config_space::{ConfigSpace, CONFIG_SIZE};
use crate::function::Function;
use crate::interrupts::InterruptSink;

/// The vfio-user backend.
///
/// Everything the client sends is checked before anything changes: a refused request returns
/// an error, which the `vfio_user` crate's server loop answers with an error reply.
pub struct Backend {
    nic: Arc<Function>,
    config: ConfigSpace,
    /// Interrupts per IRQ index, as offered.
    irq_counts: Vec<u32>,
}

impl Backend {
    /// A backend for `nic`.
    pub fn new(nic: Arc<Function>, msix_vectors: u16) -> Self {
        let mut irq_counts: Vec<u32> = irq_infos(msix_vectors).iter().map(|i| i.count).collect();
        if let Some(msix) = irq_counts.get_mut(VFIO_PCI_MSIX_IRQ_INDEX as usize) {
            // No more than the controller has.
            *msix = (*msix).min(u32::from(nic.msix.vectors()));
        }
        // The command register starts clear: no DMA until the driver turns bus mastering on.
        nic.dma.set_bus_master(false);
        let device_id = nic.lock().core.config().function.device_id();
        Self {
            nic,
            config: ConfigSpace::new(msix_vectors, device_id),
            irq_counts,
        }
    }

    /// Checks a SET_IRQS request as a VFIO device does: one action and one data type and no
    /// other flag bits, `start..start + count` inside the index's interrupts, `count == 0` only
    /// to disable them all, file descriptors only with `DATA_EVENTFD` and then one per interrupt.
    fn check_set_irqs(
        &self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: usize,
    ) -> Result<(), std::io::Error> {
        let refuse = |why: &str| {
            refused(format_args!(
                "SET_IRQS index {index} flags {flags:#x} start {start} count {count} fds {fds}: {why}"
            ))
        };
        if flags & !(VFIO_IRQ_SET_DATA_TYPE_MASK | VFIO_IRQ_SET_ACTION_TYPE_MASK) != 0 {
            return Err(refuse("undefined flag bits"));
        }
        let data = flags & VFIO_IRQ_SET_DATA_TYPE_MASK;
        let action = flags & VFIO_IRQ_SET_ACTION_TYPE_MASK;
        if !matches!(data, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_DATA_EVENTFD) {
            return Err(refuse("not exactly one supported data type"));
        }
        if !matches!(
            action,
            VFIO_IRQ_SET_ACTION_MASK | VFIO_IRQ_SET_ACTION_UNMASK | VFIO_IRQ_SET_ACTION_TRIGGER
        ) {
            return Err(refuse("not exactly one action"));
        }
        let max = self.irq_counts.get(index as usize).copied().unwrap_or(0);
        if start >= max || count > max - start {
            return Err(refuse("outside the interrupts of the index"));
        }
        let disable_all = action == VFIO_IRQ_SET_ACTION_TRIGGER && data == VFIO_IRQ_SET_DATA_NONE;
        if count == 0 && (start != 0 || !disable_all) {
            return Err(refuse("count 0 only disables"));
        }
        if action != VFIO_IRQ_SET_ACTION_TRIGGER && data != VFIO_IRQ_SET_DATA_NONE {
            return Err(refuse("masking takes no data"));
        }
        if fds != 0 && (data != VFIO_IRQ_SET_DATA_EVENTFD || fds != count as usize) {
            return Err(refuse("file descriptors do not match count"));
        }
        Ok(())
    }

    /// After a client disconnects: forget its memory and interrupts, reset the device.
    pub fn disconnected(&mut self) {
        self.nic.dma.unmap_all();
        self.nic.msix.clear_eventfds();
        self.nic.msix.set_control(false, false);
        self.config.reset();
        self.nic.dma.set_bus_master(false);
        self.nic.lock().reset();
    }
}

fn einval() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::EINVAL)
}

/// A refused client request: logged, and `EINVAL` for the error reply.
fn refused(what: std::fmt::Arguments<'_>) -> std::io::Error {
    tracing::warn!("vfio-user: refused {what}");
    einval()
}

/// Checks a region access: config space (any length inside it: QEMU reads all of it at once)
/// or BAR0 (one MMIO access of 1, 2, 4 or 8 bytes inside it); no other region.
fn check_region_access(
    dir: &str,
    region: u32,
    offset: u64,
    len: usize,
) -> Result<(), std::io::Error> {
    let (size, mmio) = match region {
        VFIO_PCI_CONFIG_REGION_INDEX => (CONFIG_SIZE as u64, false),
        VFIO_PCI_BAR0_REGION_INDEX => (ferroce_hw::BAR0_SIZE as u64, true),
        _ => return Err(refused(format_args!("{dir} of region {region}"))),
    };
    let inside = offset
        .checked_add(len as u64)
        .is_some_and(|end| end <= size);
    let length_ok = if mmio {
        matches!(len, 1 | 2 | 4 | 8)
    } else {
        len > 0
    };
    if !inside || !length_ok {
        return Err(refused(format_args!(
            "{dir} of {len} bytes at {offset:#x} of region {region} ({size:#x} bytes)"
        )));
    }
    Ok(())
}

impl ServerBackend for Backend {
    fn region_read(
        &mut self,
        region: u32,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), std::io::Error> {
        check_region_access("read", region, offset, data.len())?;
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => self.config.read(offset, data),
            _ => self.nic.lock().bar0_read(offset, data),
        }
        Ok(())
    }

    fn region_write(
        &mut self,
        region: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), std::io::Error> {
        check_region_access("write", region, offset, data.len())?;
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => {
                if let Some((enabled, masked)) = self.config.write(offset, data) {
                    tracing::debug!(enabled, masked, "MSI-X control");
                    self.nic.msix.set_control(enabled, masked);
                }
                let master = self.config.bus_master();
                if master != self.nic.dma.bus_master() {
                    tracing::debug!(master, "bus master enable");
                    self.nic
                        .trace
                        .event("bus_master", || serde_json::json!({"on": master}));
                    self.nic.dma.set_bus_master(master);
                }
            }
            _ => self.nic.bar0_write(offset, data),
        }
        Ok(())
    }

    fn dma_map(
        &mut self,
        flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> Result<(), std::io::Error> {
        let readable = flags.contains(DmaMapFlags::READ);
        let writable = flags.contains(DmaMapFlags::WRITE);
        tracing::info!(
            iova = format_args!("{address:#x}"),
            size = format_args!("{size:#x}"),
            has_fd = fd.is_some(),
            writable,
            "DMA_MAP"
        );
        self.nic.trace.event("dma_map", || {
            serde_json::json!({"iova": address, "size": size, "fd": fd.is_some(), "writable": writable})
        });
        if !DmaMapFlags::READ_WRITE.contains(flags) {
            return Err(refused(format_args!("DMA_MAP flags {:#x}", flags.bits())));
        }
        self.nic
            .dma
            .map(address, size, offset, fd.as_ref(), readable, writable)
            .map_err(|e| {
                tracing::warn!("vfio-user: refused DMA_MAP: {e}");
                std::io::Error::from_raw_os_error(e.errno())
            })
    }

    fn dma_unmap(
        &mut self,
        flags: DmaUnmapFlags,
        address: u64,
        size: u64,
    ) -> Result<(), std::io::Error> {
        let all = flags == DmaUnmapFlags::UNMAP_ALL;
        if !(flags.is_empty() || all) || (all && (address != 0 || size != 0)) {
            // Dirty page tracking is not offered; UNMAP_ALL comes without a range.
            return Err(refused(format_args!(
                "DMA_UNMAP flags {:#x} iova {address:#x} size {size:#x}",
                flags.bits()
            )));
        }
        // Device work must not race with the unmap: take the device lock first.
        let _device = self.nic.lock();
        let removed = if all {
            self.nic.dma.unmap_all()
        } else {
            self.nic.dma.unmap(address, size).map_err(|e| {
                tracing::warn!("vfio-user: refused DMA_UNMAP: {e}");
                std::io::Error::from_raw_os_error(e.errno())
            })?
        };
        tracing::info!(
            iova = format_args!("{address:#x}"),
            size = format_args!("{size:#x}"),
            removed,
            "DMA_UNMAP"
        );
        self.nic.trace.event(
            "dma_unmap",
            || serde_json::json!({"iova": address, "size": size, "removed": removed}),
        );
        Ok(())
    }

    fn reset(&mut self) -> Result<(), std::io::Error> {
        tracing::info!("device reset");
        self.config.reset();
        self.nic.dma.set_bus_master(false);
        self.nic.msix.set_control(false, false);
        self.nic.lock().reset();
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> Result<(), std::io::Error> {
        tracing::debug!(index, flags, start, count, fds = fds.len(), "SET_IRQS");
        self.check_set_irqs(index, flags, start, count, fds.len())?;
        if index != VFIO_PCI_MSIX_IRQ_INDEX {
            // INTx is offered but never raised; the other indexes offer no interrupts.
            return Ok(());
        }
        // From here `start + count` is at most the number of vectors.
        let msix = &self.nic.msix;
        let data_none = flags & VFIO_IRQ_SET_DATA_NONE != 0;
        match flags & VFIO_IRQ_SET_ACTION_TYPE_MASK {
            VFIO_IRQ_SET_ACTION_TRIGGER if !data_none => {
                // One fd per vector, or none at all to disable the vectors.
                let mut fds = fds.into_iter();
                msix.set_eventfds(start, (0..count).map(|_| fds.next()).collect());
            }
            VFIO_IRQ_SET_ACTION_TRIGGER if count == 0 => msix.clear_eventfds(),
            VFIO_IRQ_SET_ACTION_TRIGGER => {
                let device = self.nic.lock();
                for vector in start..start + count {
                    device.core.bus().raise(vector as u16);
                }
            }
            VFIO_IRQ_SET_ACTION_MASK => msix.set_masked(start, count, true),
            _ => msix.set_masked(start, count, false),
        }
        Ok(())
    }
}

/// The IRQ indexes we offer.
pub fn irq_infos(msix_vectors: u16) -> Vec<IrqInfo> {
    (0..VFIO_PCI_NUM_IRQS)
        .map(|index| match index {
            VFIO_PCI_INTX_IRQ_INDEX => IrqInfo {
                index,
                count: 1,
                flags: VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_MASKABLE | VFIO_IRQ_INFO_AUTOMASKED,
            },
            VFIO_PCI_MSIX_IRQ_INDEX => IrqInfo {
                index,
                count: u32::from(msix_vectors),
                flags: VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_MASKABLE,
            },
            _ => IrqInfo {
                index,
                count: 0,
                flags: 0,
            },
        })
        .collect()
}

/// The regions we offer: BAR0 (trapped: no MMAP flag, so every doorbell reaches us) and config.
pub fn region_infos() -> Vec<ServerRegion> {
    (0..VFIO_PCI_NUM_REGIONS)
        .map(|index| {
            let mut info = vfio_region_info {
                argsz: std::mem::size_of::<vfio_region_info>() as u32,
                index,
                ..Default::default()
            };
            match index {
                VFIO_PCI_BAR0_REGION_INDEX => {
                    info.size = ferroce_hw::BAR0_SIZE as u64;
                    info.flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
                }
                VFIO_PCI_CONFIG_REGION_INDEX => {
                    info.size = CONFIG_SIZE as u64;
                    info.flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
                }
                _ => {}
            }
            ServerRegion {
                region_info: info,
                sparse_areas: Vec::new(),
                mmap_fd: None,
            }
        })
        .collect()
}

/// Serves QEMU connections on `socket` forever (one at a time; the device resets between them).
pub fn serve(nic: Arc<Function>, socket: &Path, msix_vectors: u16) -> anyhow::Result<()> {
    if socket.exists() {
        // A stale socket from an earlier run makes the bind fail.
        std::fs::remove_file(socket)
            .with_context(|| format!("removing stale {}", socket.display()))?;
    }
    let server = Server::new(socket, true, irq_infos(msix_vectors), region_infos())
        .map_err(|e| anyhow::anyhow!("vfio-user server on {}: {e:?}", socket.display()))?;
    tracing::info!(socket = %socket.display(), "listening");
    let mut backend = Backend::new(nic, msix_vectors);
    loop {
        match server.run(&mut backend) {
            Ok(()) => tracing::info!("client disconnected"),
            Err(e) => tracing::warn!("vfio-user connection ended: {e:?}"),
        }
        backend.disconnected();
    }
}
