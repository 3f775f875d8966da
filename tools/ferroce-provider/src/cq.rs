// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Completion queues: a ring of 64-byte CQEs the device writes (owner byte last) and a
//! doorbell record with the consumer index the provider has polled up to. A resize moves the
//! CQ to a new ring: the device ends the old one with a marker CQE, and polling goes on in the
//! new ring from there.

use core::sync::atomic::{fence, Ordering};
use std::collections::VecDeque;
use std::sync::Arc;

use ferroce_hw::{
    CqDbRecord, Cqe, Ring, WcStatus, CQE_FLAG_GRH, CQE_FLAG_WITH_IMM, CQE_FLAG_WITH_INV,
    CQE_FLAG_XRC, CQE_OP_ATOMIC_WRITE, CQE_OP_BIND_MW, CQE_OP_CMP_SWAP, CQE_OP_FETCH_ADD,
    CQE_OP_FLUSH, CQE_OP_LOCAL_INV, CQE_OP_RDMA_READ, CQE_OP_RDMA_WRITE, CQE_OP_RECV,
    CQE_OP_RECV_RDMA_WITH_IMM, CQE_OP_REG_MR, CQE_OP_RESIZE, CQE_OP_SEND, CQE_OWNER_OFFSET,
    CQE_SIZE,
};
use libc::EINVAL;

use crate::dma::DmaBuf;
use crate::queue::{Completed, QueueProgress};
use crate::sys;

pub(crate) use ferroce_hw::log2_ceil as ceil_log2;

/// The CQE ring and its doorbell record, in one buffer (record after the ring).
#[derive(Debug)]
pub(crate) struct CqRing {
    buf: DmaBuf,
    ring: Ring,
    dbrec_offset: usize,
    ci: u16,
    /// The rings resizes move to, oldest first, each taken over at the marker that ends the
    /// one before it.
    next: VecDeque<Next>,
    /// Rings polled to their markers, for the caller to release ([`CqRing::take_retired`]).
    retired: Vec<DmaBuf>,
}

/// The ring a resize moves to, and how many of its first entries a clean removed (the
/// consumer index skips them after the marker).
#[derive(Debug)]
struct Next {
    ring: Box<CqRing>,
    skip: u16,
}

impl CqRing {
    /// A ring of at least `cqe` entries (at least 2), `EINVAL` beyond `1 << max_log`.
    pub(crate) fn new(cqe: u32, max_log: u32) -> Result<Self, i32> {
        let ring = Ring::new(ceil_log2(cqe.max(2)), max_log).ok_or(EINVAL)?;
        let dbrec_offset = ring.size() as usize * CQE_SIZE;
        let buf = DmaBuf::new(dbrec_offset + 64)?;
        Ok(Self {
            buf,
            ring,
            dbrec_offset,
            ci: 0,
            next: VecDeque::new(),
            retired: Vec::new(),
        })
    }

    /// The ring to resize to for at least `cqe` entries (`CMD_RESIZE_CQ`); its record already
    /// holds the consumer index. [`CqRing::resize_to`] makes it the next ring once the kernel
    /// took it.
    pub(crate) fn resized(&self, cqe: u32, max_log: u32) -> Result<CqRing, i32> {
        let mut next = CqRing::new(cqe, max_log)?;
        next.ci = self.ci;
        next.publish_ci();
        Ok(next)
    }

    /// Whether a resize waits for its marker.
    #[cfg(test)]
    pub(crate) fn resizing(&self) -> bool {
        !self.next.is_empty()
    }

    /// Goes on in `next` after the marker the device wrote for the resize (after the rings of
    /// earlier resizes whose markers are not polled yet).
    pub(crate) fn resize_to(&mut self, next: CqRing) {
        self.next.push_back(Next {
            ring: Box::new(next),
            skip: 0,
        });
    }

    /// The rings resizes were to move to, taken back (the CQ is being destroyed).
    pub(crate) fn abandon_resizes(&mut self) -> Vec<CqRing> {
        self.next.drain(..).map(|next| *next.ring).collect()
    }

    /// The buffers of rings left behind at their markers, to release.
    pub(crate) fn take_retired(&mut self) -> Vec<DmaBuf> {
        core::mem::take(&mut self.retired)
    }

    /// The buffer (for the create request and `ibv_dontfork_range`).
    pub(crate) fn buf(&self) -> &DmaBuf {
        &self.buf
    }

    /// Ring geometry.
    pub(crate) fn ring(&self) -> Ring {
        self.ring
    }

    /// Offset of the doorbell record in the buffer.
    pub(crate) fn dbrec_offset(&self) -> usize {
        self.dbrec_offset
    }

    /// Consumer index.
    #[cfg(test)]
    pub(crate) fn ci(&self) -> u16 {
        self.ci
    }

    /// The CQE at `index` if the device has written it: the owner byte first (acquire), then
    /// the rest.
    fn read(&self, index: u16) -> Option<[u8; CQE_SIZE]> {
        let off = self.ring.slot(index) as usize * CQE_SIZE;
        if !self
            .ring
            .entry_valid(index, self.buf.load_acquire_u8(off + CQE_OWNER_OFFSET))
        {
            return None;
        }
        let mut bytes = [0u8; CQE_SIZE];
        self.buf.read(off, &mut bytes);
        Some(bytes)
    }

    /// Takes the next CQE if the device has written it. At a resize's marker it moves to the
    /// next ring (the old buffer is left for [`CqRing::take_retired`]), where the marker's
    /// index holds the next CQE; a marker without a resize is returned, as a CQE of an
    /// unknown opcode.
    pub(crate) fn poll(&mut self) -> Option<Cqe> {
        loop {
            let cqe = Cqe::decode(&self.read(self.ci)?);
            if cqe.opcode != CQE_OP_RESIZE {
                self.ci = self.ci.wrapping_add(1);
                return Some(cqe);
            }
            let Some(next) = self.next.pop_front() else {
                self.ci = self.ci.wrapping_add(1);
                return Some(cqe);
            };
            let ci = self.ci.wrapping_add(next.skip);
            let mut ring = *next.ring;
            ring.next = core::mem::take(&mut self.next);
            ring.retired = core::mem::take(&mut self.retired);
            let old = core::mem::replace(self, ring);
            self.ci = ci;
            self.retired.push(old.buf);
            self.publish_ci();
        }
    }

    /// The index of the marker that ends this ring (written by a resize), looking from
    /// `from` on.
    fn marker(&self, from: u16) -> Option<u16> {
        let mut index = from;
        while self.ring.used(index, from) < self.ring.size() {
            let cqe = Cqe::decode(&self.read(index)?);
            if cqe.opcode == CQE_OP_RESIZE {
                return Some(index);
            }
            index = index.wrapping_add(1);
        }
        None
    }

    /// Removes the CQEs of QP `qpn`, just destroyed, from the ring ([`ferroce_hw::clean_cqes`]):
    /// a QP created next with that number never polls them. `removed` sees each one (receive
    /// WQEs they took from an SRQ are freed there). Publishes the new consumer index.
    ///
    /// During resizes the next rings are cleaned too, each from the index of the marker before
    /// it: the entries it frees there are skipped when polling gets to it.
    pub(crate) fn clean(&mut self, qpn: u32, removed: impl FnMut(&Cqe)) -> u16 {
        // An XRC receive names the target QP, which no process owns: its SRQ's (below).
        self.clean_matching(
            |cqe| cqe.qpn == qpn && cqe.flags & CQE_FLAG_XRC == 0,
            removed,
        )
    }

    /// Removes the CQEs of XRC SRQ `srqn`, just destroyed, from the ring: an SRQ created next
    /// with that number never polls them.
    pub(crate) fn clean_xrc_srq(&mut self, srqn: u32) -> u16 {
        self.clean_matching(
            |cqe| cqe.flags & CQE_FLAG_XRC != 0 && cqe.srqn == srqn,
            |_| {},
        )
    }

    /// Removes the CQEs `matches` picks (never a resize marker), as [`CqRing::clean`] does.
    fn clean_matching(
        &mut self,
        matches: impl Fn(&Cqe) -> bool,
        mut removed: impl FnMut(&Cqe),
    ) -> u16 {
        let mut pick = |cqe: &Cqe| {
            let ours = matches(cqe) && cqe.opcode != CQE_OP_RESIZE;
            if ours {
                removed(cqe);
            }
            ours
        };
        let freed = self.clean_from(self.ci, &mut pick);
        if freed > 0 {
            self.ci = self.ci.wrapping_add(freed);
        }
        let mut marker = if self.next.is_empty() {
            None
        } else {
            self.marker(self.ci)
        };
        for next in self.next.iter_mut() {
            let Some(at) = marker else { break };
            let start = at.wrapping_add(next.skip);
            next.skip = next
                .skip
                .wrapping_add(next.ring.clean_from(start, &mut pick));
            marker = next.ring.marker(at.wrapping_add(next.skip));
        }
        self.publish_ci();
        freed
    }

    /// [`ferroce_hw::clean_cqes`] on this ring from index `from`.
    fn clean_from(&self, from: u16, pick: &mut impl FnMut(&Cqe) -> bool) -> u16 {
        let (ring, buf) = (self.ring, &self.buf);
        ferroce_hw::clean_cqes(
            ring,
            from,
            |index| self.read(index),
            pick,
            |index, body| buf.write(ring.slot(index) as usize * CQE_SIZE, body),
        )
    }

    /// Publishes the consumer index in the doorbell record (after the CQEs were read); during
    /// a resize, in the next ring's too, which the device reads from the switch on.
    pub(crate) fn publish_ci(&self) {
        fence(Ordering::Release);
        let at = core::mem::offset_of!(CqDbRecord, ci);
        self.buf
            .store_u32(self.dbrec_offset + at, u32::from(self.ci));
        for next in &self.next {
            next.ring
                .buf
                .store_u32(next.ring.dbrec_offset + at, u32::from(self.ci));
        }
    }
}

/// The work completion opcode of a CQE.
pub(crate) fn wc_opcode(cqe: &Cqe) -> sys::ibv_wc_opcode {
    match cqe.opcode {
        CQE_OP_RDMA_WRITE => sys::IBV_WC_RDMA_WRITE,
        CQE_OP_RDMA_READ => sys::IBV_WC_RDMA_READ,
        CQE_OP_CMP_SWAP => sys::IBV_WC_COMP_SWAP,
        CQE_OP_FETCH_ADD => sys::IBV_WC_FETCH_ADD,
        CQE_OP_LOCAL_INV => sys::IBV_WC_LOCAL_INV,
        CQE_OP_BIND_MW => sys::IBV_WC_BIND_MW,
        CQE_OP_ATOMIC_WRITE => sys::IBV_WC_ATOMIC_WRITE,
        CQE_OP_FLUSH => sys::IBV_WC_FLUSH,
        CQE_OP_RECV => sys::IBV_WC_RECV,
        CQE_OP_RECV_RDMA_WITH_IMM => sys::IBV_WC_RECV_RDMA_WITH_IMM,
        _ => sys::IBV_WC_SEND,
    }
}

/// The `IBV_WC_*` flags of a CQE (`ibv_wc_flags`; the extended CQ's `read_wc_flags`).
pub(crate) fn wc_flags(cqe: &Cqe) -> u32 {
    let mut flags = 0;
    if cqe.flags & CQE_FLAG_WITH_IMM != 0 {
        flags |= sys::IBV_WC_WITH_IMM;
    }
    if cqe.flags & CQE_FLAG_WITH_INV != 0 {
        flags |= sys::IBV_WC_WITH_INV;
    }
    if cqe.flags & CQE_FLAG_GRH != 0 {
        flags |= sys::IBV_WC_GRH;
    }
    flags
}

/// Whether the CQE's opcode is one the interface defines. One that is not (a buggy device) is
/// still consumed, and reported as a general error with the CQE's `wr_id`; it frees nothing in
/// any queue (the kernel driver drops such CQEs likewise, without accounting them).
pub(crate) fn known_opcode(cqe: &Cqe) -> bool {
    matches!(
        cqe.opcode,
        CQE_OP_SEND
            | CQE_OP_RDMA_WRITE
            | CQE_OP_RDMA_READ
            | CQE_OP_CMP_SWAP
            | CQE_OP_FETCH_ADD
            | CQE_OP_REG_MR
            | CQE_OP_LOCAL_INV
            | CQE_OP_BIND_MW
            | CQE_OP_ATOMIC_WRITE
            | CQE_OP_FLUSH
            | CQE_OP_RECV
            | CQE_OP_RECV_RDMA_WITH_IMM
    )
}

/// The work completion status of a CQE: hardware statuses are IB `ib_wc_status` values,
/// which ibverbs shares; a status the interface does not define, or any status of a CQE whose
/// opcode it does not define, is a general error.
pub(crate) fn wc_status(cqe: &Cqe) -> sys::ibv_wc_status {
    if !known_opcode(cqe) {
        return sys::IBV_WC_GENERAL_ERR;
    }
    match WcStatus::try_from(cqe.status) {
        Ok(status) => sys::ibv_wc_status::from(u8::from(status)),
        Err(_) => sys::IBV_WC_GENERAL_ERR,
    }
}

/// Fills a work completion from a CQE.
pub(crate) fn fill_wc(cqe: &Cqe, wc: &mut sys::ibv_wc) {
    wc.wr_id = cqe.wr_id;
    wc.status = wc_status(cqe);
    wc.opcode = wc_opcode(cqe);
    wc.vendor_err = u32::from(cqe.vendor_err);
    wc.byte_len = cqe.byte_len;
    wc.qp_num = cqe.qpn;
    wc.src_qp = cqe.src_qpn;
    wc.wc_flags = wc_flags(cqe);
    // Immediate data is stored as the sender gave it (network order); an invalidated key
    // shares the field.
    wc.__bindgen_anon_1.imm_data = cqe.imm_or_inv;
    wc.pkey_index = cqe.pkey_index;
    wc.slid = 0;
    wc.sl = 0;
    wc.dlid_path_bits = 0;
}

/// Settles a CQE against the queue it completes (`queue(recv)`, the QP's SQ, or its RQ or
/// SRQ for a receive; `None` for a QP the provider does not know): the queue learns how far
/// the device got, and the CQE takes the `wr_id` the provider recorded for the WQE. A CQE
/// whose WQE index the queue refuses ([`QueueProgress::complete`]) becomes a general error
/// that frees nothing; like one with an unknown opcode it keeps the CQE's `wr_id`, there being
/// no record to report.
pub(crate) fn settle(cqe: &mut Cqe, queue: impl FnOnce(bool) -> Option<Arc<QueueProgress>>) {
    if !known_opcode(cqe) {
        return;
    }
    let Some(q) = queue(is_recv(cqe)) else {
        return;
    };
    match q.complete(cqe.wqe_index) {
        Completed::Recorded(wr_id) => cqe.wr_id = wr_id,
        Completed::Unrecorded => {}
        Completed::Bogus => cqe.status = WcStatus::GeneralErr.into(),
    }
}

/// Whether a CQE completes a receive WQE (RQ or SRQ).
pub(crate) fn is_recv(cqe: &Cqe) -> bool {
    cqe.opcode & 0x80 != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes CQE `index` as the device would: body, then the owner byte of its pass.
    fn device_write(cq: &CqRing, index: u16, wr_id: u64) {
        let ring = cq.ring();
        let off = ring.slot(index) as usize * CQE_SIZE;
        let cqe = Cqe {
            wr_id,
            owner: ring.owner(index),
            ..Cqe::default()
        };
        let bytes = cqe.encode();
        cq.buf().write(off, &bytes[..CQE_OWNER_OFFSET]);
        cq.buf()
            .write(off + CQE_OWNER_OFFSET, &bytes[CQE_OWNER_OFFSET..]);
    }

    /// Writes a CQE of QP `qpn` at `index`.
    fn device_write_qp(cq: &CqRing, index: u16, qpn: u32, wr_id: u64) {
        let ring = cq.ring();
        let cqe = Cqe {
            wr_id,
            qpn,
            owner: ring.owner(index),
            ..Cqe::default()
        };
        cq.buf()
            .write(ring.slot(index) as usize * CQE_SIZE, &cqe.encode());
    }

    #[test]
    fn a_destroyed_qps_cqes_are_cleaned_out() {
        let mut cq = CqRing::new(8, 15).expect("cq");
        for (i, (qpn, wr_id)) in [(9, 1), (10, 2), (9, 3), (10, 4)].into_iter().enumerate() {
            device_write_qp(&cq, i as u16, qpn, wr_id);
        }
        let mut seen = Vec::new();
        assert_eq!(cq.clean(9, |cqe| seen.push(cqe.wr_id)), 2);
        assert_eq!(seen, [3, 1]);
        // The record says the two are consumed; QP 10's CQEs follow in order.
        assert_eq!(cq.buf().load_u32(cq.dbrec_offset()), 2);
        let left: Vec<(u32, u64)> =
            std::iter::from_fn(|| cq.poll().map(|c| (c.qpn, c.wr_id))).collect();
        assert_eq!(left, [(10, 2), (10, 4)]);
    }

    #[test]
    fn xrc_receives_go_with_their_srq_not_with_the_target_qps_number() {
        let mut cq = CqRing::new(8, 15).expect("cq");
        let ring = cq.ring();
        // XRC receives of SRQs 5 and 6 through target QP 9, and a CQE of this process's QP 9
        // (a number the target's had before).
        for (i, (qpn, srqn, xrc, wr_id)) in [(9, 5, true, 1), (9, 6, true, 2), (9, 0, false, 3)]
            .into_iter()
            .enumerate()
        {
            let index = i as u16;
            let cqe = Cqe {
                wr_id,
                qpn,
                srqn,
                opcode: CQE_OP_RECV,
                flags: if xrc { CQE_FLAG_XRC } else { 0 },
                owner: ring.owner(index),
                ..Cqe::default()
            };
            cq.buf()
                .write(ring.slot(index) as usize * CQE_SIZE, &cqe.encode());
        }
        let mut seen = Vec::new();
        assert_eq!(cq.clean(9, |c| seen.push(c.wr_id)), 1, "only the QP's own");
        assert_eq!(seen, [3]);
        assert_eq!(cq.clean_xrc_srq(5), 1);
        let left: Vec<(u32, u64)> =
            std::iter::from_fn(|| cq.poll().map(|c| (c.srqn, c.wr_id))).collect();
        assert_eq!(left, [(6, 2)]);
    }

    /// What the device does for `CMD_RESIZE_CQ` at producer index `pi`: the new ring's
    /// entries stale for the indices they will hold next (from `pi` on), the marker into the
    /// old ring at `pi`.
    fn device_resize(old: &CqRing, new: &CqRing, pi: u16) {
        let ring = new.ring();
        for slot in 0..ring.size() {
            let owner = ring.stale_owner(ring.next_index_in_slot(pi, slot));
            new.buf()
                .write(slot as usize * CQE_SIZE + CQE_OWNER_OFFSET, &[owner]);
        }
        let marker = Cqe {
            opcode: CQE_OP_RESIZE,
            owner: old.ring().owner(pi),
            ..Cqe::default()
        };
        old.buf()
            .write(old.ring().slot(pi) as usize * CQE_SIZE, &marker.encode());
    }

    /// Writes `n` CQEs from index `*pi` on, with wr_ids from `from`.
    fn write_n(cq: &CqRing, pi: &mut u16, n: u64, from: u64) {
        for i in 0..n {
            device_write(cq, *pi, from + i);
            *pi = pi.wrapping_add(1);
        }
    }

    fn drain(cq: &mut CqRing) -> Vec<u64> {
        std::iter::from_fn(|| cq.poll().map(|c| c.wr_id)).collect()
    }

    #[test]
    fn a_resize_loses_and_repeats_nothing() {
        // From index 5000 on, in rings of 8, then 4, then 32 entries.
        let mut cq = CqRing::new(8, 15).expect("cq");
        let mut pi = 0u16;
        for round in 0..625 {
            write_n(&cq, &mut pi, 8, round * 8);
            assert_eq!(drain(&mut cq).len(), 8);
        }
        write_n(&cq, &mut pi, 6, 5000);
        assert_eq!(cq.poll().map(|c| c.wr_id), Some(5000));
        let next = cq.resized(3, 15).expect("next");
        assert_eq!(next.ring().size(), 4);
        assert_eq!(next.buf().load_u32(next.dbrec_offset()), u32::from(cq.ci()));
        device_resize(&cq, &next, pi);
        let new_ring = next.buf().addr();
        cq.resize_to(next);
        assert!(cq.resizing());
        // The five left in the old ring, then the marker moves polling to the new one.
        assert_eq!(drain(&mut cq), [5001, 5002, 5003, 5004, 5005]);
        assert!(!cq.resizing());
        assert_eq!(cq.buf().addr(), new_ring);
        assert_eq!(cq.take_retired().len(), 1, "the old ring is to be released");
        cq.publish_ci();
        assert_eq!(cq.buf().load_u32(cq.dbrec_offset()), u32::from(pi));
        // Around the new ring twice.
        for batch in 0..2 {
            write_n(&cq, &mut pi, 4, 6000 + batch * 4);
            assert_eq!(
                drain(&mut cq),
                (6000 + batch * 4..6004 + batch * 4).collect::<Vec<_>>()
            );
        }
        // Grow, with two waiting in the 4-entry ring.
        write_n(&cq, &mut pi, 2, 7000);
        let next = cq.resized(20, 15).expect("next");
        device_resize(&cq, &next, pi);
        cq.resize_to(next);
        assert_eq!(drain(&mut cq), [7000, 7001]);
        write_n(&cq, &mut pi, 20, 8000);
        assert_eq!(drain(&mut cq), (8000..8020).collect::<Vec<_>>());
        assert_eq!(cq.ci(), pi);
    }

    #[test]
    fn resizes_chain_until_polled_through() {
        let mut cq = CqRing::new(8, 15).expect("cq");
        let mut pi = 0u16;
        write_n(&cq, &mut pi, 5, 1);
        let second = cq.resized(8, 15).expect("second");
        device_resize(&cq, &second, pi);
        cq.resize_to(second);
        // The device writes the next CQEs, and the next marker, into the second ring.
        let third = cq.resized(30, 15).expect("third");
        {
            let second = &cq.next.front().expect("second").ring;
            write_n(second, &mut pi, 3, 6);
            device_resize(second, &third, pi);
        }
        cq.resize_to(third);
        write_n(&cq.next.back().expect("third").ring, &mut pi, 4, 9);
        cq.publish_ci();
        for next in &cq.next {
            assert_eq!(
                next.ring.buf().load_u32(next.ring.dbrec_offset()),
                0,
                "every record"
            );
        }
        assert_eq!(drain(&mut cq), (1..=12).collect::<Vec<_>>());
        assert!(!cq.resizing());
        assert_eq!(cq.ring().size(), 32);
        assert_eq!(cq.take_retired().len(), 2);
        assert_eq!(cq.ci(), pi);
    }

    #[test]
    fn a_destroyed_qps_cqes_are_cleaned_from_both_rings_of_a_resize() {
        let mut cq = CqRing::new(8, 15).expect("cq");
        device_write_qp(&cq, 0, 9, 1);
        device_write_qp(&cq, 1, 10, 2);
        let next = cq.resized(8, 15).expect("next");
        device_resize(&cq, &next, 2);
        cq.resize_to(next);
        let written = |cq: &CqRing| cq.next.front().map(|n| n.ring.ring()).expect("next");
        // The next ring goes on from the marker's index.
        for (index, qpn, wr_id) in [(2u16, 9, 3), (3, 10, 4), (4, 9, 5)] {
            let ring = written(&cq);
            let c = Cqe {
                wr_id,
                qpn,
                owner: ring.owner(index),
                ..Cqe::default()
            };
            let next = &cq.next.front().expect("next").ring;
            next.buf()
                .write(ring.slot(index) as usize * CQE_SIZE, &c.encode());
        }
        let mut removed = Vec::new();
        cq.clean(9, |c| removed.push(c.wr_id));
        removed.sort_unstable();
        assert_eq!(removed, [1, 3, 5]);
        let left: Vec<(u32, u64)> =
            std::iter::from_fn(|| cq.poll().map(|c| (c.qpn, c.wr_id))).collect();
        assert_eq!(left, [(10, 2), (10, 4)]);
        assert_eq!(cq.ci(), 5, "past the two cleaned out of the new ring");
    }

    #[test]
    fn a_marker_without_a_resize_is_an_unknown_completion() {
        let mut cq = CqRing::new(4, 15).expect("cq");
        let other = CqRing::new(4, 15).expect("other");
        device_resize(&cq, &other, 0);
        let cqe = cq.poll().expect("the marker");
        assert_eq!(cqe.opcode, CQE_OP_RESIZE);
        assert!(!known_opcode(&cqe));
    }

    #[test]
    fn unknown_opcode_is_consumed_as_a_general_error() {
        let mut cq = CqRing::new(4, 15).expect("cq");
        let ring = cq.ring();
        let bogus = Cqe {
            wr_id: 77,
            opcode: 0x42,
            status: WcStatus::Success.into(),
            byte_len: 4096,
            owner: ring.owner(0),
            ..Cqe::default()
        };
        cq.buf().write(0, &bogus.encode());
        device_write(&cq, 1, 78);
        // SAFETY: `ibv_wc` is plain data; all-zero is a valid value.
        let mut wc: sys::ibv_wc = unsafe { core::mem::zeroed() };
        let cqe = cq.poll().expect("the bogus CQE");
        fill_wc(&cqe, &mut wc);
        assert_eq!((wc.wr_id, wc.status), (77, sys::IBV_WC_GENERAL_ERR));
        // Consumed: the next poll takes the CQE after it, and the record says so.
        assert_eq!(cq.poll().map(|c| c.wr_id), Some(78));
        cq.publish_ci();
        assert_eq!(cq.buf().load_u32(cq.dbrec_offset()), 2);
    }

    /// A queue of 4 with WQEs `wr_ids` posted, and its progress.
    fn posted(srq: bool, wr_ids: &[u64]) -> (crate::queue::WorkQueue, Arc<QueueProgress>) {
        use crate::queue::{RingLayout, WorkQueue};
        let layout = RingLayout {
            offset: 0,
            log_size: 2,
            log_stride: 6,
        };
        let mut wq = WorkQueue::rq(&layout, 1024, srq).expect("wq");
        let buf = DmaBuf::new(4096).expect("buf");
        let mut scratch = [0u8; ferroce_hw::MAX_WQE_SIZE];
        let mut it = wr_ids.iter();
        let (n, res, _) = wq.fill(&buf, 0, &mut scratch, |slot| {
            it.next()
                .map(|&id| crate::wqe::build_recv_wqe(id, &[], 1, slot))
        });
        assert_eq!((n as usize, res), (wr_ids.len(), Ok(())));
        let progress = wq.progress().clone();
        (wq, progress)
    }

    /// Settles a receive CQE of WQE `index` that claims `wr_id`; returns the completion
    /// reported.
    fn complete(q: &Arc<QueueProgress>, index: u16, wr_id: u64) -> (u64, sys::ibv_wc_status) {
        let mut cqe = Cqe {
            wr_id,
            wqe_index: index,
            opcode: CQE_OP_RECV,
            status: WcStatus::Success.into(),
            ..Cqe::default()
        };
        settle(&mut cqe, |recv| recv.then(|| q.clone()));
        (cqe.wr_id, wc_status(&cqe))
    }

    #[test]
    fn wqe_index_must_advance_within_the_posted() {
        let (_wq, q) = posted(false, &[10, 11]);
        let bad = (0xdead, sys::IBV_WC_GENERAL_ERR);
        // Past the producer (2): a general error, and the queue frees nothing.
        let got = complete(&q, 5, 0xdead);
        assert_eq!(q.ci(), 0, "accounting moved past the producer");
        assert_eq!(got, bad);
        assert_eq!(complete(&q, 2, 0xdead), bad);
        assert_eq!(q.ci(), 0);
        // In range: the wr_id is the one posted, whatever the CQE says.
        assert_eq!(complete(&q, 0, 0xbeef), (10, sys::IBV_WC_SUCCESS));
        assert_eq!(q.ci(), 1);
        // Again, or backwards: nothing left to complete there.
        assert_eq!(complete(&q, 0, 0xdead), bad);
        assert_eq!(complete(&q, 65535, 0xdead), bad);
        assert_eq!(q.ci(), 1);
        assert_eq!(complete(&q, 1, 11), (11, sys::IBV_WC_SUCCESS));
        assert_eq!(q.ci(), 2);
    }

    #[test]
    fn srq_completions_stay_within_the_posted() {
        let (_wq, q) = posted(true, &[20, 21, 22]);
        let bad = (0xdead, sys::IBV_WC_GENERAL_ERR);
        let got = complete(&q, 3, 0xdead);
        assert_eq!(q.ci(), 0, "accounting moved past the producer");
        assert_eq!(got, bad);
        assert_eq!(complete(&q, 4, 0xdead), bad);
        assert_eq!(q.ci(), 0);
        // QPs complete SRQ WQEs out of order: the device took 1 and 0 when it took 2.
        assert_eq!(complete(&q, 2, 22).1, sys::IBV_WC_SUCCESS);
        assert_eq!(q.ci(), 3);
        assert_eq!(complete(&q, 0, 20).1, sys::IBV_WC_SUCCESS);
        assert_eq!(q.ci(), 3);
    }

    #[test]
    fn sizing() {
        assert_eq!(ceil_log2(0), 0);
        assert_eq!(ceil_log2(1), 0);
        assert_eq!(ceil_log2(2), 1);
        assert_eq!(ceil_log2(3), 2);
        assert_eq!(ceil_log2(4096), 12);
        assert_eq!(ceil_log2(4097), 13);
        let cq = CqRing::new(100, 15).expect("cq");
        assert_eq!(cq.ring().size(), 128);
        assert_eq!(cq.dbrec_offset(), 128 * 64);
        assert_eq!(cq.buf().len(), 3 * 4096);
        assert_eq!(CqRing::new(1, 15).expect("cq").ring().size(), 2);
        assert_eq!(CqRing::new(1 << 15, 15).expect("cq").ring().size(), 1 << 15);
        assert_eq!(CqRing::new((1 << 15) + 1, 15).err(), Some(EINVAL));
        assert_eq!(CqRing::new(64, 5).err(), Some(EINVAL));
    }

    #[test]
    fn owner_bit_across_ring_and_index_wrap() {
        let mut cq = CqRing::new(4, 15).expect("cq");
        assert!(cq.poll().is_none(), "a zeroed ring holds nothing");
        // 70000 CQEs: many passes over the 4-entry ring and a wrap of the 16-bit index.
        let mut next = 0u16;
        for round in 0..17_500u64 {
            for i in 0..4u64 {
                device_write(&cq, next.wrapping_add(i as u16), round * 4 + i);
            }
            for i in 0..4u64 {
                let cqe = cq.poll().expect("new CQE");
                assert_eq!(cqe.wr_id, round * 4 + i);
            }
            // The ring now holds only old entries (the previous pass's owner).
            assert!(cq.poll().is_none(), "round {round}: stale entry taken");
            next = next.wrapping_add(4);
            assert_eq!(cq.ci(), next);
        }
    }

    #[test]
    fn partial_and_record() {
        let mut cq = CqRing::new(8, 15).expect("cq");
        device_write(&cq, 0, 10);
        device_write(&cq, 1, 11);
        assert_eq!(cq.poll().map(|c| c.wr_id), Some(10));
        cq.publish_ci();
        assert_eq!(cq.buf().load_u32(cq.dbrec_offset()), 1);
        assert_eq!(cq.poll().map(|c| c.wr_id), Some(11));
        assert!(cq.poll().is_none());
        cq.publish_ci();
        assert_eq!(cq.buf().load_u32(cq.dbrec_offset()), 2);
        // A CQE written with the wrong phase (say, left from a previous pass) is not new.
        let off = 2 * CQE_SIZE;
        let stale = Cqe {
            wr_id: 99,
            owner: 0,
            ..Cqe::default()
        };
        cq.buf().write(off, &stale.encode());
        assert!(cq.poll().is_none());
    }

    #[test]
    fn work_completion_fields() {
        // SAFETY: `ibv_wc` is plain data; all-zero is a valid value.
        let mut wc: sys::ibv_wc = unsafe { core::mem::zeroed() };
        let cqe = Cqe {
            wr_id: 5,
            byte_len: 1024,
            imm_or_inv: 0x0403_0201,
            qpn: 17,
            src_qpn: 23,
            opcode: CQE_OP_RECV,
            status: WcStatus::Success.into(),
            flags: CQE_FLAG_WITH_IMM | CQE_FLAG_GRH,
            pkey_index: 0,
            ..Cqe::default()
        };
        fill_wc(&cqe, &mut wc);
        assert_eq!(
            (wc.wr_id, wc.byte_len, wc.qp_num, wc.src_qp),
            (5, 1024, 17, 23)
        );
        assert_eq!(wc.opcode, sys::IBV_WC_RECV);
        assert_eq!(wc.status, sys::IBV_WC_SUCCESS);
        assert_eq!(wc.wc_flags, sys::IBV_WC_WITH_IMM | sys::IBV_WC_GRH);
        // SAFETY: both union members are u32.
        assert_eq!(unsafe { wc.__bindgen_anon_1.imm_data }, 0x0403_0201);
        assert!(is_recv(&cqe));
        let cases = [
            (CQE_OP_RDMA_WRITE, sys::IBV_WC_RDMA_WRITE),
            (CQE_OP_RDMA_READ, sys::IBV_WC_RDMA_READ),
            (CQE_OP_CMP_SWAP, sys::IBV_WC_COMP_SWAP),
            (CQE_OP_FETCH_ADD, sys::IBV_WC_FETCH_ADD),
            (CQE_OP_ATOMIC_WRITE, sys::IBV_WC_ATOMIC_WRITE),
            (CQE_OP_FLUSH, sys::IBV_WC_FLUSH),
            (CQE_OP_RECV_RDMA_WITH_IMM, sys::IBV_WC_RECV_RDMA_WITH_IMM),
            (CQE_OP_SEND, sys::IBV_WC_SEND),
        ];
        for (op, want) in cases {
            let cqe = Cqe {
                opcode: op,
                status: WcStatus::WrFlushErr.into(),
                ..Cqe::default()
            };
            fill_wc(&cqe, &mut wc);
            assert_eq!(wc.opcode, want);
            assert_eq!(wc.status, sys::IBV_WC_WR_FLUSH_ERR);
            assert_eq!(wc.wc_flags, 0);
        }
        // A status the interface does not define.
        for raw in [3, 0xee] {
            let cqe = Cqe {
                status: raw,
                ..Cqe::default()
            };
            assert_eq!(wc_status(&cqe), sys::IBV_WC_GENERAL_ERR);
        }
    }
}
