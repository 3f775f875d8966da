// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! A device that lies, for testing the driver: switches that make the model write CQEs, EQEs
//! (page faults among them) and command completions that are well formed (they decode, their
//! opcodes exist) but are not true. A driver must detect each one, count it and keep it from its
//! consumers (ferroce-hw.rst, "What the driver checks").
//!
//! A lie is armed for a number of entries (`lie KIND [COUNT]` on the control socket, or
//! `serve --lie KIND`), then the device tells the truth again.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use ferroce_hw::*;

use crate::{device::DeviceCore, objects::MrBacking};

/// The kinds of lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[repr(u8)]
pub enum Lie {
    /// A CQE opcode and status the interface does not define.
    CqeOpcode = 1,
    /// A CQE naming another QP: one that completes on another CQ, or none at all.
    CqeQpn,
    /// A CQE whose `wr_id` is not the one posted (to the kernel, a pointer to anywhere).
    CqeWrId,
    /// A successful CQE reporting more bytes than the WQE had room for.
    CqeByteLen,
    /// A CQE for a WQE index nothing was posted at.
    CqeWqeIndex,
    /// Before every completion or object event, an event for an object that does not exist.
    EqeObject,
    /// Before a page fault, one of an on-demand MR key no MR has.
    PageFaultKey,
    /// Before a page fault, one for pages past the end of its MR's table.
    PageFaultRange,
    /// A page fault raised [`FLOOD`] more times at once.
    PageFaultFlood,
    /// The reply to a `CREATE_CQ`, `CREATE_QP` or `CREATE_SRQ` names another live object of
    /// that kind (the new one is created all the same).
    CmdNumber,
    /// A command is not executed, and its completion has a status the interface does not
    /// define ([`UNDEFINED_STATUS`]).
    CmdStatus,
    /// After a command's completion, one in the next command's slot, for a command never
    /// posted (token [`UNSOLICITED_TOKEN`]); then the device stalls (as `stall on`), so that
    /// the next command meets it, until the host says `stall off`.
    CmdUnsolicited,
}

/// The status of a [`Lie::CmdStatus`] completion.
pub const UNDEFINED_STATUS: u8 = 0xee;
/// The token of a [`Lie::CmdUnsolicited`] completion (the driver's tokens count up from 1).
pub const UNSOLICITED_TOKEN: u32 = 0xdead_0000;

/// How many copies of a page fault [`Lie::PageFaultFlood`] adds.
pub const FLOOD: usize = 16;

impl Lie {
    /// Every kind, in the order of their names.
    pub const ALL: [Lie; 12] = [
        Lie::CqeOpcode,
        Lie::CqeQpn,
        Lie::CqeWrId,
        Lie::CqeByteLen,
        Lie::CqeWqeIndex,
        Lie::EqeObject,
        Lie::PageFaultKey,
        Lie::PageFaultRange,
        Lie::PageFaultFlood,
        Lie::CmdNumber,
        Lie::CmdStatus,
        Lie::CmdUnsolicited,
    ];

    /// The name the control socket and `serve --lie` use.
    pub fn name(self) -> &'static str {
        match self {
            Lie::CqeOpcode => "cqe-opcode",
            Lie::CqeQpn => "cqe-qpn",
            Lie::CqeWrId => "cqe-wr-id",
            Lie::CqeByteLen => "cqe-byte-len",
            Lie::CqeWqeIndex => "cqe-wqe-index",
            Lie::EqeObject => "eqe-object",
            Lie::PageFaultKey => "page-fault-key",
            Lie::PageFaultRange => "page-fault-range",
            Lie::PageFaultFlood => "page-fault-flood",
            Lie::CmdNumber => "cmd-number",
            Lie::CmdStatus => "cmd-status",
            Lie::CmdUnsolicited => "cmd-unsolicited",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Lie> {
        Lie::ALL.into_iter().find(|l| l.name() == name)
    }

    fn from_raw(raw: u8) -> Option<Lie> {
        Lie::ALL.into_iter().find(|&l| l as u8 == raw)
    }

    fn is_cqe(self) -> bool {
        matches!(
            self,
            Lie::CqeOpcode | Lie::CqeQpn | Lie::CqeWrId | Lie::CqeByteLen | Lie::CqeWqeIndex
        )
    }

    fn is_page_fault(self) -> bool {
        matches!(
            self,
            Lie::PageFaultKey | Lie::PageFaultRange | Lie::PageFaultFlood
        )
    }
}

/// The number an [`Lie::EqeObject`] event names (no object has it: numbers are below 2^24).
pub const UNKNOWN_OBJECT: u32 = 0x00ff_fff0;

/// The armed lie, shared with the control socket.
#[derive(Default)]
pub struct Lies {
    /// `Lie as u8`, 0 for none.
    kind: AtomicU8,
    /// Entries still to lie about.
    remaining: AtomicU32,
    /// Lies told since start.
    told: AtomicU64,
}

impl Lies {
    /// Arms `lie` for the next `count` entries it applies to (`None`: disarms).
    pub fn arm(&self, lie: Option<Lie>, count: u32) {
        self.remaining.store(count, Ordering::Relaxed);
        self.kind
            .store(lie.map_or(0, |l| l as u8), Ordering::Relaxed);
    }

    /// The armed lie and the entries it still applies to (none once they are told).
    pub fn armed(&self) -> Option<(Lie, u32)> {
        let lie = Lie::from_raw(self.kind.load(Ordering::Relaxed))?;
        let left = self.remaining.load(Ordering::Relaxed);
        (left > 0).then_some((lie, left))
    }

    /// Lies told since start.
    pub fn told(&self) -> u64 {
        self.told.load(Ordering::Relaxed)
    }

    /// Takes one lie that `applies` to the entry being written, if one is armed.
    fn take(&self, applies: impl Fn(Lie) -> bool) -> Option<Lie> {
        let lie = Lie::from_raw(self.kind.load(Ordering::Relaxed)).filter(|&l| applies(l))?;
        self.remaining
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .ok()?;
        self.told.fetch_add(1, Ordering::Relaxed);
        Some(lie)
    }
}

impl DeviceCore {
    /// Falsifies `cqe`, about to be written to CQ `cqn`, if a CQE lie is armed.
    pub(crate) fn lie_about_cqe(&self, cqn: u32, cqe: &mut Cqe) {
        let Some(lie) = self.host().lies.take(Lie::is_cqe) else {
            return;
        };
        match lie {
            Lie::CqeOpcode => {
                cqe.opcode = 0x7e;
                cqe.status = 0xee;
            }
            Lie::CqeQpn => cqe.qpn = self.foreign_qpn(cqn, cqe.qpn),
            Lie::CqeWrId => cqe.wr_id ^= 0xdead_beef_0000_0000,
            Lie::CqeByteLen => {
                cqe.status = WcStatus::Success.into();
                cqe.byte_len = u32::MAX;
            }
            Lie::CqeWqeIndex => cqe.wqe_index ^= 0x8000,
            _ => {}
        }
        self.bus().trace().event("lie", || {
            serde_json::json!({"lie": lie.name(), "cqn": cqn, "qpn": cqe.qpn, "index": cqe.wqe_index})
        });
    }

    /// The EQEs that are not true to write before `eqe`, if a lie about it is armed: for a
    /// completion or object event, the same event for an object that does not exist; for a page
    /// fault, one for a key no MR has, one for pages past its MR's end, or copies of it.
    pub(crate) fn lies_before_eqe(&self, eqe: &Eqe) -> Vec<Eqe> {
        let kind = EventType::from_raw(eqe.event_type);
        let names_object = matches!(
            kind,
            Some(
                EventType::Completion
                    | EventType::QpFatal
                    | EventType::QpReqErr
                    | EventType::QpAccessErr
                    | EventType::QpLastWqeReached
                    | EventType::SqDrained
                    | EventType::CommEst
                    | EventType::CqError
                    | EventType::SrqLimit
                    | EventType::SrqErr
            )
        );
        let lie = if names_object {
            self.host().lies.take(|l| l == Lie::EqeObject)
        } else if kind == Some(EventType::PageFault) {
            self.host().lies.take(Lie::is_page_fault)
        } else {
            None
        };
        let Some(lie) = lie else {
            return Vec::new();
        };
        let lies = match lie {
            Lie::PageFaultKey => vec![Eqe {
                data0: mr_key(UNKNOWN_OBJECT, eqe.data0 as u8),
                ..*eqe
            }],
            Lie::PageFaultRange => {
                let pages = self
                    .objects()
                    .mrs()
                    .get(mr_key_index(eqe.data0))
                    .and_then(|mr| match &mr.backing {
                        MrBacking::OnDemand(table) => Some(table.len()),
                        _ => None,
                    });
                vec![Eqe {
                    data1: pages.unwrap_or(u32::MAX - 1),
                    data2: 1,
                    ..*eqe
                }]
            }
            Lie::PageFaultFlood => vec![*eqe; FLOOD],
            _ => vec![Eqe {
                data0: UNKNOWN_OBJECT,
                ..*eqe
            }],
        };
        self.bus().trace().event("lie", || {
            serde_json::json!({"lie": lie.name(), "event_type": eqe.event_type, "data0": eqe.data0})
        });
        lies
    }

    /// The status to complete the command of `header` with instead of executing it, if a
    /// [`Lie::CmdStatus`] is armed.
    pub(crate) fn lie_instead_of_command(&self, header: &CmdHeader) -> Option<u8> {
        let lie = self.host().lies.take(|l| l == Lie::CmdStatus)?;
        self.bus().trace().event("lie", || {
            serde_json::json!({"lie": lie.name(), "opcode": header.opcode, "token": header.token})
        });
        Some(UNDEFINED_STATUS)
    }

    /// Falsifies `results`, the reply of a successful command `opcode`, if a [`Lie::CmdNumber`]
    /// is armed and the command created a CQ, QP or SRQ while another of its kind lives: the
    /// reply names the highest-numbered other one (the newest, mostly).
    pub(crate) fn lie_about_reply(&self, opcode: u16, results: &mut [u32; 3]) {
        // Most creates come with no lie armed: they pay for no walk of the object tables.
        if !matches!(self.host().lies.armed(), Some((Lie::CmdNumber, _))) {
            return;
        }
        let created = results[0];
        let objects = self.objects();
        let highest_other =
            |numbers: &mut dyn Iterator<Item = u32>| numbers.filter(|&n| n != created).max();
        let other = match opcode {
            CMD_CREATE_CQ => highest_other(&mut objects.cqs().iter().map(|(n, _)| n)),
            CMD_CREATE_QP => highest_other(&mut objects.qps().iter().map(|(n, _)| n)),
            CMD_CREATE_SRQ => highest_other(&mut objects.srqs().iter().map(|(n, _)| n)),
            _ => None,
        };
        let Some(other) = other else {
            return;
        };
        let Some(lie) = self.host().lies.take(|l| l == Lie::CmdNumber) else {
            return;
        };
        results[0] = other;
        self.bus().trace().event("lie", || {
            serde_json::json!({"lie": lie.name(), "opcode": opcode, "created": created, "reply": other})
        });
    }

    /// Whether to write, after a command's completion, one for a command never posted, if a
    /// [`Lie::CmdUnsolicited`] is armed; the device then stalls until the host lets it go on.
    pub(crate) fn lie_unsolicited(&self) -> bool {
        let told = self.host().lies.take(|l| l == Lie::CmdUnsolicited);
        if let Some(lie) = told {
            self.host().stall.store(true, Ordering::Relaxed);
            self.bus().trace().event(
                "lie",
                || serde_json::json!({"lie": lie.name(), "token": UNSOLICITED_TOKEN}),
            );
        }
        told.is_some()
    }

    /// A QP number for a lie about a CQE of QP `qpn` on CQ `cqn`: a live QP that completes on
    /// other CQs, or a number no QP has.
    fn foreign_qpn(&self, cqn: u32, qpn: u32) -> u32 {
        self.objects()
            .qps()
            .iter()
            .find(|(n, qp)| *n != qpn && qp.sq_cqn != cqn && qp.rq_cqn != cqn)
            .map_or(UNKNOWN_OBJECT, |(n, _)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lie_is_told_as_often_as_armed() {
        let lies = Lies::default();
        assert_eq!(lies.take(|_| true), None);
        lies.arm(Some(Lie::CqeWrId), 2);
        assert_eq!(lies.take(|l| l == Lie::EqeObject), None, "not an EQE lie");
        assert_eq!(lies.take(Lie::is_cqe), Some(Lie::CqeWrId));
        assert_eq!(lies.take(Lie::is_cqe), Some(Lie::CqeWrId));
        assert_eq!(lies.take(Lie::is_cqe), None);
        assert_eq!(lies.told(), 2);
        assert_eq!(lies.armed(), None, "all told");
        lies.arm(None, 5);
        assert_eq!(lies.take(|_| true), None);
    }

    #[test]
    fn names_round_trip() {
        for lie in Lie::ALL {
            assert_eq!(Lie::parse(lie.name()), Some(lie));
        }
    }
}
