// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).

use crate::{
    bindings,
    error::from_result,
    prelude::*,
    rdma::{
        object::{
            verbs_object,
            Numbered, //
        },
        Cq,
        Device,
        Operations,
        Pd,
        RecvWr,
        Udata,
        Xrcd, //
    },
};

verbs_object!(
    /// A shared receive queue: receive buffers several QPs draw from.
    Srq,
    ib_srq,
    Srq
);

/// Sizes and limit of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttr {
    /// Entries.
    pub max_wr: u32,
    /// SGEs per request.
    pub max_sge: u32,
    /// Limit: when fewer requests remain, the limit event fires once (0 = disarmed).
    pub limit: u32,
}

/// What an SRQ is for (`enum ib_srq_type`).
pub enum SrqKind<'a, T: Operations> {
    /// Receives for the QPs created with it (`IB_SRQT_BASIC`).
    Basic,
    /// An XRC SRQ (`IB_SRQT_XRC`): the XRC_TGT QPs of `xrcd` deliver into it the requests that
    /// name it, completing on `cq`. Its number is what initiators name.
    Xrc {
        /// The XRC domain.
        xrcd: &'a Xrcd<T>,
        /// The CQ of its receive completions.
        cq: &'a Cq<T>,
    },
}

/// An asynchronous event of an SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrqEvent {
    /// Fewer requests than the limit remain (`IB_EVENT_SRQ_LIMIT_REACHED`).
    LimitReached,
    /// The SRQ hit an error (`IB_EVENT_SRQ_ERR`).
    Error,
}

impl<T: Operations> Srq<T> {
    /// Delivers an asynchronous event to the SRQ's consumer.
    pub fn dispatch_event(&self, event: SrqEvent) {
        let kind = match event {
            SrqEvent::LimitReached => bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
            SrqEvent::Error => bindings::ib_event_type_IB_EVENT_SRQ_ERR,
        };
        let srq = self.as_raw();
        let mut ev = bindings::ib_event {
            device: self.device().as_raw(),
            element: bindings::ib_event__bindgen_ty_1 { srq },
            event: kind,
        };
        // SAFETY: The SRQ is live; ib_core set the handler and context at creation; the handler
        // copies what it keeps.
        unsafe {
            if let Some(handler) = (*srq).event_handler {
                handler(&mut ev, (*srq).srq_context);
            }
        }
    }
}

/// `struct ib_device_ops::create_srq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn create_srq<T: Operations>(
    srq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core set `device` and `pd` and passes a valid `init` and a valid or NULL
        // `udata`.
        let (dev, pd, init, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*srq).device),
                Pd::<T>::from_raw((*srq).pd),
                &mut *init,
                Udata::from_raw(udata),
            )
        };
        let kind = match init.srq_type {
            bindings::ib_srq_type_IB_SRQT_BASIC => SrqKind::Basic,
            bindings::ib_srq_type_IB_SRQT_XRC => {
                // SAFETY: ib_core checked and holds the domain and the CQ of an XRC SRQ for the
                // call (`ib_create_srq_user`); they are objects of this device.
                let (xrcd, cq) = unsafe { (init.ext.__bindgen_anon_1.xrc.xrcd, init.ext.cq) };
                if xrcd.is_null() || cq.is_null() {
                    return Err(EINVAL);
                }
                // SAFETY: As above.
                unsafe {
                    SrqKind::Xrc {
                        xrcd: Xrcd::<T>::from_raw(xrcd),
                        cq: Cq::<T>::from_raw(cq),
                    }
                }
            }
            _ => return Err(EOPNOTSUPP),
        };
        let xrc = matches!(kind, SrqKind::Xrc { .. });
        let mut attr = SrqAttr {
            max_wr: init.attr.max_wr,
            max_sge: init.attr.max_sge,
            limit: init.attr.srq_limit,
        };
        let data = T::create_srq(dev, pd, kind, &mut attr, udata.as_mut())?;
        init.attr.max_wr = attr.max_wr;
        init.attr.max_sge = attr.max_sge;
        let number = data.number();
        // SAFETY: ib_core allocated `Srq::<T>::ALLOC_SIZE` bytes and the data is not set yet.
        unsafe { Srq::<T>::write_data(srq, data) };
        if xrc {
            // SAFETY: An XRC SRQ's `ext` holds the `xrc` member (ib_core set its `xrcd`); uverbs
            // reports `srq_num` to the process once we return.
            unsafe { (*srq).ext.__bindgen_anon_1.xrc.srq_num = number };
        }
        // SAFETY: The data is initialised now.
        let obj = unsafe { Srq::<T>::from_raw(srq) };
        let undo = || {
            let _ = T::destroy_srq(obj, None);
            // SAFETY: ib_core frees the failed SRQ after we return.
            unsafe { Srq::<T>::drop_data(srq) };
        };
        // SAFETY: `destroy_srq` removes the SRQ before ib_core frees it.
        unsafe { dev.srqs().enter_or_undo("SRQ", number, obj, undo) }?;
        Ok(0)
    })
}

/// `struct ib_device_ops::modify_srq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn modify_srq<T: Operations>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `srq` is a live SRQ of ours; `attr` is valid; `udata` valid or NULL.
        let (obj, attr, mut udata) =
            unsafe { (Srq::<T>::from_raw(srq), &*attr, Udata::from_raw(udata)) };
        let max_wr = (mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0).then_some(attr.max_wr);
        let limit = (mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0).then_some(attr.srq_limit);
        T::modify_srq(obj, max_wr, limit, udata.as_mut())?;
        Ok(0)
    })
}

/// `struct ib_device_ops::query_srq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn query_srq<T: Operations>(
    srq: *mut bindings::ib_srq,
    out: *mut bindings::ib_srq_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: `srq` is a live SRQ of ours.
        let attr = T::query_srq(unsafe { Srq::<T>::from_raw(srq) })?;
        // SAFETY: ib_core passes a writable attribute.
        unsafe {
            (*out).max_wr = attr.max_wr;
            (*out).max_sge = attr.max_sge;
            (*out).srq_limit = attr.limit;
        }
        Ok(0)
    })
}

/// `struct ib_device_ops::destroy_srq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn destroy_srq<T: Operations>(
    srq: *mut bindings::ib_srq,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `srq` was set up by `create_srq`; `udata` is valid or NULL.
        let (obj, mut udata) = unsafe { (Srq::<T>::from_raw(srq), Udata::from_raw(udata)) };
        obj.device()
            .srqs()
            .leave_for(obj.number(), obj, || T::destroy_srq(obj, udata.as_mut()))?;
        // SAFETY: ib_core frees the SRQ after we return.
        unsafe { Srq::<T>::drop_data(srq) };
        Ok(0)
    })
}

/// `struct ib_device_ops::post_srq_recv` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn post_srq_recv<T: Operations>(
    srq: *mut bindings::ib_srq,
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> c_int {
    if wr.is_null() {
        return 0;
    }
    // SAFETY: `srq` is a live SRQ of ours; the consumer passes a valid chain.
    let (obj, first) = unsafe { (Srq::<T>::from_raw(srq), RecvWr::from_raw(wr)) };
    // SAFETY: ib_core passes a writable `bad_wr`.
    unsafe { super::wr::post_result(T::post_srq_recv(obj, first), bad) }
}
