// SPDX-License-Identifier: GPL-2.0

//! RDMA (InfiniBand core) device and verbs-provider abstractions.
//!
//! A driver describes its device with a type that implements [`Operations`] (a `#[vtable]`
//! trait: the operations it does not implement stay `NULL` in the `struct ib_device_ops` given to
//! ib_core) and registers it with [`Registration::new`]. The driver's data lives inside the
//! allocation ib_core makes for the device, right after the core `struct ib_device`, the way
//! `ib_alloc_device()` lays out C drivers' structures.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/ib_cache.h`](srctree/include/rdma/ib_cache.h).

#![cfg(CONFIG_INFINIBAND)]

pub mod device;
pub mod gid;

pub use self::device::{
    Config,
    Device,
    DeviceAttr,
    DeviceHandle,
    Event,
    LinkLayer,
    Mtu,
    Operations,
    PortAttr,
    PortImmutable,
    PortState,
    Registration, //
};
pub use self::gid::{
    GidAttr,
    GidType, //
};
