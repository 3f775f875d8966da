// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Multicast in the device: ATTACH_MCAST / DETACH_MCAST and their refusals, a datagram to a
//! group reaching every attached UD QP (on the wire and on the sending port) and no other, and
//! what is dropped: a group's datagram to another QPN, a group no QP is attached to, a QP
//! detached or destroyed.

mod common;

use common::objects::{attach, GROUP_IP, GROUP_MAC};
use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;

const QKEY: u32 = 0x0123_4567;
fn detach(n: &mut Node, qpn: u32, mgid: [u8; 16]) -> u8 {
    n.g.cmd(&DetachMcastCmd {
        qpn,
        mgid,
        ..DetachMcastCmd::default()
    })
    .status
}

fn ud_qp(n: &mut Node) -> Qp {
    let qp = Qp::create(n, QpType::Ud);
    qp.activate_ud(n, QKEY);
    qp
}

/// Sends 100 bytes from `a`'s `qp` to the group with destination QPN `dest_qpn`.
fn send_to_group(a: &mut Node, qp: &mut Qp, wr_id: u64, dest_qpn: u32) {
    let av = UdAvSeg {
        dgid: mapped(GROUP_IP),
        dmac: GROUP_MAC,
        ..av_to(a, 3, dest_qpn, QKEY)
    };
    let src = a.buf;
    a.fill(src, 100, wr_id);
    qp.post_av(a, wr_id, WR_SEND, src, 100, &av, 0, 0);
}

fn pump(a: &mut Node, b: &mut Node) {
    for _ in 0..6 {
        a.g.dev.process();
        b.g.dev.process();
    }
}

/// The receive CQEs of `n`, as (QPN, wr_id), in QPN order.
fn received(n: &mut Node) -> Vec<(u32, u64)> {
    let mut got: Vec<(u32, u64)> =
        n.cq.poll(&n.g)
            .into_iter()
            .filter(|c| c.opcode == CQE_OP_RECV)
            .inspect(|c| assert_eq!((c.wc_status(), c.byte_len), (WcStatus::Success, 140)))
            .map(|c| (c.qpn, c.wr_id))
            .collect();
    got.sort();
    got
}

#[test]
fn attach_refuses_what_is_no_ud_qp_or_no_group() {
    let (pa, _pb) = ferroce_nic::engine::wire::back_to_back();
    let mut n = Node::new(1, MIB, pa);
    let ud = ud_qp(&mut n);
    let rc = Qp::create(&mut n, QpType::Rc);
    let group = mapped(GROUP_IP);
    assert_eq!(attach(&mut n.g, ud.qpn, group), STATUS_OK);
    // Attaching again is no change; detaching twice is refused.
    assert_eq!(attach(&mut n.g, ud.qpn, group), STATUS_OK);
    assert_eq!(detach(&mut n, ud.qpn, group), STATUS_OK);
    assert_eq!(detach(&mut n, ud.qpn, group), STATUS_BAD_RESOURCE);
    assert_eq!(attach(&mut n.g, rc.qpn, group), STATUS_BAD_PARAM);
    assert_eq!(attach(&mut n.g, 999, group), STATUS_BAD_RESOURCE);
    // Unicast GIDs: the node's own, and IPv4-mapped 10.0.0.9.
    let own = n.gid(3);
    assert_eq!(attach(&mut n.g, ud.qpn, own), STATUS_BAD_PARAM);
    assert_eq!(
        attach(&mut n.g, ud.qpn, mapped([10, 0, 0, 9])),
        STATUS_BAD_PARAM
    );
    // An IPv6 multicast GID (RoCE v1 groups) is a group.
    let mut v6 = [0u8; 16];
    v6[..2].copy_from_slice(&[0xff, 0x0e]);
    assert_eq!(attach(&mut n.g, ud.qpn, v6), STATUS_OK);
    let c = n.g.cmd(&AttachMcastCmd {
        qpn: ud.qpn,
        rsvd: 1,
        mgid: group,
    });
    assert_eq!((c.status, c.syndrome), (STATUS_BAD_PARAM, 5));
    // Groups and attachments are bounded.
    let mut last = STATUS_OK;
    for i in 0..=MAX_MCAST_GROUPS {
        last = attach(&mut n.g, ud.qpn, mapped([239, 2, (i >> 8) as u8, i as u8]));
    }
    assert_eq!(last, STATUS_NO_RESOURCES);
}

#[test]
fn a_groups_datagram_reaches_every_attached_qp_and_no_other() {
    let (pa, pb) = ferroce_nic::engine::wire::back_to_back();
    let mut a = Node::new(1, MIB, pa);
    let mut b = Node::new(2, MIB, pb);
    let group = mapped(GROUP_IP);
    let mut sender = ud_qp(&mut a);
    let mut local = ud_qp(&mut a);
    let mut b1 = ud_qp(&mut b);
    let mut b2 = ud_qp(&mut b);
    let mut other = ud_qp(&mut b);
    assert_eq!(attach(&mut a.g, local.qpn, group), STATUS_OK);
    for qpn in [b1.qpn, b2.qpn] {
        assert_eq!(attach(&mut b.g, qpn, group), STATUS_OK);
    }
    let (abuf, bbuf) = (a.buf, b.buf);
    for i in 0..4 {
        let at = |base: u64| base + 4096 * (i + 1);
        local.post_recv(&mut a, 10 + i, at(abuf), 256);
        b1.post_recv(&mut b, 20 + i, at(bbuf), 256);
        b2.post_recv(&mut b, 30 + i, at(bbuf + 0x40000), 256);
        other.post_recv(&mut b, 40 + i, at(bbuf + 0x80000), 256);
    }

    send_to_group(&mut a, &mut sender, 1, MCAST_QPN);
    pump(&mut a, &mut b);
    // Both of b's attached QPs, and a's own attached QP (the sending port hears its group).
    assert_eq!(received(&mut b), [(b1.qpn, 20), (b2.qpn, 30)]);
    assert_eq!(received(&mut a), [(local.qpn, 10)]);
    let payload = a.g.read(a.buf, 100);
    assert!(b.g.read(b.buf + 4096 + 40, 100) == payload);
    assert!(b.g.read(b.buf + 0x40000 + 4096 + 40, 100) == payload);

    // Detached, a QP gets nothing more.
    assert_eq!(detach(&mut b, b2.qpn, group), STATUS_OK);
    send_to_group(&mut a, &mut sender, 2, MCAST_QPN);
    pump(&mut a, &mut b);
    assert_eq!(received(&mut b), [(b1.qpn, 21)]);
    assert_eq!(received(&mut a), [(local.qpn, 11)]);

    // A group's datagram must name QPN 0xffffff: one naming an attached QP is dropped.
    let drops = b.counter(COUNTER_DROPS);
    send_to_group(&mut a, &mut sender, 3, b1.qpn);
    pump(&mut a, &mut b);
    assert_eq!(received(&mut b), []);
    assert_eq!(b.counter(COUNTER_DROPS), drops + 1);

    // A destroyed QP leaves its groups; a group without QPs takes nothing.
    b.g.ok(&DestroyQpCmd {
        qpn: b1.qpn,
        ..DestroyQpCmd::default()
    });
    assert_eq!(detach(&mut b, b1.qpn, group), STATUS_BAD_RESOURCE);
    send_to_group(&mut a, &mut sender, 4, MCAST_QPN);
    pump(&mut a, &mut b);
    assert_eq!(received(&mut b), []);
    assert_eq!(b.counter(COUNTER_DROPS), drops + 2);
    assert_eq!(received(&mut a), [(local.qpn, 12)]);
}
