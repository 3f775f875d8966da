// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The device's counter block: indexes and names.

#[cfg(userspace)] // `counter_offset`.
use super::*;
use core::ffi::CStr;

#[cfg(userspace)] // The device counts; the driver reads them all in this order.
pub use index::*;

/// Counter indexes.
#[cfg(userspace)]
mod index {
    /// BAR0 MMIO reads.
    pub const COUNTER_MMIO_READS: usize = 0;
    /// BAR0 MMIO writes.
    pub const COUNTER_MMIO_WRITES: usize = 1;
    /// Doorbell writes (SQ, RQ, SRQ, push, CQ arm, command, EQ).
    pub const COUNTER_DOORBELLS: usize = 2;
    /// Doorbells rejected (unknown queue, bad index, wrong context).
    pub const COUNTER_BAD_DOORBELLS: usize = 3;
    /// WQEs read from rings by DMA.
    pub const COUNTER_WQE_FETCHES: usize = 4;
    /// WQEs taken from a push window.
    pub const COUNTER_WQE_PUSHES: usize = 5;
    /// Payload DMA reads.
    pub const COUNTER_PAYLOAD_DMA_READS: usize = 6;
    /// Payload DMA writes.
    pub const COUNTER_PAYLOAD_DMA_WRITES: usize = 7;
    /// Payload bytes read by DMA.
    pub const COUNTER_PAYLOAD_READ_BYTES: usize = 8;
    /// Payload bytes written by DMA.
    pub const COUNTER_PAYLOAD_WRITE_BYTES: usize = 9;
    /// CQEs written.
    pub const COUNTER_CQES: usize = 10;
    /// EQEs written.
    pub const COUNTER_EQES: usize = 11;
    /// MSI-X interrupts raised (delivered or left pending).
    pub const COUNTER_INTERRUPTS: usize = 12;
    /// Commands executed.
    pub const COUNTER_COMMANDS: usize = 13;
    /// Commands completed with a non-zero status.
    pub const COUNTER_COMMAND_ERRORS: usize = 14;
    /// DMA accesses that hit unmapped or read-only guest memory.
    pub const COUNTER_DMA_ERRORS: usize = 15;
    /// Doorbell record reads.
    pub const COUNTER_DBREC_READS: usize = 16;
    /// Async events generated.
    pub const COUNTER_ASYNC_EVENTS: usize = 17;
    /// Packets transmitted.
    pub const COUNTER_TX_PACKETS: usize = 18;
    /// Bytes transmitted.
    pub const COUNTER_TX_BYTES: usize = 19;
    /// Packets received.
    pub const COUNTER_RX_PACKETS: usize = 20;
    /// Bytes received.
    pub const COUNTER_RX_BYTES: usize = 21;
    /// Packets sent again to recover a loss (timer expiry, sequence NAK, a gap in READ
    /// responses); not those sent again after an RNR NAK ([`COUNTER_RNR_RESENDS`]).
    pub const COUNTER_RETRANSMITS: usize = 22;
    /// NAKs sent.
    pub const COUNTER_NAKS_SENT: usize = 23;
    /// NAKs received.
    pub const COUNTER_NAKS_RECEIVED: usize = 24;
    /// RNR retries.
    pub const COUNTER_RNR_RETRIES: usize = 25;
    /// Frames dropped.
    pub const COUNTER_DROPS: usize = 26;
    /// Frames with a bad ICRC.
    pub const COUNTER_ICRC_ERRORS: usize = 27;
    /// PSN sequence errors.
    pub const COUNTER_SEQ_ERRORS: usize = 28;
    /// CQ arm doorbells.
    pub const COUNTER_CQ_ARMS: usize = 29;
    /// Duplicate request packets received (answered again, never executed twice).
    pub const COUNTER_DUPLICATES: usize = 30;
    /// Retransmission timer expiries.
    pub const COUNTER_TIMEOUTS: usize = 31;
    /// Frames lost because a queue of the NIC was full (the engine's receive or loopback FIFO).
    pub const COUNTER_QUEUE_DROPS: usize = 32;
    /// Producer indexes the device found by polling doorbell records (`QP_FLAG_DB_RECORD`):
    /// each stands for a doorbell no one wrote.
    pub const COUNTER_RECORD_DOORBELLS: usize = 33;
    /// Packets sent again after an RNR NAK: the responder had no receive WQE and dropped what
    /// followed the refused packet. Flow control, not loss: they are not in `retransmits`.
    pub const COUNTER_RNR_RESENDS: usize = 34;
    /// Accesses to an on-demand MR that met a page not present (or not writable) and waited.
    pub const COUNTER_ODP_FAULTS: usize = 35;
    /// Page fault events raised (`EventType::PageFault`).
    pub const COUNTER_ODP_FAULT_EVENTS: usize = 36;
    /// On-demand page table entries filled by `CMD_UPDATE_MR_PAGES`.
    pub const COUNTER_ODP_PAGES_MAPPED: usize = 37;
    /// On-demand page table entries cleared by `CMD_UPDATE_MR_PAGES` (invalidation).
    pub const COUNTER_ODP_PAGES_INVALIDATED: usize = 38;
    /// Of [`COUNTER_RETRANSMITS`], the packets sent again because the peer reported a loss: a
    /// sequence NAK, an ACK past a READ or atomic that got no response, or a gap in READ
    /// responses. Not those after a timer expiry (the peer may only have been late) nor the
    /// answers to duplicate requests. A wire that loses nothing keeps it at 0.
    pub const COUNTER_NAK_RETRANSMITS: usize = 39;
    /// Packets sent of a SEND (every transport; first, middle, last or only).
    pub const COUNTER_TX_SEND_PACKETS: usize = 40;
    /// Packets sent of an RDMA WRITE.
    pub const COUNTER_TX_WRITE_PACKETS: usize = 41;
    /// RDMA READ requests sent.
    pub const COUNTER_TX_READ_REQUESTS: usize = 42;
    /// RDMA READ response packets sent (the data of a READ this NIC answered).
    pub const COUNTER_TX_READ_RESPONSES: usize = 43;
    /// Packets received of a SEND.
    pub const COUNTER_RX_SEND_PACKETS: usize = 44;
    /// Packets received of an RDMA WRITE.
    pub const COUNTER_RX_WRITE_PACKETS: usize = 45;
    /// RDMA READ requests received.
    pub const COUNTER_RX_READ_REQUESTS: usize = 46;
    /// RDMA READ response packets received.
    pub const COUNTER_RX_READ_RESPONSES: usize = 47;
    /// Fast registrations (REG_MR work requests) that succeeded.
    pub const COUNTER_FAST_REGISTRATIONS: usize = 48;
    /// Local invalidations (LOCAL_INV work requests) that succeeded.
    pub const COUNTER_LOCAL_INVALIDATIONS: usize = 49;
    /// Remote invalidations (a SEND with invalidate received) that succeeded.
    pub const COUNTER_REMOTE_INVALIDATIONS: usize = 50;
    /// Frames the port did not carry because it was down (`EventType::PortDown` until
    /// `EventType::PortActive`): those the engine sent to the wire and those that came from it.
    /// Frames the engine loops back to its own MAC never reach the port and still go.
    pub const COUNTER_PORT_DOWN_DROPS: usize = 51;
}

/// Number of counters.
pub const NUM_COUNTERS: usize = 52;

/// Counter names, indexed by `COUNTER_*`: C strings, because the driver hands them to ib_core
/// (`rdma_stat_desc`).
pub const COUNTER_NAMES: [&CStr; NUM_COUNTERS] = [
    c"mmio_reads",
    c"mmio_writes",
    c"doorbells",
    c"bad_doorbells",
    c"wqe_fetches",
    c"wqe_pushes",
    c"payload_dma_reads",
    c"payload_dma_writes",
    c"payload_read_bytes",
    c"payload_write_bytes",
    c"cqes",
    c"eqes",
    c"interrupts",
    c"commands",
    c"command_errors",
    c"dma_errors",
    c"dbrec_reads",
    c"async_events",
    c"tx_packets",
    c"tx_bytes",
    c"rx_packets",
    c"rx_bytes",
    c"retransmits",
    c"naks_sent",
    c"naks_received",
    c"rnr_retries",
    c"drops",
    c"icrc_errors",
    c"seq_errors",
    c"cq_arms",
    c"duplicates",
    c"timeouts",
    c"queue_drops",
    c"record_doorbells",
    c"rnr_resends",
    c"odp_faults",
    c"odp_fault_events",
    c"odp_pages_mapped",
    c"odp_pages_invalidated",
    c"nak_retransmits",
    c"tx_send_packets",
    c"tx_write_packets",
    c"tx_read_requests",
    c"tx_read_responses",
    c"rx_send_packets",
    c"rx_write_packets",
    c"rx_read_requests",
    c"rx_read_responses",
    c"fast_registrations",
    c"local_invalidations",
    c"remote_invalidations",
    c"port_down_drops",
];

/// BAR0 offset of counter `index` in the interface's layout.
#[cfg(userspace)] // The driver takes the offset from `REG_COUNTERS_OFFSET`.
pub const fn counter_offset(index: usize) -> usize {
    COUNTERS_OFFSET + index * 8
}
