// SPDX-License-Identifier: GPL-2.0

//! XRC domains (`struct ib_xrcd`).
//!
//! An XRC domain groups the XRC target QPs and XRC SRQs that may serve each other: a request an
//! XRC_TGT QP receives is delivered only into an XRC SRQ of the QP's domain. ib_core shares a
//! domain between the processes that open it through one file (uverbs `OPEN_XRCD` by inode) and
//! counts its users; the driver sees one `alloc_xrcd` per domain and its `dealloc_xrcd` only
//! once no SRQ or target QP uses it.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    error::from_result,
    prelude::*,
    rdma::{
        object::verbs_object,
        Device,
        Operations,
        Udata, //
    },
};

verbs_object!(
    /// An XRC domain: the XRC target QPs and XRC SRQs that deliver to each other.
    Xrcd,
    ib_xrcd,
    Xrcd
);

/// `struct ib_device_ops::alloc_xrcd` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn alloc_xrcd<T: Operations>(
    xrcd: *mut bindings::ib_xrcd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core set `device` to our registered device before calling us
        // (`ib_alloc_xrcd_user`), and passes a valid or NULL `udata`.
        let (dev, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*xrcd).device),
                Udata::from_raw(udata),
            )
        };
        let data = T::alloc_xrcd(dev, udata.as_mut())?;
        // SAFETY: ib_core allocated `Xrcd::<T>::ALLOC_SIZE` bytes and the data is not set yet.
        unsafe { Xrcd::<T>::write_data(xrcd, data) };
        Ok(0)
    })
}

/// `struct ib_device_ops::dealloc_xrcd` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn dealloc_xrcd<T: Operations>(
    xrcd: *mut bindings::ib_xrcd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `xrcd` was set up by `alloc_xrcd` and ib_core has no user of it left
        // (`ib_dealloc_xrcd_user` refuses while `usecnt` is not zero); `udata` is valid or NULL.
        let (obj, mut udata) = unsafe { (Xrcd::<T>::from_raw(xrcd), Udata::from_raw(udata)) };
        T::dealloc_xrcd(obj, udata.as_mut())?;
        // SAFETY: The driver let go of the domain; ib_core frees it after we return.
        unsafe { Xrcd::<T>::drop_data(xrcd) };
        Ok(0)
    })
}
