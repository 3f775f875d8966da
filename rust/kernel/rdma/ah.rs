// SPDX-License-Identifier: GPL-2.0

//! Address vectors (`struct rdma_ah_attr`) and address handles (`struct ib_ah`).

use crate::{
    bindings,
    error::from_result,
    prelude::*,
    rdma::{
        object::verbs_object,
        Device,
        GidAttr,
        Operations,
        Pd,
        Udata, //
    },
};

/// Where packets go: the destination ib_core resolved for an address handle or a connected QP
/// (on RoCE: destination GID and MAC, source GID index, IP header fields).
#[derive(Clone, Copy)]
pub struct AddressVector<'a>(&'a bindings::rdma_ah_attr);

impl<'a> AddressVector<'a> {
    /// Wraps an attribute ib_core passes.
    ///
    /// # Safety
    ///
    /// `attr` must point to a valid `struct rdma_ah_attr` that is not written during `'a`.
    pub(crate) unsafe fn from_raw(attr: *const bindings::rdma_ah_attr) -> Self {
        // SAFETY: Guaranteed by the caller.
        Self(unsafe { &*attr })
    }

    /// The address vector is a RoCE one (has a destination MAC).
    pub fn is_roce(&self) -> bool {
        self.0.type_ == bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE
    }

    /// The address vector carries a global route (always so on RoCE).
    pub fn has_grh(&self) -> bool {
        u32::from(self.0.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH != 0
    }

    /// Destination GID.
    pub fn dgid(&self) -> [u8; 16] {
        // SAFETY: Every bit pattern is a valid `raw` member of the union.
        unsafe { self.0.grh.dgid.raw }
    }

    /// Source GID index in the port's GID table.
    pub fn sgid_index(&self) -> u8 {
        self.0.grh.sgid_index
    }

    /// The source GID's attribute (its type tells RoCE v1 from v2), if ib_core resolved it.
    pub fn sgid_attr(&self) -> Option<&'a GidAttr> {
        let attr = self.0.grh.sgid_attr;
        // SAFETY: ib_core holds a reference on the attribute while the address vector lives.
        (!attr.is_null()).then(|| unsafe { GidAttr::from_raw(attr) })
    }

    /// Flow label (20 bits): on RoCE v2 it selects the UDP source port.
    pub fn flow_label(&self) -> u32 {
        self.0.grh.flow_label
    }

    /// Hop limit (IPv6) or TTL (IPv4).
    pub fn hop_limit(&self) -> u8 {
        self.0.grh.hop_limit
    }

    /// Traffic class (IPv6) or TOS (IPv4).
    pub fn traffic_class(&self) -> u8 {
        self.0.grh.traffic_class
    }

    /// Destination MAC (RoCE): the peer's, or the gateway's when the peer is in another
    /// subnet.
    pub fn dmac(&self) -> [u8; 6] {
        // SAFETY: The `roce` member is plain bytes; it is what RoCE address vectors use.
        unsafe { self.0.__bindgen_anon_1.roce.dmac }
    }

    /// Service level (RoCE: the VLAN priority).
    pub fn sl(&self) -> u8 {
        self.0.sl
    }

    /// Port number.
    pub fn port(&self) -> u32 {
        self.0.port_num
    }
}

verbs_object!(
    /// An address handle: the destination of datagrams (UD QPs, the GSI QP).
    Ah,
    ib_ah,
    Ah
);

/// `struct ib_device_ops::create_ah` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn create_ah<T: Operations>(
    ah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core set `device` and `pd` (a live PD of ours, which outlives the AH) and
        // passes a valid `init` with a valid `ah_attr`, and a valid or NULL `udata`.
        let (dev, pd, av, flags, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*ah).device),
                Pd::<T>::from_raw((*ah).pd),
                AddressVector::from_raw((*init).ah_attr),
                (*init).flags,
                Udata::from_raw(udata),
            )
        };
        let sleepable = flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
        let data = T::create_ah(dev, pd, &av, sleepable, udata.as_mut())?;
        // SAFETY: ib_core allocated `Ah::<T>::ALLOC_SIZE` bytes and the data is not set yet.
        unsafe { Ah::<T>::write_data(ah, data) };
        Ok(0)
    })
}

/// `struct ib_device_ops::destroy_ah` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn destroy_ah<T: Operations>(
    ah: *mut bindings::ib_ah,
    flags: u32,
) -> c_int {
    from_result(|| {
        // SAFETY: `ah` was set up by `create_ah`.
        let obj = unsafe { Ah::<T>::from_raw(ah) };
        let sleepable = flags & bindings::rdma_destroy_ah_flags_RDMA_DESTROY_AH_SLEEPABLE != 0;
        T::destroy_ah(obj, sleepable)?;
        // SAFETY: ib_core frees the AH after we return.
        unsafe { Ah::<T>::drop_data(ah) };
        Ok(0)
    })
}
