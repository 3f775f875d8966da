// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Lies about command completions (host control `lie cmd-number|cmd-status|cmd-unsolicited`):
//! what the device writes, told as often as armed and then the truth again. What the driver
//! makes of them is the driver-lies VM scenario's.

mod common;

use common::*;
use std::sync::atomic::Ordering;

use ferroce_hw::*;
use ferroce_nic::lies::{Lie, UNDEFINED_STATUS, UNSOLICITED_TOKEN};

fn guest() -> Guest {
    let mut g = Guest::new();
    g.bring_up();
    g
}

fn live_cqs(g: &Guest) -> usize {
    g.dev.core.objects().cqs().len()
}

#[test]
fn a_create_reply_names_another_live_object_of_its_kind() {
    let mut g = guest();
    let eqn = g.create_ceq(4, 2);
    g.host.lies.arm(Some(Lie::CmdNumber), 1);
    // No other CQ lives: nothing to lie about, and the lie stays armed.
    let first = GuestCq::create(&mut g, eqn, 4);
    assert_eq!(g.host.lies.told(), 0);
    let lied = GuestCq::create(&mut g, eqn, 4);
    assert_eq!(lied.cqn, first.cqn, "the reply names the CQ that lives");
    assert_eq!(live_cqs(&g), 2, "the new CQ was created all the same");
    assert_eq!(g.host.lies.told(), 1);
    let truth = GuestCq::create(&mut g, eqn, 4);
    assert!(
        truth.cqn != first.cqn && truth.cqn != lied.cqn,
        "told once: {} after {}",
        truth.cqn,
        first.cqn
    );
    // The same for QPs: the second QP's reply names the first.
    let qp = GuestQp::create(&mut g, QpType::Rc, first.cqn, first.cqn, NONE);
    g.host.lies.arm(Some(Lie::CmdNumber), 1);
    let (other, c) = GuestQp::try_create(&mut g, QpType::Rc, first.cqn, first.cqn, NONE, 0);
    assert_eq!((c.status, other.qpn), (STATUS_OK, qp.qpn));
    assert_eq!(g.dev.core.objects().qps().len(), 2);
}

#[test]
fn a_command_lied_about_is_not_executed() {
    let mut g = guest();
    let eqn = g.create_ceq(4, 2);
    g.host.lies.arm(Some(Lie::CmdStatus), 1);
    let (ring, dbrec) = (g.alloc(64 << 4, 4096), g.alloc(64, 64));
    let c = g.cmd(&CreateCqCmd {
        ring: BufDesc {
            addr: ring,
            ..BufDesc::default()
        },
        dbrec_addr: dbrec,
        eqn,
        log_size: 4,
        ..CreateCqCmd::default()
    });
    assert_eq!((c.status, c.results), (UNDEFINED_STATUS, [0; 3]));
    assert_eq!(
        status_name(c.status),
        "unknown",
        "a status the interface does not define"
    );
    assert_eq!(live_cqs(&g), 0, "the CQ was not created");
    GuestCq::create(&mut g, eqn, 4);
    assert_eq!((live_cqs(&g), g.host.lies.told()), (1, 1));
}

#[test]
fn an_unsolicited_completion_waits_in_the_next_slot() {
    let mut g = guest();
    g.host.lies.arm(Some(Lie::CmdUnsolicited), 1);
    g.ok(&NopCmd::default());
    // The next index's slot holds a completion of the right pass for a command never posted.
    let ring = Ring::new(g.cmd_log, MAX_LOG_CMDQ).expect("ring");
    let next = g.cmd_pi;
    let at = g.cmd_cq + u64::from(ring.slot(next)) * CmdCompletion::SIZE as u64;
    let unsolicited =
        CmdCompletion::read_from(&g.read(at, CmdCompletion::SIZE)).expect("a completion");
    assert!(ring.entry_valid(next, unsolicited.owner));
    assert_eq!(
        (unsolicited.token, unsolicited.index),
        (UNSOLICITED_TOKEN, next)
    );
    // The device stalls, so that the next command meets it; then that command gets its own
    // completion over it.
    assert!(
        g.host.stall.load(Ordering::Relaxed),
        "stalled after the lie"
    );
    g.host.stall.store(false, Ordering::Relaxed);
    let c = g.cmd(&NopCmd::default());
    assert_eq!((c.status, c.token), (STATUS_OK, g.token));
    assert_eq!(g.host.lies.told(), 1);
}
