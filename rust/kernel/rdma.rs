// SPDX-License-Identifier: GPL-2.0

//! RDMA (InfiniBand core) device and verbs-provider abstractions.
//!
//! A driver describes its device with a type that implements [`Operations`] (a `#[vtable]`
//! trait: the operations it does not implement stay `NULL` in the `struct ib_device_ops` given to
//! ib_core) and registers it with [`Registration::new`]. The driver's data lives inside the
//! allocation ib_core makes for the device, right after the core `struct ib_device`, the way
//! `ib_alloc_device()` lays out C drivers' structures.
//!
//! Verbs objects (PDs, CQs, QPs, SRQs, XRC domains, AHs, memory windows, user contexts) are
//! allocated by ib_core with room for the driver's data, named by the associated types of
//! [`Operations`]; MRs are allocated by the abstraction. CQs, QPs and SRQs are also entered in
//! per-device [`Table`]s by number, so that completion and event interrupts reach them
//! ([`Device::cqs`], [`Device::qps`]).
//!
//! # Examples
//!
//! A device with kernel CQs: the driver reads completions from its own rings, its completion
//! interrupt wakes the CQ's consumer, and its probe registers it.
//!
//! ```
//! use core::sync::atomic::{AtomicU32, Ordering};
//! use kernel::{
//!     device::Bound,
//!     pci,
//!     prelude::*,
//!     rdma::{
//!         self, Completions, CqInit, DeviceAttr, LinkLayer, Numbered, Operations, PortAttr,
//!         PortImmutable, PortState, Udata, WorkCompletion,
//!     },
//!     ThisModule,
//! };
//!
//! /// The driver's data of one device (pinned in the device's allocation, so it may hold locks).
//! #[pin_data]
//! struct Example {
//!     next_pd: AtomicU32,
//!     next_queue: AtomicU32,
//! }
//!
//! /// A CQ, QP or SRQ: its number (and, in a real driver, its ring in DMA memory).
//! struct Queue {
//!     number: u32,
//! }
//!
//! impl Numbered for Queue {
//!     fn number(&self) -> u32 {
//!         self.number
//!     }
//! }
//!
//! impl Queue {
//!     /// The next completion the device wrote into the CQ's ring, decoded and checked.
//!     fn next_completion(&self) -> Option<WorkCompletion> {
//!         None
//!     }
//! }
//!
//! #[vtable]
//! impl Operations for Example {
//!     const DRIVER_ID: rdma::DriverId = rdma::DriverId::Unknown;
//!     type Pd = u32;
//!     type Cq = Queue;
//!     type Qp = Queue;
//!     type Srq = Queue;
//!     type Xrcd = ();
//!     type Ah = ();
//!     type Mr = ();
//!     type Mw = ();
//!     type Ucontext = ();
//!     type MmapEntry = ();
//!
//!     fn query_device(_dev: &rdma::Device<Self>, attr: &mut DeviceAttr<'_>) -> Result {
//!         attr.max_pd(64).max_cq(64).max_cqe(1024);
//!         Ok(())
//!     }
//!
//!     fn query_port(_dev: &rdma::Device<Self>, _port: u32, attr: &mut PortAttr<'_>) -> Result {
//!         attr.state(PortState::Down).gid_tbl_len(16).pkey_tbl_len(1).ip_gids(true);
//!         Ok(())
//!     }
//!
//!     fn get_port_immutable(_dev: &rdma::Device<Self>, _port: u32) -> Result<PortImmutable> {
//!         Ok(PortImmutable {
//!             pkey_tbl_len: 1,
//!             gid_tbl_len: 16,
//!             core_cap_flags: PortImmutable::ROCE_V1_V2,
//!             max_mad_size: PortImmutable::MGMT_MAD_SIZE,
//!         })
//!     }
//!
//!     fn get_link_layer(_dev: &rdma::Device<Self>, _port: u32) -> LinkLayer {
//!         LinkLayer::Ethernet
//!     }
//!
//!     fn alloc_pd(dev: &rdma::Device<Self>, _udata: Option<&mut Udata<'_>>) -> Result<u32> {
//!         Ok(dev.next_pd.fetch_add(1, Ordering::Relaxed))
//!     }
//!
//!     fn create_cq(
//!         dev: &rdma::Device<Self>,
//!         init: &CqInit,
//!         _udata: Option<&mut Udata<'_>>,
//!     ) -> Result<(Queue, u32)> {
//!         // A real driver allocates the ring with `dev.parent()` and creates the CQ in the
//!         // device.
//!         let number = dev.next_queue.fetch_add(1, Ordering::Relaxed);
//!         Ok((Queue { number }, init.entries.next_power_of_two()))
//!     }
//!
//!     fn poll_cq(cq: &rdma::Cq<Self>, out: &mut Completions<'_, Self>) -> Result {
//!         while !out.is_full() {
//!             let Some(wc) = cq.next_completion() else {
//!                 break;
//!             };
//!             // `push` refuses a completion of a QP that is gone: it is dropped.
//!             let _ = out.push(&wc);
//!         }
//!         Ok(())
//!     }
//!
//!     fn req_notify_cq(_cq: &rdma::Cq<Self>, _solicited_only: bool) -> Result<bool> {
//!         // A real driver rings the CQ's arm doorbell here.
//!         Ok(false)
//!     }
//! }
//!
//! /// The completion interrupt for CQ `cqn` wakes its consumer. The handle outlives the
//! /// registration; `with_atomic` runs only while the device is registered.
//! fn completion_event(handle: &rdma::DeviceHandle<Example>, cqn: u32) {
//!     handle.with_atomic(|dev| dev.cqs().with(cqn, |cq| cq.notify_completion()));
//! }
//!
//! /// The PCI probe registers the device; dropping the registration unregisters it.
//! fn probe(
//!     pdev: &pci::Device<Bound>,
//!     module: &'static ThisModule,
//!     mac: &[u8; 6],
//! ) -> Result<rdma::Registration<Example>> {
//!     let config = rdma::Config {
//!         ports: 1,
//!         comp_vectors: 1,
//!         netdev: None,
//!         cq_numbers: 64,
//!         qp_numbers: 64,
//!         srq_numbers: 64,
//!         node_guid: rdma::Config::guid_from_mac(mac),
//!     };
//!     let data = try_pin_init!(Example {
//!         next_pd: AtomicU32::new(1),
//!         next_queue: AtomicU32::new(0),
//!     });
//!     rdma::Registration::new(pdev.as_ref(), module, c"example%d", config, data)
//! }
//!
//! // The node GUID is the MAC's EUI-64, which librdmacm finds the device by.
//! let guid = rdma::Config::guid_from_mac(&[0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
//! assert_eq!(guid, 0x5054_00ff_fe12_3456);
//! ```
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/ib_cache.h`](srctree/include/rdma/ib_cache.h).

#![cfg(CONFIG_INFINIBAND)]

pub mod ah;
pub mod cq;
pub mod device;
pub mod gid;
pub mod mmap;
pub mod mr;
pub mod mw;
pub mod object;
pub mod pd;
pub mod qp;
pub mod srq;
pub mod stats;
pub mod uapi;
pub mod udata;
pub mod umem;
pub mod umem_odp;
pub mod wr;
pub mod xrcd;

pub use self::ah::{
    AddressVector,
    Ah, //
};
pub use self::cq::{
    Completions,
    Cq,
    CqInit,
    NetworkHeader,
    WcOpcode,
    WcStatus,
    WorkCompletion, //
};

pub use self::device::{
    AtomicCap,
    Config,
    Device,
    DeviceAttr,
    DeviceCap,
    DeviceCaps,
    DeviceHandle,
    DeviceRef,
    DriverId,
    Event,
    LinkLayer,
    Mtu,
    OdpCaps,
    OdpOp,
    OdpOps,
    Operations,
    PortAttr,
    PortCap,
    PortCaps,
    PortImmutable,
    PortState,
    Registration, //
};
pub use self::gid::{
    GidAttr,
    GidType, //
};
pub use self::mmap::{
    MmapEntry,
    MmapHandle,
    MmapRequest, //
};
pub use self::mr::{
    AccessFlag,
    AccessFlags,
    AdviseMr,
    Mr,
    MrType,
    NewMr,
    SgPages, //
};
pub use self::mw::{
    Mw,
    MwType,
    NewMw, //
};
pub use self::object::{
    Numbered,
    Table, //
};
pub use self::pd::{
    Pd,
    Ucontext,
    UcontextInit, //
};
pub use self::qp::{
    Qp,
    QpAttr,
    QpAttrOut,
    QpCaps,
    QpEvent,
    QpInit,
    QpState,
    QpType, //
};
pub use self::srq::{
    Srq,
    SrqAttr,
    SrqEvent,
    SrqKind, //
};
pub use self::stats::StatDesc;
pub use self::udata::Udata;
pub use self::umem::{
    DmaBlocks,
    Umem, //
};
pub use self::umem_odp::{
    OdpHandler,
    OdpPages,
    UmemOdp, //
};
pub use self::wr::{
    PostError,
    RecvWr,
    Remote,
    SendOp,
    SendWr,
    Sge,
    UdDest, //
};
pub use self::xrcd::Xrcd;
