// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Two NICs through a relay the test controls, on the stable toolchain: node A's requester
//! driven by WQEs of every RC opcode, node B's responder by A's frames (delivered, lost,
//! duplicated, swapped, corrupted) and by frames the test forges either way, while device time
//! jumps. Nothing may complete twice, every WR of A must complete, no device may write outside
//! its MR and rings, and one device turn sends at most a budget of frames. The body is the
//! libFuzzer pair target's (`common::pair`, `make fuzz`); `PROPTEST_CASES=N` makes this run
//! longer.

mod common;

use common::fuzz::{Dest, Frame};
use common::pair::{
    self, decode, encode, pair_actions, Action, Duo, Post, Relay, Setup, REGISTERED,
};
use common::roce::{statuses, PD};
use common::seeds;
use ferroce_hw::*;
use proptest::prelude::*;

/// A post of POST_OPCODES[op] with `len` bytes between the starts of both MRs.
fn post(op: u8, len: u16) -> Action {
    Action::Post(Post {
        op,
        local: 0,
        len,
        remote: 0,
        rkey: None,
        operand: 0,
        fence: false,
    })
}

#[test]
fn through_a_faithful_relay_every_opcode_completes_and_the_data_arrives() {
    let mut actions = vec![
        Action::Recv {
            offset: 0x4000,
            len: 4096,
        },
        Action::Recv {
            offset: 0x5000,
            len: 4096,
        },
    ];
    // A SEND, a SEND with immediate and a WRITE (wr_ids 4, 5, 6).
    actions.extend([post(0, 3000), post(1, 100), post(3, 4096)]);
    let duo = pair_actions(Setup::default(), &actions);
    let ok = WcStatus::Success;
    assert_eq!(statuses(&duo.a.cqes), [(4, ok), (5, ok), (6, ok)]);
    assert_eq!(statuses(&duo.b.cqes), [(2, ok), (3, ok)]);
    let (a, b) = (&duo.a.n, &duo.b.n);
    assert_eq!(
        a.g.read(a.buf, 4096),
        b.g.read(b.buf, 4096),
        "the WRITE's bytes"
    );
    assert_eq!(
        a.g.read(a.buf, 3000),
        b.g.read(b.buf + 0x4000 * 4, 3000),
        "the SEND's bytes"
    );
}

#[test]
fn a_write_past_the_peers_mr_fails_and_writes_nothing() {
    // The remote offset is in units of 4 bytes: REGISTERED - 1 KiB, and 4 KiB from there.
    let remote = ((REGISTERED - 1024) / 4) as u16;
    let duo = pair_actions(
        Setup::default(),
        &[Action::Post(Post {
            op: 3,
            local: 0,
            len: 4096,
            remote,
            rkey: None,
            operand: 0,
            fence: false,
        })],
    );
    assert_eq!(statuses(&duo.a.cqes), [(2, WcStatus::RemAccessErr)]);
}

/// The check itself: a write the device makes through an MR the body did not list (one the
/// test registers over B's unregistered half) is caught.
#[test]
#[should_panic(expected = "B's device wrote 0x165000..0x165040, outside its MR")]
fn a_write_outside_the_listed_ranges_is_caught() {
    let mut duo = Duo::new(Setup::default());
    let b = &mut duo.b.n;
    let hidden = b.mr(
        b.buf + REGISTERED,
        4096,
        ACCESS_LOCAL_WRITE | common::fuzz::REMOTE_ACCESS,
        PD,
    );
    // The remote offset is in units of 4 bytes: the hidden MR's start.
    duo.act(&Action::Post(Post {
        op: 3,
        local: 0,
        len: 64,
        remote: (REGISTERED / 4) as u16,
        rkey: Some(hidden),
        operand: 0,
        fence: false,
    }));
    duo.act(&Action::Turns(4));
    duo.settle();
}

#[test]
fn the_seeds_run_clean() {
    for (name, setup, actions) in seeds::pair_seeds() {
        let duo = pair_actions(setup, &actions);
        eprintln!(
            "seed {name}: A {:?}, B {:?}",
            statuses(&duo.a.cqes),
            statuses(&duo.b.cqes)
        );
    }
}

fn relay() -> impl Strategy<Value = Relay> {
    prop_oneof![
        4 => Just(Relay::One),
        2 => Just(Relay::All),
        1 => Just(Relay::Drop),
        1 => Just(Relay::Duplicate),
        1 => Just(Relay::Swap),
        1 => (any::<u16>(), any::<u8>()).prop_map(|(at, value)| Relay::Corrupt { at, value }),
    ]
}

fn forged() -> impl Strategy<Value = Frame> {
    (
        prop_oneof![8 => 0x00u8..=0x14, 1 => any::<u8>()],
        -4i32..8,
        proptest::option::of((
            0u64..1 << 18,
            proptest::option::of(any::<u32>()),
            0u32..8192,
        )),
        proptest::option::of((any::<u8>(), any::<u32>())),
        proptest::option::of((0u64..1 << 18, any::<u64>(), any::<u64>())),
        proptest::collection::vec(any::<u8>(), 0..2048),
    )
        .prop_map(|(opcode, psn, reth, aeth, atomic, payload)| Frame {
            psn: Ok(psn),
            reth,
            aeth,
            atomic,
            payload,
            ..Frame::new(opcode, Dest::Rc)
        })
}

fn setup() -> impl Strategy<Value = Setup> {
    (any::<bool>(), any::<bool>()).prop_map(|(uc, long_timeout)| Setup { uc, long_timeout })
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (any::<u8>(), any::<u16>(), 0u16..4097, any::<u16>(), any::<u64>(), any::<bool>())
            .prop_map(|(op, local, len, remote, operand, fence)| Action::Post(Post {
                op,
                local,
                len,
                remote,
                rkey: None,
                operand,
                fence,
            })),
        2 => (any::<u16>(), 0u16..4097).prop_map(|(offset, len)| Action::Recv { offset, len }),
        6 => (any::<bool>(), relay()).prop_map(|(to_b, how)| Action::Relay { to_b, how }),
        1 => (any::<bool>(), forged()).prop_map(|(to_b, frame)| Action::Forge { to_b, frame }),
        3 => (1u8..8).prop_map(Action::Turns),
        1 => proptest::option::of(0u8..20).prop_map(Action::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_actions_keep_the_invariants(
        setup in setup(),
        actions in proptest::collection::vec(action(), 0..48),
    ) {
        pair_actions(setup, &actions);
    }

    #[test]
    fn actions_survive_their_encoding(
        setup in setup(),
        actions in proptest::collection::vec(action(), 0..16),
    ) {
        prop_assert_eq!(decode(&encode(setup, &actions)), (setup, actions));
    }
}

#[test]
fn raw_bytes_keep_the_invariants() {
    // Bytes the decoder must take whatever they are: every action kind with garbage operands.
    let data: Vec<u8> = (0..2048u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    pair::pair(&data);
}
