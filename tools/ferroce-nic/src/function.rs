// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! One PCI function of the NIC (the PF, or a VF): its device model, its doorbell mailbox, and
//! everything its vfio-user thread, the NIC's device thread and its control socket share.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::counters::Counters;
use crate::device::{Device, DeviceConfig, HostControls};
use crate::dma::DmaTable;
use crate::engine::faults::{FaultConfig, FaultControl};
use crate::engine::roce::RoceEngine;
use crate::engine::wire::{FrameSink, NullSink, PortEnd, RxQueue};
use crate::interrupts::MsixController;
use crate::mailbox::{Mailbox, Posted};
use crate::port::PortStats;
use crate::schedule::Schedule;
use crate::trace::Tracer;
use crate::wake::Wake;

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

impl FunctionParts {
    /// The parts of a function woken by `wake` (the NIC's device thread's), with a receive
    /// queue and a trace of its own.
    pub fn new(wake: Arc<Wake>) -> Self {
        Self {
            wake,
            port_rx: RxQueue::new(),
            trace: Arc::new(Tracer::new()),
        }
    }

    /// The parts of a function alone on its device thread (a wake-up of its own). `serve`
    /// makes a NIC's functions with [`make_functions`](crate::functions::make_functions).
    pub fn alone() -> std::io::Result<Self> {
        Ok(Self::new(Arc::new(Wake::new()?)))
    }
}

impl Function {
    /// A NIC with the RoCE engine and no cable.
    pub fn new(config: DeviceConfig) -> std::io::Result<Arc<Self>> {
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
    ) -> std::io::Result<Arc<Self>> {
        let parts = FunctionParts::alone()?;
        Ok(Self::with_parts(config, sink, faults, port_stats, parts))
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroce_hw::COUNTER_DOORBELLS;
    use std::time::Duration;

    /// BAR0 offset of register `reg` (or push window byte) of doorbell page `ctx`.
    fn db(ctx: usize, reg: usize) -> u64 {
        (ferroce_hw::DB_AREA_OFFSET + ctx * ferroce_hw::DB_PAGE_SIZE + reg) as u64
    }

    #[test]
    fn a_doorbell_does_not_wait_for_the_device_lock() {
        let nic = Function::new(DeviceConfig::default()).expect("a function");
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
            round.core.bus().counters().get(COUNTER_DOORBELLS),
            0,
            "queued, not applied"
        );
        drop(round);
        writer.join().unwrap();
        assert!(nic.wake.take(), "the device thread was woken");
        assert_eq!(
            nic.lock().core.bus().counters().get(COUNTER_DOORBELLS),
            1,
            "applied at the next lock"
        );
    }

    #[test]
    fn a_pushed_wqe_wakes_the_device_thread_once() {
        let nic = Function::new(DeviceConfig::default()).expect("a function");
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
        let nic = Function::new(DeviceConfig::default()).expect("a function");
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
            device
                .core
                .bus()
                .counters()
                .get(ferroce_hw::COUNTER_MMIO_WRITES),
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
}
