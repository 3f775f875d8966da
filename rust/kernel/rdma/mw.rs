// SPDX-License-Identifier: GPL-2.0

//! Memory windows (`struct ib_mw`).
//!
//! A memory window is a remote key for part of a memory region, with rights no wider than the
//! region's. Processes allocate windows through uverbs (`ibv_alloc_mw()`) and bind and
//! invalidate them with work requests the device executes; ib_core has no kernel API for them,
//! so the driver only creates and destroys them.

use crate::{
    bindings,
    error::from_result,
    prelude::*,
    rdma::{
        object::verbs_object,
        Operations,
        Pd,
        Udata, //
    },
};

verbs_object!(
    /// A memory window.
    Mw,
    ib_mw,
    Mw
);

/// The type of a memory window (`enum ib_mw_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwType {
    /// Bound by `ibv_bind_mw()` and usable from every QP of its PD.
    Type1,
    /// Bound by a BIND_MW work request to the QP that posts it, which alone may use it;
    /// invalidated locally or by a SEND with invalidate.
    Type2,
}

impl MwType {
    fn from_raw(raw: bindings::ib_mw_type) -> Result<Self> {
        match raw {
            bindings::ib_mw_type_IB_MW_TYPE_1 => Ok(Self::Type1),
            bindings::ib_mw_type_IB_MW_TYPE_2 => Ok(Self::Type2),
            _ => Err(EINVAL),
        }
    }
}

/// A new memory window: its first remote key and the driver's data.
pub struct NewMw<D> {
    /// Remote key (a bind replaces its low byte).
    pub rkey: u32,
    /// The driver's data.
    pub data: D,
}

/// `struct ib_device_ops::alloc_mw` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn alloc_mw<T: Operations>(
    mw: *mut bindings::ib_mw,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core allocated `mw` for our device and set its `pd` (one of ours, held for
        // the window's life) and `type` before calling us; `udata` is valid or NULL.
        let (pd, mw_type, mut udata) = unsafe {
            (
                Pd::<T>::from_raw((*mw).pd),
                (*mw).type_,
                Udata::from_raw(udata),
            )
        };
        let new = T::alloc_mw(pd, MwType::from_raw(mw_type)?, udata.as_mut())?;
        // SAFETY: ib_core allocated `Mw::<T>::ALLOC_SIZE` bytes and the data is not set yet;
        // `rkey` is ours to set until we return.
        unsafe {
            (*mw).rkey = new.rkey;
            Mw::<T>::write_data(mw, new.data);
        }
        Ok(0)
    })
}

/// `struct ib_device_ops::dealloc_mw` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn dealloc_mw<T: Operations>(mw: *mut bindings::ib_mw) -> c_int {
    from_result(|| {
        // SAFETY: `mw` was set up by `alloc_mw`.
        T::dealloc_mw(unsafe { Mw::<T>::from_raw(mw) })?;
        // SAFETY: The driver let go of the window; ib_core frees it after we return.
        unsafe { Mw::<T>::drop_data(mw) };
        Ok(0)
    })
}
