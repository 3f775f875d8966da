// SPDX-License-Identifier: GPL-2.0

//! Work requests: what consumers post to send and receive queues (`struct ib_send_wr` and the
//! structures that extend it, `struct ib_recv_wr`).

use crate::{
    bindings,
    prelude::*,
    rdma::{
        AccessFlags,
        Ah,
        Mr,
        Operations,
        QpType, //
    },
};
use core::marker::PhantomData;

/// A scatter/gather element: `length` bytes at DMA address `addr` of the memory region with
/// local key `lkey`.
#[repr(transparent)]
pub struct Sge(bindings::ib_sge);

impl Sge {
    /// DMA address (or, for a user MR, virtual address in the MR's IOVA space).
    pub fn addr(&self) -> u64 {
        self.0.addr
    }

    /// Length in bytes.
    pub fn length(&self) -> u32 {
        self.0.length
    }

    /// Local key of the memory region.
    pub fn lkey(&self) -> u32 {
        self.0.lkey
    }
}

/// Builds the SGE slice of a work request.
///
/// # Safety
///
/// `sg_list` must be NULL or point to `num` valid `ib_sge` for `'a`.
unsafe fn sges<'a>(sg_list: *mut bindings::ib_sge, num: c_int) -> Result<&'a [Sge]> {
    let num = usize::try_from(num).map_err(|_| EINVAL)?;
    if num == 0 {
        return Ok(&[]);
    }
    if sg_list.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: Per the caller `sg_list` points to `num` SGEs; `Sge` is a transparent wrapper.
    Ok(unsafe { core::slice::from_raw_parts(sg_list.cast::<Sge>(), num) })
}

/// Where an RDMA or atomic operation goes in the peer's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    /// Address in the peer's memory region.
    pub addr: u64,
    /// The region's remote key.
    pub rkey: u32,
}

/// The destination of a datagram (UD and GSI QPs).
pub struct UdDest<'a, T: Operations> {
    /// Address handle.
    pub ah: &'a Ah<T>,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
}

/// What a send work request asks for, with the fields of its opcode.
///
/// Immediate data is given as the consumer wrote it: in network byte order (`__be32`).
pub enum SendOp<'a, T: Operations> {
    /// SEND, possibly with immediate data.
    Send {
        /// Immediate data.
        imm: Option<u32>,
    },
    /// SEND with invalidate: the peer invalidates `rkey`.
    SendWithInv {
        /// Key the peer invalidates.
        rkey: u32,
    },
    /// A datagram SEND (UD and GSI QPs).
    UdSend {
        /// Destination.
        dest: UdDest<'a, T>,
        /// Immediate data.
        imm: Option<u32>,
    },
    /// RDMA WRITE, possibly with immediate data.
    RdmaWrite {
        /// Destination in the peer's memory.
        remote: Remote,
        /// Immediate data.
        imm: Option<u32>,
    },
    /// RDMA READ.
    RdmaRead {
        /// Source in the peer's memory.
        remote: Remote,
    },
    /// 64-bit compare and swap.
    CompareSwap {
        /// Target in the peer's memory.
        remote: Remote,
        /// Value compared.
        compare: u64,
        /// Value written when equal.
        swap: u64,
    },
    /// 64-bit fetch and add.
    FetchAdd {
        /// Target in the peer's memory.
        remote: Remote,
        /// Value added.
        add: u64,
    },
    /// Fast registration of a memory region the consumer mapped with `ib_map_mr_sg()`.
    RegMr {
        /// The region.
        mr: &'a Mr<T>,
        /// The key it gets (its keys with a new variant byte).
        key: u32,
        /// Access rights.
        access: AccessFlags,
    },
    /// Local invalidation of `rkey`.
    LocalInv {
        /// Key invalidated.
        rkey: u32,
    },
}

/// One send work request of a chain posted to a QP.
pub struct SendWr<'a, T: Operations> {
    raw: &'a bindings::ib_send_wr,
    qp_type: QpType,
    _p: PhantomData<T>,
}

impl<T: Operations> Clone for SendWr<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Operations> Copy for SendWr<'_, T> {}

impl<'a, T: Operations> SendWr<'a, T> {
    /// Wraps the first request of a chain posted to a QP of type `qp_type`.
    ///
    /// # Safety
    ///
    /// `raw` must point to a valid chain of send requests for `'a`, each embedded in the
    /// structure its opcode and the QP type call for (`ib_rdma_wr`, `ib_atomic_wr`, `ib_ud_wr`,
    /// `ib_reg_wr`), as ib_core requires of consumers.
    pub(crate) unsafe fn from_raw(raw: *const bindings::ib_send_wr, qp_type: QpType) -> Self {
        Self {
            // SAFETY: Guaranteed by the caller.
            raw: unsafe { &*raw },
            qp_type,
            _p: PhantomData,
        }
    }

    /// The raw request.
    pub fn as_raw(&self) -> *const bindings::ib_send_wr {
        self.raw
    }

    /// The next request of the chain.
    pub fn next(&self) -> Option<Self> {
        let next = self.raw.next;
        // SAFETY: The chain is valid for `'a` (type invariant of the first element).
        (!next.is_null()).then(|| unsafe { Self::from_raw(next, self.qp_type) })
    }

    /// The consumer's identifier, returned in the work completion.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: Both union members are 64 bits; `wr_id` reads either as the value to return.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }

    /// Scatter/gather list (the local buffers).
    ///
    /// # Errors
    ///
    /// `EINVAL` for a negative count or a missing list.
    pub fn sges(&self) -> Result<&'a [Sge]> {
        // SAFETY: ib_core's consumers pass `num_sge` valid SGEs at `sg_list`.
        unsafe { sges(self.raw.sg_list, self.raw.num_sge) }
    }

    fn flag(&self, flag: bindings::ib_send_flags) -> bool {
        self.raw.send_flags & flag as c_int != 0
    }

    /// A completion is wanted even if the QP does not signal all requests.
    pub fn signaled(&self) -> bool {
        self.flag(bindings::ib_send_flags_IB_SEND_SIGNALED)
    }

    /// The receiver's completion is solicited (wakes a `req_notify_cq(SOLICITED)`).
    pub fn solicited(&self) -> bool {
        self.flag(bindings::ib_send_flags_IB_SEND_SOLICITED)
    }

    /// Wait for earlier READs and atomics before this request.
    pub fn fence(&self) -> bool {
        self.flag(bindings::ib_send_flags_IB_SEND_FENCE)
    }

    /// The payload is copied into the WQE now (the buffers may be reused at once).
    pub fn inline(&self) -> bool {
        self.flag(bindings::ib_send_flags_IB_SEND_INLINE)
    }

    /// The bytes of SGE `i` of an inline request (`IB_SEND_INLINE`): for inline data, kernel
    /// consumers give kernel virtual addresses, not DMA addresses. `None` for a request that is
    /// not inline or an index out of range.
    pub fn inline_data(&self, i: usize) -> Option<&'a [u8]> {
        if !self.inline() {
            return None;
        }
        let sge = self.sges().ok()?.get(i)?;
        if sge.length() == 0 {
            return Some(&[]);
        }
        let addr = usize::try_from(sge.addr()).ok()?;
        // SAFETY: ib_core requires kernel consumers of `IB_SEND_INLINE` to pass mapped kernel
        // memory of `length` bytes at `addr`, readable during the post (user requests never
        // reach `post_send`: providers write their own WQEs).
        Some(unsafe { core::slice::from_raw_parts(addr as *const u8, sge.length() as usize) })
    }

    fn imm(&self) -> u32 {
        // SAFETY: Both union members are `u32`-sized plain data.
        unsafe { self.raw.ex.imm_data }
    }

    fn invalidate_rkey(&self) -> u32 {
        // SAFETY: As in `imm`.
        unsafe { self.raw.ex.invalidate_rkey }
    }

    fn rdma(&self) -> Remote {
        // SAFETY: RDMA opcodes come in an `ib_rdma_wr` whose first field is this request.
        let wr =
            unsafe { &*crate::container_of!(self.as_raw().cast_mut(), bindings::ib_rdma_wr, wr) };
        Remote {
            addr: wr.remote_addr,
            rkey: wr.rkey,
        }
    }

    fn atomic(&self) -> &'a bindings::ib_atomic_wr {
        // SAFETY: Atomic opcodes come in an `ib_atomic_wr` whose first field is this request.
        unsafe { &*crate::container_of!(self.as_raw().cast_mut(), bindings::ib_atomic_wr, wr) }
    }

    /// Decodes the opcode and its fields.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an opcode this abstraction does not know, or one the QP type does not
    /// allow, and for a datagram request without an address handle.
    pub fn op(&self) -> Result<SendOp<'a, T>> {
        // The opcodes, as the type of `ib_send_wr::opcode` (some are defined by the uverbs enum).
        const SEND: u32 = bindings::ib_wr_opcode_IB_WR_SEND;
        const SEND_WITH_IMM: u32 = bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM;
        const SEND_WITH_INV: u32 = bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV;
        const RDMA_WRITE: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE;
        const RDMA_WRITE_WITH_IMM: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM;
        const RDMA_READ: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_READ;
        const CMP_AND_SWP: u32 = bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP;
        const FETCH_AND_ADD: u32 = bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD;
        const REG_MR: u32 = bindings::ib_wr_opcode_IB_WR_REG_MR;
        const LOCAL_INV: u32 = bindings::ib_wr_opcode_IB_WR_LOCAL_INV;
        let datagram = matches!(self.qp_type, QpType::Ud | QpType::Gsi);
        let op = match self.raw.opcode {
            SEND | SEND_WITH_IMM if datagram => {
                // SAFETY: Sends on UD and GSI QPs come in an `ib_ud_wr`.
                let ud = unsafe {
                    &*crate::container_of!(self.as_raw().cast_mut(), bindings::ib_ud_wr, wr)
                };
                if ud.ah.is_null() {
                    return Err(EINVAL);
                }
                SendOp::UdSend {
                    dest: UdDest {
                        // SAFETY: The consumer's AH is a live AH of this device.
                        ah: unsafe { Ah::from_raw(ud.ah) },
                        remote_qpn: ud.remote_qpn,
                        remote_qkey: ud.remote_qkey,
                    },
                    imm: (self.raw.opcode == SEND_WITH_IMM).then(|| self.imm()),
                }
            }
            _ if datagram => return Err(EINVAL),
            SEND => SendOp::Send { imm: None },
            SEND_WITH_IMM => SendOp::Send {
                imm: Some(self.imm()),
            },
            SEND_WITH_INV => SendOp::SendWithInv {
                rkey: self.invalidate_rkey(),
            },
            RDMA_WRITE => SendOp::RdmaWrite {
                remote: self.rdma(),
                imm: None,
            },
            RDMA_WRITE_WITH_IMM => SendOp::RdmaWrite {
                remote: self.rdma(),
                imm: Some(self.imm()),
            },
            RDMA_READ => SendOp::RdmaRead {
                remote: self.rdma(),
            },
            CMP_AND_SWP => {
                let wr = self.atomic();
                SendOp::CompareSwap {
                    remote: Remote {
                        addr: wr.remote_addr,
                        rkey: wr.rkey,
                    },
                    compare: wr.compare_add,
                    swap: wr.swap,
                }
            }
            FETCH_AND_ADD => {
                let wr = self.atomic();
                SendOp::FetchAdd {
                    remote: Remote {
                        addr: wr.remote_addr,
                        rkey: wr.rkey,
                    },
                    add: wr.compare_add,
                }
            }
            REG_MR => {
                // SAFETY: REG_MR comes in an `ib_reg_wr` whose first field is this request.
                let wr = unsafe {
                    &*crate::container_of!(self.as_raw().cast_mut(), bindings::ib_reg_wr, wr)
                };
                if wr.mr.is_null() {
                    return Err(EINVAL);
                }
                SendOp::RegMr {
                    // SAFETY: The consumer's MR is a live MR of this device.
                    mr: unsafe { Mr::from_raw(wr.mr) },
                    key: wr.key,
                    access: AccessFlags::from_raw(wr.access as u32),
                }
            }
            LOCAL_INV => SendOp::LocalInv {
                rkey: self.invalidate_rkey(),
            },
            _ => return Err(EINVAL),
        };
        Ok(op)
    }
}

/// One receive work request of a chain posted to a QP or SRQ.
#[derive(Clone, Copy)]
pub struct RecvWr<'a>(&'a bindings::ib_recv_wr);

impl<'a> RecvWr<'a> {
    /// Wraps the first request of a chain.
    ///
    /// # Safety
    ///
    /// `raw` must point to a valid chain of receive requests for `'a`.
    pub(crate) unsafe fn from_raw(raw: *const bindings::ib_recv_wr) -> Self {
        // SAFETY: Guaranteed by the caller.
        Self(unsafe { &*raw })
    }

    /// The raw request.
    pub fn as_raw(&self) -> *const bindings::ib_recv_wr {
        self.0
    }

    /// The next request of the chain.
    pub fn next(&self) -> Option<Self> {
        let next = self.0.next;
        // SAFETY: The chain is valid for `'a`.
        (!next.is_null()).then(|| unsafe { Self::from_raw(next) })
    }

    /// The consumer's identifier, returned in the work completion.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: As for `SendWr::wr_id`.
        unsafe { self.0.__bindgen_anon_1.wr_id }
    }

    /// Scatter/gather list (where received data goes).
    ///
    /// # Errors
    ///
    /// `EINVAL` for a negative count or a missing list.
    pub fn sges(&self) -> Result<&'a [Sge]> {
        // SAFETY: ib_core's consumers pass `num_sge` valid SGEs at `sg_list`.
        unsafe { sges(self.0.sg_list, self.0.num_sge) }
    }
}

/// A post that failed: the error, and the first request that was not posted (ib_core hands it
/// back to the consumer as `bad_wr`). Requests before it were posted.
pub struct PostError<W> {
    /// Why.
    pub error: Error,
    /// The first request not posted.
    pub bad: W,
}

/// A work request as ib_core knows it, for `bad_wr`.
pub(crate) trait RawWr {
    /// The C structure.
    type Raw;
    /// The request's address.
    fn raw(&self) -> *const Self::Raw;
}

impl<T: Operations> RawWr for SendWr<'_, T> {
    type Raw = bindings::ib_send_wr;
    fn raw(&self) -> *const Self::Raw {
        self.as_raw()
    }
}

impl RawWr for RecvWr<'_> {
    type Raw = bindings::ib_recv_wr;
    fn raw(&self) -> *const Self::Raw {
        self.as_raw()
    }
}

/// What a `post_*` callback returns to ib_core for the driver's `result`: 0, or the error with
/// `*bad` pointing to the first request not posted.
///
/// # Safety
///
/// `bad` must be NULL or writable.
pub(crate) unsafe fn post_result<W: RawWr>(
    result: Result<(), PostError<W>>,
    bad: *mut *const W::Raw,
) -> c_int {
    match result {
        Ok(()) => 0,
        Err(PostError { error, bad: wr }) => {
            if !bad.is_null() {
                // SAFETY: Writable, per the caller.
                unsafe { *bad = wr.raw() };
            }
            error.to_errno()
        }
    }
}
