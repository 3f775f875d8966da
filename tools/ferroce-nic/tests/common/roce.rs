// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Two NICs with the RoCE engine back to back, each driven by its own test guest: GID tables
//! as seed 2 §4, a CQ, one large MR, and RC / UD / GSI QPs, with helpers to post work and pump
//! both devices until a condition holds.
//!
//! The devices run on virtual time ([`VirtualTime`]), which one pump ([`Driven`]) moves for
//! every harness ([`Pair`], [`Solo`], [`Scripted`]): only when no NIC has moved anything in a
//! round, and then to the next deadline. The host is infinitely fast as the NICs see it: a
//! timer expires because an answer is lost or held by a fault, never because the test thread
//! was descheduled.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroce_hw::*;
use ferroce_nic::clock::VirtualTime;
use ferroce_nic::device::DeviceConfig;
use ferroce_nic::engine::faults::{FaultConfig, FaultControl};
use ferroce_nic::engine::frame::{self, Route};
use ferroce_nic::engine::headers::{Aeth, Bth, Headers, Packet, Reth};
use ferroce_nic::engine::opcode;
use ferroce_nic::engine::roce::RoceEngine;
use ferroce_nic::engine::wire::{back_to_back, PortEnd};
use ferroce_nic::trace::Tracer;

use super::{create_qp_cmd, qp_rings, Guest, GuestCq};

/// PD tag used for everything.
pub const PD: u32 = 1;

/// Bytes in a MiB.
pub const MIB: usize = 1 << 20;

pub fn mapped(ip: [u8; 4]) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&ip);
    gid
}

/// One NIC and its guest.
pub struct Node {
    pub g: Guest,
    pub cq: GuestCq,
    pub mac: [u8; 6],
    pub ip: [u8; 4],
    /// The data MR: iova = guest address.
    pub buf: u64,
    pub buf_len: usize,
    pub key: u32,
    pub faults: Arc<FaultControl>,
    pub trace: Arc<Tracer>,
}

impl Node {
    /// A node on a time of its own (alone, or with peers that have no timers: UD).
    pub fn new(last: u8, buf_len: usize, port: PortEnd) -> Self {
        Self::with_time(VirtualTime::new(), last, buf_len, port)
    }

    /// A node (MAC and IPv4 address ending in `last`) on `time`, which the nodes it talks to
    /// share.
    pub fn with_time(time: Arc<VirtualTime>, last: u8, buf_len: usize, port: PortEnd) -> Self {
        Self::with_config(time, last, buf_len, port, 0, |_| {})
    }

    /// [`Node::with_time`] with `extra_ram` more guest memory (for many queues) and the
    /// device configuration `adjust` changed (larger object tables).
    pub fn with_config(
        time: Arc<VirtualTime>,
        last: u8,
        buf_len: usize,
        port: PortEnd,
        extra_ram: usize,
        adjust: impl FnOnce(&mut DeviceConfig),
    ) -> Self {
        let mac = [0x52, 0x54, 0x00, 0x00, 0x00, last];
        let ip = [10, 0, 0, last];
        let faults = FaultControl::new(FaultConfig::default());
        let trace = Arc::new(Tracer::new());
        let engine = RoceEngine::new(mac, port, faults.clone(), trace.clone());
        let mut g = Guest::with_engine_config(
            mac,
            buf_len + (8 << 20) + extra_ram,
            Box::new(engine),
            trace.clone(),
            time,
            adjust,
        );
        g.bring_up();
        // GID table as seed 2 §4: 0/1 link-local (v1/v2), 2/3 IPv4-mapped (v1/v2).
        let entries = [
            (gid_from_mac(mac), GID_TYPE_ROCE_V1, GID_FAMILY_IPV6),
            (gid_from_mac(mac), GID_TYPE_ROCE_V2, GID_FAMILY_IPV6),
            (mapped(ip), GID_TYPE_ROCE_V1, GID_FAMILY_IPV4),
            (mapped(ip), GID_TYPE_ROCE_V2, GID_FAMILY_IPV4),
        ];
        for (index, (gid, gid_type, family)) in entries.into_iter().enumerate() {
            g.ok(&SetGidCmd {
                index: index as u32,
                gid_type,
                family,
                gid,
                mac,
                vlan: VLAN_NONE,
                ..SetGidCmd::default()
            });
        }
        g.ok(&SetPortCmd {
            port: 1,
            active_mtu: MTU_4096,
            ..SetPortCmd::default()
        });
        let eqn = g.create_ceq(6, 2);
        let cq = GuestCq::create(&mut g, eqn, 12);
        let buf = g.alloc(buf_len, 4096);
        let key = g
            .ok(&CreateMrCmd {
                iova: buf,
                length: buf_len as u64,
                pages: BufDesc {
                    addr: buf,
                    ..BufDesc::default()
                },
                pd: PD,
                access: ACCESS_VALID_MASK,
                ..CreateMrCmd::default()
            })
            .key;
        Self {
            g,
            cq,
            mac,
            ip,
            buf,
            buf_len,
            key,
            faults,
            trace,
        }
    }

    /// Registers `[addr, addr + len)` of the data buffer again with `access` and `pd`.
    pub fn mr(&mut self, addr: u64, len: u64, access: u32, pd: u32) -> u32 {
        self.g
            .ok(&CreateMrCmd {
                iova: addr,
                length: len,
                pages: BufDesc {
                    addr,
                    ..BufDesc::default()
                },
                pd,
                access,
                ..CreateMrCmd::default()
            })
            .key
    }

    pub fn counter(&self, index: usize) -> u64 {
        self.g.counters.get(index)
    }

    /// One round of the device, its new CQEs added to `cqes`; `true` if it has work left over
    /// or CQEs came (see [`Driven::round`]).
    pub fn round(&mut self, cqes: &mut Vec<Cqe>) -> bool {
        let more = self.g.dev.process();
        let new = self.cq.poll(&self.g);
        let collected = !new.is_empty();
        cqes.extend(new);
        more || collected
    }

    pub fn gid(&self, index: u8) -> [u8; 16] {
        if index < 2 {
            gid_from_mac(self.mac)
        } else {
            mapped(self.ip)
        }
    }

    pub fn fill(&self, addr: u64, len: usize, seed: u64) -> Vec<u8> {
        let data = pattern(len, seed);
        self.g.write(addr, &data);
        data
    }
}

/// Deterministic bytes.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Bytes of a receive WQE (`create_qp_cmd`'s receive stride).
pub const RECV_STRIDE: usize = 64;

/// A QP as the guest sees it.
pub struct Qp {
    pub qpn: u32,
    pub qp_type: QpType,
    sq: u64,
    rq: u64,
    dbrec: u64,
    sq_log: u8,
    stride_log: u8,
    rq_log: u8,
    pub sq_pi: u16,
    pub rq_pi: u16,
    /// XRC_INI: the XRC SRQ at the target that [`Qp::post`]'s WQEs name.
    pub xrc_srqn: u32,
}

/// RC connection parameters.
#[derive(Clone, Copy)]
pub struct Conn {
    pub mtu: u8,
    pub sgid_index: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub access: u32,
    pub max_dest_rd_atomic: u8,
}

impl Default for Conn {
    fn default() -> Self {
        Self {
            mtu: MTU_1024,
            sgid_index: 3,
            timeout: 12,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            access: ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC,
            max_dest_rd_atomic: 16,
        }
    }
}

impl Qp {
    pub fn create(node: &mut Node, qp_type: QpType) -> Self {
        Self::create_with_flags(node, qp_type, 0)
    }

    /// A QP with `CreateQpCmd::flags` `flags` (`QP_FLAG_*`).
    pub fn create_with_flags(node: &mut Node, qp_type: QpType, flags: u8) -> Self {
        Self::create_sized(node, qp_type, flags, (8, 9, 8))
    }

    /// A QP whose rings have `(sq_log, stride_log, rq_log)`: 2^sq_log send WQEs of
    /// 2^stride_log bytes, 2^rq_log receive WQEs.
    pub fn create_sized(node: &mut Node, qp_type: QpType, flags: u8, logs: (u8, u8, u8)) -> Self {
        let (sq_log, stride_log, rq_log) = logs;
        let (sq, rq, dbrec) = qp_rings(&mut node.g, sq_log, stride_log, rq_log);
        let qpn = node
            .g
            .ok(&CreateQpCmd {
                pd: PD,
                sq_cqn: node.cq.cqn,
                rq_cqn: node.cq.cqn,
                qp_type: qp_type.into(),
                flags,
                ..create_qp_cmd(sq, rq, dbrec, sq_log, stride_log, rq_log)
            })
            .qpn;
        Self {
            qpn,
            qp_type,
            sq,
            rq,
            dbrec,
            sq_log,
            stride_log,
            rq_log,
            sq_pi: 0,
            rq_pi: 0,
            xrc_srqn: 0,
        }
    }

    /// An XRC_INI QP: the send side of [`Qp::create`]'s, no receive side.
    pub fn create_xrc_ini(node: &mut Node) -> Self {
        let (sq_log, stride_log) = (8u8, 9u8);
        let (sq, _, dbrec) = qp_rings(&mut node.g, sq_log, stride_log, 0);
        let qpn = node
            .g
            .ok(&CreateQpCmd {
                pd: PD,
                sq_cqn: node.cq.cqn,
                rq_cqn: NONE,
                qp_type: QpType::XrcIni.into(),
                srqn: NONE,
                rq: BufDesc::default(),
                rq_log_stride: 0,
                ..create_qp_cmd(sq, 0, dbrec, sq_log, stride_log, 0)
            })
            .qpn;
        Self {
            qpn,
            qp_type: QpType::XrcIni,
            sq,
            rq: 0,
            dbrec,
            sq_log,
            stride_log,
            rq_log: 0,
            sq_pi: 0,
            rq_pi: 0,
            xrc_srqn: 0,
        }
    }

    /// An XRC_TGT QP of XRC domain `xrcd`: nothing but its number.
    pub fn create_xrc_tgt(node: &mut Node, xrcd: u32) -> Self {
        let qpn = node
            .g
            .ok(&CreateQpCmd {
                qp_type: QpType::XrcTgt.into(),
                sq_cqn: NONE,
                rq_cqn: NONE,
                srqn: NONE,
                xrcd,
                ..CreateQpCmd::default()
            })
            .qpn;
        Self {
            qpn,
            qp_type: QpType::XrcTgt,
            sq: 0,
            rq: 0,
            dbrec: 0,
            sq_log: 0,
            stride_log: 0,
            rq_log: 0,
            sq_pi: 0,
            rq_pi: 0,
            xrc_srqn: 0,
        }
    }

    fn modify(node: &mut Node, cmd: ModifyQpCmd) {
        let c = node.g.cmd(&cmd);
        assert_eq!(
            c.status, STATUS_OK,
            "modify QP {} to {}: syndrome {}",
            cmd.qpn, cmd.new_state, c.syndrome
        );
    }

    /// RESET → INIT → RTR → RTS towards `peer` (QPN `dest_qpn`, PSNs given).
    pub fn connect(
        &self,
        node: &mut Node,
        peer: &Node,
        dest_qpn: u32,
        sq_psn: u32,
        rq_psn: u32,
        conn: Conn,
    ) {
        let (dgid, dmac) = (peer.gid(conn.sgid_index), peer.mac);
        self.connect_to(node, dgid, dmac, dest_qpn, sq_psn, rq_psn, conn);
    }

    /// RESET → INIT → RTR → RTS towards QPN `dest_qpn` at `dgid` / `dmac`.
    #[allow(clippy::too_many_arguments)]
    pub fn connect_to(
        &self,
        node: &mut Node,
        dgid: [u8; 16],
        dmac: [u8; 6],
        dest_qpn: u32,
        sq_psn: u32,
        rq_psn: u32,
        conn: Conn,
    ) {
        let base = ModifyQpCmd {
            qpn: self.qpn,
            vlan: VLAN_NONE,
            ..ModifyQpCmd::default()
        };
        // What ib_modify_qp_is_ok lets a UC QP name: no acknowledgement or RDMA READ limits.
        let reliable_only = if self.qp_type == QpType::Uc {
            QP_ATTR_MAX_DEST_RD_ATOMIC
                | QP_ATTR_MIN_RNR_TIMER
                | QP_ATTR_TIMEOUT
                | QP_ATTR_RETRY_CNT
                | QP_ATTR_RNR_RETRY
                | QP_ATTR_MAX_QP_RD_ATOMIC
        } else {
            0
        };
        Self::modify(
            node,
            ModifyQpCmd {
                attr_mask: QP_ATTR_STATE | QP_ATTR_ACCESS_FLAGS | QP_ATTR_PKEY_INDEX | QP_ATTR_PORT,
                new_state: QpState::Init.into(),
                access_flags: conn.access,
                ..base
            },
        );
        Self::modify(
            node,
            ModifyQpCmd {
                attr_mask: (QP_ATTR_STATE
                    | QP_ATTR_AV
                    | QP_ATTR_PATH_MTU
                    | QP_ATTR_DEST_QPN
                    | QP_ATTR_RQ_PSN
                    | QP_ATTR_MAX_DEST_RD_ATOMIC
                    | QP_ATTR_MIN_RNR_TIMER)
                    & !reliable_only,
                new_state: QpState::Rtr.into(),
                path_mtu: conn.mtu,
                sgid_index: conn.sgid_index,
                dgid,
                dmac,
                hop_limit: 64,
                dest_qpn,
                rq_psn,
                max_dest_rd_atomic: conn.max_dest_rd_atomic,
                min_rnr_timer: conn.min_rnr_timer,
                ..base
            },
        );
        Self::modify(
            node,
            ModifyQpCmd {
                attr_mask: (QP_ATTR_STATE
                    | QP_ATTR_SQ_PSN
                    | QP_ATTR_TIMEOUT
                    | QP_ATTR_RETRY_CNT
                    | QP_ATTR_RNR_RETRY
                    | QP_ATTR_MAX_QP_RD_ATOMIC)
                    & !reliable_only,
                new_state: QpState::Rts.into(),
                sq_psn,
                timeout: conn.timeout,
                retry_cnt: conn.retry_cnt,
                rnr_retry: conn.rnr_retry,
                max_rd_atomic: 16,
                ..base
            },
        );
    }

    /// RESET → INIT → RTR → RTS for a UD or GSI QP.
    pub fn activate_ud(&self, node: &mut Node, qkey: u32) {
        let base = ModifyQpCmd {
            qpn: self.qpn,
            vlan: VLAN_NONE,
            ..ModifyQpCmd::default()
        };
        for (state, mask) in [
            (
                QpState::Init,
                QP_ATTR_QKEY | QP_ATTR_PKEY_INDEX | QP_ATTR_PORT,
            ),
            (QpState::Rtr, 0),
            (QpState::Rts, QP_ATTR_SQ_PSN),
        ] {
            Self::modify(
                node,
                ModifyQpCmd {
                    attr_mask: QP_ATTR_STATE | mask,
                    new_state: state.into(),
                    qkey,
                    ..base
                },
            );
        }
    }

    /// Writes a send WQE (no doorbell). `tail` is SGEs or inline bytes.
    pub fn put(&mut self, node: &Node, ctrl: WqeCtrl, seg: &[u8], tail: &[u8]) -> Vec<u8> {
        let stride = 1usize << self.stride_log;
        let mut wqe = vec![0u8; stride];
        assert!(ctrl.write_to(&mut wqe));
        wqe[WQE_SEG_OFFSET..WQE_SEG_OFFSET + seg.len()].copy_from_slice(seg);
        wqe[WQE_HEADER_SIZE..WQE_HEADER_SIZE + tail.len()].copy_from_slice(tail);
        let slot = u64::from(self.sq_pi) & ((1 << self.sq_log) - 1);
        node.g.write(self.sq + slot * stride as u64, &wqe);
        self.sq_pi = self.sq_pi.wrapping_add(1);
        node.g.write_u32(self.dbrec, u32::from(self.sq_pi));
        wqe
    }

    /// Rings the SQ doorbell (context 0, QID = QPN).
    pub fn ring(&self, node: &mut Node) {
        node.g.w32(
            db_page_offset(0) + DB_SQ,
            Doorbell {
                qid: self.qpn as u16,
                index: self.sq_pi,
            }
            .encode(),
        );
    }

    /// Posts one signalled WR with one SGE (or none for `len == 0`) and rings.
    #[allow(clippy::too_many_arguments)]
    pub fn post(
        &mut self,
        node: &mut Node,
        wr_id: u64,
        opcode: u8,
        addr: u64,
        len: u32,
        seg: &[u8],
        imm: u32,
    ) {
        let sge = Sge {
            addr,
            length: len,
            lkey: node.key,
        };
        let ctrl = WqeCtrl {
            wr_id,
            opcode,
            flags: WQE_FLAG_SIGNALED,
            num_sge: u8::from(len > 0),
            imm_or_inv: imm,
            xrc_srqn: self.xrc_srqn,
            ..WqeCtrl::default()
        };
        let tail = if len > 0 {
            sge.encode().to_vec()
        } else {
            Vec::new()
        };
        self.put(node, ctrl, seg, &tail);
        self.ring(node);
    }

    /// Posts one signalled UD / GSI WR with one SGE (or none for `len == 0`) whose operation
    /// segment is the address vector `av` itself (`WQE_FLAG_AV`, plus `extra_flags`), and rings.
    #[allow(clippy::too_many_arguments)]
    pub fn post_av(
        &mut self,
        node: &mut Node,
        wr_id: u64,
        opcode: u8,
        addr: u64,
        len: u32,
        av: &UdAvSeg,
        imm: u32,
        extra_flags: u8,
    ) {
        let ctrl = WqeCtrl {
            wr_id,
            opcode,
            flags: WQE_FLAG_SIGNALED | WQE_FLAG_AV | extra_flags,
            num_sge: u8::from(len > 0),
            imm_or_inv: imm,
            ..WqeCtrl::default()
        };
        let tail = if len > 0 {
            Sge {
                addr,
                length: len,
                lkey: node.key,
            }
            .encode()
            .to_vec()
        } else {
            Vec::new()
        };
        self.put(node, ctrl, &av.encode(), &tail);
        self.ring(node);
    }

    /// Bytes of a send WQE (the send ring's stride).
    pub fn send_stride(&self) -> usize {
        1 << self.stride_log
    }

    /// Posts a receive WQE with one SGE (of the data MR) and publishes it.
    pub fn post_recv(&mut self, node: &mut Node, wr_id: u64, addr: u64, len: u32) {
        let mut wqe = vec![0u8; 64];
        assert!(RecvWqeHeader {
            wr_id,
            num_sge: 1,
            ..RecvWqeHeader::default()
        }
        .write_to(&mut wqe));
        assert!(Sge {
            addr,
            length: len,
            lkey: node.key,
        }
        .write_to(&mut wqe[16..]));
        self.put_recv(node, &wqe);
        self.ring_recv(node);
    }

    /// Writes the receive WQE `wqe` (at most [`RECV_STRIDE`] bytes, whatever they hold) at
    /// the producer index and publishes it in the doorbell record (no doorbell).
    pub fn put_recv(&mut self, node: &Node, wqe: &[u8]) {
        let wqe = wqe.get(..RECV_STRIDE).unwrap_or(wqe);
        let slot = u64::from(self.rq_pi) & ((1 << self.rq_log) - 1);
        node.g.write(self.rq + slot * RECV_STRIDE as u64, wqe);
        self.rq_pi = self.rq_pi.wrapping_add(1);
        node.g.write_u32(self.dbrec + 4, u32::from(self.rq_pi));
    }

    /// Rings the RQ doorbell (context 0, QID = QPN).
    pub fn ring_recv(&self, node: &mut Node) {
        node.g.w32(
            db_page_offset(0) + DB_RQ,
            Doorbell {
                qid: self.qpn as u16,
                index: self.rq_pi,
            }
            .encode(),
        );
    }
}

/// The inline address vector towards `peer`'s QP `remote_qpn` from GID `sgid_index`.
pub fn av_to(peer: &Node, sgid_index: u8, remote_qpn: u32, remote_qkey: u32) -> UdAvSeg {
    UdAvSeg {
        dgid: peer.gid(sgid_index),
        dmac: peer.mac,
        vlan: VLAN_NONE,
        remote_qpn,
        remote_qkey,
        sgid_index,
        hop_limit: 64,
        ..UdAvSeg::default()
    }
}

/// The operation segment of an RDMA WRITE or READ towards `remote_addr` under `rkey`.
pub fn rdma_seg(remote_addr: u64, rkey: u32) -> [u8; 40] {
    RdmaSeg {
        remote_addr,
        rkey,
        ..RdmaSeg::default()
    }
    .encode()
}

/// The operation segment of an atomic: compare-and-swap (`compare_add`, `swap`) or fetch-and-add
/// (`compare_add` is the addend) on the 8 bytes at `remote_addr` under `rkey`.
pub fn atomic_seg(remote_addr: u64, rkey: u32, compare_add: u64, swap: u64) -> [u8; 40] {
    AtomicSeg {
        remote_addr,
        rkey,
        compare_add,
        swap,
        ..AtomicSeg::default()
    }
    .encode()
}

/// Most rounds one drive takes: the bound on a drive that moves frames for ever without its
/// condition holding (counted in rounds, as the host's time no longer tells).
pub const MAX_ROUNDS: u64 = 10_000_000;

/// What the nodes have moved so far ([`Counters::activity`](ferroce_nic::counters::Counters::activity):
/// the device thread's rule too).
fn activity(nodes: &[&Node]) -> u64 {
    nodes.iter().map(|n| n.g.counters.activity()).sum()
}

/// Whether the nodes moved anything since their [`activity`] was `before`, given a round that
/// left work over (`more`) or not: frames sent or received, CQEs or EQEs written, or frames
/// waiting to be received.
fn moved(nodes: &[&Node], more: bool, before: u64) -> bool {
    more || activity(nodes) != before || nodes.iter().any(|n| n.g.dev.frames_waiting())
}

/// NICs the test thread drives on one virtual time ([`Pair`], [`Solo`], [`Scripted`]), and the
/// one pump that moves them and their time.
pub trait Driven {
    /// The nodes; they share one [`VirtualTime`].
    fn nodes(&self) -> Vec<&Node>;

    /// Every device once, then the CQEs collected; `true` if a device has work left over or
    /// CQEs were collected.
    fn round(&mut self) -> bool;

    /// The nodes' time.
    fn time(&self) -> Arc<VirtualTime> {
        self.nodes()[0].g.time.clone()
    }

    /// One round; whether anything moved (see [`moved`]).
    fn step(&mut self) -> bool {
        let before = activity(&self.nodes());
        let more = self.round();
        moved(&self.nodes(), more, before)
    }

    /// The pump: rounds until `done` holds (asked before each round; it may act, e.g. answer
    /// page faults, and what it moves counts as the round's). While rounds move something the
    /// time stands still; after a round that moved nothing it jumps to the earliest deadline of
    /// any device after now, or to `horizon` if that comes first. With no such deadline the
    /// NICs are quiet: nothing can happen any more, and the drive ends, `false`. Panics after
    /// `limit` of device time or [`MAX_ROUNDS`] rounds.
    fn drive(
        &mut self,
        limit: Duration,
        horizon: Option<Instant>,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> bool {
        let time = self.time();
        assert!(
            self.nodes().iter().all(|n| Arc::ptr_eq(&n.g.time, &time)),
            "the nodes of a harness share one time (Node::with_time)"
        );
        let start = time.now();
        for _ in 0..MAX_ROUNDS {
            let before = activity(&self.nodes());
            if done(self) {
                return true;
            }
            let more = self.round();
            if moved(&self.nodes(), more, before) {
                continue;
            }
            let now = time.now();
            let next = self
                .nodes()
                .iter()
                .filter_map(|n| n.g.dev.next_deadline())
                .filter(|t| *t > now)
                .chain(horizon)
                .min()
                .filter(|t| *t > now);
            let Some(t) = next else {
                return false;
            };
            assert!(
                t - start <= limit,
                "timed out: {limit:?} of device time passed"
            );
            time.advance_to(t);
        }
        panic!("{MAX_ROUNDS} rounds and the NICs are still busy");
    }

    /// Pumps until `done` holds; panics after `limit` of device time, or when the NICs are
    /// stuck: nothing moves, nothing is timed, and `done` does not hold.
    fn pump_until(&mut self, limit: Duration, done: impl FnMut(&mut Self) -> bool) {
        assert!(
            self.drive(limit, None, done),
            "stuck: nothing moves, nothing is timed, and the condition does not hold"
        );
    }

    /// Runs the NICs for `d` of device time: whatever is due meanwhile happens.
    fn run_for(&mut self, d: Duration) {
        let horizon = self.time().now() + d;
        self.drive(d, Some(horizon), |_| false);
    }

    /// Runs the NICs until nothing moves and nothing is timed (every timer has fired and every
    /// held frame arrived); panics if that takes more than `limit` of device time.
    fn settle(&mut self, limit: Duration) {
        self.drive(limit, None, |_| false);
    }
}

/// Two nodes back to back with an RC QP each, connected; PSNs start near the 24-bit wrap.
pub struct Pair {
    pub a: Node,
    pub b: Node,
    pub qa: Qp,
    pub qb: Qp,
    /// CQEs polled so far and not yet taken, per node.
    pub cqes_a: Vec<Cqe>,
    pub cqes_b: Vec<Cqe>,
}

impl Pair {
    pub fn new(buf_len: usize, conn: Conn) -> Self {
        Self::of_type(buf_len, conn, QpType::Rc)
    }

    /// The pair with connected QPs of `qp_type` (RC or UC).
    pub fn of_type(buf_len: usize, conn: Conn, qp_type: QpType) -> Self {
        let (pa, pb) = back_to_back();
        Self::with_ports(buf_len, conn, qp_type, pa, pb)
    }

    /// The pair on ports `pa` (node 1, MAC ..:01) and `pb` (node 2, MAC ..:02).
    pub fn with_ports(
        buf_len: usize,
        conn: Conn,
        qp_type: QpType,
        pa: PortEnd,
        pb: PortEnd,
    ) -> Self {
        let mut a = Node::new(1, buf_len, pa);
        let mut b = Node::with_time(a.g.time.clone(), 2, buf_len, pb);
        let qa = Qp::create(&mut a, qp_type);
        let qb = Qp::create(&mut b, qp_type);
        let (psn_a, psn_b) = (PSN_MASK - 20, 5);
        qa.connect(&mut a, &b, qb.qpn, psn_a, psn_b, conn);
        qb.connect(&mut b, &a, qa.qpn, psn_b, psn_a, conn);
        Self {
            a,
            b,
            qa,
            qb,
            cqes_a: Vec::new(),
            cqes_b: Vec::new(),
        }
    }

    /// An RC pair whose NICs hold `idle` more connected QPs each, which never post (their
    /// peers do not exist), and the device's full table of CQ numbers.
    pub fn among_idle(buf_len: usize, conn: Conn, idle: u32) -> Self {
        let (pa, pb) = back_to_back();
        // Each idle QP's rings: 4 send WQEs of 128 bytes, 4 receive WQEs, a record (a page each).
        let extra = (idle as usize) * 3 * 4096;
        // The device's own table of CQs (the tests' guests have 64), for moderation to scan.
        let tables = |config: &mut DeviceConfig| {
            config.max_qp = idle + 64;
            config.max_cq = DeviceConfig::default().max_cq;
        };
        let mut a = Node::with_config(VirtualTime::new(), 1, buf_len, pa, extra, tables);
        let mut b = Node::with_config(a.g.time.clone(), 2, buf_len, pb, extra, tables);
        for i in 0..idle {
            let qp = Qp::create_sized(&mut a, QpType::Rc, 0, (2, 7, 2));
            qp.connect(&mut a, &b, 0x10_0000 + i, i, i, conn);
            let qp = Qp::create_sized(&mut b, QpType::Rc, 0, (2, 7, 2));
            qp.connect(&mut b, &a, 0x10_0000 + i, i, i, conn);
        }
        let qa = Qp::create(&mut a, QpType::Rc);
        let qb = Qp::create(&mut b, QpType::Rc);
        qa.connect(&mut a, &b, qb.qpn, 100, 200, conn);
        qb.connect(&mut b, &a, qa.qpn, 200, 100, conn);
        Self {
            a,
            b,
            qa,
            qb,
            cqes_a: Vec::new(),
            cqes_b: Vec::new(),
        }
    }

    /// Pumps until `a` has `n_a` and `b` has `n_b` CQEs (within 60 s of device time), and
    /// returns them.
    pub fn wait_cqes(&mut self, n_a: usize, n_b: usize) -> (Vec<Cqe>, Vec<Cqe>) {
        self.pump_until(Duration::from_secs(60), |p| {
            p.cqes_a.len() >= n_a && p.cqes_b.len() >= n_b
        });
        let a: Vec<Cqe> = self.cqes_a.drain(..n_a).collect();
        let b: Vec<Cqe> = self.cqes_b.drain(..n_b).collect();
        (a, b)
    }
}

/// One node whose two RC QPs are connected to each other through the node's own MAC and GID:
/// every frame loops back inside the NIC. `wire` is the far end of its cable, where nothing
/// should arrive.
pub struct Solo {
    pub n: Node,
    pub qa: Qp,
    pub qb: Qp,
    pub wire: PortEnd,
    /// CQEs polled so far and not yet taken (both QPs share the node's CQ).
    pub cqes: Vec<Cqe>,
}

impl Driven for Pair {
    fn nodes(&self) -> Vec<&Node> {
        vec![&self.a, &self.b]
    }

    fn round(&mut self) -> bool {
        let more_a = self.a.round(&mut self.cqes_a);
        let more_b = self.b.round(&mut self.cqes_b);
        more_a || more_b
    }
}

impl Solo {
    pub fn new(buf_len: usize, conn: Conn) -> Self {
        let (port, wire) = back_to_back();
        let mut n = Node::new(1, buf_len, port);
        let qa = Qp::create(&mut n, QpType::Rc);
        let qb = Qp::create(&mut n, QpType::Rc);
        let (psn_a, psn_b) = (PSN_MASK - 20, 5);
        let (gid, mac) = (n.gid(conn.sgid_index), n.mac);
        qa.connect_to(&mut n, gid, mac, qb.qpn, psn_a, psn_b, conn);
        qb.connect_to(&mut n, gid, mac, qa.qpn, psn_b, psn_a, conn);
        Self {
            n,
            qa,
            qb,
            wire,
            cqes: Vec::new(),
        }
    }

    fn count(&self, qpn: u32) -> usize {
        self.cqes.iter().filter(|c| c.qpn == qpn).count()
    }

    /// Pumps until `qa` has `n_a` and `qb` has `n_b` CQEs (within 60 s of device time), and
    /// returns them.
    pub fn wait_cqes(&mut self, n_a: usize, n_b: usize) -> (Vec<Cqe>, Vec<Cqe>) {
        let (qpn_a, qpn_b) = (self.qa.qpn, self.qb.qpn);
        self.pump_until(Duration::from_secs(60), |s| {
            s.count(qpn_a) >= n_a && s.count(qpn_b) >= n_b
        });
        let mut taken = (Vec::new(), Vec::new());
        self.cqes.retain(|c| {
            let (list, want) = if c.qpn == qpn_a {
                (&mut taken.0, n_a)
            } else {
                (&mut taken.1, n_b)
            };
            if list.len() < want {
                list.push(*c);
                false
            } else {
                true
            }
        });
        taken
    }
}

impl Driven for Solo {
    fn nodes(&self) -> Vec<&Node> {
        vec![&self.n]
    }

    fn round(&mut self) -> bool {
        self.n.round(&mut self.cqes)
    }
}

/// A frame the node sent, decoded.
#[derive(Clone, Debug)]
pub struct Sent {
    pub bth: Bth,
    pub xrceth: Option<u32>,
    pub reth: Option<Reth>,
    pub aeth: Option<Aeth>,
    pub payload: Vec<u8>,
}

/// One node whose RC QP is connected to a peer the test plays by hand: what the node sends is
/// taken off `wire` ([`Scripted::sent`]) and what the peer answers is built by the test
/// ([`Scripted::inject`]), so that responses can be forged, stale or out of order.
pub struct Scripted {
    pub n: Node,
    pub qp: Qp,
    /// The far end of the node's cable: the test's side.
    pub wire: PortEnd,
    pub peer_mac: [u8; 6],
    pub peer_gid: [u8; 16],
    pub peer_qpn: u32,
    /// The QP's first send PSN and its first expected receive PSN.
    pub sq_psn: u32,
    pub rq_psn: u32,
    /// CQEs polled so far and not yet taken.
    pub cqes: Vec<Cqe>,
}

impl Scripted {
    /// The node (10.0.0.1) with one RC QP connected to QPN 0x77 at 10.0.0.2 (GID index 3).
    pub fn new(buf_len: usize, conn: Conn) -> Self {
        Self::of_type(buf_len, conn, QpType::Rc)
    }

    /// The same with a connected QP of `qp_type` (RC or UC).
    pub fn of_type(buf_len: usize, conn: Conn, qp_type: QpType) -> Self {
        Self::with(buf_len, conn, |n| Qp::create(n, qp_type))
    }

    /// The device's object of the QP (its state, its WQEs in flight, its transport).
    pub fn qp_object(&self) -> &ferroce_nic::objects::Qp {
        let qps = self.n.g.dev.core.objects().qps();
        qps.get(self.qp.qpn).expect("the QP exists")
    }

    /// The same with the QP `make` creates on the node (connected here).
    pub fn with(buf_len: usize, conn: Conn, make: impl FnOnce(&mut Node) -> Qp) -> Self {
        let (port, wire) = back_to_back();
        let mut n = Node::new(1, buf_len, port);
        let qp = make(&mut n);
        let peer_mac = [0x52, 0x54, 0x00, 0x00, 0x00, 0x02];
        let peer_gid = mapped([10, 0, 0, 2]);
        let (peer_qpn, sq_psn, rq_psn) = (0x77, PSN_MASK - 3, 40);
        qp.connect_to(&mut n, peer_gid, peer_mac, peer_qpn, sq_psn, rq_psn, conn);
        Self {
            n,
            qp,
            wire,
            peer_mac,
            peer_gid,
            peer_qpn,
            sq_psn,
            rq_psn,
            cqes: Vec::new(),
        }
    }

    /// Runs the device `rounds` times and collects CQEs (no time passes).
    pub fn run(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.round();
        }
    }

    /// Runs the device a few times and returns the packets it sent since the last call.
    pub fn sent(&mut self) -> Vec<Sent> {
        self.run(4);
        self.take_sent()
    }

    /// The packets that reached the test's end of the wire since the last call.
    pub fn take_sent(&mut self) -> Vec<Sent> {
        let mut out = Vec::new();
        while let Some(bytes) = self.wire.rx.pop() {
            let f = frame::parse(&bytes).expect("a RoCE frame");
            let p = Packet::parse(f.transport).expect("a transport packet");
            out.push(Sent {
                bth: p.bth,
                xrceth: p.xrceth,
                reth: p.reth,
                aeth: p.aeth,
                payload: p.payload.to_vec(),
            });
        }
        out
    }

    /// Puts packet `b` (with `payload`) on the wire towards the node as if sent from GID
    /// `sgid` (the peer's, or another's), and runs the device.
    pub fn inject_from(&mut self, sgid: [u8; 16], b: &Headers, payload: &[u8]) {
        let bytes = self.frame_from(sgid, b, payload);
        self.wire.sink.send(&bytes);
        self.run(4);
    }

    /// The frame carrying packet `b` (with `payload`) to the node from GID `sgid`.
    pub fn frame_from(&self, sgid: [u8; 16], b: &Headers, payload: &[u8]) -> Vec<u8> {
        self.frame_to(sgid, self.n.mac, self.n.gid(3), b, payload)
    }

    /// The same addressed to `dmac` and `dgid` (a multicast group's).
    pub fn frame_to(
        &self,
        sgid: [u8; 16],
        dmac: [u8; 6],
        dgid: [u8; 16],
        b: &Headers,
        payload: &[u8],
    ) -> Vec<u8> {
        let route = Route {
            smac: self.peer_mac,
            dmac,
            vlan: None,
            v1: false,
            sgid,
            dgid,
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
        };
        let mut transport = Vec::new();
        b.write(payload, &mut transport);
        let mut bytes = Vec::new();
        frame::build(&route, &transport, &mut bytes);
        bytes
    }

    /// Puts packet `b` on the wire as the peer.
    pub fn inject(&mut self, b: &Headers, payload: &[u8]) {
        self.inject_from(self.peer_gid, b, payload);
    }

    /// An ACK (or NAK: `syndrome`) of `psn` addressed to the node's QP.
    pub fn ack(&self, psn: u32, syndrome: u8) -> Headers {
        let mut b = Headers::new(opcode::op::RC_ACKNOWLEDGE, self.qp.qpn, psn);
        b.aeth = Some(Aeth { syndrome, msn: 0 });
        b
    }
}

impl Driven for Scripted {
    fn nodes(&self) -> Vec<&Node> {
        vec![&self.n]
    }

    fn round(&mut self) -> bool {
        self.n.round(&mut self.cqes)
    }
}

/// Another host's GID, for forged frames.
pub fn stranger_gid() -> [u8; 16] {
    mapped([10, 0, 0, 66])
}

/// A connection whose local ACK timeout is about 1 ms (4.096 µs × 2^8).
pub fn fast_timeout() -> Conn {
    Conn {
        timeout: 8,
        ..Conn::default()
    }
}

/// Runs the device of `s` for `ms` milliseconds of device time (every timer due meanwhile
/// fires) and returns what it sent meanwhile.
pub fn sent_during(s: &mut Scripted, ms: u64) -> Vec<Sent> {
    s.run_for(Duration::from_millis(ms));
    s.take_sent()
}

/// (wr_id, status) of each CQE.
pub fn statuses(cqes: &[Cqe]) -> Vec<(u64, WcStatus)> {
    use super::CqeStatus;
    cqes.iter().map(|c| (c.wr_id, c.wc_status())).collect()
}

/// Posts a one-packet RDMA WRITE on the scripted QP and returns its PSN, as sent.
pub fn one_write(s: &mut Scripted, wr_id: u64) -> u32 {
    let seg = rdma_seg(0x10_0000, 0x1234);
    let buf = s.n.buf;
    s.qp.post(&mut s.n, wr_id, WR_RDMA_WRITE, buf, 100, &seg, 0);
    let sent = s.sent();
    assert_eq!(sent.len(), 1, "one WRITE packet: {sent:?}");
    assert_eq!(sent[0].bth.opcode, opcode::op::RC_WRITE_ONLY);
    sent[0].bth.psn
}
