// SPDX-License-Identifier: GPL-2.0

//! GID table entries (`struct ib_gid_attr`), as handed to a driver's `add_gid` / `del_gid`.

use crate::{
    bindings,
    error::to_result,
    prelude::*,
    types::Opaque, //
};

/// The type of a GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidType {
    /// InfiniBand.
    Ib,
    /// RoCE v1: Ethernet frames with a GRH (ethertype 0x8915).
    RoceV1,
    /// RoCE v2: UDP/IP encapsulation (port 4791).
    RoceV2,
}

/// A GID table entry being added or deleted.
///
/// # Invariants
///
/// `self.0` is a valid `struct ib_gid_attr` whose fields do not change while it is borrowed
/// (ib_core holds the GID table lock across `add_gid`/`del_gid`).
#[repr(transparent)]
pub struct GidAttr(Opaque<bindings::ib_gid_attr>);

impl GidAttr {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct ib_gid_attr` that stays valid and unchanged for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *const bindings::ib_gid_attr) -> &'a Self {
        // SAFETY: `GidAttr` is `repr(transparent)` over the C struct; validity is guaranteed by
        // the caller.
        unsafe { &*ptr.cast() }
    }

    fn raw(&self) -> &bindings::ib_gid_attr {
        // SAFETY: By the type invariant the struct is valid and not mutated while borrowed.
        unsafe { &*self.0.get() }
    }

    /// The GID itself, in network byte order.
    pub fn gid(&self) -> [u8; 16] {
        // SAFETY: `raw` is the byte view of the `union ib_gid`; every bit pattern is valid.
        unsafe { self.raw().gid.raw }
    }

    /// The entry's index in the port's GID table.
    pub fn index(&self) -> u16 {
        self.raw().index
    }

    /// The port number (starting at 1).
    pub fn port(&self) -> u32 {
        self.raw().port_num
    }

    /// The type of the entry.
    pub fn gid_type(&self) -> GidType {
        match self.raw().gid_type {
            bindings::ib_gid_type_IB_GID_TYPE_ROCE => GidType::RoceV1,
            bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP => GidType::RoceV2,
            _ => GidType::Ib,
        }
    }

    /// The VLAN ID (`0xffff` when none) and source MAC address of the entry's network device.
    ///
    /// # Errors
    ///
    /// Fails with `ENODEV` when the entry has no network device (any longer).
    pub fn l2_fields(&self) -> Result<(u16, [u8; 6])> {
        let mut vlan: u16 = 0xffff;
        let mut mac = [0u8; 6];
        // SAFETY: `self.0` is valid by the type invariant; `vlan` and `mac` (6 bytes, ETH_ALEN)
        // are valid for writes.
        to_result(unsafe {
            bindings::rdma_read_gid_l2_fields(self.0.get(), &mut vlan, mac.as_mut_ptr())
        })?;
        Ok((vlan, mac))
    }
}
