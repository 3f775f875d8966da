// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! XRC test helpers: XRC SRQs, and two nodes joined by an XRC connection (an XRC_INI QP on
//! node a sending to an XRC_TGT QP on node b), built on [`super::roce`].

use ferroce_hw::*;
use ferroce_nic::engine::wire::back_to_back;

use super::roce::{Conn, Node, Pair, Qp, Scripted, PD, RECV_STRIDE};

/// The XRC domain of the target QPs and SRQs these helpers make.
pub const XRCD: u32 = 7;

/// An XRC SRQ as the guest sees it: a ring of [`RECV_STRIDE`]-byte receive WQEs.
pub struct XrcSrq {
    pub srqn: u32,
    ring: u64,
    dbrec: u64,
    log: u8,
    pub pi: u16,
}

impl XrcSrq {
    /// The `CREATE_SRQ` of an XRC SRQ of `xrcd` in `pd` completing on `cqn`, on fresh rings
    /// of 64 entries, and those rings (ring, record).
    pub fn command(node: &mut Node, xrcd: u32, pd: u32, cqn: u32) -> (CreateSrqCmd, u64, u64) {
        let log = 6u8;
        let ring = node.g.alloc(RECV_STRIDE << log, 4096);
        let dbrec = node.g.alloc(64, 64);
        let cmd = CreateSrqCmd {
            ring: BufDesc {
                addr: ring,
                ..BufDesc::default()
            },
            dbrec_addr: dbrec,
            pd,
            log_size: log,
            log_stride: RECV_STRIDE.trailing_zeros() as u8,
            srq_type: SrqType::Xrc.into(),
            xrcd,
            cqn,
            ..CreateSrqCmd::default()
        };
        (cmd, ring, dbrec)
    }

    /// Creates an XRC SRQ of `xrcd` in `pd` completing on `cqn`.
    pub fn create(node: &mut Node, xrcd: u32, pd: u32, cqn: u32) -> Self {
        let (cmd, ring, dbrec) = Self::command(node, xrcd, pd, cqn);
        let srqn = node.g.ok(&cmd).srqn;
        Self {
            srqn,
            ring,
            dbrec,
            log: cmd.log_size,
            pi: 0,
        }
    }

    /// Posts a receive WQE with one SGE (`lkey`'s) and rings the SRQ doorbell.
    pub fn post(&mut self, node: &mut Node, wr_id: u64, addr: u64, len: u32, lkey: u32) {
        let mut wqe = vec![0u8; RECV_STRIDE];
        assert!(RecvWqeHeader {
            wr_id,
            num_sge: 1,
            ..RecvWqeHeader::default()
        }
        .write_to(&mut wqe));
        assert!(Sge {
            addr,
            length: len,
            lkey,
        }
        .write_to(&mut wqe[16..]));
        let slot = u64::from(self.pi) & ((1 << self.log) - 1);
        node.g.write(self.ring + slot * RECV_STRIDE as u64, &wqe);
        self.pi = self.pi.wrapping_add(1);
        node.g.write_u32(self.dbrec, u32::from(self.pi));
        node.g.w32(
            db_page_offset(0) + DB_SRQ,
            Doorbell {
                qid: self.srqn as u16,
                index: self.pi,
            }
            .encode(),
        );
    }
}

/// Node a's XRC_INI QP (`qa`) connected to node b's XRC_TGT QP (`qb`, domain [`XRCD`]), and
/// an XRC SRQ of that domain on b (PD [`PD`], completing on b's CQ) that a's WQEs name.
pub fn xrc_pair(buf_len: usize, conn: Conn) -> (Pair, XrcSrq) {
    let (pa, pb) = back_to_back();
    let mut a = Node::new(1, buf_len, pa);
    let mut b = Node::with_time(a.g.time.clone(), 2, buf_len, pb);
    let mut qa = Qp::create_xrc_ini(&mut a);
    let qb = Qp::create_xrc_tgt(&mut b, XRCD);
    let cqn = b.cq.cqn;
    let srq = XrcSrq::create(&mut b, XRCD, PD, cqn);
    let (psn_a, psn_b) = (PSN_MASK - 20, 5);
    qa.connect(&mut a, &b, qb.qpn, psn_a, psn_b, conn);
    qb.connect(&mut b, &a, qa.qpn, psn_b, psn_a, conn);
    qa.xrc_srqn = srq.srqn;
    let pair = Pair {
        a,
        b,
        qa,
        qb,
        cqes_a: Vec::new(),
        cqes_b: Vec::new(),
    };
    (pair, srq)
}

/// A node whose XRC_TGT QP (domain [`XRCD`]) the test's peer sends to by hand, with an XRC SRQ
/// of that domain (PD [`PD`], on the node's CQ).
pub fn scripted_target(buf_len: usize, conn: Conn) -> (Scripted, XrcSrq) {
    let mut s = Scripted::with(buf_len, conn, |n| Qp::create_xrc_tgt(n, XRCD));
    let cqn = s.n.cq.cqn;
    let srq = XrcSrq::create(&mut s.n, XRCD, PD, cqn);
    (s, srq)
}
