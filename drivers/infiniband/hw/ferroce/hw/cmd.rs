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

hw_codes! {
    /// Returns a short name for a command opcode.
    fn command_name(u16);
    /// All command opcodes, for tables and tests.
    #[cfg(userspace)] // The device side.
    const CMD_OPCODES;
    {
        /// No operation.
        CMD_NOP = 0x0001 => "nop",
        /// Query port 1: state, MTUs, companion MAC. Reply: [`PortInfo`].
        CMD_QUERY_PORT = 0x0002 => "query_port",
        /// Set port parameters: [`SetPortCmd`].
        CMD_SET_PORT = 0x0003 => "set_port",
        /// Create a completion EQ: [`CreateEqCmd`] → [`CreateEqReply`].
        CMD_CREATE_EQ = 0x0010 => "create_eq",
        /// Destroy an EQ (no CQ may use it): [`DestroyEqCmd`].
        CMD_DESTROY_EQ = 0x0011 => "destroy_eq",
        /// Change an EQ's MSI-X vector: [`ModifyEqCmd`].
        CMD_MODIFY_EQ = 0x0012 => "modify_eq",
        /// Create a CQ: [`CreateCqCmd`] → [`CreateCqReply`].
        CMD_CREATE_CQ = 0x0020 => "create_cq",
        /// Destroy a CQ (no QP may use it): [`DestroyCqCmd`].
        CMD_DESTROY_CQ = 0x0021 => "destroy_cq",
        /// Change CQ moderation: [`ModifyCqCmd`].
        CMD_MODIFY_CQ = 0x0022 => "modify_cq",
        /// Move a CQ to a new ring (and doorbell record): [`ResizeCqCmd`].
        CMD_RESIZE_CQ = 0x0023 => "resize_cq",
        /// Create a QP in RESET: [`CreateQpCmd`] → [`CreateQpReply`].
        CMD_CREATE_QP = 0x0030 => "create_qp",
        /// Destroy a QP: [`DestroyQpCmd`].
        CMD_DESTROY_QP = 0x0031 => "destroy_qp",
        /// Modify a QP (state transitions and attributes): [`ModifyQpCmd`] → [`QpStateReply`].
        CMD_MODIFY_QP = 0x0032 => "modify_qp",
        /// Query a QP: [`DestroyQpCmd`] layout (qpn); writes a [`ModifyQpCmd`] image with all
        /// attributes to `out_addr` → [`QpStateReply`].
        CMD_QUERY_QP = 0x0033 => "query_qp",
        /// Attach a UD QP to a multicast group: [`AttachMcastCmd`].
        CMD_ATTACH_MCAST = 0x0034 => "attach_mcast",
        /// Detach a QP from a multicast group: [`DetachMcastCmd`].
        CMD_DETACH_MCAST = 0x0035 => "detach_mcast",
        /// Register an MR: [`CreateMrCmd`] → [`CreateMrReply`] (lkey = rkey).
        CMD_CREATE_MR = 0x0040 => "create_mr",
        /// Deregister an MR (no window may be bound to it): [`DestroyMrCmd`].
        CMD_DESTROY_MR = 0x0041 => "destroy_mr",
        /// Allocate a memory window: [`CreateMwCmd`] → [`CreateMwReply`].
        CMD_CREATE_MW = 0x0042 => "create_mw",
        /// Free a memory window: [`DestroyMwCmd`].
        CMD_DESTROY_MW = 0x0043 => "destroy_mw",
        /// Fill or invalidate entries of an on-demand MR's page table: [`UpdateMrPagesCmd`].
        CMD_UPDATE_MR_PAGES = 0x0044 => "update_mr_pages",
        /// Create an address handle: [`CreateAhCmd`] → [`CreateAhReply`].
        CMD_CREATE_AH = 0x0050 => "create_ah",
        /// Destroy an address handle: [`DestroyAhCmd`].
        CMD_DESTROY_AH = 0x0051 => "destroy_ah",
        /// Create an SRQ: [`CreateSrqCmd`] → [`CreateSrqReply`].
        CMD_CREATE_SRQ = 0x0060 => "create_srq",
        /// Destroy an SRQ (no QP may use it): [`DestroySrqCmd`].
        CMD_DESTROY_SRQ = 0x0061 => "destroy_srq",
        /// Arm an SRQ's limit event: [`ModifySrqCmd`].
        CMD_MODIFY_SRQ = 0x0062 => "modify_srq",
        /// Move an SRQ to a new ring (and doorbell record): [`ResizeSrqCmd`].
        CMD_RESIZE_SRQ = 0x0063 => "resize_srq",
        /// Set a GID table entry: [`SetGidCmd`].
        CMD_SET_GID = 0x0070 => "set_gid",
        /// Clear a GID table entry: [`ClearGidCmd`].
        CMD_CLEAR_GID = 0x0071 => "clear_gid",
        /// Copy counters to `out_addr`: [`QueryCountersCmd`] → [`QueryCountersReply`].
        CMD_QUERY_COUNTERS = 0x0080 => "query_counters",
        /// Allocate a context (doorbell page): no payload → [`AllocCtxReply`].
        CMD_ALLOC_CTX = 0x0090 => "alloc_ctx",
        /// Free a context and its QID table: [`FreeCtxCmd`].
        CMD_FREE_CTX = 0x0091 => "free_ctx",
        /// Map a local QID of a context to a queue: [`MapQidCmd`].
        CMD_MAP_QID = 0x0092 => "map_qid",
        /// Unmap a local QID: [`UnmapQidCmd`].
        CMD_UNMAP_QID = 0x0093 => "unmap_qid",
    }
}

hw_codes! {
    /// Returns a short name for a command status.
    fn status_name(u8);
    {
        /// Success.
        STATUS_OK = 0x00 => "ok",
        /// Unknown opcode.
        STATUS_BAD_OPCODE = 0x01 => "bad_opcode",
        /// A field is out of range or reserved bits are set (see `syndrome`).
        STATUS_BAD_PARAM = 0x02 => "bad_param",
        /// The object named does not exist.
        STATUS_BAD_RESOURCE = 0x03 => "bad_resource",
        /// The table is full.
        STATUS_NO_RESOURCES = 0x04 => "no_resources",
        /// Illegal state transition or object state.
        STATUS_BAD_STATE = 0x05 => "bad_state",
        /// The object is still referenced.
        STATUS_BUSY = 0x06 => "busy",
        /// A host address given in the command is not accessible.
        STATUS_DMA_ERROR = 0x07 => "dma_error",
        /// A size or alignment is invalid.
        STATUS_BAD_SIZE = 0x08 => "bad_size",
        /// Not supported by this device.
        STATUS_NOT_SUPPORTED = 0x09 => "not_supported",
        /// Internal error.
        STATUS_INTERNAL = 0x0a => "internal",
        /// `CREATE_MR` / `CREATE_MW`: the key of the variant asked for would be the last key of
        /// every free MR table slot (a stale rkey of the old MR would reach the new one): ask
        /// again with another variant.
        STATUS_STALE_KEY = 0x0b => "stale_key",
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
