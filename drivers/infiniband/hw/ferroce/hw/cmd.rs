// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The command queue: entry and completion framing, opcodes, status codes, the [`Command`]
//! trait with each command's typed reply, and the payloads of the EQ, CQ, AH, SRQ, counter,
//! context and QID commands.

use super::*;

/// Size of a command entry.
pub const CMD_ENTRY_SIZE: usize = 128;
/// Size of a command's payload (after the header).
pub const CMD_PAYLOAD_SIZE: usize = CMD_ENTRY_SIZE - CmdHeader::SIZE;

hw_layout! {
    /// Header of a 128-byte command entry; the command payload follows at offset 16.
    pub struct CmdHeader(16) {
        /// `CMD_*` opcode.
        pub opcode: u16,
        /// Reserved, zero.
        pub flags: u16,
        /// Driver cookie, copied into the completion and the command EQE.
        pub token: u32,
        /// Output buffer for commands with large results (`CMD_QUERY_QP`,
        /// `CMD_QUERY_COUNTERS`), 0 otherwise.
        pub out_addr: u64,
    }
}

hw_layout! {
    /// Command completion entry (32 bytes), written to the completion ring in order.
    pub struct CmdCompletion(32) {
        /// Token of the command.
        pub token: u32,
        /// Opcode of the command.
        pub opcode: u16,
        /// Command ring index of the command.
        pub index: u16,
        /// `STATUS_*`.
        pub status: u8,
        /// Reserved.
        pub rsvd0: [u8; 3],
        /// Detail for errors: byte offset in the payload of the offending field + 1, or 0.
        pub syndrome: u32,
        /// Result words of a successful command, the encoding of its [`Command::Reply`] (the
        /// new object's number, for create commands); zero on error.
        pub results: [u32; 3],
        /// Reserved.
        pub rsvd1: u16,
        /// Reserved.
        pub rsvd2: u8,
        /// Owner bit (bit 0), written last; see [`Ring::owner`].
        pub owner: u8,
    }
}

/// Encodes a whole command entry from a header and a payload (truncated to the payload size).
pub fn encode_command(header: &CmdHeader, payload: &[u8]) -> [u8; CMD_ENTRY_SIZE] {
    let mut entry = [0u8; CMD_ENTRY_SIZE];
    if let Some(dst) = entry.get_mut(..CmdHeader::SIZE) {
        dst.copy_from_slice(&header.encode());
    }
    let len = if payload.len() < CMD_PAYLOAD_SIZE {
        payload.len()
    } else {
        CMD_PAYLOAD_SIZE
    };
    if let (Some(dst), Some(src)) = (
        entry.get_mut(CmdHeader::SIZE..CmdHeader::SIZE + len),
        payload.get(..len),
    ) {
        dst.copy_from_slice(src);
    }
    entry
}

/// Returns the payload part of a command entry.
#[cfg(userspace)] // The device side.
pub fn command_payload(entry: &[u8; CMD_ENTRY_SIZE]) -> &[u8] {
    entry.get(CmdHeader::SIZE..).unwrap_or(&[])
}

// Command opcodes.
/// No operation.
pub const CMD_NOP: u16 = 0x0001;
/// Query port 1: state, MTUs, companion MAC. Reply: [`PortInfo`].
pub const CMD_QUERY_PORT: u16 = 0x0002;
/// Set port parameters: [`SetPortCmd`].
pub const CMD_SET_PORT: u16 = 0x0003;
/// Create a completion EQ: [`CreateEqCmd`] → [`CreateEqReply`].
pub const CMD_CREATE_EQ: u16 = 0x0010;
/// Destroy an EQ (no CQ may use it): [`DestroyEqCmd`].
pub const CMD_DESTROY_EQ: u16 = 0x0011;
/// Change an EQ's MSI-X vector: [`ModifyEqCmd`].
pub const CMD_MODIFY_EQ: u16 = 0x0012;
/// Create a CQ: [`CreateCqCmd`] → [`CreateCqReply`].
pub const CMD_CREATE_CQ: u16 = 0x0020;
/// Destroy a CQ (no QP may use it): [`DestroyCqCmd`].
pub const CMD_DESTROY_CQ: u16 = 0x0021;
/// Change CQ moderation: [`ModifyCqCmd`].
pub const CMD_MODIFY_CQ: u16 = 0x0022;
/// Move a CQ to a new ring (and doorbell record): [`ResizeCqCmd`].
pub const CMD_RESIZE_CQ: u16 = 0x0023;
/// Create a QP in RESET: [`CreateQpCmd`] → [`CreateQpReply`].
pub const CMD_CREATE_QP: u16 = 0x0030;
/// Destroy a QP: [`DestroyQpCmd`].
pub const CMD_DESTROY_QP: u16 = 0x0031;
/// Modify a QP (state transitions and attributes): [`ModifyQpCmd`] → [`QpStateReply`].
pub const CMD_MODIFY_QP: u16 = 0x0032;
/// Query a QP: [`DestroyQpCmd`] layout (qpn); writes a [`ModifyQpCmd`] image with all
/// attributes to `out_addr` → [`QpStateReply`].
pub const CMD_QUERY_QP: u16 = 0x0033;
/// Attach a UD QP to a multicast group: [`AttachMcastCmd`].
pub const CMD_ATTACH_MCAST: u16 = 0x0034;
/// Detach a QP from a multicast group: [`DetachMcastCmd`].
pub const CMD_DETACH_MCAST: u16 = 0x0035;
/// Register an MR: [`CreateMrCmd`] → [`CreateMrReply`] (lkey = rkey).
pub const CMD_CREATE_MR: u16 = 0x0040;
/// Deregister an MR (no window may be bound to it): [`DestroyMrCmd`].
pub const CMD_DESTROY_MR: u16 = 0x0041;
/// Fill or invalidate entries of an on-demand MR's page table: [`UpdateMrPagesCmd`].
pub const CMD_UPDATE_MR_PAGES: u16 = 0x0044;
/// Allocate a memory window: [`CreateMwCmd`] → [`CreateMwReply`].
pub const CMD_CREATE_MW: u16 = 0x0042;
/// Free a memory window: [`DestroyMwCmd`].
pub const CMD_DESTROY_MW: u16 = 0x0043;
/// Create an address handle: [`CreateAhCmd`] → [`CreateAhReply`].
pub const CMD_CREATE_AH: u16 = 0x0050;
/// Destroy an address handle: [`DestroyAhCmd`].
pub const CMD_DESTROY_AH: u16 = 0x0051;
/// Create an SRQ: [`CreateSrqCmd`] → [`CreateSrqReply`].
pub const CMD_CREATE_SRQ: u16 = 0x0060;
/// Destroy an SRQ (no QP may use it): [`DestroySrqCmd`].
pub const CMD_DESTROY_SRQ: u16 = 0x0061;
/// Arm an SRQ's limit event: [`ModifySrqCmd`].
pub const CMD_MODIFY_SRQ: u16 = 0x0062;
/// Move an SRQ to a new ring (and doorbell record): [`ResizeSrqCmd`].
pub const CMD_RESIZE_SRQ: u16 = 0x0063;
/// Set a GID table entry: [`SetGidCmd`].
pub const CMD_SET_GID: u16 = 0x0070;
/// Clear a GID table entry: [`ClearGidCmd`].
pub const CMD_CLEAR_GID: u16 = 0x0071;
/// Copy counters to `out_addr`: [`QueryCountersCmd`] → [`QueryCountersReply`].
pub const CMD_QUERY_COUNTERS: u16 = 0x0080;
/// Allocate a context (doorbell page): no payload → [`AllocCtxReply`].
pub const CMD_ALLOC_CTX: u16 = 0x0090;
/// Free a context and its QID table: [`FreeCtxCmd`].
pub const CMD_FREE_CTX: u16 = 0x0091;
/// Map a local QID of a context to a queue: [`MapQidCmd`].
pub const CMD_MAP_QID: u16 = 0x0092;
/// Unmap a local QID: [`UnmapQidCmd`].
pub const CMD_UNMAP_QID: u16 = 0x0093;

/// All command opcodes, for tables and tests.
#[cfg(userspace)] // The device side.
pub const CMD_OPCODES: [u16; 34] = [
    CMD_NOP,
    CMD_QUERY_PORT,
    CMD_SET_PORT,
    CMD_CREATE_EQ,
    CMD_DESTROY_EQ,
    CMD_MODIFY_EQ,
    CMD_CREATE_CQ,
    CMD_DESTROY_CQ,
    CMD_MODIFY_CQ,
    CMD_RESIZE_CQ,
    CMD_CREATE_QP,
    CMD_DESTROY_QP,
    CMD_MODIFY_QP,
    CMD_QUERY_QP,
    CMD_ATTACH_MCAST,
    CMD_DETACH_MCAST,
    CMD_CREATE_MR,
    CMD_DESTROY_MR,
    CMD_CREATE_MW,
    CMD_DESTROY_MW,
    CMD_UPDATE_MR_PAGES,
    CMD_CREATE_AH,
    CMD_DESTROY_AH,
    CMD_CREATE_SRQ,
    CMD_DESTROY_SRQ,
    CMD_MODIFY_SRQ,
    CMD_RESIZE_SRQ,
    CMD_SET_GID,
    CMD_CLEAR_GID,
    CMD_QUERY_COUNTERS,
    CMD_ALLOC_CTX,
    CMD_FREE_CTX,
    CMD_MAP_QID,
    CMD_UNMAP_QID,
];

/// Returns a short name for a command opcode.
pub const fn command_name(opcode: u16) -> &'static str {
    match opcode {
        CMD_NOP => "nop",
        CMD_QUERY_PORT => "query_port",
        CMD_SET_PORT => "set_port",
        CMD_CREATE_EQ => "create_eq",
        CMD_DESTROY_EQ => "destroy_eq",
        CMD_MODIFY_EQ => "modify_eq",
        CMD_CREATE_CQ => "create_cq",
        CMD_DESTROY_CQ => "destroy_cq",
        CMD_MODIFY_CQ => "modify_cq",
        CMD_RESIZE_CQ => "resize_cq",
        CMD_CREATE_QP => "create_qp",
        CMD_DESTROY_QP => "destroy_qp",
        CMD_MODIFY_QP => "modify_qp",
        CMD_QUERY_QP => "query_qp",
        CMD_ATTACH_MCAST => "attach_mcast",
        CMD_DETACH_MCAST => "detach_mcast",
        CMD_CREATE_MR => "create_mr",
        CMD_DESTROY_MR => "destroy_mr",
        CMD_CREATE_MW => "create_mw",
        CMD_DESTROY_MW => "destroy_mw",
        CMD_UPDATE_MR_PAGES => "update_mr_pages",
        CMD_CREATE_AH => "create_ah",
        CMD_DESTROY_AH => "destroy_ah",
        CMD_CREATE_SRQ => "create_srq",
        CMD_DESTROY_SRQ => "destroy_srq",
        CMD_MODIFY_SRQ => "modify_srq",
        CMD_RESIZE_SRQ => "resize_srq",
        CMD_SET_GID => "set_gid",
        CMD_CLEAR_GID => "clear_gid",
        CMD_QUERY_COUNTERS => "query_counters",
        CMD_ALLOC_CTX => "alloc_ctx",
        CMD_FREE_CTX => "free_ctx",
        CMD_MAP_QID => "map_qid",
        CMD_UNMAP_QID => "unmap_qid",
        _ => "unknown",
    }
}

// Command status codes.
/// Success.
pub const STATUS_OK: u8 = 0x00;
/// Unknown opcode.
pub const STATUS_BAD_OPCODE: u8 = 0x01;
/// A field is out of range or reserved bits are set (see `syndrome`).
pub const STATUS_BAD_PARAM: u8 = 0x02;
/// The object named does not exist.
pub const STATUS_BAD_RESOURCE: u8 = 0x03;
/// The table is full.
pub const STATUS_NO_RESOURCES: u8 = 0x04;
/// Illegal state transition or object state.
pub const STATUS_BAD_STATE: u8 = 0x05;
/// The object is still referenced.
pub const STATUS_BUSY: u8 = 0x06;
/// A host address given in the command is not accessible.
pub const STATUS_DMA_ERROR: u8 = 0x07;
/// A size or alignment is invalid.
pub const STATUS_BAD_SIZE: u8 = 0x08;
/// Not supported by this device.
pub const STATUS_NOT_SUPPORTED: u8 = 0x09;
/// Internal error.
pub const STATUS_INTERNAL: u8 = 0x0a;
/// `CREATE_MR` / `CREATE_MW`: the key of the variant asked for would be the last key of every
/// free MR table slot (a stale rkey of the old MR would reach the new one): ask again with
/// another variant.
pub const STATUS_STALE_KEY: u8 = 0x0b;

/// Returns a short name for a command status.
pub const fn status_name(status: u8) -> &'static str {
    match status {
        STATUS_OK => "ok",
        STATUS_BAD_OPCODE => "bad_opcode",
        STATUS_BAD_PARAM => "bad_param",
        STATUS_BAD_RESOURCE => "bad_resource",
        STATUS_NO_RESOURCES => "no_resources",
        STATUS_BAD_STATE => "bad_state",
        STATUS_BUSY => "busy",
        STATUS_DMA_ERROR => "dma_error",
        STATUS_BAD_SIZE => "bad_size",
        STATUS_NOT_SUPPORTED => "not_supported",
        STATUS_INTERNAL => "internal",
        STATUS_STALE_KEY => "stale_key",
        _ => "unknown",
    }
}

/// A command payload type: its opcode, its encoding and the type of its reply.
pub trait Command: Sized {
    /// The command's opcode.
    const OPCODE: u16;
    /// What a successful completion of this command carries in its result words.
    type Reply: Reply;
    /// Encodes the payload (zero-padded to `CMD_PAYLOAD_SIZE`).
    fn to_payload(&self) -> [u8; CMD_PAYLOAD_SIZE];
    /// Decodes the payload; a short payload is zero-padded.
    #[cfg(userspace)] // The device decodes commands.
    fn from_payload(payload: &[u8]) -> Self;
}

/// A command's reply, carried in the three result words of its [`CmdCompletion`].
pub trait Reply: Sized {
    /// Encodes as completion result words.
    #[cfg(userspace)] // The device encodes replies.
    fn to_results(&self) -> [u32; 3];
    /// Decodes from completion result words; `None` if they hold no valid reply (a driver must
    /// not trust what the device wrote).
    fn from_results(results: [u32; 3]) -> Option<Self>;
}

/// Commands that only succeed or fail.
impl Reply for () {
    #[cfg(userspace)]
    fn to_results(&self) -> [u32; 3] {
        [0; 3]
    }

    fn from_results(_: [u32; 3]) -> Option<Self> {
        Some(())
    }
}

impl CmdCompletion {
    /// The reply of command `C` this completion carries; `None` if the result words do not
    /// decode (the status must have been checked first).
    pub fn reply<C: Command>(&self) -> Option<C::Reply> {
        C::Reply::from_results(self.results)
    }
}

hw_layout! {
    /// `CMD_NOP` payload (none).
    pub struct NopCmd(8) {
        /// Reserved, zero.
        pub rsvd: u64,
    }
}
hw_command!(NopCmd, CMD_NOP);
hw_layout! {
    /// `CMD_CREATE_EQ` payload (completion EQs; numbers from `EQN_FIRST_COMPLETION`).
    pub struct CreateEqCmd(24) {
        /// EQE ring (16-byte EQEs).
        pub ring: BufDesc,
        /// log2 of the number of EQEs.
        pub log_size: u8,
        /// Reserved, zero.
        pub rsvd0: u8,
        /// MSI-X vector.
        pub vector: u16,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_number_reply! {
    /// Reply of `CMD_CREATE_EQ`.
    CreateEqReply { eqn }
}
hw_command!(CreateEqCmd, CMD_CREATE_EQ, CreateEqReply);

hw_layout! {
    /// `CMD_DESTROY_EQ` payload.
    pub struct DestroyEqCmd(8) {
        /// EQ number.
        pub eqn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyEqCmd, CMD_DESTROY_EQ);

hw_layout! {
    /// `CMD_MODIFY_EQ` payload.
    pub struct ModifyEqCmd(8) {
        /// EQ number.
        pub eqn: u32,
        /// New MSI-X vector.
        pub vector: u16,
        /// Reserved, zero.
        pub rsvd: u16,
    }
}
hw_command!(ModifyEqCmd, CMD_MODIFY_EQ);

hw_layout! {
    /// `CMD_CREATE_CQ` payload.
    pub struct CreateCqCmd(40) {
        /// CQE ring (64-byte CQEs).
        pub ring: BufDesc,
        /// Doorbell record ([`CqDbRecord`]), 8-byte aligned.
        pub dbrec_addr: u64,
        /// Completion EQ receiving this CQ's completion events.
        pub eqn: u32,
        /// log2 of the number of CQEs.
        pub log_size: u8,
        /// Reserved, zero.
        pub flags: u8,
        /// Moderation: event after this many CQEs (0 or 1 = every CQE).
        pub moder_count: u16,
        /// Moderation: or after this many microseconds since the first unreported CQE (0 = off).
        pub moder_period_us: u16,
        /// Reserved, zero.
        pub rsvd0: u16,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_number_reply! {
    /// Reply of `CMD_CREATE_CQ`.
    CreateCqReply { cqn }
}
hw_command!(CreateCqCmd, CMD_CREATE_CQ, CreateCqReply);

hw_layout! {
    /// `CMD_DESTROY_CQ` payload.
    pub struct DestroyCqCmd(8) {
        /// CQ number.
        pub cqn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyCqCmd, CMD_DESTROY_CQ);

hw_layout! {
    /// `CMD_MODIFY_CQ` payload.
    pub struct ModifyCqCmd(16) {
        /// CQ number.
        pub cqn: u32,
        /// Reserved, zero.
        pub rsvd0: u32,
        /// New moderation count.
        pub moder_count: u16,
        /// New moderation period in microseconds.
        pub moder_period_us: u16,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_command!(ModifyCqCmd, CMD_MODIFY_CQ);

hw_layout! {
    /// `CMD_RESIZE_CQ` payload: the CQ moves to a new ring and doorbell record, losing and
    /// repeating no CQE. At its producer index the device writes a marker CQE
    /// ([`CQE_OP_RESIZE`]) into the old ring, the last it writes there; every later CQE goes
    /// to the new ring, from that same index on (the marker takes no index). Before the
    /// switch the device makes every entry of the new ring read as not written yet for the
    /// index it will next hold, and it reads the consumer index from the new record from then
    /// on. The consumer polls the old ring up to the marker, then reads the marker's index
    /// again in the new ring; it keeps its consumer index in both records until it gets
    /// there. Refused (`STATUS_BAD_PARAM`) if the new ring has fewer entries than the CQEs
    /// not consumed yet and those owed for send WQEs already posted on QPs completing there
    /// (however late the device gets to them), and (`STATUS_BUSY`) if the old ring is full
    /// (no slot for the marker).
    pub struct ResizeCqCmd(32) {
        /// The new CQE ring.
        pub ring: BufDesc,
        /// The new doorbell record ([`CqDbRecord`]), 8-byte aligned.
        pub dbrec_addr: u64,
        /// CQ number.
        pub cqn: u32,
        /// log2 of the number of CQEs of the new ring.
        pub log_size: u8,
        /// Reserved, zero.
        pub rsvd0: u8,
        /// Reserved, zero.
        pub rsvd1: u16,
    }
}
hw_command!(ResizeCqCmd, CMD_RESIZE_CQ);
hw_layout! {
    /// `CMD_CREATE_AH` payload (UD address vector).
    pub struct CreateAhCmd(40) {
        /// Protection domain tag.
        pub pd: u32,
        /// Flow label (20 bits).
        pub flow_label: u32,
        /// Destination GID.
        pub dgid: [u8; 16],
        /// Destination (next hop) MAC.
        pub dmac: [u8; 6],
        /// VLAN ID or [`VLAN_NONE`], for the record: the device uses the source GID entry's.
        pub vlan: u16,
        /// Source GID index.
        pub sgid_index: u8,
        /// Hop limit / TTL.
        pub hop_limit: u8,
        /// Traffic class.
        pub traffic_class: u8,
        /// Reserved, zero.
        pub rsvd0: u8,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_number_reply! {
    /// Reply of `CMD_CREATE_AH`.
    CreateAhReply { ah }
}
hw_command!(CreateAhCmd, CMD_CREATE_AH, CreateAhReply);

hw_layout! {
    /// `CMD_DESTROY_AH` payload.
    pub struct DestroyAhCmd(8) {
        /// AH number.
        pub ah: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyAhCmd, CMD_DESTROY_AH);

hw_enum! {
    /// SRQ types (`CreateSrqCmd::srq_type`).
    pub enum SrqType {
        /// Used by the RC and UC QPs created with it.
        Basic = 0,
        /// An XRC SRQ: the XRC_TGT QPs of its domain deliver into it the requests that name
        /// it, with its PD, and complete them on its own CQ.
        Xrc = 1,
    }
}

hw_layout! {
    /// `CMD_CREATE_SRQ` payload.
    pub struct CreateSrqCmd(48) {
        /// Receive ring.
        pub ring: BufDesc,
        /// Doorbell record ([`SrqDbRecord`]), 8-byte aligned.
        pub dbrec_addr: u64,
        /// Protection domain tag: its receive buffers', and for an XRC SRQ that of every
        /// memory access a request it receives makes.
        pub pd: u32,
        /// Limit: `SRQ_LIMIT` event when fewer WQEs remain (0 = disarmed).
        pub limit: u32,
        /// log2 of entries.
        pub log_size: u8,
        /// log2 of the WQE stride.
        pub log_stride: u8,
        /// [`SrqType`].
        pub srq_type: u8,
        /// Reserved, zero.
        pub rsvd0: u8,
        /// XRC: the XRC domain (non-zero) whose XRC_TGT QPs may deliver into it; zero
        /// otherwise.
        pub xrcd: u32,
        /// XRC: the CQ of its receive completions; zero otherwise.
        pub cqn: u32,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_number_reply! {
    /// Reply of `CMD_CREATE_SRQ`.
    CreateSrqReply { srqn }
}
hw_command!(CreateSrqCmd, CMD_CREATE_SRQ, CreateSrqReply);

hw_layout! {
    /// `CMD_DESTROY_SRQ` payload.
    pub struct DestroySrqCmd(8) {
        /// SRQ number.
        pub srqn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroySrqCmd, CMD_DESTROY_SRQ);

hw_layout! {
    /// `CMD_MODIFY_SRQ` payload: (re-)arm the limit event.
    pub struct ModifySrqCmd(8) {
        /// SRQ number.
        pub srqn: u32,
        /// New limit (0 disarms); must be below the ring size.
        pub limit: u32,
    }
}
hw_command!(ModifySrqCmd, CMD_MODIFY_SRQ);

hw_layout! {
    /// `CMD_RESIZE_SRQ` payload: the SRQ moves to a new ring and doorbell record, losing no
    /// posted WQE. The device copies the WQEs it has not taken yet (from its consumer index to
    /// the producer index of the old record) into the new ring, each at its index, takes WQEs
    /// from the new ring from then on and reads the producer index from the new record. The
    /// producer posts nothing while the command runs and has written its producer index into
    /// the new record before; the device no longer reads the old ring once the command is
    /// done. Refused (`STATUS_BAD_PARAM`) if the new ring has fewer entries than the WQEs not
    /// taken or than the armed limit, or a smaller stride than the old one.
    pub struct ResizeSrqCmd(32) {
        /// The new receive ring.
        pub ring: BufDesc,
        /// The new doorbell record ([`SrqDbRecord`]), 8-byte aligned.
        pub dbrec_addr: u64,
        /// SRQ number.
        pub srqn: u32,
        /// log2 of the entries of the new ring.
        pub log_size: u8,
        /// log2 of its WQE stride.
        pub log_stride: u8,
        /// Reserved, zero.
        pub rsvd: u16,
    }
}
hw_command!(ResizeSrqCmd, CMD_RESIZE_SRQ);
hw_layout! {
    /// `CMD_QUERY_COUNTERS` payload: copies `count` u64 counters starting at `first` to the
    /// header's `out_addr`.
    pub struct QueryCountersCmd(8) {
        /// First counter index.
        pub first: u32,
        /// Number of counters.
        pub count: u32,
    }
}
/// Reply of `CMD_QUERY_COUNTERS`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryCountersReply {
    /// Number of counters copied to `out_addr`.
    pub copied: u32,
}

impl Reply for QueryCountersReply {
    #[cfg(userspace)]
    fn to_results(&self) -> [u32; 3] {
        [self.copied, 0, 0]
    }

    fn from_results(results: [u32; 3]) -> Option<Self> {
        Some(Self { copied: results[0] })
    }
}
hw_command!(QueryCountersCmd, CMD_QUERY_COUNTERS, QueryCountersReply);

hw_layout! {
    /// `CMD_ALLOC_CTX` payload (none).
    pub struct AllocCtxCmd(8) {
        /// Reserved, zero.
        pub rsvd: u64,
    }
}
hw_number_reply! {
    /// Reply of `CMD_ALLOC_CTX`.
    AllocCtxReply { ctx }
}
hw_command!(AllocCtxCmd, CMD_ALLOC_CTX, AllocCtxReply);

hw_layout! {
    /// `CMD_FREE_CTX` payload. Context 0 cannot be freed.
    pub struct FreeCtxCmd(8) {
        /// Context number.
        pub ctx: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(FreeCtxCmd, CMD_FREE_CTX);

/// QID kind: a QP (SQ, RQ and push doorbells).
pub const QID_KIND_QP: u8 = 1;
/// QID kind: an SRQ (SRQ doorbells).
pub const QID_KIND_SRQ: u8 = 2;
/// QID kind: a CQ (arm doorbells).
pub const QID_KIND_CQ: u8 = 3;

hw_layout! {
    /// `CMD_MAP_QID` payload: doorbells on context `ctx`'s page naming `local_qid` act on
    /// queue `global` of kind `kind`.
    pub struct MapQidCmd(16) {
        /// Context.
        pub ctx: u32,
        /// Local QID (< `QID_TABLE_LEN`).
        pub local_qid: u32,
        /// Global QPN, SRQN or CQN.
        pub global: u32,
        /// `QID_KIND_*`.
        pub kind: u8,
        /// Reserved, zero.
        pub rsvd: [u8; 3],
    }
}
hw_command!(MapQidCmd, CMD_MAP_QID);

hw_layout! {
    /// `CMD_UNMAP_QID` payload.
    pub struct UnmapQidCmd(8) {
        /// Context.
        pub ctx: u32,
        /// Local QID.
        pub local_qid: u32,
    }
}
hw_command!(UnmapQidCmd, CMD_UNMAP_QID);
