// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Memory windows in the device: CREATE_MW / DESTROY_MW, BIND_MW work requests, remote access
//! through a window's R_Key within its range and rights only, type 2 windows serving their QP
//! only, local and remote invalidation, and the hostile cases (a bind beyond the MR, rights
//! escalation, use after invalidation or unbind).

mod common;

use common::objects::{create_mw, next_key};
use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;
use ferroce_nic::engine::headers::{syndrome, Headers, Reth};
use ferroce_nic::engine::opcode::op;
use ferroce_nic::engine::psn;

/// Where windows go in the node's data MR, and how long.
const AT: u64 = 0x4000;
const LEN: u64 = 0x2000;

/// Posts a BIND_MW of window `mw_key` (its new key) to `[addr, addr + len)` of MR `mr_key`
/// and returns its completion status.
fn bind(s: &mut Scripted, mw_key: u32, mr_key: u32, addr: u64, len: u64, access: u32) -> WcStatus {
    let seg = BindMwSeg {
        addr,
        length: len,
        mw_key,
        mr_key,
        access,
        ..BindMwSeg::default()
    };
    s.qp.post(&mut s.n, 77, WR_BIND_MW, 0, 0, &seg.encode(), 0);
    s.run(4);
    let cqe = s.cqes.pop().expect("the bind's completion");
    assert_eq!(cqe.wr_id, 77);
    if cqe.wc_status() == WcStatus::Success {
        assert_eq!(cqe.opcode, CQE_OP_BIND_MW);
    }
    cqe.wc_status()
}

/// A fresh node with a window of `mw_type` bound to `[buf + offset, buf + offset + len)` of
/// its data MR with `access`: the node (its QP posted the bind), the window's key, `buf`.
fn bound_window(mw_type: u8, offset: u64, len: u64, access: u32) -> (Scripted, u32, u64) {
    let mut s = Scripted::new(MIB, Conn::default());
    let (mr, buf) = (s.n.key, s.n.buf);
    let mw = next_key(create_mw(&mut s.n.g, mw_type));
    assert_eq!(
        bind(&mut s, mw, mr, buf + offset, len, access),
        WcStatus::Success
    );
    (s, mw, buf)
}

/// Injects an RDMA WRITE of 64 bytes at `va` with `rkey` and returns the syndrome of the
/// answer (ACK or NAK).
fn remote_write(s: &mut Scripted, at: &mut u32, rkey: u32, va: u64) -> u8 {
    let mut b = Headers::new(op::RC_WRITE_ONLY, s.qp.qpn, *at);
    b.bth.ack_req = true;
    b.reth = Some(Reth { va, rkey, len: 64 });
    s.inject(&b, &pattern(64, u64::from(*at)));
    *at = psn::add(*at, 1);
    let sent = s.sent();
    let answer = sent.last().and_then(|p| p.aeth).expect("an ACK or NAK");
    answer.syndrome
}

fn remote_access_nak(syn: u8) -> bool {
    syn == syndrome::NAK_REMOTE_ACCESS
}

#[test]
fn a_type_2_window_grants_its_range_and_rights_only() {
    let mut s = Scripted::new(MIB, Conn::default());
    let (mr, buf) = (s.n.key, s.n.buf);
    let mw = next_key(create_mw(&mut s.n.g, MW_TYPE_2));
    let rights = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
    assert_eq!(
        bind(&mut s, mw, mr, buf + AT, LEN, rights),
        WcStatus::Success
    );
    let mut at = s.rq_psn;
    assert_eq!(
        remote_write(&mut s, &mut at, mw, buf + AT + 128),
        syndrome::ACK
    );
    assert!(s.n.g.read(buf + AT + 128, 64) == pattern(64, u64::from(s.rq_psn)));
    // One byte past the window: a remote access error, nothing written.
    let (mut s2, mw2, buf2) = bound_window(MW_TYPE_2, AT, LEN, ACCESS_REMOTE_READ);
    let mut at2 = s2.rq_psn;
    assert!(
        remote_access_nak(remote_write(&mut s2, &mut at2, mw2, buf2 + AT)),
        "a read-only window written"
    );
    assert!(s2.n.g.read(buf2 + AT, 64).iter().all(|&b| b == 0));
    let (mut s3, mw3, buf3) = bound_window(MW_TYPE_2, AT, LEN, rights);
    let mut at3 = s3.rq_psn;
    let past = buf3 + AT + LEN - 32;
    assert!(
        remote_access_nak(remote_write(&mut s3, &mut at3, mw3, past)),
        "beyond the window"
    );
    assert!(s3.n.g.read(past, 32).iter().all(|&b| b == 0));
}

/// A bind to try: the MR's key, address, length and rights, made on the node.
type BindCase = fn(&mut Scripted) -> (u32, u64, u64, u32);

#[test]
fn binds_beyond_the_mr_or_its_rights_are_refused() {
    let cases: [(&str, BindCase); 5] = [
        ("beyond the MR", |s| {
            (s.n.key, s.n.buf + MIB as u64 - 16, 64, ACCESS_REMOTE_READ)
        }),
        ("local rights", |s| {
            (s.n.key, s.n.buf, 64, ACCESS_LOCAL_WRITE)
        }),
        ("MR without MW_BIND", |s| {
            let key = s.n.mr(s.n.buf, 4096, ACCESS_LOCAL_WRITE, PD);
            (key, s.n.buf, 64, ACCESS_REMOTE_READ)
        }),
        ("remote write on an MR without local write", |s| {
            let key =
                s.n.mr(s.n.buf, 4096, ACCESS_MW_BIND | ACCESS_REMOTE_READ, PD);
            (key, s.n.buf, 64, ACCESS_REMOTE_WRITE)
        }),
        ("an MR of another PD", |s| {
            let key = s.n.mr(s.n.buf, 4096, ACCESS_VALID_MASK, PD + 1);
            (key, s.n.buf, 64, ACCESS_REMOTE_READ)
        }),
    ];
    for (what, case) in cases {
        let mut s = Scripted::new(MIB, Conn::default());
        let mw = next_key(create_mw(&mut s.n.g, MW_TYPE_2));
        let (mr, addr, len, access) = case(&mut s);
        assert_eq!(
            bind(&mut s, mw, mr, addr, len, access),
            WcStatus::MwBindErr,
            "{what}"
        );
    }
    // A type 2 window is bound once, until invalidated.
    let (mut s2, mw2, buf2) = bound_window(MW_TYPE_2, 0, 64, ACCESS_REMOTE_READ);
    let mr2 = s2.n.key;
    assert_eq!(
        bind(&mut s2, next_key(mw2), mr2, buf2, 64, ACCESS_REMOTE_READ),
        WcStatus::MwBindErr,
        "a bound type 2 window bound again"
    );
}

#[test]
fn a_type_2_window_serves_the_qp_it_is_bound_to_only() {
    let mut s = Scripted::new(MIB, Conn::default());
    let (mr, buf) = (s.n.key, s.n.buf);
    let mw = next_key(create_mw(&mut s.n.g, MW_TYPE_2));
    // A second QP to the same peer; the window is bound on the first.
    let other = Qp::create(&mut s.n, QpType::Rc);
    let (gid, mac, peer_qpn) = (s.peer_gid, s.peer_mac, s.peer_qpn + 1);
    other.connect_to(&mut s.n, gid, mac, peer_qpn, 100, 200, Conn::default());
    assert_eq!(
        bind(&mut s, mw, mr, buf + AT, LEN, ACCESS_REMOTE_WRITE),
        WcStatus::Success
    );
    let mut b = Headers::new(op::RC_WRITE_ONLY, other.qpn, 200);
    b.bth.ack_req = true;
    b.reth = Some(Reth {
        va: buf + AT,
        rkey: mw,
        len: 64,
    });
    s.inject(&b, &pattern(64, 9));
    let sent = s.sent();
    let syn = sent
        .last()
        .and_then(|p| p.aeth)
        .expect("an answer")
        .syndrome;
    assert!(
        remote_access_nak(syn),
        "another QP used a type 2 window: {syn:#x}"
    );
    assert!(s.n.g.read(buf + AT, 64).iter().all(|&b| b == 0));
    // Its own QP still may.
    let mut at = s.rq_psn;
    assert_eq!(remote_write(&mut s, &mut at, mw, buf + AT), syndrome::ACK);
}

#[test]
fn invalidated_windows_grant_nothing() {
    // Local invalidation.
    let (mut s, mw, buf) = bound_window(MW_TYPE_2, AT, LEN, ACCESS_REMOTE_WRITE);
    s.qp.post(&mut s.n, 78, WR_LOCAL_INV, 0, 0, &[], mw);
    s.run(4);
    assert_eq!(statuses(&s.cqes), [(78, WcStatus::Success)]);
    let mut at = s.rq_psn;
    assert!(
        remote_access_nak(remote_write(&mut s, &mut at, mw, buf + AT)),
        "used after LOCAL_INV"
    );
    // Remote invalidation: a SEND with invalidate of the window's key.
    let (mut s, mw, buf) = bound_window(MW_TYPE_2, AT, LEN, ACCESS_REMOTE_WRITE);
    s.qp.post_recv(&mut s.n, 5, buf + 0x10000, 64);
    let mut at = s.rq_psn;
    let mut b = Headers::new(op::RC_SEND_ONLY_INV, s.qp.qpn, at);
    b.bth.ack_req = true;
    b.ieth = Some(mw);
    s.inject(&b, &pattern(16, 1));
    at = psn::add(at, 1);
    let recv = s.cqes.pop().expect("the SEND's receive");
    assert_eq!(
        (
            recv.wc_status(),
            recv.flags & CQE_FLAG_WITH_INV,
            recv.imm_or_inv
        ),
        (WcStatus::Success, CQE_FLAG_WITH_INV, mw)
    );
    assert!(
        remote_access_nak(remote_write(&mut s, &mut at, mw, buf + AT)),
        "used after remote invalidation"
    );
    // A type 1 window cannot be invalidated: the LOCAL_INV fails.
    let (mut s, mw, _) = bound_window(MW_TYPE_1, 0, 64, ACCESS_REMOTE_READ);
    s.qp.post(&mut s.n, 79, WR_LOCAL_INV, 0, 0, &[], mw);
    s.run(4);
    assert_eq!(statuses(&s.cqes), [(79, WcStatus::LocProtErr)]);
}

#[test]
fn a_type_1_window_rebinds_with_a_new_key_and_unbinds() {
    let (mut s, first, buf) = bound_window(MW_TYPE_1, AT, LEN, ACCESS_REMOTE_WRITE);
    let mr = s.n.key;
    let mut at = s.rq_psn;
    assert_eq!(
        remote_write(&mut s, &mut at, first, buf + AT),
        syndrome::ACK
    );
    let second = next_key(first);
    assert_eq!(
        bind(&mut s, second, mr, buf + AT, LEN, ACCESS_REMOTE_WRITE),
        WcStatus::Success
    );
    assert_eq!(
        remote_write(&mut s, &mut at, second, buf + AT),
        syndrome::ACK
    );
    // Unbound by a bind of length 0: its key grants nothing.
    let third = next_key(second);
    assert_eq!(bind(&mut s, third, mr, 0, 0, 0), WcStatus::Success);
    assert!(
        remote_access_nak(remote_write(&mut s, &mut at, third, buf + AT)),
        "an unbound window"
    );
    // The key before the rebind is stale: a fresh QP sees it refused.
    let (mut s2, old, buf2) = bound_window(MW_TYPE_1, 0, LEN, ACCESS_REMOTE_WRITE);
    let mr2 = s2.n.key;
    assert_eq!(
        bind(&mut s2, next_key(old), mr2, buf2, LEN, ACCESS_REMOTE_WRITE),
        WcStatus::Success
    );
    let mut at2 = s2.rq_psn;
    assert!(
        remote_access_nak(remote_write(&mut s2, &mut at2, old, buf2)),
        "the key before the rebind"
    );
}

#[test]
fn an_mr_with_windows_bound_cannot_be_destroyed_and_a_window_is_no_local_key() {
    let mut s = Scripted::new(MIB, Conn::default());
    let buf = s.n.buf;
    let mr = s.n.mr(buf, 65536, ACCESS_VALID_MASK, PD);
    let mw = next_key(create_mw(&mut s.n.g, MW_TYPE_1));
    assert_eq!(
        bind(&mut s, mw, mr, buf, 4096, ACCESS_REMOTE_READ),
        WcStatus::Success
    );
    let c = s.n.g.cmd(&DestroyMrCmd { key: mr, rsvd: 0 });
    assert_eq!(c.status, STATUS_BUSY, "an MR with a window bound destroyed");
    assert_eq!(
        s.n.g.cmd(&DestroyMrCmd { key: mw, rsvd: 0 }).status,
        STATUS_BAD_RESOURCE
    );
    // A window as the lkey of a WRITE: a local protection error.
    let mut s2 = Scripted::new(MIB, Conn::default());
    let buf2 = s2.n.buf;
    let mw2 = next_key(create_mw(&mut s2.n.g, MW_TYPE_1));
    let mr2 = s2.n.key;
    assert_eq!(
        bind(&mut s2, mw2, mr2, buf2, 4096, ACCESS_REMOTE_READ),
        WcStatus::Success
    );
    let sge = Sge {
        addr: buf2,
        length: 64,
        lkey: mw2,
    };
    let ctrl = WqeCtrl {
        wr_id: 81,
        opcode: WR_RDMA_WRITE,
        flags: WQE_FLAG_SIGNALED,
        num_sge: 1,
        ..WqeCtrl::default()
    };
    s2.qp
        .put(&s2.n, ctrl, &rdma_seg(0x1000, 0x99), &sge.encode());
    s2.qp.ring(&mut s2.n);
    s2.run(4);
    assert_eq!(statuses(&s2.cqes), [(81, WcStatus::LocProtErr)]);
    // Freed, the window's MR may go.
    s.n.g.ok(&DestroyMwCmd { key: mw, rsvd: 0 });
    s.n.g.ok(&DestroyMrCmd { key: mr, rsvd: 0 });
}

/// Issue 36, defect 7: a duplicate READ was replayed from its own RETH, checked for rights and
/// bounds only, so that a peer of QP B read through a type 2 window bound to QP A by sending
/// a "duplicate" of an innocent READ with the window's key. A duplicate is answered only inside
/// the original READ's range and key.
#[test]
fn a_duplicate_read_reaches_only_what_the_original_asked_for() {
    let mut s = Scripted::new(MIB, Conn::default());
    let (mr, buf) = (s.n.key, s.n.buf);
    let secret = s.n.fill(buf + AT, LEN as usize, 0x5ec);
    let mw = next_key(create_mw(&mut s.n.g, MW_TYPE_2));
    let other = Qp::create(&mut s.n, QpType::Rc);
    let (gid, mac, peer_qpn) = (s.peer_gid, s.peer_mac, s.peer_qpn + 1);
    other.connect_to(&mut s.n, gid, mac, peer_qpn, 100, 200, Conn::default());
    assert_eq!(
        bind(&mut s, mw, mr, buf + AT, LEN, ACCESS_REMOTE_READ),
        WcStatus::Success
    );
    let read = |va, rkey| {
        let mut b = Headers::new(op::RC_READ_REQUEST, other.qpn, 200);
        b.bth.ack_req = true;
        b.reth = Some(Reth { va, rkey, len: 64 });
        b
    };
    // The original: 64 bytes of the MR, far from the window, on QP B.
    s.inject(&read(buf, mr), &[]);
    let answered = s.sent();
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].payload, s.n.g.read(buf, 64));
    let drops = s.n.counter(COUNTER_DROPS);
    // Its "duplicate" names the window bound to QP A, then another range of the MR.
    for (va, rkey) in [(buf + AT, mw), (buf + AT, mr)] {
        s.inject(&read(va, rkey), &[]);
        let replayed = s.sent();
        assert!(
            replayed.iter().all(|p| p.payload != secret[..64]),
            "a duplicate READ through {rkey:#x} at {va:#x} was answered with what it may not read"
        );
        assert!(replayed.is_empty(), "answered: {replayed:?}");
    }
    assert_eq!(s.n.counter(COUNTER_DROPS) - drops, 2);
    // The true duplicate is answered again.
    s.inject(&read(buf, mr), &[]);
    let again = s.sent();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].payload, s.n.g.read(buf, 64));
}
