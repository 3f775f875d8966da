// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`): creation, the state machine's transitions, work requests.

use crate::{
    bindings,
    error::from_result,
    prelude::*,
    rdma::{
        object::{
            verbs_object,
            Numbered, //
        },
        AccessFlags,
        AddressVector,
        Cq,
        Device,
        Operations,
        Pd,
        RecvWr,
        SendWr,
        Srq,
        Udata,
        Xrcd, //
    },
};
use core::marker::PhantomData;

verbs_object!(
    /// A queue pair: a send queue and a receive queue (or an SRQ) bound to CQs.
    Qp,
    ib_qp,
    Qp
);

/// The transport of a QP (`enum ib_qp_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// The general services QP (QP1), which carries management datagrams.
    Gsi,
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// XRC initiator: RC's send side, each request naming an XRC SRQ at the target.
    XrcIni,
    /// XRC target: RC's receive side in an XRC domain ([`QpInit::xrcd`]); it has no PD, CQ or
    /// queue of its own, and ib_core creates it without `udata` even for a process, which
    /// opens it by number ([`Qp`] of another process's `ibv_open_qp` is ib_core's alone).
    XrcTgt,
    /// Any other type (SMI, raw packet, driver-specific).
    Other(u32),
}

impl QpType {
    fn from_raw(raw: bindings::ib_qp_type) -> Self {
        match raw {
            bindings::ib_qp_type_IB_QPT_GSI => Self::Gsi,
            bindings::ib_qp_type_IB_QPT_RC => Self::Rc,
            bindings::ib_qp_type_IB_QPT_UC => Self::Uc,
            bindings::ib_qp_type_IB_QPT_UD => Self::Ud,
            bindings::ib_qp_type_IB_QPT_XRC_INI => Self::XrcIni,
            bindings::ib_qp_type_IB_QPT_XRC_TGT => Self::XrcTgt,
            other => Self::Other(other),
        }
    }

    fn to_raw(self) -> bindings::ib_qp_type {
        match self {
            Self::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
            Self::Rc => bindings::ib_qp_type_IB_QPT_RC,
            Self::Uc => bindings::ib_qp_type_IB_QPT_UC,
            Self::Ud => bindings::ib_qp_type_IB_QPT_UD,
            Self::XrcIni => bindings::ib_qp_type_IB_QPT_XRC_INI,
            Self::XrcTgt => bindings::ib_qp_type_IB_QPT_XRC_TGT,
            Self::Other(raw) => raw,
        }
    }
}

/// A state of the QP state machine (`enum ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum QpState {
    /// Reset: no work is accepted.
    Reset = bindings::ib_qp_state_IB_QPS_RESET,
    /// Initialised: receives may be posted.
    Init = bindings::ib_qp_state_IB_QPS_INIT,
    /// Ready to receive.
    Rtr = bindings::ib_qp_state_IB_QPS_RTR,
    /// Ready to send.
    Rts = bindings::ib_qp_state_IB_QPS_RTS,
    /// Send queue drained.
    Sqd = bindings::ib_qp_state_IB_QPS_SQD,
    /// Send queue error.
    Sqe = bindings::ib_qp_state_IB_QPS_SQE,
    /// Error: every request completes flushed.
    Err = bindings::ib_qp_state_IB_QPS_ERR,
}

impl QpState {
    /// The state of an `enum ib_qp_state` value.
    pub fn from_raw(raw: u32) -> Option<Self> {
        [
            Self::Reset,
            Self::Init,
            Self::Rtr,
            Self::Rts,
            Self::Sqd,
            Self::Sqe,
            Self::Err,
        ]
        .into_iter()
        .find(|s| *s as u32 == raw)
    }

    /// Whether a `modify_qp` from `self` to `next` of a `qp_type` QP with `mask` is one the
    /// specification allows, with every required attribute and no forbidden one
    /// (`ib_modify_qp_is_ok()`).
    pub fn transition_ok(self, next: Self, qp_type: QpType, mask: u32) -> bool {
        // SAFETY: Pure function of its arguments.
        unsafe { bindings::ib_modify_qp_is_ok(self as u32, next as u32, qp_type.to_raw(), mask) }
    }
}

/// An asynchronous event of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// The QP hit an error it cannot report in a completion (`IB_EVENT_QP_FATAL`).
    Fatal,
    /// The peer reported an invalid request (`IB_EVENT_QP_REQ_ERR`).
    RequestError,
    /// The peer reported an access violation (`IB_EVENT_QP_ACCESS_ERR`).
    AccessError,
    /// The last WQE of a QP on an SRQ was consumed (`IB_EVENT_QP_LAST_WQE_REACHED`).
    LastWqeReached,
    /// The send queue drained in SQD (`IB_EVENT_SQ_DRAINED`).
    SqDrained,
    /// The first packet arrived in RTR (`IB_EVENT_COMM_EST`).
    CommEstablished,
}

impl<T: Operations> Qp<T> {
    /// The QP's transport.
    pub fn qp_type(&self) -> QpType {
        // SAFETY: `qp_type` is set by ib_core before creation and never changes.
        QpType::from_raw(unsafe { (*self.as_raw()).qp_type })
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: Set at creation, never changed.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// The CQ of the send queue.
    pub fn send_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: ib_core keeps the CQ alive (it holds a use count) while the QP lives.
        let cq = unsafe { (*self.as_raw()).send_cq };
        // SAFETY: A CQ of this device is a `Cq<T>`, live as said above.
        (!cq.is_null()).then(|| unsafe { Cq::from_raw(cq) })
    }

    /// The CQ of the receive queue.
    pub fn recv_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: As in `send_cq`.
        let cq = unsafe { (*self.as_raw()).recv_cq };
        // SAFETY: As in `send_cq`.
        (!cq.is_null()).then(|| unsafe { Cq::from_raw(cq) })
    }

    /// Delivers an asynchronous event to the QP's consumer.
    pub fn dispatch_event(&self, event: QpEvent) {
        use bindings::*;
        let kind = match event {
            QpEvent::Fatal => ib_event_type_IB_EVENT_QP_FATAL,
            QpEvent::RequestError => ib_event_type_IB_EVENT_QP_REQ_ERR,
            QpEvent::AccessError => ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            QpEvent::LastWqeReached => ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            QpEvent::SqDrained => ib_event_type_IB_EVENT_SQ_DRAINED,
            QpEvent::CommEstablished => ib_event_type_IB_EVENT_COMM_EST,
        };
        let qp = self.as_raw();
        let mut ev = ib_event {
            device: self.device().as_raw(),
            element: ib_event__bindgen_ty_1 { qp },
            event: kind,
        };
        // SAFETY: The QP is live; ib_core set the handler (`__ib_qp_event_handler`) and the
        // context at creation; the handler copies what it keeps.
        unsafe {
            if let Some(handler) = (*qp).event_handler {
                handler(&mut ev, (*qp).qp_context);
            }
        }
    }
}

/// Queue sizes of a QP: asked for at creation, reported back as created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue entries.
    pub max_send_wr: u32,
    /// Receive queue entries.
    pub max_recv_wr: u32,
    /// SGEs per send request.
    pub max_send_sge: u32,
    /// SGEs per receive request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send request.
    pub max_inline_data: u32,
}

/// What the consumer asks of a new QP (`struct ib_qp_init_attr`).
pub struct QpInit<'a, T: Operations> {
    raw: &'a mut bindings::ib_qp_init_attr,
    _p: PhantomData<T>,
}

impl<'a, T: Operations> QpInit<'a, T> {
    /// The transport.
    pub fn qp_type(&self) -> QpType {
        QpType::from_raw(self.raw.qp_type)
    }

    /// Requested queue sizes.
    pub fn caps(&self) -> QpCaps {
        let c = &self.raw.cap;
        QpCaps {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    /// Reports the sizes created (at least those asked for).
    pub fn set_caps(&mut self, caps: QpCaps) {
        let c = &mut self.raw.cap;
        c.max_send_wr = caps.max_send_wr;
        c.max_recv_wr = caps.max_recv_wr;
        c.max_send_sge = caps.max_send_sge;
        c.max_recv_sge = caps.max_recv_sge;
        c.max_inline_data = caps.max_inline_data;
    }

    /// Every send request completes, not only the signaled ones.
    pub fn signal_all(&self) -> bool {
        self.raw.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    }

    /// Creation flags (`IB_QP_CREATE_*`); a driver refuses those it does not implement.
    pub fn create_flags(&self) -> u32 {
        self.raw.create_flags
    }

    /// The CQ of the send queue.
    pub fn send_cq(&self) -> Option<&'a Cq<T>> {
        let cq = self.raw.send_cq;
        // SAFETY: The consumer's CQs are live CQs of this device for the call.
        (!cq.is_null()).then(|| unsafe { Cq::from_raw(cq) })
    }

    /// The CQ of the receive queue.
    pub fn recv_cq(&self) -> Option<&'a Cq<T>> {
        let cq = self.raw.recv_cq;
        // SAFETY: As in `send_cq`.
        (!cq.is_null()).then(|| unsafe { Cq::from_raw(cq) })
    }

    /// The shared receive queue, if the QP uses one.
    pub fn srq(&self) -> Option<&'a Srq<T>> {
        let srq = self.raw.srq;
        // SAFETY: As in `send_cq`.
        (!srq.is_null()).then(|| unsafe { Srq::from_raw(srq) })
    }

    /// The XRC domain of an XRC_TGT QP.
    pub fn xrcd(&self) -> Option<&'a Xrcd<T>> {
        let xrcd = self.raw.xrcd;
        // SAFETY: ib_core holds a use of the domain for the call (`create_xrc_qp_user`), and
        // every domain of this device was set up by `alloc_xrcd`.
        (!xrcd.is_null()).then(|| unsafe { Xrcd::from_raw(xrcd) })
    }
}

/// The attributes of a `modify_qp` call (`struct ib_qp_attr`); `mask` (`IB_QP_*`) says which
/// are given.
pub struct QpAttr<'a> {
    raw: &'a bindings::ib_qp_attr,
    mask: u32,
}

macro_rules! qp_attr_getters {
    ($($(#[$m:meta])* $name:ident: $field:ident: $t:ty),* $(,)?) => {
        impl QpAttr<'_> {
            $(
                $(#[$m])*
                pub fn $name(&self) -> $t {
                    self.raw.$field as $t
                }
            )*
        }
    };
}

qp_attr_getters!(
    /// Path MTU (`enum ib_mtu`).
    path_mtu: path_mtu: u32,
    /// Q_Key (UD, GSI).
    qkey: qkey: u32,
    /// Expected PSN of the receive side.
    rq_psn: rq_psn: u32,
    /// First PSN of the send side.
    sq_psn: sq_psn: u32,
    /// Destination QP (connected QPs).
    dest_qp_num: dest_qp_num: u32,
    /// P_Key index.
    pkey_index: pkey_index: u16,
    /// Port.
    port: port_num: u32,
    /// Local ACK timeout (4.096 µs × 2^timeout).
    timeout: timeout: u8,
    /// Transport retries.
    retry_cnt: retry_cnt: u8,
    /// RNR retries (7 = infinite).
    rnr_retry: rnr_retry: u8,
    /// Minimum RNR NAK timer (encoded).
    min_rnr_timer: min_rnr_timer: u8,
    /// Outstanding READs/atomics as initiator.
    max_rd_atomic: max_rd_atomic: u8,
    /// Outstanding READs/atomics as responder.
    max_dest_rd_atomic: max_dest_rd_atomic: u8,
);

impl QpAttr<'_> {
    /// What the QP's peers may do (`IB_ACCESS_REMOTE_*`).
    pub fn access_flags(&self) -> AccessFlags {
        AccessFlags::from_raw(self.raw.qp_access_flags as u32)
    }
}

impl QpAttr<'_> {
    /// Which attributes are given (`IB_QP_*`).
    pub fn mask(&self) -> u32 {
        self.mask
    }

    /// The new state, if `IB_QP_STATE` is given and the value is a state.
    pub fn state(&self) -> Option<QpState> {
        (self.mask & bindings::ib_qp_attr_mask_IB_QP_STATE != 0)
            .then(|| QpState::from_raw(self.raw.qp_state))
            .flatten()
    }

    /// The state the consumer believes the QP is in, if `IB_QP_CUR_STATE` is given.
    pub fn cur_state(&self) -> Option<QpState> {
        (self.mask & bindings::ib_qp_attr_mask_IB_QP_CUR_STATE != 0)
            .then(|| QpState::from_raw(self.raw.cur_qp_state))
            .flatten()
    }

    /// The destination (connected QPs, `IB_QP_AV`).
    pub fn av(&self) -> AddressVector<'_> {
        // SAFETY: `ah_attr` is part of the attribute ib_core passed, valid for the call.
        unsafe { AddressVector::from_raw(&self.raw.ah_attr) }
    }
}

/// What `query_qp` reports (`struct ib_qp_attr` and the creation attributes): the driver sets
/// what the device knows; the QP's type, CQs and SRQ come from ib_core's own record.
pub struct QpAttrOut<'a> {
    attr: &'a mut bindings::ib_qp_attr,
    init: &'a mut bindings::ib_qp_init_attr,
}

macro_rules! qp_attr_setters {
    ($($(#[$m:meta])* $name:ident: $field:ident: $t:ty),* $(,)?) => {
        impl QpAttrOut<'_> {
            $(
                $(#[$m])*
                pub fn $name(&mut self, value: $t) -> &mut Self {
                    self.attr.$field = value.into();
                    self
                }
            )*
        }
    };
}

qp_attr_setters!(
    /// Path MTU (`enum ib_mtu`).
    path_mtu: path_mtu: u32,
    /// Q_Key.
    qkey: qkey: u32,
    /// Expected receive PSN.
    rq_psn: rq_psn: u32,
    /// Next send PSN.
    sq_psn: sq_psn: u32,
    /// Destination QP.
    dest_qp_num: dest_qp_num: u32,
    /// P_Key index.
    pkey_index: pkey_index: u16,
    /// Local ACK timeout.
    timeout: timeout: u8,
    /// Transport retries.
    retry_cnt: retry_cnt: u8,
    /// RNR retries.
    rnr_retry: rnr_retry: u8,
    /// Minimum RNR NAK timer.
    min_rnr_timer: min_rnr_timer: u8,
    /// Outstanding READs/atomics as initiator.
    max_rd_atomic: max_rd_atomic: u8,
    /// Outstanding READs/atomics as responder.
    max_dest_rd_atomic: max_dest_rd_atomic: u8,
    /// Port.
    port: port_num: u32,
);

impl QpAttrOut<'_> {
    /// The current state (also reported as the consumer-visible current state).
    pub fn state(&mut self, state: QpState) -> &mut Self {
        self.attr.qp_state = state as u32;
        self.attr.cur_qp_state = state as u32;
        self
    }

    /// Remote access allowed.
    pub fn access_flags(&mut self, flags: AccessFlags) -> &mut Self {
        self.attr.qp_access_flags = u32::from(flags) as c_int;
        self
    }

    /// The queue sizes, as created.
    pub fn caps(&mut self, caps: QpCaps) -> &mut Self {
        for cap in [&mut self.attr.cap, &mut self.init.cap] {
            cap.max_send_wr = caps.max_send_wr;
            cap.max_recv_wr = caps.max_recv_wr;
            cap.max_send_sge = caps.max_send_sge;
            cap.max_recv_sge = caps.max_recv_sge;
            cap.max_inline_data = caps.max_inline_data;
        }
        self
    }

    /// Every send request completes, not only the signaled ones.
    pub fn signal_all(&mut self, all: bool) -> &mut Self {
        self.init.sq_sig_type = if all {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR
        };
        self
    }
}

/// `struct ib_device_ops::query_qp` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn query_qp<T: Operations>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _mask: c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is a live QP of ours; ib_core passes writable attributes (zeroed by most
        // callers; we fill what we know).
        let (obj, attr, init) = unsafe { (Qp::<T>::from_raw(qp), &mut *attr, &mut *init) };
        // SAFETY: As above; ib_core's record of the QP.
        unsafe {
            init.qp_type = (*qp).qp_type;
            init.send_cq = (*qp).send_cq;
            init.recv_cq = (*qp).recv_cq;
            init.srq = (*qp).srq;
            init.qp_context = (*qp).qp_context;
            init.port_num = (*qp).port;
        }
        T::query_qp(obj, &mut QpAttrOut { attr, init })?;
        Ok(0)
    })
}

/// `struct ib_device_ops::create_qp` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn create_qp<T: Operations>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core set `device`, `pd` (NULL for an XRC_TGT QP, which has none), the CQs
        // and the type before calling us, and passes a valid `attr` and a valid or NULL `udata`.
        let (dev, pd, mut udata) = unsafe {
            let pd = (*qp).pd;
            (
                Device::<T>::from_raw((*qp).device),
                (!pd.is_null()).then(|| Pd::<T>::from_raw(pd)),
                Udata::from_raw(udata),
            )
        };
        let mut init = QpInit {
            // SAFETY: As above; ib_core does not touch it during the call.
            raw: unsafe { &mut *attr },
            _p: PhantomData,
        };
        let data = T::create_qp(dev, pd, &mut init, udata.as_mut())?;
        let number = data.number();
        // SAFETY: ib_core allocated `Qp::<T>::ALLOC_SIZE` bytes and the data is not set yet.
        unsafe {
            Qp::<T>::write_data(qp, data);
            (*qp).qp_num = number;
        }
        // SAFETY: The data is initialised now.
        let obj = unsafe { Qp::<T>::from_raw(qp) };
        let undo = || {
            let _ = T::destroy_qp(obj, None);
            // SAFETY: ib_core frees the failed QP after we return.
            unsafe { Qp::<T>::drop_data(qp) };
        };
        // SAFETY: `destroy_qp` removes the QP before ib_core frees it.
        unsafe { dev.qps().enter_or_undo("QP", number, obj, undo) }?;
        Ok(0)
    })
}

/// `struct ib_device_ops::modify_qp` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn modify_qp<T: Operations>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is a live QP of ours; `attr` is valid for the call; `udata` valid or NULL.
        let (obj, mut udata) = unsafe { (Qp::<T>::from_raw(qp), Udata::from_raw(udata)) };
        let attr = QpAttr {
            // SAFETY: As above.
            raw: unsafe { &*attr },
            mask: mask as u32,
        };
        T::modify_qp(obj, &attr, udata.as_mut())?;
        Ok(0)
    })
}

/// `attach_mcast` and `detach_mcast`: `T::attach_mcast` or `T::detach_mcast` (`op`) on the QP
/// and group GID ib_core passes (the LID means nothing on RoCE).
///
/// # Safety
///
/// `qp` is a live QP of ours and `gid` valid for the call.
unsafe fn mcast<T: Operations>(
    qp: *mut bindings::ib_qp,
    gid: *mut bindings::ib_gid,
    op: fn(&Qp<T>, &[u8; 16]) -> Result,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's contract; every bit pattern is a valid `raw` member.
        let (obj, mgid) = unsafe { (Qp::<T>::from_raw(qp), (*gid).raw) };
        op(obj, &mgid)?;
        Ok(0)
    })
}

/// `struct ib_device_ops::attach_mcast` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn attach_mcast<T: Operations>(
    qp: *mut bindings::ib_qp,
    gid: *mut bindings::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: ib_core passes a live UD QP of ours and a valid multicast GID.
    unsafe { mcast::<T>(qp, gid, T::attach_mcast) }
}

/// `struct ib_device_ops::detach_mcast` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn detach_mcast<T: Operations>(
    qp: *mut bindings::ib_qp,
    gid: *mut bindings::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: As in `attach_mcast`.
    unsafe { mcast::<T>(qp, gid, T::detach_mcast) }
}

/// `struct ib_device_ops::destroy_qp` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn destroy_qp<T: Operations>(
    qp: *mut bindings::ib_qp,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` was set up by `create_qp`; `udata` is valid or NULL.
        let (obj, mut udata) = unsafe { (Qp::<T>::from_raw(qp), Udata::from_raw(udata)) };
        obj.device()
            .qps()
            .leave_for(obj.qp_num(), obj, || T::destroy_qp(obj, udata.as_mut()))?;
        // SAFETY: ib_core frees the QP after we return.
        unsafe { Qp::<T>::drop_data(qp) };
        Ok(0)
    })
}

/// `struct ib_device_ops::post_send` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn post_send<T: Operations>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad: *mut *const bindings::ib_send_wr,
) -> c_int {
    if wr.is_null() {
        return 0;
    }
    // SAFETY: `qp` is a live QP of ours; the consumer passes a valid chain.
    let (obj, first) = unsafe {
        let obj = Qp::<T>::from_raw(qp);
        (obj, SendWr::from_raw(wr, obj.qp_type()))
    };
    // SAFETY: ib_core passes a writable `bad_wr`.
    unsafe { super::wr::post_result(T::post_send(obj, first), bad) }
}

/// `struct ib_device_ops::post_recv` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn post_recv<T: Operations>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> c_int {
    if wr.is_null() {
        return 0;
    }
    // SAFETY: `qp` is a live QP of ours; the consumer passes a valid chain.
    let (obj, first) = unsafe { (Qp::<T>::from_raw(qp), RecvWr::from_raw(wr)) };
    // SAFETY: ib_core passes a writable `bad_wr`.
    unsafe { super::wr::post_result(T::post_recv(obj, first), bad) }
}
