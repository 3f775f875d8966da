// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Queue pairs: types, states and their transitions, attribute masks, and the QP commands.

use super::*;

hw_enum! {
    /// QP types (IB `ib_qp_type` values).
    pub enum QpType {
        /// The GSI QP (QP1).
        Gsi = 1,
        /// Reliable connected.
        Rc = 2,
        /// Unreliable connected: RC's SEND and RDMA WRITE without acknowledgements; a lost
        /// packet loses its message, which is never retransmitted.
        Uc = 3,
        /// Unreliable datagram.
        Ud = 4,
        /// XRC initiator: RC's send side, each request naming an XRC SRQ at the target
        /// (`WqeCtrl::xrc_srqn`); no receive queue.
        XrcIni = 9,
        /// XRC target: RC's receive side in an XRC domain (`CreateQpCmd::xrcd`); a request's
        /// XRCETH names the SRQ of that domain that receives it. No rings, no PD, no CQs.
        XrcTgt = 10,
    }
}

impl QpType {
    /// Whether the QP sends datagrams with an address vector per WQE (UD and GSI).
    pub const fn is_datagram(self) -> bool {
        matches!(self, QpType::Ud | QpType::Gsi)
    }

    /// Whether the QP is connected to one remote QP, set by `modify_qp` (RC, UC, XRC).
    pub const fn is_connected(self) -> bool {
        matches!(
            self,
            QpType::Rc | QpType::Uc | QpType::XrcIni | QpType::XrcTgt
        )
    }

    /// Whether the QP's messages are acknowledged and retransmitted (RC and XRC).
    pub const fn is_reliable(self) -> bool {
        matches!(self, QpType::Rc | QpType::XrcIni | QpType::XrcTgt)
    }

    /// Whether the QP is one half of an XRC connection.
    pub const fn is_xrc(self) -> bool {
        matches!(self, QpType::XrcIni | QpType::XrcTgt)
    }

    /// Whether the QP may take its receive WQEs from an SRQ of its own (RC and UC; an
    /// XRC_TGT QP's requests name theirs).
    pub const fn may_use_srq(self) -> bool {
        matches!(self, QpType::Rc | QpType::Uc)
    }

    /// Whether the QP has a send queue (all but XRC_TGT).
    pub const fn has_sq(self) -> bool {
        !matches!(self, QpType::XrcTgt)
    }

    /// Whether the QP has receive WQEs of its own, in an RQ or an SRQ (not XRC).
    pub const fn has_rq(self) -> bool {
        !self.is_xrc()
    }
}
/// QPN of the GSI QP.
pub const GSI_QPN: u32 = 1;
/// First QPN for RC, UC and UD QPs.
pub const FIRST_QPN: u32 = 2;

/// `CreateQpCmd::flags`: every send WQE generates a CQE (`IB_SIGNAL_ALL_WR`).
pub const QP_FLAG_SIGNAL_ALL: u8 = 1 << 0;
/// `CreateQpCmd::flags`: UD send WQEs must name an AH by handle (`UdSeg`); one with an inline
/// address vector (`WQE_FLAG_AV`) is malformed. The kernel sets it on a process's QPs, whose
/// destinations it checked when it created their AHs.
pub const QP_FLAG_AH_HANDLES: u8 = 1 << 1;
/// `CreateQpCmd::flags` (capability `CAP_DB_RECORD`): the device polls the QP's doorbell
/// record for new producer indexes, so its owner writes no SQ doorbell (it may still, and
/// `DB_PUSH` still pushes).
pub const QP_FLAG_DB_RECORD: u8 = 1 << 2;
/// `CreateQpCmd::flags`: defined bits.
#[cfg(userspace)] // The device checks commands.
pub const QP_FLAGS_VALID: u8 = QP_FLAG_SIGNAL_ALL | QP_FLAG_AH_HANDLES | QP_FLAG_DB_RECORD;

hw_layout! {
    /// `CMD_CREATE_QP` payload. The QP starts in RESET. An XRC_INI QP has no receive side:
    /// `rq` zero, `rq_cqn` and `srqn` [`NONE`]. An XRC_TGT QP has only `qp_type` and `xrcd`:
    /// every ring, `dbrec_addr`, `pd` and `flags` zero, every CQ and the SRQ [`NONE`].
    pub struct CreateQpCmd(72) {
        /// Send ring.
        pub sq: BufDesc,
        /// Receive ring (ignored with an SRQ).
        pub rq: BufDesc,
        /// Doorbell record ([`QpDbRecord`]), 8-byte aligned.
        pub dbrec_addr: u64,
        /// Protection domain tag chosen by the driver; MRs must match.
        pub pd: u32,
        /// CQ for send completions.
        pub sq_cqn: u32,
        /// CQ for receive completions.
        pub rq_cqn: u32,
        /// SRQ, or [`NONE`].
        pub srqn: u32,
        /// [`QpType`].
        pub qp_type: u8,
        /// log2 of SQ entries.
        pub sq_log_size: u8,
        /// log2 of the SQ WQE stride.
        pub sq_log_stride: u8,
        /// log2 of RQ entries.
        pub rq_log_size: u8,
        /// log2 of the RQ WQE stride.
        pub rq_log_stride: u8,
        /// `QP_FLAG_*`.
        pub flags: u8,
        /// Reserved, zero.
        pub rsvd: u16,
        /// XRC_TGT: its XRC domain, a non-zero tag chosen by the driver (like a PD's); the
        /// SRQs a request may name are that domain's. Zero for every other type.
        pub xrcd: u32,
        /// Reserved, zero.
        pub rsvd2: u32,
    }
}
hw_number_reply! {
    /// Reply of `CMD_CREATE_QP`.
    CreateQpReply { qpn }
}
hw_command!(CreateQpCmd, CMD_CREATE_QP, CreateQpReply);

hw_layout! {
    /// `CMD_DESTROY_QP` (and `CMD_QUERY_QP`) payload.
    pub struct DestroyQpCmd(8) {
        /// QP number.
        pub qpn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyQpCmd, CMD_DESTROY_QP);

/// `CMD_QUERY_QP` payload (same layout as [`DestroyQpCmd`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryQpCmd {
    /// QP number.
    pub qpn: u32,
}

/// Reply of `CMD_MODIFY_QP` (the state reached) and `CMD_QUERY_QP` (the current state; the
/// attributes go to the header's `out_addr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpStateReply {
    /// The QP's current state.
    pub state: QpState,
}

impl Reply for QpStateReply {
    #[cfg(userspace)]
    fn to_results(&self) -> [u32; 3] {
        [u32::from(u8::from(self.state)), 0, 0]
    }

    fn from_results(results: [u32; 3]) -> Option<Self> {
        let state = QpState::from_raw(u8::try_from(results[0]).ok()?)?;
        Some(Self { state })
    }
}

impl Command for QueryQpCmd {
    const OPCODE: u16 = CMD_QUERY_QP;
    type Reply = QpStateReply;

    fn to_payload(&self) -> [u8; CMD_PAYLOAD_SIZE] {
        DestroyQpCmd {
            qpn: self.qpn,
            rsvd: 0,
        }
        .to_payload()
    }

    #[cfg(userspace)]
    fn from_payload(payload: &[u8]) -> Self {
        Self {
            qpn: DestroyQpCmd::from_payload(payload).qpn,
        }
    }
}

hw_enum! {
    /// QP states (IB `ib_qp_state` values). The derived order is the declaration order, which
    /// is the order of the values.
    pub enum QpState {
        /// Reset.
        Reset = 0,
        /// Initialized.
        Init = 1,
        /// Ready to receive.
        Rtr = 2,
        /// Ready to send.
        Rts = 3,
        /// Send queue drained.
        Sqd = 4,
        /// Send queue error.
        Sqe = 5,
        /// Error.
        Err = 6,
    }
}

/// `ModifyQpCmd::cur_state` value meaning "don't check".
#[cfg(userspace)] // ib_core always names the current state.
pub const QP_STATE_ANY: u8 = 0xff;

impl QpState {
    /// Whether the IB state machine allows `self → to` through a modify command.
    pub const fn can_move_to(self, to: QpState) -> bool {
        use QpState::*;
        matches!(
            (self, to),
            (_, Reset | Err)
                | (Reset, Init)
                | (Init, Init | Rtr)
                | (Rtr, Rts)
                | (Rts, Rts | Sqd)
                | (Sqd, Sqd | Rts)
                | (Sqe, Rts)
        )
    }
}

// Attribute mask bits (IB `ib_qp_attr_mask` values).
/// `new_state` is valid.
pub const QP_ATTR_STATE: u32 = 1 << 0;
/// `cur_state` is valid.
pub const QP_ATTR_CUR_STATE: u32 = 1 << 1;
/// `access_flags`.
pub const QP_ATTR_ACCESS_FLAGS: u32 = 1 << 3;
/// `pkey_index`.
pub const QP_ATTR_PKEY_INDEX: u32 = 1 << 4;
/// Port (must be 1; no field).
pub const QP_ATTR_PORT: u32 = 1 << 5;
/// `qkey`.
pub const QP_ATTR_QKEY: u32 = 1 << 6;
/// Address vector: `sgid_index`, `dgid`, `dmac`, `vlan`, `hop_limit`, `traffic_class`,
/// `flow_label`.
pub const QP_ATTR_AV: u32 = 1 << 7;
/// `path_mtu`.
pub const QP_ATTR_PATH_MTU: u32 = 1 << 8;
/// `timeout`.
pub const QP_ATTR_TIMEOUT: u32 = 1 << 9;
/// `retry_cnt`.
pub const QP_ATTR_RETRY_CNT: u32 = 1 << 10;
/// `rnr_retry`.
pub const QP_ATTR_RNR_RETRY: u32 = 1 << 11;
/// `rq_psn`.
pub const QP_ATTR_RQ_PSN: u32 = 1 << 12;
/// `max_rd_atomic`.
pub const QP_ATTR_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
/// `min_rnr_timer`.
pub const QP_ATTR_MIN_RNR_TIMER: u32 = 1 << 15;
/// `sq_psn`.
pub const QP_ATTR_SQ_PSN: u32 = 1 << 16;
/// `max_dest_rd_atomic`.
pub const QP_ATTR_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
/// `dest_qpn`.
pub const QP_ATTR_DEST_QPN: u32 = 1 << 20;
/// All mask bits the device understands.
pub const QP_ATTR_VALID_MASK: u32 = QP_ATTR_STATE
    | QP_ATTR_CUR_STATE
    | QP_ATTR_ACCESS_FLAGS
    | QP_ATTR_PKEY_INDEX
    | QP_ATTR_PORT
    | QP_ATTR_QKEY
    | QP_ATTR_AV
    | QP_ATTR_PATH_MTU
    | QP_ATTR_TIMEOUT
    | QP_ATTR_RETRY_CNT
    | QP_ATTR_RNR_RETRY
    | QP_ATTR_RQ_PSN
    | QP_ATTR_MAX_QP_RD_ATOMIC
    | QP_ATTR_MIN_RNR_TIMER
    | QP_ATTR_SQ_PSN
    | QP_ATTR_MAX_DEST_RD_ATOMIC
    | QP_ATTR_DEST_QPN;

/// Largest PSN (24 bits).
pub const PSN_MASK: u32 = 0x00ff_ffff;
/// Largest QPN, and largest SRQN an XRCETH carries (24 bits).
pub const QPN_MASK: u32 = 0x00ff_ffff;
/// Largest flow label (20 bits).
pub const FLOW_LABEL_MASK: u32 = 0x000f_ffff;
/// Largest outstanding RDMA READ / atomic depth.
pub const MAX_RD_ATOMIC: u8 = 16;

hw_layout! {
    /// `CMD_MODIFY_QP` payload, and the `CMD_QUERY_QP` output image (with `attr_mask` = all
    /// valid bits and `new_state` = the current state).
    pub struct ModifyQpCmd(72) {
        /// QP number.
        pub qpn: u32,
        /// `QP_ATTR_*` bits naming the valid fields.
        pub attr_mask: u32,
        /// Target state ([`QpState`]), with `QP_ATTR_STATE`.
        pub new_state: u8,
        /// Expected current state, with `QP_ATTR_CUR_STATE`.
        pub cur_state: u8,
        /// Path MTU (`MTU_*`).
        pub path_mtu: u8,
        /// Source GID index.
        pub sgid_index: u8,
        /// Destination GID.
        pub dgid: [u8; 16],
        /// Destination MAC (the next hop's: the gateway's across subnets).
        pub dmac: [u8; 6],
        /// VLAN ID, or [`VLAN_NONE`], for the record: the device sends with the VLAN of the
        /// source GID's entry.
        pub vlan: u16,
        /// Flow label (20 bits); also selects the UDP source port.
        pub flow_label: u32,
        /// Destination QP number (24 bits).
        pub dest_qpn: u32,
        /// Expected receive PSN (24 bits).
        pub rq_psn: u32,
        /// Send PSN (24 bits).
        pub sq_psn: u32,
        /// Q_Key (UD, GSI).
        pub qkey: u32,
        /// Remote access flags (`ACCESS_REMOTE_*`).
        pub access_flags: u32,
        /// Hop limit / TTL.
        pub hop_limit: u8,
        /// Traffic class (DSCP << 2 | ECN).
        pub traffic_class: u8,
        /// Local ACK timeout exponent (4.096 µs × 2^timeout).
        pub timeout: u8,
        /// Transport retry count (0..=7).
        pub retry_cnt: u8,
        /// RNR retry count (0..=7, 7 = infinite).
        pub rnr_retry: u8,
        /// Minimum RNR NAK timer (IB encoding, 0..=31).
        pub min_rnr_timer: u8,
        /// Outstanding RDMA READ / atomic as requester.
        pub max_rd_atomic: u8,
        /// Outstanding RDMA READ / atomic as responder.
        pub max_dest_rd_atomic: u8,
        /// P_Key index (must be 0).
        pub pkey_index: u16,
        /// Reserved, zero.
        pub rsvd: u16,
    }
}
hw_command!(ModifyQpCmd, CMD_MODIFY_QP, QpStateReply);
