// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! XRC on the wire (IBA 9.2, transport type 101): the engine knows the XRC opcodes and their
//! XRCETH. No QP of the device is XRC yet, so an XRC request reaches no QP: it is dropped as
//! meant for another QP type, and the QP it names is as it was.

mod common;

use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;
use ferroce_nic::engine::headers::PacketBuilder;
use ferroce_nic::engine::opcode::op;

#[test]
fn an_xrc_request_to_an_rc_qp_is_dropped_and_changes_nothing() {
    let mut s = Scripted::new(MIB, Conn::default());
    let dst = s.n.buf;
    s.qp.post_recv(&mut s.n, 5, dst, 64);
    let drops = s.n.counter(COUNTER_DROPS);
    let mut xrc = PacketBuilder::new(op::XRC_SEND_ONLY, s.qp.qpn, s.rq_psn);
    xrc.xrc_srqn = Some(1);
    xrc.bth.ack_req = true;
    s.inject(&xrc, b"xrc");
    assert!(
        s.cqes.is_empty(),
        "an XRC SEND took the receive: {:?}",
        statuses(&s.cqes)
    );
    assert!(s.sent().is_empty(), "an XRC SEND was answered");
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 1, "counted as a drop");
    // The QP still expects that PSN: an RC SEND there takes the receive.
    let mut rc = PacketBuilder::new(op::RC_SEND_ONLY, s.qp.qpn, s.rq_psn);
    rc.bth.ack_req = true;
    s.inject(&rc, b"rc");
    assert_eq!(
        s.cqes
            .iter()
            .map(|c| (c.wr_id, c.wc_status(), c.byte_len))
            .collect::<Vec<_>>(),
        [(5, WcStatus::Success, 2)]
    );
    assert_eq!(s.n.g.read(dst, 2), b"rc");
}
