// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The extended post API (`ibv_wr_start` .. `ibv_wr_complete`): a WR builder opens a work
//! request, setters complete it, and the next builder (or the end of the batch) seals it into
//! a WQE with [`build_send_wqe`], the builder `post_send` uses. The WQEs wait here, in the
//! batch, until `wr_complete` copies them into the ring and rings once; `wr_abort` just
//! forgets them. The individual calls return nothing (the API's design): the first error is
//! kept and `wr_complete` returns it, posting nothing.
//!
//! Also the [`SpinGate`] that makes `wr_start` .. `wr_complete` (and `start_poll` ..
//! `end_poll` of an extended CQ) a per-queue critical section, as the API requires.

use core::sync::atomic::{AtomicBool, Ordering};

use ferroce_hw::{QpType, Sge, UdAddress, MAX_SGE, MAX_WQE_SIZE};
use libc::{EINVAL, ENOMEM};

use crate::wqe::{build_send_wqe, Payload, SendOp, SendRequest, SqLimits};

/// A lock that can be held across calls into the provider (from `wr_start` to
/// `wr_complete`): the C API gives no place for a guard. Spins briefly, then yields.
#[derive(Debug, Default)]
pub(crate) struct SpinGate(AtomicBool);

impl SpinGate {
    /// Waits until the gate is free and takes it.
    pub(crate) fn acquire(&self) {
        let mut spins = 0u32;
        while self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            if spins < 64 {
                core::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Frees the gate.
    pub(crate) fn release(&self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The data of the open work request.
#[derive(Clone, Debug)]
enum Data {
    None,
    Sges(Vec<Sge>),
    Inline(Vec<u8>),
}

/// The open work request: its builder was called, its setters may follow.
#[derive(Clone, Debug)]
struct Open {
    wr_id: u64,
    op: SendOp,
    flags: WrFlags,
    ud: Option<UdAddress>,
    xrc_srqn: Option<u32>,
    data: Data,
}

/// The `wr_flags` of `ibv_qp_ex` that the WQE carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WrFlags {
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
    pub(crate) fence: bool,
}

/// The WQEs of one `wr_start` .. `wr_complete` batch.
#[derive(Debug)]
pub(crate) struct WrBatch {
    limits: SqLimits,
    /// At most this many WQEs (the SQ size): more can never be posted at once.
    capacity: usize,
    /// Sealed WQEs, one slot (stride, at most `MAX_WQE_SIZE`) each.
    wqes: Vec<u8>,
    /// Bytes used in each sealed WQE.
    lens: Vec<usize>,
    open: Option<Open>,
    err: Option<i32>,
}

impl WrBatch {
    /// An empty batch for a send queue of `limits` with `capacity` slots.
    pub(crate) fn new(limits: SqLimits, capacity: usize) -> Self {
        Self {
            limits,
            capacity,
            wqes: Vec::new(),
            lens: Vec::new(),
            open: None,
            err: None,
        }
    }

    fn slot_len(&self) -> usize {
        self.limits.stride.min(MAX_WQE_SIZE)
    }

    /// Forgets everything (`wr_start`, `wr_abort`, after `wr_complete`).
    pub(crate) fn clear(&mut self) {
        self.wqes.clear();
        self.lens.clear();
        self.open = None;
        self.err = None;
    }

    /// Records `e` unless an earlier error is already recorded.
    pub(crate) fn fail(&mut self, e: i32) {
        self.err.get_or_insert(e);
    }

    /// A WR builder: seals the open request and opens one for `op` (or records its error,
    /// e.g. an operation the QP does not have).
    pub(crate) fn begin(&mut self, wr_id: u64, flags: WrFlags, op: Result<SendOp, i32>) {
        self.seal();
        match op {
            Ok(_) if self.lens.len() >= self.capacity => self.fail(ENOMEM),
            Ok(op) => {
                self.open = Some(Open {
                    wr_id,
                    op,
                    flags,
                    ud: None,
                    xrc_srqn: None,
                    data: Data::None,
                })
            }
            Err(e) => self.fail(e),
        }
    }

    fn open_mut(&mut self) -> Option<&mut Open> {
        if self.open.is_none() {
            // A setter without a builder.
            self.fail(EINVAL);
        }
        self.open.as_mut()
    }

    /// `wr_set_ud_addr`: the destination (an AH and the remote QPN and Q_Key), or `None` for
    /// an unusable AH.
    pub(crate) fn set_ud(&mut self, dest: Option<UdAddress>) {
        match dest {
            Some(dest) => {
                if let Some(open) = self.open_mut() {
                    open.ud = Some(dest);
                }
            }
            None => self.fail(EINVAL),
        }
    }

    /// `wr_set_xrc_srqn`: the XRC SRQ at the target (an XRC_INI QP's requests need one).
    pub(crate) fn set_xrc_srqn(&mut self, srqn: u32) {
        if self.limits.qp_type != QpType::XrcIni {
            return self.fail(EINVAL);
        }
        if let Some(open) = self.open_mut() {
            open.xrc_srqn = Some(srqn);
        }
    }

    /// `wr_set_sge` / `wr_set_sge_list`.
    pub(crate) fn set_sges(&mut self, sges: &[Sge]) {
        if sges.len() > MAX_SGE as usize {
            return self.fail(EINVAL);
        }
        if let Some(open) = self.open_mut() {
            open.data = Data::Sges(sges.to_vec());
        }
    }

    /// `wr_set_inline_data` / `wr_set_inline_data_list`: the pieces are copied now (the
    /// application may reuse its buffers when the call returns).
    pub(crate) fn set_inline(&mut self, pieces: &[&[u8]]) {
        let max = self.limits.max_inline as usize;
        let total = pieces
            .iter()
            .try_fold(0usize, |n, p| n.checked_add(p.len()));
        if total.is_none_or(|t| t > max) {
            return self.fail(EINVAL);
        }
        if let Some(open) = self.open_mut() {
            open.data = Data::Inline(pieces.concat());
        }
    }

    /// Builds the open request into a new WQE slot.
    fn seal(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        if self.err.is_some() {
            return;
        }
        let inline: [&[u8]; 1];
        let payload = match &open.data {
            Data::None => Payload::Sges(&[]),
            Data::Sges(sges) => Payload::Sges(sges),
            Data::Inline(bytes) => {
                inline = [bytes.as_slice()];
                Payload::Inline(&inline)
            }
        };
        let req = SendRequest {
            wr_id: open.wr_id,
            op: open.op,
            signaled: open.flags.signaled,
            solicited: open.flags.solicited,
            fence: open.flags.fence,
            payload,
            ud: open.ud,
            xrc_srqn: open.xrc_srqn,
        };
        let slot_len = self.slot_len();
        let start = self.wqes.len();
        self.wqes.resize(start + slot_len, 0);
        match build_send_wqe(&req, &self.limits, &mut self.wqes[start..]) {
            Ok(len) => self.lens.push(len),
            Err(e) => {
                self.wqes.truncate(start);
                self.fail(e);
            }
        }
    }

    /// `wr_complete`: seals the open request; the batch's WQEs, or its first error.
    pub(crate) fn finish(&mut self) -> Result<usize, i32> {
        self.seal();
        match self.err {
            Some(e) => Err(e),
            None => Ok(self.lens.len()),
        }
    }

    /// Sealed WQE `i`: its slot and the bytes it uses.
    pub(crate) fn wqe(&self, i: usize) -> Option<(&[u8], usize)> {
        let len = *self.lens.get(i)?;
        let n = self.slot_len();
        Some((self.wqes.get(i * n..(i + 1) * n)?, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroce_hw::{
        wqe_sge, QpType, UdSeg, WqeCtrl, WQE_FLAG_AV, WQE_FLAG_INLINE, WQE_FLAG_SIGNALED,
        WR_RDMA_WRITE, WR_SEND, WR_SEND_WITH_IMM,
    };
    use libc::EOPNOTSUPP;
    use std::sync::Arc;

    const RC: SqLimits = SqLimits {
        qp_type: QpType::Rc,
        stride: 128,
        max_sge: 4,
        max_inline: 64,
    };
    const SIG: WrFlags = WrFlags {
        signaled: true,
        solicited: false,
        fence: false,
    };

    fn sge(n: u64) -> Sge {
        Sge {
            addr: 0x1000 * n,
            length: 10,
            lkey: n as u32,
        }
    }

    #[test]
    fn builders_and_setters_make_wqes() {
        let mut b = WrBatch::new(RC, 8);
        b.begin(1, SIG, Ok(SendOp::Send));
        b.set_sges(&[sge(1), sge(2)]);
        b.begin(
            2,
            WrFlags::default(),
            Ok(SendOp::Write {
                remote_addr: 0x9000,
                rkey: 5,
            }),
        );
        b.set_inline(&[b"abc", b"defg"]);
        assert_eq!(b.finish(), Ok(2));
        let (w, len) = b.wqe(0).expect("first");
        assert_eq!((w.len(), len), (128, 96));
        let c = WqeCtrl::read_from(w).expect("ctrl");
        assert_eq!(
            (c.wr_id, c.opcode, c.flags, c.num_sge),
            (1, WR_SEND, WQE_FLAG_SIGNALED, 2)
        );
        assert_eq!(wqe_sge(w, 64, 1), Some(sge(2)));
        let (w, len) = b.wqe(1).expect("second");
        assert_eq!(len, 64 + 16);
        let c = WqeCtrl::read_from(w).expect("ctrl");
        assert_eq!(
            (c.wr_id, c.opcode, c.flags),
            (2, WR_RDMA_WRITE, WQE_FLAG_INLINE)
        );
        assert_eq!(c.inline_len, 7);
        assert_eq!(&w[64..71], b"abcdefg");
        assert!(b.wqe(2).is_none());
        // The setters' last call wins; no data at all is a zero-length request.
        b.clear();
        b.begin(3, SIG, Ok(SendOp::SendWithImm(7)));
        b.set_inline(&[b"xx"]);
        b.set_sges(&[]);
        assert_eq!(b.finish(), Ok(1));
        let (w, len) = b.wqe(0).expect("wqe");
        assert_eq!(len, 64);
        let c = WqeCtrl::read_from(w).expect("ctrl");
        assert_eq!(
            (c.opcode, c.num_sge, c.imm_or_inv),
            (WR_SEND_WITH_IMM, 0, 7)
        );
    }

    #[test]
    fn first_error_wins_and_clear_forgets() {
        let mut b = WrBatch::new(RC, 8);
        // A setter with no open request.
        b.set_sges(&[sge(1)]);
        b.begin(1, SIG, Ok(SendOp::Send));
        b.set_sges(&[sge(1)]);
        assert_eq!(b.finish(), Err(EINVAL));
        b.clear();
        b.begin(1, SIG, Ok(SendOp::Send));
        b.begin(2, SIG, Err(EOPNOTSUPP));
        b.begin(3, SIG, Ok(SendOp::Send));
        b.set_inline(&[&[0u8; 65]]);
        assert_eq!(b.finish(), Err(EOPNOTSUPP));
        b.clear();
        assert_eq!(b.finish(), Ok(0));
        // Too much inline data, too many SGEs, a bad atomic: each fails the batch.
        for bad in 0..3 {
            b.clear();
            match bad {
                0 => {
                    b.begin(1, SIG, Ok(SendOp::Send));
                    b.set_inline(&[&[0u8; 60], &[0u8; 5]]);
                }
                1 => {
                    b.begin(1, SIG, Ok(SendOp::Send));
                    b.set_sges(&[sge(1), sge(2), sge(3), sge(4), sge(5)]);
                }
                _ => {
                    b.begin(
                        1,
                        SIG,
                        Ok(SendOp::FetchAdd {
                            remote_addr: 0x1004,
                            rkey: 1,
                            add: 1,
                        }),
                    );
                    b.set_sges(&[sge(1)]);
                }
            }
            assert_eq!(b.finish(), Err(EINVAL), "case {bad}");
            assert!(b.wqe(0).is_none());
        }
    }

    #[test]
    fn capacity_bounds_the_batch() {
        let mut b = WrBatch::new(RC, 2);
        for i in 0..3 {
            b.begin(i, SIG, Ok(SendOp::Send));
        }
        assert_eq!(b.finish(), Err(ENOMEM));
    }

    #[test]
    fn an_xrc_initiators_requests_need_the_srq_they_go_to() {
        let ini = SqLimits {
            qp_type: QpType::XrcIni,
            ..RC
        };
        let mut b = WrBatch::new(ini, 4);
        b.begin(1, SIG, Ok(SendOp::Send));
        b.set_sges(&[sge(1)]);
        assert_eq!(b.finish(), Err(EINVAL), "a SEND naming no SRQ");
        b.clear();
        b.begin(1, SIG, Ok(SendOp::Send));
        b.set_xrc_srqn(0x42);
        b.set_sges(&[sge(1)]);
        assert_eq!(b.finish(), Ok(1));
        let (w, _) = b.wqe(0).expect("wqe");
        assert_eq!(WqeCtrl::read_from(w).expect("ctrl").xrc_srqn, 0x42);
        // A local operation names none; an RC QP takes no SRQ number.
        b.clear();
        b.begin(2, SIG, Ok(SendOp::LocalInv(7)));
        assert_eq!(b.finish(), Ok(1));
        let mut rc = WrBatch::new(RC, 4);
        rc.begin(1, SIG, Ok(SendOp::Send));
        rc.set_xrc_srqn(0x42);
        assert_eq!(rc.finish(), Err(EINVAL));
    }

    #[test]
    fn ud_needs_an_address() {
        let ud = SqLimits {
            qp_type: QpType::Ud,
            ..RC
        };
        let mut b = WrBatch::new(ud, 4);
        b.begin(1, SIG, Ok(SendOp::Send));
        b.set_sges(&[sge(1)]);
        assert_eq!(b.finish(), Err(EINVAL));
        b.clear();
        // A process's QPs name the kernel's AHs by number, never an inline vector.
        let seg = UdSeg {
            ah: 7,
            remote_qpn: 0x33,
            remote_qkey: 0x11,
            ..UdSeg::default()
        };
        let av = UdAddress::Handle(seg);
        b.begin(1, SIG, Ok(SendOp::Send));
        b.set_ud(Some(av));
        b.set_sges(&[sge(1)]);
        assert_eq!(b.finish(), Ok(1));
        let (w, _) = b.wqe(0).expect("wqe");
        assert_eq!(WqeCtrl::read_from(w).expect("ctrl").flags & WQE_FLAG_AV, 0);
        assert_eq!(UdSeg::read_from(&w[24..]), Some(seg));
        b.clear();
        b.begin(1, SIG, Ok(SendOp::Send));
        b.set_ud(None);
        assert_eq!(b.finish(), Err(EINVAL));
        // No RDMA on UD.
        b.clear();
        b.begin(
            1,
            SIG,
            Ok(SendOp::Read {
                remote_addr: 0,
                rkey: 0,
            }),
        );
        b.set_ud(Some(av));
        assert_eq!(b.finish(), Err(EINVAL));
    }

    #[test]
    fn gate_excludes() {
        let gate = Arc::new(SpinGate::default());
        let count = Arc::new(core::sync::atomic::AtomicU32::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (gate, count) = (gate.clone(), count.clone());
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        gate.acquire();
                        // Non-atomic read-modify-write under the gate.
                        let v = count.load(Ordering::Relaxed);
                        count.store(v + 1, Ordering::Relaxed);
                        gate.release();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(count.load(Ordering::Relaxed), 4000);
    }
}
