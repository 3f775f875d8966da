// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The wire boundary under fuzzing, on the stable toolchain: random and half-valid RoCE frames
//! against a live node, an RC QP connected to a peer the test plays (receives posted, a WRITE,
//! a READ and an atomic outstanding, an MR the frames' keys may name) and a UD QP with
//! receives posted, so that responder and completer see them, not only the parsers. From the
//! peer's GID or another's; every header combination the builder makes, then bytes flipped.
//! The device must not panic or go fatal, and nothing may complete twice. The body is the
//! libFuzzer frame target's (`common::fuzz`, `make fuzz`); `PROPTEST_CASES=N` makes this run
//! longer.

mod common;

use common::fuzz::{self, busy, inject, Dest, Frame, POSTED_WR_IDS};
use common::roce::statuses;
use common::seeds;
use ferroce_hw::*;
use proptest::prelude::*;

fn opcode() -> impl Strategy<Value = u8> {
    prop_oneof![
        8 => 0x00u8..=0x14,  // RC: every request, response and ACK
        1 => 0x60u8..=0x65,  // UD
        1 => any::<u8>(),
    ]
}

/// A destination and an opcode: mostly the RC QP with RC opcodes, often the UD QP with UD ones.
fn dest_and_opcode() -> impl Strategy<Value = (Dest, u8)> {
    prop_oneof![
        6 => (
            prop_oneof![5 => Just(Dest::Rc), 1 => any::<u32>().prop_map(Dest::Qpn)],
            opcode(),
        ),
        2 => (Just(Dest::Ud), prop_oneof![4 => 0x64u8..=0x65, 1 => opcode()]),
        1 => (Just(Dest::Group), prop_oneof![4 => 0x64u8..=0x65, 1 => opcode()]),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    (
        (
            dest_and_opcode(),
            prop_oneof![6 => (-4i32..12).prop_map(Ok), 1 => any::<u32>().prop_map(Err)],
            proptest::option::of((
                prop_oneof![Just(0u64), 0u64..1 << 20, any::<u64>()],
                proptest::option::of(any::<u32>()),
                prop_oneof![0u32..4096, any::<u32>()],
            )),
            proptest::option::of((any::<u8>(), any::<u32>())),
            proptest::option::of((any::<u64>(), any::<u64>(), any::<u64>())),
        ),
        (
            proptest::option::of(any::<u64>()),
            prop_oneof![
                3 => Just(None),
                1 => (prop_oneof![Just(fuzz::UD_QKEY), any::<u32>()], any::<u32>()).prop_map(Some),
            ],
            proptest::option::of(any::<[u8; 4]>()),
            proptest::option::of(any::<u32>()),
            proptest::collection::vec(any::<u8>(), 0..1100),
            prop_oneof![9 => Just(false), 1 => Just(true)],
            proptest::collection::vec((0usize..200, any::<u8>()), 0..3),
        ),
    )
        .prop_map(
            |(
                ((dest, opcode), psn, reth, aeth, atomic),
                (atomic_ack, deth, imm, ieth, payload, stranger, flips),
            )| Frame {
                opcode,
                dest,
                psn,
                reth,
                aeth,
                atomic,
                atomic_ack,
                deth,
                imm,
                ieth,
                payload,
                stranger,
                flips,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn frames_against_a_live_connection(frames in proptest::collection::vec(frame(), 1..24)) {
        // The libFuzzer target decodes the same frames from bytes.
        prop_assert_eq!(&fuzz::decode_frames(&fuzz::encode_frames(&frames)), &frames);
        fuzz::frames(&frames);
    }
}

/// The seeds of the frame corpus reach what they are for: a SEND to each QP consumes a
/// receive, and the responses complete the WRITE, the READ and the atomic; WRITEs through the
/// window and into the on-demand MR (its pages faulted in) land and are acknowledged, the READ
/// of them is answered, and a SEND to the multicast group reaches the UD QP.
#[test]
fn the_frame_seeds_reach_responder_and_completer() {
    for (name, frames) in seeds::frame_seeds() {
        let mut live = busy();
        let _ = live.s.take_sent();
        for f in &frames {
            inject(&mut live, f);
        }
        live.s.run(8);
        let sent = live.s.take_sent();
        let got = statuses(&live.s.cqes);
        assert!(
            got.iter().all(|&(id, _)| POSTED_WR_IDS.contains(&id)),
            "{name}: {got:?}"
        );
        let success = |id| got.contains(&(id, WcStatus::Success));
        match name {
            "rc-send" => assert!(success(100), "{name}: {got:?}"),
            "ud-send" => assert!(success(200), "{name}: {got:?}"),
            "responses" => assert!(success(1) && success(2) && success(3), "{name}: {got:?}"),
            "nak" => assert_eq!(got.first(), Some(&(1, WcStatus::RemAccessErr)), "{name}"),
            "window-odp-group" => {
                let (buf, payload) = (live.s.n.buf, &frames[0].payload);
                assert_eq!(
                    &live.s.n.g.read(buf + fuzz::WINDOW_AT, 64),
                    payload,
                    "{name}"
                );
                assert_eq!(&live.s.n.g.read(buf + fuzz::ODP_AT, 64), payload, "{name}");
                // One RNR NAK: the on-demand MR's page was not present the first time.
                let naks: Vec<u8> = sent
                    .iter()
                    .filter_map(|p| p.aeth)
                    .map(|a| a.syndrome)
                    .filter(|&syndrome| syndrome & 0x60 != 0)
                    .collect();
                assert_eq!(naks.len(), 1, "{name}: NAKs {naks:x?}");
                assert_eq!(naks[0] & 0xe0, 0x20, "{name}: an RNR NAK");
                let read = sent
                    .iter()
                    .find(|p| p.bth.opcode == 0x10)
                    .map(|p| &p.payload);
                assert_eq!(read, Some(payload), "{name}: the READ response");
                assert!(success(200), "{name}: the group's SEND: {got:?}");
            }
            _ => {}
        }
    }
}
