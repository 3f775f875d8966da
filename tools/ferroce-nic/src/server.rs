// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The vfio-user front end: serves config space, BAR0, DMA_MAP/UNMAP, SET_IRQS and reset to
//! QEMU on the `vfio_user` crate's thread, and runs the device on a thread of its own.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use vfio_bindings::bindings::vfio::*;
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, Server, ServerBackend, ServerRegion};

use crate::config_space::{ConfigSpace, CONFIG_SIZE};
use crate::counters::Counters;
use crate::device::{Device, DeviceConfig, HostControls};
use crate::dma::DmaTable;
use crate::engine::faults::{FaultConfig, FaultControl};
use crate::engine::roce::RoceEngine;
use crate::engine::wire::{FrameSink, NullSink, PortEnd, RxQueue};
use crate::interrupts::{InterruptSink, MsixController};
use crate::mailbox::{Mailbox, Posted};
use crate::port::PortStats;
use crate::records::PollWindow;
use crate::schedule::Schedule;
use crate::trace::Tracer;
use ferroce_hw::{COUNTER_DOORBELLS, COUNTER_RECORD_DOORBELLS};

/// Wakes the device thread (a thread wake-up, not a register: the guest's doorbells are
/// `ferroce_hw`'s and go to the [`Mailbox`]).
///
/// A signal is a flag; it takes the lock and wakes the thread only if the thread waits. The
/// port's thread rings once per frame, and while the device thread is busy a lock shared with
/// it (contended) and a wake-up (a futex call) per frame were a tenth of both threads' time in
/// a profile of ib_write_bw at MTU 1500.
#[derive(Default)]
pub struct Wake {
    /// Work was signalled since the thread last looked.
    pending: AtomicBool,
    /// The thread waits (set and cleared under `lock`).
    waiting: AtomicBool,
    lock: Mutex<()>,
    cond: Condvar,
}

impl Wake {
    /// Signals work.
    pub fn signal(&self) {
        // Both flags sequentially consistent: either this sees `waiting`, or the thread, which
        // sets `waiting` before it looks at `pending`, sees the signal and does not sleep.
        self.pending.store(true, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            // Under the lock, so that the notification cannot fall between the thread's look
            // at `pending` and its sleep.
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cond.notify_one();
        }
    }

    /// Waits for a signal or the timeout; `true` if signalled.
    fn wait(&self, timeout: Duration) -> bool {
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.waiting.store(true, Ordering::SeqCst);
        let (guard, _) = self
            .cond
            .wait_timeout_while(guard, timeout, |_| !self.pending.load(Ordering::SeqCst))
            .unwrap_or_else(|e| e.into_inner());
        self.waiting.store(false, Ordering::SeqCst);
        drop(guard);
        self.take()
    }

    /// Takes a signal without waiting; `true` if there was one.
    fn take(&self) -> bool {
        self.pending.swap(false, Ordering::SeqCst)
    }
}

/// One PCI function of the NIC (the PF, or a VF): everything its vfio-user thread, the NIC's
/// device thread and its control socket share.
pub struct Function {
    /// The device model. Lock it with [`Function::lock`], which applies the doorbell mailbox
    /// first.
    pub device: Mutex<Device>,
    /// The guest's writes to the doorbell pages, queued without the device's lock.
    pub mailbox: Mailbox,
    /// Wakes the device thread (shared by the functions of one NIC, which one thread serves).
    pub wake: Arc<Wake>,
    /// DMA regions.
    pub dma: Arc<DmaTable>,
    /// MSI-X.
    pub msix: Arc<MsixController>,
    /// Counters.
    pub counters: Arc<Counters>,
    /// Trace.
    pub trace: Arc<Tracer>,
    /// Host switches.
    pub host: Arc<HostControls>,
    /// Fault injection on the wire side.
    pub faults: Arc<FaultControl>,
    /// Frames the port steered to the engine.
    pub port_rx: Arc<RxQueue>,
    /// Pass-through counts of the port.
    pub port_stats: Arc<PortStats>,
    /// Stops the device thread.
    pub shutdown: AtomicBool,
    /// The device thread's share for this function (the functions of a NIC take turns).
    pub schedule: Schedule,
}

/// What a NIC's functions share and the port's switch needs before they exist: the device
/// thread's wake-up, and each function's receive queue and trace.
#[derive(Clone)]
pub struct FunctionParts {
    /// Wakes the device thread.
    pub wake: Arc<Wake>,
    /// Frames the port steered to the function's engine.
    pub port_rx: Arc<RxQueue>,
    /// The function's trace and capture.
    pub trace: Arc<Tracer>,
}

impl Default for FunctionParts {
    fn default() -> Self {
        Self {
            wake: Arc::new(Wake::default()),
            port_rx: RxQueue::new(),
            trace: Arc::new(Tracer::new()),
        }
    }
}

impl Function {
    /// A NIC with the RoCE engine and no cable.
    pub fn new(config: DeviceConfig) -> Arc<Self> {
        Self::with_port(
            config,
            Box::new(NullSink),
            FaultControl::new(FaultConfig::default()),
            Arc::new(PortStats::default()),
        )
    }

    /// A NIC with the RoCE engine sending into `sink` (the wire side of the port).
    pub fn with_port(
        config: DeviceConfig,
        sink: Box<dyn FrameSink>,
        faults: Arc<FaultControl>,
        port_stats: Arc<PortStats>,
    ) -> Arc<Self> {
        Self::with_parts(config, sink, faults, port_stats, FunctionParts::default())
    }

    /// A function of a NIC, with the parts it shares with the NIC's port and device thread.
    pub fn with_parts(
        config: DeviceConfig,
        sink: Box<dyn FrameSink>,
        faults: Arc<FaultControl>,
        port_stats: Arc<PortStats>,
        parts: FunctionParts,
    ) -> Arc<Self> {
        let dma = Arc::new(DmaTable::new());
        let msix = Arc::new(MsixController::new(config.msix_vectors));
        let counters = Arc::new(Counters::new());
        let FunctionParts {
            wake,
            port_rx,
            trace,
        } = parts;
        let host = Arc::new(HostControls::default());
        let schedule = Schedule::new(config.db_rate);
        let engine = RoceEngine::new(
            config.mac,
            PortEnd {
                sink,
                rx: port_rx.clone(),
            },
            faults.clone(),
            trace.clone(),
        );
        let device = Device::new(
            config,
            dma.clone(),
            msix.clone(),
            Box::new(engine),
            counters.clone(),
            trace.clone(),
            host.clone(),
        );
        Arc::new(Self {
            device: Mutex::new(device),
            mailbox: Mailbox::default(),
            wake,
            dma,
            msix,
            counters,
            trace,
            host,
            faults,
            port_rx,
            port_stats,
            shutdown: AtomicBool::new(false),
            schedule,
        })
    }

    /// Locks the device (a panicked holder does not make it unusable), with every doorbell
    /// the mailbox holds applied first: whoever takes the lock sees the guest's writes in the
    /// order it made them.
    pub fn lock(&self) -> MutexGuard<'_, Device> {
        let mut device = self.device.lock().unwrap_or_else(|e| e.into_inner());
        self.mailbox.apply(&mut device);
        device
    }

    /// A BAR0 write from the guest. A write to a doorbell page goes to the mailbox without the
    /// device's lock: a doorbell register wakes the device thread, the bytes of a pushed WQE
    /// wake nothing. Any other write is applied under the lock.
    pub fn bar0_write(&self, offset: u64, data: &[u8]) {
        match self.mailbox.post(offset, data, || self.lock()) {
            Some(Posted::PushBytes) => {}
            Some(Posted::Doorbell) => self.wake.signal(),
            None => {
                self.lock().bar0_write(offset, data);
                self.wake.signal();
            }
        }
    }

    /// Starts the device thread.
    pub fn spawn_device_thread(self: &Arc<Self>) -> std::io::Result<JoinHandle<()>> {
        spawn_device_thread(vec![self.clone()])
    }
}

/// Starts the one device thread of a NIC's functions (which share `doorbell`).
pub fn spawn_device_thread(functions: Vec<Arc<Function>>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ferroce-device".into())
        .spawn(move || device_loop(&functions))
}

/// What one turn of the device thread found.
#[derive(Default)]
struct Turn {
    /// Work left over (another round at once).
    more: bool,
    /// Something timed is pending (moderation, retransmission, a throttled function).
    timed: bool,
    /// Some function polls doorbell records.
    polls: bool,
    /// Frames the functions sent and received.
    frames: u64,
}

/// The device thread: each function in turn processes one budgeted round (commands, then
/// queued objects, then the engine), then the thread waits for a doorbell, a frame or a timer.
/// A function over its doorbell rate sits its turns out until its budget refills. While
/// functions poll doorbell records the thread first goes on polling for a [`PollWindow`]
/// after activity (signals and work count), then sleeps as the records' producers are told.
fn device_loop(functions: &[Arc<Function>]) {
    let Some(first) = functions.first() else {
        return;
    };
    let spin = Duration::from_micros(first.lock().core.config().poll_spin_us.into());
    let mut window = PollWindow::new(spin, Instant::now());
    let mut linger = Linger::default();
    let mut signalled = false;
    while !first.shutdown.load(Ordering::Relaxed) {
        let mut turn = Turn::default();
        for nic in functions {
            let now = Instant::now();
            // Doorbells written and doorbells found in records count alike.
            let rung =
                nic.counters.get(COUNTER_DOORBELLS) + nic.counters.get(COUNTER_RECORD_DOORBELLS);
            if !nic.schedule.take_turn(now, rung) {
                turn.timed = true;
                continue;
            }
            let before = nic.counters.frames();
            let mut device = nic.lock();
            let more = device.process();
            nic.schedule.ran(more);
            turn.more |= more;
            turn.frames += nic.counters.frames().wrapping_sub(before);
            turn.timed |= device.has_work();
            turn.polls |= device.polls_records();
        }
        // Short sleeps only while something is pending (moderation timers, budgets).
        let timeout = if turn.timed {
            Duration::from_micros(200)
        } else {
            Duration::from_millis(50)
        };
        let now = Instant::now();
        if turn.more || signalled {
            window.active(now);
        }
        linger.round(now, turn.frames);
        signalled = if turn.more || (turn.polls && window.spinning(now)) || linger.lingers(now) {
            // Work left over, polling, or work coming faster than a sleep and a wake-up: another
            // round at once.
            std::thread::yield_now();
            first.wake.take()
        } else if turn.polls {
            if functions.iter().all(|nic| nic.lock().core.records_sleep()) {
                let rung = first.wake.wait(timeout);
                functions
                    .iter()
                    .for_each(|nic| nic.lock().core.records_wake());
                rung
            } else {
                functions
                    .iter()
                    .for_each(|nic| nic.lock().core.records_wake());
                true
            }
        } else {
            first.wake.wait(timeout)
        };
        functions.iter().for_each(|nic| nic.trace.flush());
    }
}

/// Whether the device thread, out of work, stays awake a little instead of sleeping. After a
/// round that moved a burst of frames (a stream: ib_write_bw), the next frames are likely to
/// come before a sleep and a wake-up would be over; sleeping between them cost a futex wait, a
/// wake-up by the port's thread and a context switch each (ib_write_bw 64 KiB at MTU 1500:
/// 21,000 sleeps a second in the two device threads). After a round of a frame or two (a
/// ping-pong: ib_send_lat), the thread sleeps at once and leaves the CPU to the vCPUs, which
/// then poll for the completion: staying awake there made ib_send_lat slower.
#[derive(Debug, Default)]
struct Linger {
    /// Until when the thread stays awake.
    until: Option<Instant>,
}

impl Linger {
    /// How long the thread stays awake after a burst.
    const WINDOW: Duration = Duration::from_micros(20);
    /// Frames sent and received in one round that make a burst.
    const BURST: u64 = 4;

    /// A round at `now` moved `frames` frames.
    fn round(&mut self, now: Instant, frames: u64) {
        if frames >= Self::BURST {
            self.until = Some(now + Self::WINDOW);
        }
    }

    /// Whether to look for work again at once rather than sleep.
    fn lingers(&self, now: Instant) -> bool {
        self.until.is_some_and(|t| now < t)
    }
}

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
                    device.core.raise(vector as u16);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_thread_lingers_after_a_burst_only() {
        let t0 = Instant::now();
        let us = |n| t0 + Duration::from_micros(n);
        let mut l = Linger::default();
        assert!(!l.lingers(t0), "nothing moved yet");
        l.round(t0, Linger::BURST - 1);
        assert!(!l.lingers(t0), "a ping-pong's frame or two: sleep at once");
        l.round(us(10), Linger::BURST);
        assert!(l.lingers(us(29)), "after a burst: stay awake");
        assert!(!l.lingers(us(30)), "but only for the window");
        l.round(us(31), 0);
        assert!(!l.lingers(us(31)), "an empty round does not extend it");
    }

    /// BAR0 offset of register `reg` (or push window byte) of doorbell page `ctx`.
    fn db(ctx: usize, reg: usize) -> u64 {
        (ferroce_hw::DB_AREA_OFFSET + ctx * ferroce_hw::DB_PAGE_SIZE + reg) as u64
    }

    #[test]
    fn a_doorbell_does_not_wait_for_the_device_lock() {
        let nic = Function::new(DeviceConfig::default());
        // The device thread's round holds the lock.
        let round = nic.lock();
        let (done, written) = std::sync::mpsc::channel();
        let writer = {
            let nic = nic.clone();
            std::thread::spawn(move || {
                nic.bar0_write(db(0, ferroce_hw::DB_SQ), &1u32.to_le_bytes());
                let _ = done.send(());
            })
        };
        assert!(
            written.recv_timeout(Duration::from_secs(30)).is_ok(),
            "the doorbell write waited for the round"
        );
        assert_eq!(
            round.core.counters().get(COUNTER_DOORBELLS),
            0,
            "queued, not applied"
        );
        drop(round);
        writer.join().unwrap();
        assert!(nic.wake.take(), "the device thread was woken");
        assert_eq!(
            nic.lock().core.counters().get(COUNTER_DOORBELLS),
            1,
            "applied at the next lock"
        );
    }

    #[test]
    fn a_pushed_wqe_wakes_the_device_thread_once() {
        let nic = Function::new(DeviceConfig::default());
        let wqe: Vec<u8> = (0..80u8).collect();
        for (i, chunk) in wqe.chunks(8).enumerate() {
            nic.bar0_write(db(1, ferroce_hw::PUSH_WINDOW_OFFSET + 8 * i), chunk);
        }
        assert!(!nic.wake.take(), "the WQE's ten stores wake nothing");
        nic.bar0_write(db(1, ferroce_hw::DB_PUSH), &1u32.to_le_bytes());
        assert!(nic.wake.take(), "its push doorbell does");
        let device = nic.lock();
        let window = device.core.doorbells().push_window(1).unwrap();
        assert_eq!(&window[..80], &wqe[..]);
    }

    #[test]
    fn a_full_mailbox_loses_no_write_and_keeps_their_order() {
        let nic = Function::new(DeviceConfig::default());
        let mailbox = Mailbox::with_capacity(2);
        let lock = || {
            let mut device = nic.device.lock().unwrap();
            mailbox.apply(&mut device);
            device
        };
        for value in 1..=5u64 {
            let posted = mailbox.post(
                db(2, ferroce_hw::PUSH_WINDOW_OFFSET),
                &value.to_le_bytes(),
                lock,
            );
            assert_eq!(posted, Some(Posted::PushBytes));
        }
        let device = lock();
        assert_eq!(
            device.core.counters().get(ferroce_hw::COUNTER_MMIO_WRITES),
            5
        );
        let window = device.core.doorbells().push_window(2).unwrap();
        assert_eq!(
            &window[..8],
            &5u64.to_le_bytes(),
            "the last write is the one that stays"
        );
        drop(device);
        assert_eq!(
            mailbox.post(ferroce_hw::REG_SCRATCH as u64, &[0; 4], lock),
            None,
            "not a doorbell page"
        );
    }

    #[test]
    fn a_wake_signalled_before_the_wait_is_not_lost() {
        let db = Wake::default();
        db.signal();
        assert!(db.wait(Duration::from_secs(10)), "the signal was kept");
        assert!(!db.take(), "and taken once");
        assert!(
            !db.wait(Duration::from_millis(1)),
            "no signal: the wait times out"
        );
    }

    #[test]
    fn a_wake_signal_wakes_a_waiting_thread() {
        let db = Arc::new(Wake::default());
        let waiter = {
            let db = db.clone();
            std::thread::spawn(move || db.wait(Duration::from_secs(30)))
        };
        // Only once the waiter waits, so that the wake-up itself is what is tested.
        while !db.waiting.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let rung = Instant::now();
        db.signal();
        assert_eq!(waiter.join().ok(), Some(true));
        assert!(
            rung.elapsed() < Duration::from_secs(30),
            "woken, not timed out"
        );
    }
}
