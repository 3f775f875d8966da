// SPDX-License-Identifier: GPL-2.0

//! RDMA (InfiniBand core) device and verbs-provider abstractions.
//!
//! A driver describes its device with a type that implements [`Operations`] (a `#[vtable]`
//! trait: the operations it does not implement stay `NULL` in the `struct ib_device_ops` given to
//! ib_core) and registers it with [`Registration::new`]. The driver's data lives inside the
//! allocation ib_core makes for the device, right after the core `struct ib_device`, the way
//! `ib_alloc_device()` lays out C drivers' structures.
//!
//! Verbs objects (PDs, CQs, QPs, SRQs, AHs, memory windows, user contexts) are allocated by
//! ib_core with room for the driver's data, named by the associated types of [`Operations`];
//! MRs are allocated by the abstraction. CQs, QPs and SRQs are also entered in per-device [`Table`]s by number, so
//! that completion and event interrupts reach them ([`Device::cqs`], [`Device::qps`]).
//!
//! # Examples
//!
//! A device with kernel verbs: PDs are numbers, CQs and QPs are the driver's rings.
//!
//! ```ignore
//! use kernel::rdma::{self, Completions, CqInit, Numbered, Operations, Udata};
//!
//! struct MyCq { cqn: u32 /* , ring, doorbell record... */ }
//! impl Numbered for MyCq {
//!     fn number(&self) -> u32 { self.cqn }
//! }
//!
//! #[vtable]
//! impl Operations for MyDevice {
//!     const DRIVER_ID: rdma::DriverId = rdma::DriverId::Unknown;
//!     type Pd = u32;
//!     type Cq = MyCq;
//!     // type Qp, Srq, Ah, Mr, Ucontext ...
//!
//!     fn alloc_pd(dev: &rdma::Device<Self>, _udata: Option<&mut Udata<'_>>) -> Result<u32> {
//!         Ok(dev.next_pd())
//!     }
//!
//!     fn create_cq(dev: &rdma::Device<Self>, init: &CqInit, _: Option<&mut Udata<'_>>)
//!         -> Result<(MyCq, u32)>
//!     {
//!         let cq = dev.create_ring(init.entries)?; // DMA memory via `dev.parent()`
//!         Ok((cq, init.entries.next_power_of_two()))
//!     }
//!
//!     fn poll_cq(cq: &rdma::Cq<Self>, out: &mut Completions<'_, Self>) -> Result {
//!         while !out.is_full() {
//!             let Some(wc) = cq.next_completion() else { break };
//!             // Completions of QPs that are gone are dropped by `push`.
//!             let _ = out.push(&wc);
//!         }
//!         Ok(())
//!     }
//!     // query_device, query_port, get_port_immutable, ...
//! }
//!
//! // In the completion interrupt: wake the consumer of CQ `cqn`.
//! fn completion_event(handle: &rdma::DeviceHandle<MyDevice>, cqn: u32) {
//!     handle.with_atomic(|dev| dev.cqs().with(cqn, |cq| cq.notify_completion()));
//! }
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
pub mod wr;

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
    DriverId,
    Event,
    LinkLayer,
    Mtu,
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
    SrqEvent, //
};
pub use self::stats::StatDesc;
pub use self::udata::Udata;
pub use self::umem::{
    DmaBlocks,
    Umem, //
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
