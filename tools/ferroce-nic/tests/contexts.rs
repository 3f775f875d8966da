// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! User contexts and memory registration in the device model, driven through BAR0 and DMA by the
//! test guest: QID translation, what a freed context leaves, fast registration.

mod common;

use common::*;
use ferroce_hw::*;
use ferroce_nic::engine::EngineHost;

#[test]
fn qid_translation_confines_user_contexts() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 6);
    let mut qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    qp.connect(&mut g);
    let ctx = g.ok(&AllocCtxCmd::default()).ctx as usize;
    g.ok(&MapQidCmd {
        ctx: ctx as u32,
        local_qid: 9,
        global: qp.qpn,
        kind: QID_KIND_QP,
        ..MapQidCmd::default()
    });
    let ctrl = WqeCtrl {
        wr_id: 1,
        opcode: WR_SEND,
        ..WqeCtrl::default()
    };
    qp.put_send(&g, ctrl, &[0; 40], &[]);
    qp.ring_sq(&mut g, ctx, 9);
    assert_eq!(
        g.log.lock().expect("log").sends.len(),
        1,
        "local QID 9 of the context reaches the QP"
    );
    // The QP's global number means nothing on the user page; another context reaches nothing.
    let bad = g.counters.get(COUNTER_BAD_DOORBELLS);
    qp.put_send(&g, ctrl, &[0; 40], &[]);
    qp.ring_sq(&mut g, ctx, qp.qpn as u16);
    qp.ring_sq(&mut g, ctx + 1, 9);
    assert_eq!(g.counters.get(COUNTER_BAD_DOORBELLS) - bad, 2);
    let events = g.poll_eq(EQN_ASYNC);
    assert!(events
        .iter()
        .all(|e| EventType::try_from(e.event_type) == Ok(EventType::DoorbellError)));
    assert_eq!(events.len(), 2);
    // A CQ arm through a QP mapping is refused (kind mismatch).
    g.w32(
        db_page_offset(ctx) + DB_CQ_ARM,
        CqArmDoorbell {
            qid: 9,
            solicited: false,
        }
        .encode(),
    );
    assert_eq!(g.counters.get(COUNTER_BAD_DOORBELLS) - bad, 3);
    // Destroying the QP removes its mapping, so a reused QPN is unreachable from the context.
    assert_eq!(
        GuestQp::modify(&mut g, qp.qpn, QpState::Reset, 0).status,
        STATUS_OK
    );
    g.ok(&DestroyQpCmd {
        qpn: qp.qpn,
        rsvd: 0,
    });
    assert!(g
        .dev
        .core
        .objects()
        .translate_qid(ctx, 9, QID_KIND_QP)
        .is_none());
    g.ok(&FreeCtxCmd {
        ctx: ctx as u32,
        rsvd: 0,
    });
    assert_eq!(
        g.cmd(&FreeCtxCmd { ctx: 0, rsvd: 0 }).status,
        STATUS_BAD_PARAM
    );
}

/// A context number (doorbell page) handed to a new process carries nothing of the old one: no
/// push window bytes, no QID mappings, no doorbell errors still waiting to be reported.
#[test]
fn freed_context_leaves_nothing_to_the_next_tenant() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 6);
    let mut qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    qp.connect(&mut g);
    let ctx = g.ok(&AllocCtxCmd::default()).ctx;
    for local_qid in [3u32, 9] {
        g.ok(&MapQidCmd {
            ctx,
            local_qid,
            global: qp.qpn,
            kind: QID_KIND_QP,
            ..MapQidCmd::default()
        });
    }
    let page = db_page_offset(ctx as usize);
    // The old tenant pushes a WQE through its window...
    let ctrl = WqeCtrl {
        wr_id: 0x01d,
        opcode: WR_SEND,
        flags: WQE_FLAG_INLINE,
        inline_len: 8,
        ..WqeCtrl::default()
    };
    let wqe = qp.put_send(&g, ctrl, &[0; 40], b"secret!!");
    for (i, chunk) in wqe[..128].chunks(8).enumerate() {
        g.dev
            .bar0_write((page + PUSH_WINDOW_OFFSET + i * 8) as u64, chunk);
    }
    // ...and rings a doorbell the device rejects, whose report is still waiting when the
    // context is freed (FREE_CTX executed straight away, not after a `process` round).
    g.w32(page + DB_SQ, Doorbell { qid: 200, index: 1 }.encode());
    let free = CmdHeader {
        opcode: CMD_FREE_CTX,
        ..CmdHeader::default()
    };
    g.dev
        .execute(&free, &FreeCtxCmd { ctx, rsvd: 0 }.to_payload())
        .expect("FREE_CTX");
    let alloc = CmdHeader {
        opcode: CMD_ALLOC_CTX,
        ..CmdHeader::default()
    };
    let again = g
        .dev
        .execute(&alloc, &AllocCtxCmd::default().to_payload())
        .expect("ALLOC_CTX");
    assert_eq!(
        again[0], ctx,
        "the next process gets the same context number"
    );

    let window = g
        .dev
        .core
        .doorbells()
        .push_window(ctx as usize)
        .expect("window");
    assert!(
        window.iter().all(|&b| b == 0),
        "the old tenant's pushed WQE is still in the push window: {:02x?}",
        &window[..32]
    );
    for local_qid in [3u16, 9] {
        assert_eq!(
            g.dev
                .core
                .objects()
                .translate_qid(ctx as usize, local_qid, QID_KIND_QP),
            None,
            "local QID {local_qid} still mapped"
        );
    }
    // The old local QIDs reach nothing: a send and a push doorbell are both rejected, and no WQE
    // is fetched or pushed.
    let (bad, fetches, pushes) = (
        g.counters.get(COUNTER_BAD_DOORBELLS),
        g.counters.get(COUNTER_WQE_FETCHES),
        g.counters.get(COUNTER_WQE_PUSHES),
    );
    let sends = g.log.lock().expect("log").sends.len();
    let (sq, push) = (
        Doorbell {
            qid: 9,
            index: qp.sq_pi,
        }
        .encode(),
        Doorbell {
            qid: 3,
            index: qp.sq_pi,
        }
        .encode(),
    );
    g.w32(page + DB_SQ, sq);
    g.w32(page + DB_PUSH, push);
    g.run();
    assert_eq!(g.counters.get(COUNTER_BAD_DOORBELLS) - bad, 2);
    assert_eq!(g.counters.get(COUNTER_WQE_FETCHES), fetches, "WQE fetched");
    assert_eq!(g.counters.get(COUNTER_WQE_PUSHES), pushes, "WQE pushed");
    assert_eq!(g.log.lock().expect("log").sends.len(), sends);
    // Only the new tenant's two doorbell errors are reported, not the old one's.
    let reported: Vec<(u32, u32)> = g
        .poll_eq(EQN_ASYNC)
        .iter()
        .filter(|e| EventType::try_from(e.event_type) == Ok(EventType::DoorbellError))
        .map(|e| (e.data0, e.data1))
        .collect();
    assert_eq!(reported, vec![(ctx, sq), (ctx, push)]);
}

#[test]
fn fast_registration_and_invalidation() {
    let mut g = Guest::new();
    g.bring_up();
    let fast = g
        .ok(&CreateMrCmd {
            pd: 1,
            flags: MR_FLAG_FAST_REG,
            max_pages: 4,
            ..CreateMrCmd::default()
        })
        .key;
    let mut byte = [0u8; 1];
    assert!(
        g.dev.core.read_payload(1, fast, 0, &mut byte, 0).is_err(),
        "invalid until registered"
    );
    let pbl = g.alloc(16, 8);
    let (page_a, page_b) = (g.alloc(4096, 4096), g.alloc(4096, 4096));
    g.write(pbl, &[page_a.to_le_bytes(), page_b.to_le_bytes()].concat());
    g.write(page_b + 0x10, &[0x77]);
    let new_key = mr_key(mr_key_index(fast), 0x33);
    let seg = RegMrSeg {
        iova: 0x9000_0000,
        length: 8192,
        pbl_addr: pbl,
        key: new_key,
        access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ,
        page_count: 2,
        log_page_size: 12,
        ..RegMrSeg::default()
    };
    assert!(g.dev.core.fast_register(2, &seg).is_err(), "PD mismatch");
    assert!(
        g.dev
            .core
            .fast_register(
                1,
                &RegMrSeg {
                    page_count: 5,
                    ..seg
                }
            )
            .is_err(),
        "beyond max_pages"
    );
    g.dev.core.fast_register(1, &seg).expect("register");
    g.dev
        .core
        .read_payload(1, new_key, 0x9000_1010, &mut byte, ACCESS_REMOTE_READ)
        .expect("read");
    assert_eq!(byte, [0x77]);
    assert!(
        g.dev
            .core
            .read_payload(1, fast, 0x9000_1010, &mut byte, 0)
            .is_err(),
        "the old key is gone"
    );
    g.dev.core.invalidate(1, 0, new_key).expect("invalidate");
    assert!(g
        .dev
        .core
        .read_payload(1, new_key, 0x9000_1010, &mut byte, 0)
        .is_err());
    // The MR goes by its index whatever variant the driver still knows (a REG_MR that was
    // flushed leaves the device a variant behind); a second destroy finds nothing.
    let stale = mr_key(mr_key_index(new_key), (new_key as u8).wrapping_add(1));
    g.ok(&DestroyMrCmd {
        key: stale,
        rsvd: 0,
    });
    assert_eq!(
        g.cmd(&DestroyMrCmd {
            key: new_key,
            rsvd: 0
        })
        .status,
        STATUS_BAD_RESOURCE
    );
}

/// A REG_MR work request gets the access rules of CREATE_MR: only defined access bits, and
/// remote write or atomic only together with local write. A refused one leaves the MR as it was.
#[test]
fn fast_registration_follows_the_create_mr_access_rules() {
    let mut g = Guest::new();
    g.bring_up();
    // CREATE_MR refuses these (the rules REG_MR must follow).
    for access in [
        ACCESS_REMOTE_WRITE,
        ACCESS_REMOTE_ATOMIC,
        ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE,
        ACCESS_VALID_MASK + 1,
    ] {
        let c = g.cmd(&CreateMrCmd {
            pd: 1,
            access,
            flags: MR_FLAG_FAST_REG,
            max_pages: 4,
            ..CreateMrCmd::default()
        });
        assert_eq!(c.status, STATUS_BAD_PARAM, "CREATE_MR access {access:#x}");
    }
    let fast = g
        .ok(&CreateMrCmd {
            pd: 1,
            flags: MR_FLAG_FAST_REG,
            max_pages: 4,
            ..CreateMrCmd::default()
        })
        .key;
    let pbl = g.alloc(16, 8);
    let page = g.alloc(4096, 4096);
    g.write(pbl, &page.to_le_bytes());
    let new_key = mr_key(mr_key_index(fast), 0x44);
    let seg = RegMrSeg {
        iova: 0x7000_0000,
        length: 4096,
        pbl_addr: pbl,
        key: new_key,
        access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE,
        page_count: 1,
        log_page_size: 12,
        ..RegMrSeg::default()
    };
    let mut byte = [0u8; 1];
    for access in [
        ACCESS_REMOTE_WRITE,
        ACCESS_REMOTE_ATOMIC,
        ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC,
        ACCESS_VALID_MASK + 1,
        1 << 31,
    ] {
        assert!(
            g.dev
                .core
                .fast_register(1, &RegMrSeg { access, ..seg })
                .is_err(),
            "REG_MR with access {access:#x} was accepted"
        );
        let mr = g
            .dev
            .core
            .objects()
            .mrs()
            .get(mr_key_index(fast))
            .expect("mr");
        assert_eq!(
            (mr.key, mr.access),
            (fast, 0),
            "a refused REG_MR changed the MR"
        );
        assert!(
            g.dev
                .core
                .read_payload(1, new_key, 0x7000_0000, &mut byte, 0)
                .is_err(),
            "a refused REG_MR made the MR valid"
        );
    }
    g.dev.core.fast_register(1, &seg).expect("register");
    g.dev
        .core
        .write_payload(1, new_key, 0x7000_0010, &[0x5a], ACCESS_REMOTE_WRITE)
        .expect("remote write into a local-write MR");
    assert_eq!(g.read(page + 0x10, 1), [0x5a]);
}

/// A fast-registration MR of PD 1 that allows binds, registered (REG_MR) over one page at
/// `iova` with the key of `variant`: its key at creation and the registration.
fn registered_page(g: &mut Guest, iova: u64, variant: u8) -> (u32, RegMrSeg) {
    let fast = g
        .ok(&CreateMrCmd {
            pd: 1,
            flags: MR_FLAG_FAST_REG,
            max_pages: 4,
            access: ACCESS_LOCAL_WRITE | ACCESS_MW_BIND,
            ..CreateMrCmd::default()
        })
        .key;
    let page = g.alloc(4096, 4096);
    let pbl = g.alloc(8, 8);
    g.write(pbl, &page.to_le_bytes());
    let seg = RegMrSeg {
        iova,
        length: 4096,
        pbl_addr: pbl,
        key: mr_key(mr_key_index(fast), variant),
        access: ACCESS_LOCAL_WRITE | ACCESS_MW_BIND,
        page_count: 1,
        log_page_size: 12,
        ..RegMrSeg::default()
    };
    g.dev.core.fast_register(1, &seg).expect("register");
    (fast, seg)
}

/// CREATE_MR with `key_variant`, a fast-register MR of one page in PD 1.
fn create_mr(g: &mut Guest, key_variant: u8) -> CmdCompletion {
    g.cmd(&CreateMrCmd {
        pd: 1,
        flags: MR_FLAG_FAST_REG,
        max_pages: 1,
        key_variant,
        ..CreateMrCmd::default()
    })
}

/// The key of a successful CREATE_MR.
fn created_key(completion: CmdCompletion) -> u32 {
    assert_eq!(status_name(completion.status), "ok");
    completion.reply::<CreateMrCmd>().expect("a key").key
}

/// Issue 36, defect 8: the driver remembered each slot's creation key only, while BIND_MW and
/// REG_MR change keys in the NIC, so that a slot could hand out the key a window had last: a
/// peer's stale rkey of the window then reached the new MR there. The NIC, which knows every
/// key, never gives a slot its last key again, also across a reset: it passes over a free slot
/// whose last key the driver's variant would make there.
#[test]
fn a_slot_never_hands_out_its_last_key_again() {
    let mut g = Guest::new();
    g.bring_up();
    let mw = g
        .ok(&CreateMwCmd {
            pd: 1,
            mw_type: MW_TYPE_1,
            key_variant: 0x10,
            ..CreateMwCmd::default()
        })
        .key;
    let (_, seg) = registered_page(&mut g, 0x5000_0000, 0x21);
    let registered = seg.key;
    // The window bound with a new key, 0x11: what a peer holds.
    let bound = mr_key(mr_key_index(mw), 0x11);
    let bind = BindMwSeg {
        addr: 0x5000_0000,
        length: 4096,
        mw_key: bound,
        mr_key: registered,
        access: ACCESS_REMOTE_READ,
        ..BindMwSeg::default()
    };
    g.dev.core.bind_mw(1, 0, &bind).expect("bind");
    g.ok(&DestroyMwCmd {
        key: bound,
        rsvd: 0,
    });
    // The window's slot is the lowest free one, but variant 0x11 would give it 0x11 again:
    // the MR goes to the next free slot. 0x10, the window's creation key, the slot may have.
    let elsewhere = created_key(create_mr(&mut g, 0x11));
    assert_ne!(elsewhere, bound, "a new MR got the key a window had last");
    assert_ne!(mr_key_index(elsewhere), mr_key_index(mw));
    let key = created_key(create_mr(&mut g, 0x10));
    assert_eq!(key, mr_key(mr_key_index(mw), 0x10));
    // Across a reset: the slot's key then was 0x10.
    g.reset();
    g.bring_up();
    let after_reset = created_key(create_mr(&mut g, 0x10));
    assert_ne!(mr_key_index(after_reset), mr_key_index(mw));
}

/// The NIC refuses a variant (`STATUS_STALE_KEY`, not "no resources") only when every free slot
/// had the key it makes there last; the driver then asks with another. Before, it refused
/// whenever the lowest free slot had, one creation in 256 with a driver's random variants:
/// `command_errors` and a "command CREATE_MR failed" line where nothing had gone wrong.
#[test]
fn a_variant_is_refused_only_when_every_free_slot_had_its_key() {
    // Slots 1 and 2 (slot 0 is never an MR's).
    let mut g = Guest::with_config(|c| c.max_mr = 3);
    g.bring_up();
    let first = created_key(create_mr(&mut g, 0x10));
    let second = created_key(create_mr(&mut g, 0x20));
    assert_eq!(status_name(create_mr(&mut g, 0x30).status), "no_resources");
    g.ok(&DestroyMrCmd {
        key: first,
        rsvd: 0,
    });
    assert_eq!(status_name(create_mr(&mut g, 0x10).status), "stale_key");
    g.ok(&DestroyMrCmd {
        key: second,
        rsvd: 0,
    });
    // Slot 2 had 0x20 last, not 0x10.
    let again = created_key(create_mr(&mut g, 0x10));
    assert_eq!(again, mr_key(mr_key_index(second), 0x10));
}

/// Issue 36, defect 8 (as IBA and rxe): a REG_MR registers a free (invalid) MR only, and an
/// MR windows are bound to is not invalidated.
#[test]
fn reg_mr_needs_a_free_mr_and_windows_keep_theirs_valid() {
    let mut g = Guest::new();
    g.bring_up();
    let (fast, seg) = registered_page(&mut g, 0x6000_0000, 0x31);
    let key = seg.key;
    let again = RegMrSeg {
        key: mr_key(mr_key_index(fast), 0x32),
        ..seg
    };
    assert!(
        g.dev.core.fast_register(1, &again).is_err(),
        "REG_MR over a valid MR"
    );
    let mw = g
        .ok(&CreateMwCmd {
            pd: 1,
            mw_type: MW_TYPE_1,
            key_variant: 0x40,
            ..CreateMwCmd::default()
        })
        .key;
    let bound = mr_key(mr_key_index(mw), 0x41);
    let bind = BindMwSeg {
        addr: 0x6000_0000,
        length: 4096,
        mw_key: bound,
        mr_key: key,
        access: ACCESS_REMOTE_READ,
        ..BindMwSeg::default()
    };
    g.dev.core.bind_mw(1, 0, &bind).expect("bind");
    assert!(
        g.dev.core.invalidate(1, 0, key).is_err(),
        "an MR with a window bound was invalidated"
    );
    let mut byte = [0u8; 1];
    g.dev
        .core
        .read_payload(1, bound, 0x6000_0000, &mut byte, ACCESS_REMOTE_READ)
        .expect("the window still reads");
    // Unbound (a type 1 window's bind of length 0), the MR is invalidated and registered anew.
    let unbind = BindMwSeg {
        length: 0,
        mw_key: mr_key(mr_key_index(mw), 0x42),
        ..bind
    };
    g.dev.core.bind_mw(1, 0, &unbind).expect("unbind");
    g.dev.core.invalidate(1, 0, key).expect("invalidate");
    g.dev.core.fast_register(1, &again).expect("register again");
}
