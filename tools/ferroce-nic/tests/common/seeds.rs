// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Seed inputs of the fuzz targets' bodies ([`super::fuzz`], [`super::pair`]), by name: what the saved corpus
//! (`tools/fuzz/corpus/<target>/seed-*`) holds, and what the tests check they reach.

use ferroce_hw::*;

use super::fuzz::{
    Dest, Frame, ACT_OBJECT, ACT_PLAUSIBLE, ACT_SCRATCH_OUT, ACT_TABLE_OPCODE, ACT_UD,
};
use super::pair::{Action, Post, Relay, Setup, REGISTERED};
use super::roce::rdma_seg;
use ferroce_nic::engine::opcode;

/// Seed inputs of the frame body, by name: each reaches the responder or the completer.
pub fn frame_seeds() -> Vec<(&'static str, Vec<Frame>)> {
    let payload = |n: usize| (0..n).map(|i| i as u8).collect::<Vec<u8>>();
    let op = ferroce_nic::engine::opcode::op::RC_SEND_ONLY;
    let rc_send = Frame {
        payload: payload(100),
        ..Frame::new(op, Dest::Rc)
    };
    let ud_send = Frame {
        payload: payload(64),
        ..Frame::new(0x64, Dest::Ud)
    };
    let write = Frame {
        reth: Some((0x3_0000, None, 64)),
        payload: payload(64),
        ..Frame::new(0x0a, Dest::Rc)
    };
    let read = Frame {
        reth: Some((0x3_0000, None, 256)),
        ..Frame::new(0x0c, Dest::Rc)
    };
    let cmp_swap = Frame {
        atomic: Some((0x3_0100, 0, 7)),
        ..Frame::new(0x13, Dest::Rc)
    };
    // Responses to the WRITE (PSNs 0 and 1), the READ (2..=4) and the atomic (5).
    let ack = |psn: i32, syndrome: u8, msn: u32| Frame {
        psn: Ok(psn),
        aeth: Some((syndrome, msn)),
        ..Frame::new(0x11, Dest::Rc)
    };
    let read_response = |opcode: u8, psn: i32, len: usize, aeth: bool| Frame {
        psn: Ok(psn),
        aeth: aeth.then_some((0, 2)),
        payload: payload(len),
        ..Frame::new(opcode, Dest::Rc)
    };
    let atomic_ack = Frame {
        psn: Ok(5),
        aeth: Some((0, 3)),
        atomic_ack: Some(5),
        ..Frame::new(0x12, Dest::Rc)
    };
    let odp_write = Frame {
        psn: Ok(1),
        reth: Some((0x8_0000, Some(2), 64)),
        payload: payload(64),
        ..Frame::new(0x0a, Dest::Rc)
    };
    vec![
        ("rc-send", vec![rc_send.clone()]),
        ("ud-send", vec![ud_send.clone()]),
        ("rc-write-read-atomic", vec![write, read, cmp_swap]),
        (
            "responses",
            vec![
                ack(1, 0, 1),
                read_response(0x0d, 2, 1024, true),
                read_response(0x0e, 3, 1024, false),
                read_response(0x0f, 4, 952, true),
                atomic_ack,
            ],
        ),
        ("nak", vec![ack(0, 0x62, 0)]),
        (
            // Through the window (R_Key 1: its range starts at offset 0x4000) and into the
            // on-demand MR (2: its range starts at 0x8_0000), twice: the page faults in after
            // the first one's RNR NAK; a READ of it, and a UD SEND to the multicast group.
            "window-odp-group",
            vec![
                Frame {
                    reth: Some((0x4000, Some(1), 64)),
                    payload: payload(64),
                    ..Frame::new(0x0a, Dest::Rc)
                },
                odp_write.clone(),
                odp_write,
                Frame {
                    psn: Ok(2),
                    reth: Some((0x8_0000, Some(2), 64)),
                    ..Frame::new(0x0c, Dest::Rc)
                },
                Frame {
                    payload: payload(64),
                    ..Frame::new(0x64, Dest::Group)
                },
            ],
        ),
        (
            "strangers",
            vec![
                Frame {
                    stranger: true,
                    ..rc_send.clone()
                },
                Frame {
                    deth: Some((0x2222, 9)),
                    ..ud_send
                },
                Frame {
                    dest: Dest::Qpn(0xff_ffff),
                    ..rc_send.clone()
                },
                Frame {
                    psn: Err(0x12_3456),
                    flips: vec![(14, 0x60), (60, 0xff)],
                    ..rc_send
                },
            ],
        ),
    ]
}

/// Builds command-body inputs, as [`super::fuzz::commands`] decodes them.
#[derive(Default)]
pub struct Script(pub Vec<u8>);

impl Script {
    /// A command: `flags` of `ACT_*` for commands, `opcode` and `payload`.
    pub fn command(mut self, flags: u8, opcode: u16, payload: &[u8]) -> Self {
        let header = CmdHeader {
            opcode,
            token: 7,
            ..CmdHeader::default()
        };
        self.0.push(flags & !7);
        self.0.extend(encode_command(&header, payload));
        self
    }

    /// A doorbell: the selector byte and its operands, as raw bytes.
    pub fn doorbell(mut self, bytes: &[u8]) -> Self {
        self.0.push(2);
        self.0.extend(bytes);
        self
    }

    /// A send WQE of `wqe` with `ACT_UD` / `ACT_PLAUSIBLE` `flags`.
    pub fn send(mut self, flags: u8, wqe: &[u8]) -> Self {
        self.0.push(3 | (flags & !7));
        self.0.extend((wqe.len() as u16).to_le_bytes());
        self.0.extend(wqe);
        self
    }

    /// A receive WQE of `wqe` (zero-padded to 64 bytes) with `ACT_*` `flags`.
    pub fn recv(mut self, flags: u8, wqe: &[u8]) -> Self {
        self.0.push(5 | (flags & !7));
        let mut bytes = [0u8; 64];
        let n = wqe.len().min(64);
        bytes[..n].copy_from_slice(&wqe[..n]);
        self.0.extend(bytes);
        self
    }

    /// `rounds` (1..=8) device rounds.
    pub fn run(mut self, rounds: u8) -> Self {
        self.0.push(6 | (rounds.clamp(1, 8) - 1) << 3);
        self
    }
}

/// Seed inputs of the command body, by name.
pub fn command_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let ctrl = |wr_id, opcode, flags, num_sge| {
        let mut wqe = WqeCtrl {
            wr_id,
            opcode,
            flags,
            num_sge,
            ..WqeCtrl::default()
        }
        .encode()
        .to_vec();
        wqe.resize(WQE_HEADER_SIZE, 0);
        wqe
    };
    let sge = |addr, length| {
        Sge {
            addr,
            length,
            lkey: 0,
        }
        .encode()
    };
    let mut ud_send = ctrl(9, WR_SEND, WQE_FLAG_SIGNALED, 1);
    ud_send.extend(sge(0x4_0000, 64));
    let mut rc_write = ctrl(10, WR_RDMA_WRITE, WQE_FLAG_SIGNALED, 1);
    rc_write[WQE_SEG_OFFSET..WQE_HEADER_SIZE].copy_from_slice(&rdma_seg(0x10_0000, 0x1234));
    rc_write.extend(sge(0x5_0000, 300));
    // A bind of the window (its next key), an ATOMIC_WRITE and a FLUSH, a LOCAL_INV of the
    // window (key index 1).
    let mut bind = ctrl(13, WR_BIND_MW, WQE_FLAG_SIGNALED, 0);
    bind[WQE_SEG_OFFSET..WQE_SEG_OFFSET + BindMwSeg::SIZE].copy_from_slice(
        &BindMwSeg {
            addr: 0x1000,
            length: 0x800,
            mw_key: 0x12,
            access: ACCESS_REMOTE_WRITE,
            ..BindMwSeg::default()
        }
        .encode(),
    );
    let mut atomic_write = ctrl(14, WR_ATOMIC_WRITE, WQE_FLAG_SIGNALED, 0);
    atomic_write[WQE_SEG_OFFSET..WQE_SEG_OFFSET + AtomicWriteSeg::SIZE].copy_from_slice(
        &AtomicWriteSeg {
            remote_addr: 0x10_0000,
            rkey: 0x1234,
            value: 7u64.to_le_bytes(),
            ..AtomicWriteSeg::default()
        }
        .encode(),
    );
    let mut flush = ctrl(15, WR_FLUSH, WQE_FLAG_SIGNALED, 0);
    flush[WQE_SEG_OFFSET..WQE_SEG_OFFSET + FlushSeg::SIZE].copy_from_slice(
        &FlushSeg {
            remote_addr: 0x10_0000,
            rkey: 0x1234,
            length: 64,
            ..FlushSeg::default()
        }
        .encode(),
    );
    let mut local_inv = WqeCtrl {
        wr_id: 16,
        opcode: WR_LOCAL_INV,
        flags: WQE_FLAG_SIGNALED,
        imm_or_inv: 1,
        ..WqeCtrl::default()
    }
    .encode()
    .to_vec();
    local_inv.resize(WQE_HEADER_SIZE, 0);
    let mut recv = RecvWqeHeader {
        wr_id: 11,
        num_sge: 1,
        ..RecvWqeHeader::default()
    }
    .encode()
    .to_vec();
    recv.extend(sge(0x6_0000, 2048));
    let modify_to_error = ModifyQpCmd {
        attr_mask: QP_ATTR_STATE,
        new_state: QpState::Err.into(),
        ..ModifyQpCmd::default()
    }
    .to_payload();
    // Doorbell selectors: an SQ doorbell of the RC QP at its producer index (0, 0), the CQ
    // arm (0x0c: DB_CQ_ARM, 2: the CQ), an EQ doorbell arming EQ 0, a command doorbell far
    // ahead, anything in the doorbell area.
    let sq_doorbell = [0u8, 0];
    let cq_arm = [0x0c, 2];
    let mut eq_arm = vec![1];
    eq_arm.extend((1u32 << 31).to_le_bytes());
    let mut cmd_ahead = vec![2];
    cmd_ahead.extend(1000u32.to_le_bytes());
    let mut anywhere = vec![3];
    anywhere.extend(0x0804u32.to_le_bytes());
    anywhere.extend(0xdead_beefu32.to_le_bytes());
    vec![
        (
            "nop-query",
            Script::default()
                .command(0, CMD_NOP, &[])
                .command(ACT_SCRATCH_OUT | ACT_OBJECT, CMD_QUERY_QP, &[0])
                .command(ACT_TABLE_OPCODE, 1, &[])
                .run(1)
                .0,
        ),
        (
            "ud-loopback",
            Script::default()
                .recv(ACT_UD | ACT_PLAUSIBLE, &recv)
                .send(ACT_UD | ACT_PLAUSIBLE, &ud_send)
                .run(4)
                .0,
        ),
        (
            "rc-write",
            Script::default()
                .send(ACT_PLAUSIBLE, &rc_write)
                .recv(ACT_PLAUSIBLE, &recv)
                .run(2)
                .0,
        ),
        (
            "bad-wqe",
            Script::default()
                .send(0, &ctrl(12, 0x55, WQE_FLAG_SIGNALED, 0))
                .run(2)
                .0,
        ),
        (
            "error-then-post",
            Script::default()
                .command(ACT_OBJECT, CMD_MODIFY_QP, &modify_to_error)
                .run(1)
                .send(ACT_PLAUSIBLE, &rc_write)
                .doorbell(&sq_doorbell)
                .run(2)
                .0,
        ),
        (
            "doorbells",
            Script::default()
                .doorbell(&cq_arm)
                .doorbell(&eq_arm)
                .doorbell(&anywhere)
                .doorbell(&cmd_ahead)
                .run(2)
                .command(0, CMD_NOP, &[])
                .0,
        ),
        (
            "window-atomic-write-flush",
            Script::default()
                .send(ACT_PLAUSIBLE, &bind)
                .send(ACT_PLAUSIBLE, &atomic_write)
                .send(ACT_PLAUSIBLE, &flush)
                .run(2)
                .send(ACT_PLAUSIBLE, &local_inv)
                .run(2)
                .0,
        ),
        (
            "destroy-in-use",
            Script::default()
                .command(ACT_OBJECT, CMD_DESTROY_CQ, &[2])
                .command(ACT_OBJECT, CMD_DESTROY_QP, &[1])
                .run(1)
                .send(ACT_UD | ACT_PLAUSIBLE, &ud_send)
                .run(2)
                .0,
        ),
    ]
}

/// Seed inputs of the two-NIC body ([`super::pair`]), by name.
pub fn pair_seeds() -> Vec<(&'static str, Setup, Vec<Action>)> {
    use Action::{Forge, Recv, Turns, Wait};
    // POST_OPCODES[op] with `len` bytes from `local` to `remote` (units of 4 bytes).
    let post = |op: u8, len: u16, local: u16, remote: u16| {
        Action::Post(Post {
            op,
            local,
            len,
            remote,
            rkey: None,
            operand: 0x0102_0304_0506_0708,
            fence: false,
        })
    };
    let recv = |offset: u16| Recv { offset, len: 4096 };
    let to_b = |how| Action::Relay { to_b: true, how };
    let to_a = |how| Action::Relay { to_b: false, how };
    let forge = |to_b: bool, frame: Frame| Forge { to_b, frame };
    let nak = |psn: i32, syndrome: u8| Frame {
        psn: Ok(psn),
        aeth: Some((syndrome, 0)),
        ..Frame::new(opcode::op::RC_ACKNOWLEDGE, Dest::Rc)
    };
    // Every opcode in order, the SEND with invalidate (of B's MR) last.
    let mut every = vec![recv(0x4000), recv(0x5000), recv(0x6000), recv(0x7000)];
    every.extend(
        (0..10u8)
            .filter(|&op| op != 2)
            .map(|op| post(op, 4000, 0, 0x1000)),
    );
    every.extend([post(2, 16, 0, 0), Turns(4)]);
    let rc = Setup::default();
    let uc = Setup {
        uc: true,
        ..Setup::default()
    };
    let long_timeout = Setup {
        long_timeout: true,
        ..Setup::default()
    };
    vec![
        ("every-opcode", rc, every),
        (
            "uc-lossy",
            uc,
            vec![
                recv(0x4000),
                recv(0x5000),
                post(0, 3000, 0, 0),
                post(3, 3000, 0, 0x2000),
                post(4, 64, 0, 0x3000),
                Turns(2),
                to_b(Relay::One),
                to_b(Relay::Drop),
                to_b(Relay::All),
                Turns(2),
            ],
        ),
        (
            // A first round trip sets the adaptive timeout well below the configured one; a
            // lost WRITE then goes out again when the adaptive one expires.
            "adaptive-timeout",
            long_timeout,
            vec![
                post(3, 64, 0, 0),
                Turns(1),
                to_b(Relay::All),
                Turns(1),
                to_a(Relay::All),
                Turns(1),
                post(3, 64, 0, 0x100),
                Turns(1),
                to_b(Relay::Drop),
                Wait(None),
                Turns(1),
            ],
        ),
        (
            "lossy",
            rc,
            vec![
                recv(0x4000),
                post(3, 4096, 0, 0),
                post(5, 4096, 0x2000, 0x2000),
                post(0, 2000, 0, 0),
                Turns(2),
                to_b(Relay::Drop),
                to_b(Relay::Duplicate),
                to_b(Relay::Swap),
                to_b(Relay::Corrupt {
                    at: 60,
                    value: 0xff,
                }),
                to_b(Relay::All),
                Turns(2),
                to_a(Relay::Drop),
                to_a(Relay::All),
                Wait(None),
                Turns(4),
                to_b(Relay::All),
                Turns(2),
                to_a(Relay::Swap),
                to_a(Relay::All),
            ],
        ),
        (
            "forged-requests",
            rc,
            vec![
                recv(0x4000),
                post(3, 64, 0, 0),
                Turns(1),
                to_b(Relay::All),
                Turns(1),
                // A READ behind B's ePSN (a duplicate), a SEND ahead of it, then a WRITE
                // crossing the end of B's MR.
                forge(
                    true,
                    Frame {
                        psn: Ok(-1),
                        reth: Some((0, None, 64)),
                        ..Frame::new(opcode::op::RC_READ_REQUEST, Dest::Rc)
                    },
                ),
                forge(
                    true,
                    Frame {
                        psn: Ok(5),
                        payload: vec![1; 32],
                        ..Frame::new(opcode::op::RC_SEND_ONLY, Dest::Rc)
                    },
                ),
                forge(
                    true,
                    Frame {
                        reth: Some((REGISTERED - 16, None, 64)),
                        payload: vec![2; 64],
                        ..Frame::new(opcode::op::RC_WRITE_ONLY, Dest::Rc)
                    },
                ),
                Turns(2),
                post(0, 64, 0, 0),
            ],
        ),
        (
            "forged-responses",
            rc,
            vec![
                post(3, 4096, 0, 0),
                post(5, 4096, 0x2000, 0x2000),
                post(6, 8, 0x3000, 0x3000),
                Turns(2),
                forge(false, nak(-8, 0x21)),
                Turns(1),
                forge(false, nak(-5, 0x60)),
                Turns(1),
                forge(false, nak(0, 0x00)),
                forge(false, nak(0, 0x62)),
                Turns(2),
            ],
        ),
        (
            "rnr",
            rc,
            vec![
                post(0, 100, 0, 0),
                post(1, 100, 0, 0),
                Turns(2),
                to_b(Relay::All),
                Turns(2),
                to_a(Relay::All),
                Wait(None),
                recv(0x4000),
                Turns(2),
            ],
        ),
        (
            "read-gap",
            rc,
            vec![
                post(5, 4096, 0, 0),
                Turns(1),
                to_b(Relay::All),
                Turns(1),
                to_a(Relay::One),
                to_a(Relay::Drop),
                to_a(Relay::All),
                Turns(2),
                Wait(Some(5)),
            ],
        ),
    ]
}
