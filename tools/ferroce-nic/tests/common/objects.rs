// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Objects beyond a node's MR and QPs, as the tests and the fuzz bodies make them: on-demand
//! MRs and the driver's answers to their page faults, memory windows, multicast groups.

use ferroce_hw::*;

use super::roce::{Node, PD};
use super::Guest;

/// The page size of on-demand MRs.
pub const PAGE: u64 = 4096;

/// 239.1.1.1, as rdma_cm names a RoCE v2 group (`::ffff:239.1.1.1`), and its MAC (RFC 1112).
pub const GROUP_IP: [u8; 4] = [239, 1, 1, 1];
pub const GROUP_MAC: [u8; 6] = [0x01, 0x00, 0x5e, 0x01, 0x01, 0x01];

/// CREATE_MR of an on-demand MR over `[addr, addr + len)` (iova = address), no page present.
pub fn on_demand(addr: u64, len: u64, access: u32) -> CreateMrCmd {
    CreateMrCmd {
        iova: addr,
        length: len,
        pages: BufDesc {
            page_count: (len + (addr % PAGE)).div_ceil(PAGE) as u32,
            log_page_size: 12,
            ..BufDesc::default()
        },
        pd: PD,
        access,
        flags: MR_FLAG_ON_DEMAND,
        ..CreateMrCmd::default()
    }
}

/// Creates an on-demand MR over `[addr, addr + len)`; returns its key.
pub fn odp_mr(node: &mut Node, addr: u64, len: u64, access: u32) -> u32 {
    node.g.ok(&on_demand(addr, len, access)).key
}

/// The page faults among `events`.
pub fn page_faults(events: Vec<Eqe>) -> Vec<Eqe> {
    events
        .into_iter()
        .filter(|e| e.event_type == u8::from(EventType::PageFault))
        .collect()
}

/// What a driver answers a fault with.
#[derive(Clone, Copy, PartialEq)]
pub enum Answer {
    /// The pages, writable.
    Writable,
    /// The pages, read only.
    ReadOnly,
    /// The pages cannot be had.
    Failed,
}

/// Answers page fault `f` of the MR over the guest range starting at `base` (page-aligned),
/// as the driver does: the pages' addresses with their rights, by `CMD_UPDATE_MR_PAGES`.
/// Returns the command's status.
pub fn answer(g: &mut Guest, base: u64, f: &Eqe, how: Answer) -> u8 {
    let entries: Vec<u8> = (0..u64::from(f.data2))
        .flat_map(|i| {
            let page = base + (u64::from(f.data1) + i) * PAGE;
            let entry = match how {
                Answer::Writable => page | ODP_PAGE_READ | ODP_PAGE_WRITE,
                Answer::ReadOnly => page | ODP_PAGE_READ,
                Answer::Failed => ODP_PAGE_FAILED,
            };
            entry.to_le_bytes()
        })
        .collect();
    let table = g.alloc(entries.len().max(8), 8);
    g.write(table, &entries);
    g.cmd(&UpdateMrPagesCmd {
        pages: table,
        key: f.data0,
        first: f.data1,
        count: u32::from(f.data2),
        flags: 0,
    })
    .status
}

/// Creates a memory window of `mw_type` in the node's PD; returns its key (variant 0x10).
pub fn create_mw(g: &mut Guest, mw_type: u8) -> u32 {
    g.ok(&CreateMwCmd {
        pd: PD,
        mw_type,
        key_variant: 0x10,
        ..CreateMwCmd::default()
    })
    .key
}

/// The next key of a window (its variant byte + 1), as `ibv_inc_rkey`.
pub fn next_key(key: u32) -> u32 {
    (key & !0xff) | ((key + 1) & 0xff)
}

/// Attaches UD QP `qpn` to group `mgid`; returns the command's status.
pub fn attach(g: &mut Guest, qpn: u32, mgid: [u8; 16]) -> u8 {
    g.cmd(&AttachMcastCmd {
        qpn,
        mgid,
        ..AttachMcastCmd::default()
    })
    .status
}
