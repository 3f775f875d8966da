// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`) and user contexts (`struct ib_ucontext`).

use crate::{
    bindings,
    error::from_result,
    prelude::*,
    rdma::{
        object::verbs_object,
        Device,
        MmapHandle,
        Operations,
        Udata, //
    },
};
use core::marker::PhantomData;

verbs_object!(
    /// A protection domain: the memory regions, QPs, SRQs and address handles that may be used
    /// together.
    Pd,
    ib_pd,
    Pd
);

verbs_object!(
    /// The context of one process that opened the device through uverbs: the objects it
    /// creates and the doorbell pages it maps belong to it.
    Ucontext,
    ib_ucontext,
    Ucontext
);

/// A user context while the driver sets it up (`alloc_ucontext`): ib_core's part exists, the
/// driver's data does not yet.
///
/// # Invariants
///
/// `raw` is a context of a device of `T` that ib_core allocated, valid for `'a`.
pub struct UcontextInit<'a, T: Operations> {
    raw: *mut bindings::ib_ucontext,
    _p: PhantomData<&'a Device<T>>,
}

impl<'a, T: Operations> UcontextInit<'a, T> {
    /// The device the process opened.
    pub fn device(&self) -> &'a Device<T> {
        // SAFETY: By the type invariant the context is valid and of a device of `T`.
        unsafe { Device::<T>::from_raw((*self.raw).device) }
    }

    /// Inserts an mmap entry in the context, as [`Ucontext::insert_mmap`] does.
    ///
    /// # Errors
    ///
    /// As [`Ucontext::insert_mmap`].
    pub fn insert_mmap(&self, data: T::MmapEntry, length: usize) -> Result<MmapHandle<T>> {
        // SAFETY: By the type invariant `raw` is a valid context of a `T` device.
        unsafe { super::mmap::insert_mmap::<T>(self.raw, data, length) }
    }
}

/// `struct ib_device_ops::alloc_pd` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn alloc_pd<T: Operations>(
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core set `device` to our registered device before calling us, and passes
        // a valid or NULL `udata`.
        let (dev, mut udata) =
            unsafe { (Device::<T>::from_raw((*pd).device), Udata::from_raw(udata)) };
        let data = T::alloc_pd(dev, udata.as_mut())?;
        // SAFETY: ib_core allocated `Pd::<T>::ALLOC_SIZE` bytes and the data is not set yet.
        unsafe { Pd::<T>::write_data(pd, data) };
        Ok(0)
    })
}

/// `struct ib_device_ops::dealloc_pd` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn dealloc_pd<T: Operations>(
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `pd` was set up by `alloc_pd`; `udata` is valid or NULL.
        let (obj, mut udata) = unsafe { (Pd::<T>::from_raw(pd), Udata::from_raw(udata)) };
        T::dealloc_pd(obj, udata.as_mut())?;
        // SAFETY: The driver let go of the PD; ib_core frees it after we return.
        unsafe { Pd::<T>::drop_data(pd) };
        Ok(0)
    })
}

/// `struct ib_device_ops::alloc_ucontext` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn alloc_ucontext<T: Operations>(
    ctx: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: As in `alloc_pd`.
        let mut udata = unsafe { Udata::from_raw(udata) };
        // INVARIANT: ib_core allocated `ctx` for our device and keeps it for the call.
        let init = UcontextInit::<T> {
            raw: ctx,
            _p: PhantomData,
        };
        let data = T::alloc_ucontext(&init, udata.as_mut())?;
        // SAFETY: As in `alloc_pd`.
        unsafe { Ucontext::<T>::write_data(ctx, data) };
        Ok(0)
    })
}

/// `disassociate_ucontext`: the device goes away while the process has the context open.
///
/// # Safety
///
/// `ctx` is a context `alloc_ucontext` set up and `dealloc_ucontext` did not tear down yet.
pub(crate) unsafe extern "C" fn disassociate_ucontext<T: Operations>(
    ctx: *mut bindings::ib_ucontext,
) {
    // SAFETY: By the function's contract the context's data is initialised.
    T::disassociate_ucontext(unsafe { Ucontext::<T>::from_raw(ctx) });
}

/// `struct ib_device_ops::dealloc_ucontext` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn dealloc_ucontext<T: Operations>(ctx: *mut bindings::ib_ucontext) {
    // SAFETY: `ctx` was set up by `alloc_ucontext`.
    T::dealloc_ucontext(unsafe { Ucontext::<T>::from_raw(ctx) });
    // SAFETY: ib_core frees the context after we return.
    unsafe { Ucontext::<T>::drop_data(ctx) };
}
