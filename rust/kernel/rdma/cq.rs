// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`) and work completions (`struct ib_wc`).

use crate::{
    bindings,
    error::from_result,
    prelude::*,
    rdma::{
        object::{
            verbs_object,
            Numbered, //
        },
        Device,
        Operations,
        Udata, //
    },
};
use core::marker::PhantomData;

verbs_object!(
    /// A completion queue: where the device reports finished work requests.
    Cq,
    ib_cq,
    Cq
);

impl<T: Operations> Cq<T> {
    /// Calls the consumer's completion handler: a completion arrived after the CQ was armed
    /// ([`Operations::req_notify_cq`]). Runs in any context, interrupts included.
    pub fn notify_completion(&self) {
        let cq = self.as_raw();
        // SAFETY: `cq` is live (type invariant); ib_core set the handler and context at
        // creation and never changes them.
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
    }

    /// Reports a CQ error (`IB_EVENT_CQ_ERR`, e.g. an overrun) to the consumer.
    pub fn dispatch_error(&self) {
        let cq = self.as_raw();
        let mut ev = bindings::ib_event {
            device: self.device().as_raw(),
            element: bindings::ib_event__bindgen_ty_1 { cq },
            event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
        };
        // SAFETY: As in `notify_completion`; the handler copies what it keeps of the event.
        unsafe {
            if let Some(handler) = (*cq).event_handler {
                handler(&mut ev, (*cq).cq_context);
            }
        }
    }
}

/// What the consumer asks of a new CQ.
pub struct CqInit {
    /// Minimum number of entries.
    pub entries: u32,
    /// Completion vector whose interrupts deliver the CQ's completion events.
    pub comp_vector: u32,
    /// Creation flags (`IB_UVERBS_CQ_FLAGS_*`).
    pub flags: u32,
}

/// The status of a work completion (`enum ib_wc_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WcStatus {
    /// Success.
    Success = bindings::ib_wc_status_IB_WC_SUCCESS,
    /// Local length error.
    LocLenErr = bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
    /// Local QP operation error.
    LocQpOpErr = bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    /// Local protection error.
    LocProtErr = bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
    /// Flushed: the QP was in the error state.
    WrFlushErr = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
    /// A memory window bind failed.
    MwBindErr = bindings::ib_wc_status_IB_WC_MW_BIND_ERR,
    /// Bad response.
    BadRespErr = bindings::ib_wc_status_IB_WC_BAD_RESP_ERR,
    /// Local access error.
    LocAccessErr = bindings::ib_wc_status_IB_WC_LOC_ACCESS_ERR,
    /// Remote invalid request.
    RemInvReqErr = bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    /// Remote access error.
    RemAccessErr = bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
    /// Remote operation error.
    RemOpErr = bindings::ib_wc_status_IB_WC_REM_OP_ERR,
    /// Transport retries exhausted.
    RetryExcErr = bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    /// RNR retries exhausted.
    RnrRetryExcErr = bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
    /// Fatal error.
    FatalErr = bindings::ib_wc_status_IB_WC_FATAL_ERR,
    /// General error.
    GeneralErr = bindings::ib_wc_status_IB_WC_GENERAL_ERR,
}

/// The operation a work completion reports (`enum ib_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WcOpcode {
    /// SEND (any kind).
    Send = bindings::ib_wc_opcode_IB_WC_SEND,
    /// RDMA WRITE.
    RdmaWrite = bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
    /// RDMA READ.
    RdmaRead = bindings::ib_wc_opcode_IB_WC_RDMA_READ,
    /// Compare and swap.
    CompSwap = bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
    /// Fetch and add.
    FetchAdd = bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
    /// Local invalidation.
    LocalInv = bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
    /// Fast registration.
    RegMr = bindings::ib_wc_opcode_IB_WC_REG_MR,
    /// A received SEND.
    Recv = bindings::ib_wc_opcode_IB_WC_RECV,
    /// A received RDMA WRITE with immediate data.
    RecvRdmaWithImm = bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
}

/// The network header of a received datagram (RoCE), in `ib_wc::network_hdr_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NetworkHeader {
    /// RoCE v1: an IB global route header.
    Ib = bindings::rdma_network_type_RDMA_NETWORK_IB as u8,
    /// RoCE v2 over IPv4.
    Ipv4 = bindings::rdma_network_type_RDMA_NETWORK_IPV4 as u8,
    /// RoCE v2 over IPv6.
    Ipv6 = bindings::rdma_network_type_RDMA_NETWORK_IPV6 as u8,
}

/// A work completion as the driver decoded it from its device.
pub struct WorkCompletion {
    /// The work request's identifier.
    pub wr_id: u64,
    /// Number of the QP the request was posted to.
    pub qp_num: u32,
    /// Status.
    pub status: WcStatus,
    /// Operation (meaningful for successful completions).
    pub opcode: WcOpcode,
    /// Device-specific error detail.
    pub vendor_err: u32,
    /// Bytes received (receives, READs and atomics).
    pub byte_len: u32,
    /// Immediate data, in network byte order.
    pub imm: Option<u32>,
    /// Key the sender invalidated (SEND with invalidate).
    pub invalidated_rkey: Option<u32>,
    /// Source QP of a datagram.
    pub src_qp: u32,
    /// Source MAC of a datagram.
    pub smac: Option<[u8; 6]>,
    /// VLAN of a datagram.
    pub vlan: Option<u16>,
    /// Network header of a datagram (the receive buffer starts with 40 bytes for it).
    pub network_header: Option<NetworkHeader>,
    /// P_Key index (GSI).
    pub pkey_index: u16,
    /// The port the completion came through (numbered from 1).
    pub port: u8,
}

/// The `ib_wc` array of a `poll_cq` call, filled by [`Operations::poll_cq`].
pub struct Completions<'a, T: Operations> {
    wc: *mut bindings::ib_wc,
    capacity: usize,
    len: usize,
    dev: &'a Device<T>,
    _p: PhantomData<&'a mut bindings::ib_wc>,
}

impl<T: Operations> Completions<'_, T> {
    /// Number of completions written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No completion was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The array is full.
    pub fn is_full(&self) -> bool {
        self.len == self.capacity
    }

    /// Appends a completion.
    ///
    /// # Errors
    ///
    /// `ENOSPC` when the array is full; `ENOENT` when no QP has number `wc.qp_num` (the device
    /// reported a completion for a QP that is gone, or a bogus number): nothing is written.
    pub fn push(&mut self, wc: &WorkCompletion) -> Result {
        if self.is_full() {
            return Err(ENOSPC);
        }
        let qp = self
            .dev
            .qps()
            .with(wc.qp_num, |qp| qp.as_raw())
            .ok_or(ENOENT)?;
        let mut flags = 0;
        let mut ex = bindings::ib_wc__bindgen_ty_2 { imm_data: 0 };
        if let Some(imm) = wc.imm {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM;
            ex.imm_data = imm;
        } else if let Some(rkey) = wc.invalidated_rkey {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
            ex.invalidate_rkey = rkey;
        }
        if wc.smac.is_some() {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_SMAC;
        }
        if wc.vlan.is_some() {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_VLAN;
        }
        if wc.network_header.is_some() {
            flags |=
                bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE | bindings::ib_wc_flags_IB_WC_GRH;
        }
        let out = bindings::ib_wc {
            __bindgen_anon_1: bindings::ib_wc__bindgen_ty_1 { wr_id: wc.wr_id },
            status: wc.status as u32,
            opcode: wc.opcode as u32,
            vendor_err: wc.vendor_err,
            byte_len: wc.byte_len,
            qp,
            ex,
            src_qp: wc.src_qp,
            wc_flags: flags as c_int,
            pkey_index: wc.pkey_index,
            port_num: wc.port.into(),
            smac: wc.smac.unwrap_or_default(),
            vlan_id: wc.vlan.unwrap_or(0xffff),
            network_hdr_type: wc.network_header.map_or(0, |h| h as u8),
            ..pin_init::zeroed()
        };
        // SAFETY: `len < capacity` and the array has `capacity` writable entries.
        unsafe { self.wc.add(self.len).write(out) };
        self.len += 1;
        Ok(())
    }
}

/// `struct ib_device_ops::create_cq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn create_cq<T: Operations>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core set `device` and passes a valid `attr`; `attrs` is NULL for kernel
        // callers, otherwise its `driver_udata` is valid.
        let (dev, init, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*cq).device),
                CqInit {
                    entries: (*attr).cqe,
                    comp_vector: (*attr).comp_vector,
                    flags: (*attr).flags,
                },
                if attrs.is_null() {
                    None
                } else {
                    Udata::from_raw(bindings::uverbs_attr_bundle_udata(attrs))
                },
            )
        };
        let (data, entries) = T::create_cq(dev, &init, udata.as_mut())?;
        let number = data.number();
        // SAFETY: ib_core allocated `Cq::<T>::ALLOC_SIZE` bytes and the data is not set yet.
        unsafe {
            Cq::<T>::write_data(cq, data);
            (*cq).cqe = entries.try_into().unwrap_or(c_int::MAX);
        }
        // SAFETY: The data is initialised now.
        let obj = unsafe { Cq::<T>::from_raw(cq) };
        let undo = || {
            let _ = T::destroy_cq(obj, None);
            // SAFETY: ib_core frees the failed CQ after we return.
            unsafe { Cq::<T>::drop_data(cq) };
        };
        // SAFETY: `destroy_cq` removes the CQ before ib_core frees it.
        unsafe { dev.cqs().enter_or_undo("CQ", number, obj, undo) }?;
        Ok(0)
    })
}

/// `struct ib_device_ops::destroy_cq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn destroy_cq<T: Operations>(
    cq: *mut bindings::ib_cq,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `cq` was set up by `create_cq`; `udata` is valid or NULL.
        let (obj, mut udata) = unsafe { (Cq::<T>::from_raw(cq), Udata::from_raw(udata)) };
        obj.device()
            .cqs()
            .leave_for(obj.number(), obj, || T::destroy_cq(obj, udata.as_mut()))?;
        // SAFETY: ib_core frees the CQ after we return.
        unsafe { Cq::<T>::drop_data(cq) };
        Ok(0)
    })
}

/// `struct ib_device_ops::poll_cq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn poll_cq<T: Operations>(
    cq: *mut bindings::ib_cq,
    num: c_int,
    wc: *mut bindings::ib_wc,
) -> c_int {
    from_result(|| {
        // SAFETY: `cq` is a live CQ of ours.
        let obj = unsafe { Cq::<T>::from_raw(cq) };
        let mut out = Completions {
            wc,
            capacity: if wc.is_null() {
                0
            } else {
                usize::try_from(num).unwrap_or(0)
            },
            len: 0,
            dev: obj.device(),
            _p: PhantomData,
        };
        T::poll_cq(obj, &mut out)?;
        Ok(out.len as c_int)
    })
}

/// `struct ib_device_ops::req_notify_cq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn req_notify_cq<T: Operations>(
    cq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> c_int {
    from_result(|| {
        // SAFETY: `cq` is a live CQ of ours.
        let obj = unsafe { Cq::<T>::from_raw(cq) };
        let solicited_only = flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
        let report_missed = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
        let missed = T::req_notify_cq(obj, solicited_only)?;
        Ok(c_int::from(report_missed && missed))
    })
}

/// `struct ib_device_ops::resize_user_cq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn resize_user_cq<T: Operations>(
    cq: *mut bindings::ib_cq,
    cqe: c_uint,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `cq` is a live CQ of ours; uverbs passes its `driver_udata`, valid or NULL.
        let (obj, udata) = unsafe { (Cq::<T>::from_raw(cq), Udata::from_raw(udata)) };
        let mut udata = udata.ok_or(EINVAL)?;
        let entries = T::resize_user_cq(obj, cqe, &mut udata)?;
        // SAFETY: ib_core serialises verbs on one CQ object (uverbs holds it exclusively for
        // a resize), and reports `cqe` back to the caller after we return.
        unsafe { (*cq).cqe = entries.try_into().unwrap_or(c_int::MAX) };
        Ok(0)
    })
}

/// `struct ib_device_ops::modify_cq` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn modify_cq<T: Operations>(
    cq: *mut bindings::ib_cq,
    count: u16,
    period: u16,
) -> c_int {
    from_result(|| {
        // SAFETY: `cq` is a live CQ of ours.
        T::modify_cq(unsafe { Cq::<T>::from_raw(cq) }, count, period)?;
        Ok(0)
    })
}
