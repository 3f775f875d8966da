// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! `CMD_RESIZE_SRQ`: the WQEs the device has not taken move with the SRQ to its new ring, in
//! order, and the producer goes on there; a resize below them, below the armed limit or to a
//! smaller stride changes nothing.

mod common;

use common::*;
use ferroce_hw::*;
use ferroce_nic::engine::EngineHost;

/// An SRQ as the guest sees it: its ring and record, which a resize replaces.
struct GuestSrq {
    srqn: u32,
    ring: u64,
    dbrec: u64,
    log: u8,
    pi: u16,
}

impl GuestSrq {
    fn create(g: &mut Guest, log: u8, limit: u32) -> Self {
        let ring = g.alloc(64 << log, 4096);
        let dbrec = g.alloc(64, 64);
        let srqn = g
            .ok(&CreateSrqCmd {
                ring: BufDesc {
                    addr: ring,
                    ..BufDesc::default()
                },
                dbrec_addr: dbrec,
                pd: 1,
                limit,
                log_size: log,
                log_stride: 6,
                ..CreateSrqCmd::default()
            })
            .srqn;
        Self {
            srqn,
            ring,
            dbrec,
            log,
            pi: 0,
        }
    }

    /// Posts receive WQEs with these wr_ids and publishes the producer index.
    fn post(&mut self, g: &mut Guest, wr_ids: impl IntoIterator<Item = u64>) {
        for wr_id in wr_ids {
            let mut wqe = vec![0u8; 64];
            assert!(RecvWqeHeader {
                wr_id,
                ..RecvWqeHeader::default()
            }
            .write_to(&mut wqe));
            let slot = u64::from(self.pi) & ((1 << self.log) - 1);
            g.write(self.ring + slot * 64, &wqe);
            self.pi = self.pi.wrapping_add(1);
        }
        g.write_u32(self.dbrec, u32::from(self.pi));
    }

    /// Moves to a new ring of `1 << log` entries of `1 << log_stride` bytes.
    fn resize(&mut self, g: &mut Guest, log: u8, log_stride: u8) -> CmdCompletion {
        let ring = g.alloc(1 << (log + log_stride.max(6)), 4096);
        let dbrec = g.alloc(64, 64);
        g.write_u32(dbrec, u32::from(self.pi));
        let c = g.cmd(&ResizeSrqCmd {
            ring: BufDesc {
                addr: ring,
                ..BufDesc::default()
            },
            dbrec_addr: dbrec,
            srqn: self.srqn,
            log_size: log,
            log_stride,
            ..ResizeSrqCmd::default()
        });
        if c.status == STATUS_OK {
            (self.ring, self.dbrec, self.log) = (ring, dbrec, log);
        }
        c
    }
}

/// A guest with an SRQ and an RC QP that takes receive WQEs from it.
fn setup(log: u8, limit: u32) -> (Guest, GuestSrq, u32) {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 6);
    let srq = GuestSrq::create(&mut g, log, limit);
    let qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, srq.srqn);
    qp.connect(&mut g);
    (g, srq, qp.qpn)
}

fn take(g: &mut Guest, qpn: u32, n: usize) -> Vec<u64> {
    (0..n)
        .map_while(|_| g.dev.core.take_recv(qpn).expect("srq").map(|w| w.wr_id))
        .collect()
}

#[test]
fn wqes_not_taken_move_with_the_srq() {
    let (mut g, mut srq, qpn) = setup(3, 0);
    srq.post(&mut g, 1000..1006);
    assert_eq!(take(&mut g, qpn, 2), [1000, 1001]);
    assert_eq!(srq.resize(&mut g, 4, 6).status, STATUS_OK, "grow to 16");
    srq.post(&mut g, 1006..1014);
    assert_eq!(take(&mut g, qpn, 20), (1002..1014).collect::<Vec<_>>());
    // Around the new ring, then grow again with WQEs waiting, to a larger stride.
    for round in 0..3u64 {
        let first = 2000 + round * 10;
        srq.post(&mut g, first..first + 10);
        assert_eq!(take(&mut g, qpn, 4), (first..first + 4).collect::<Vec<_>>());
        assert_eq!(
            take(&mut g, qpn, 20),
            (first + 4..first + 10).collect::<Vec<_>>()
        );
    }
    srq.post(&mut g, 3000..3010);
    assert_eq!(take(&mut g, qpn, 3), [3000, 3001, 3002]);
    assert_eq!(
        srq.resize(&mut g, 5, 7).status,
        STATUS_OK,
        "grow to 32, 128-byte WQEs"
    );
    assert_eq!(take(&mut g, qpn, 40), (3003..3010).collect::<Vec<_>>());
}

#[test]
fn a_resize_below_what_waits_the_limit_or_the_stride_is_refused() {
    let (mut g, mut srq, qpn) = setup(4, 6);
    srq.post(&mut g, 1..13);
    assert_eq!(take(&mut g, qpn, 2), [1, 2]);
    assert_eq!(
        srq.resize(&mut g, 3, 6).status,
        STATUS_BAD_PARAM,
        "10 left, 8 entries"
    );
    let (mut g2, mut srq2, qpn2) = setup(3, 0);
    srq2.post(&mut g2, 1..3);
    assert_eq!(
        srq2.resize(&mut g2, 4, 5).status,
        STATUS_BAD_PARAM,
        "32-byte stride"
    );
    assert_eq!(take(&mut g2, qpn2, 8), [1, 2]);
    // An armed limit must stay below the entries.
    assert_eq!(take(&mut g, qpn, 6), (3..9).collect::<Vec<_>>());
    g.ok(&ModifySrqCmd {
        srqn: srq.srqn,
        limit: 5,
    });
    assert_eq!(
        srq.resize(&mut g, 2, 6).status,
        STATUS_BAD_PARAM,
        "limit 5 of 4"
    );
    assert_eq!(take(&mut g, qpn, 20), (9..13).collect::<Vec<_>>());
}
