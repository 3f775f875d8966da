// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The command queue: a ring of 128-byte commands and a ring of 32-byte completions in guest
//! memory, a producer-index doorbell, and a command-done EQE on EQ 1.

use ferroce_hw::*;

use serde::Serialize;

use crate::{
    device::{Device, DeviceCore},
    lies::UNSOLICITED_TOKEN,
    objects::CmdError,
};

/// The ring registers as latched when the queue was enabled, and the indexes.
#[derive(Clone, Copy, Debug, Serialize)]
struct CmdRing {
    /// Command ring base.
    sq_base: u64,
    /// Completion ring base.
    cq_base: u64,
    /// log2 entries.
    log_size: u32,
    /// Device consumer index.
    ci: u16,
    /// Producer index from the last doorbell.
    pi: u16,
    /// A doorbell overran the ring; the queue stopped.
    error: bool,
}

/// The command queue state: disabled, or the latched ring with its indexes.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct Cmdq {
    ring: Option<CmdRing>,
}

/// The next command to execute: where it is and where its completion goes.
#[derive(Clone, Copy, Debug)]
pub struct CmdSlot {
    /// Free-running index.
    pub index: u16,
    /// Guest address of the command entry.
    pub entry_addr: u64,
    /// Guest address of the completion entry.
    pub completion_addr: u64,
    /// Owner bit value of a completion at this index.
    pub owner: u8,
}

impl Cmdq {
    /// Enables the queue on the given ring registers (`REG_CMDQ_CTRL` written with
    /// `CMDQ_CTRL_ENABLE`); bad registers leave it enabled in error.
    pub fn enable(&mut self, sq_base: u64, cq_base: u64, log_size: u32) {
        let span = |entry: usize| (entry as u64) << log_size.min(MAX_LOG_CMDQ);
        let error = log_size > MAX_LOG_CMDQ
            || sq_base == 0
            || cq_base == 0
            || sq_base % CMD_ENTRY_SIZE as u64 != 0
            || cq_base % CmdCompletion::SIZE as u64 != 0
            || sq_base.checked_add(span(CMD_ENTRY_SIZE)).is_none()
            || cq_base.checked_add(span(CmdCompletion::SIZE)).is_none();
        self.ring = Some(CmdRing {
            sq_base,
            cq_base,
            log_size: log_size.min(MAX_LOG_CMDQ),
            ci: 0,
            pi: 0,
            error,
        });
    }

    /// Disables the queue.
    pub fn disable(&mut self) {
        self.ring = None;
    }

    /// Whether the queue is enabled (`REG_CMDQ_CTRL`).
    pub fn is_enabled(&self) -> bool {
        self.ring.is_some()
    }

    /// `REG_CMDQ_CI` value (0 while disabled).
    pub fn ci(&self) -> u32 {
        self.ring.as_ref().map_or(0, |q| u32::from(q.ci))
    }

    /// `REG_CMDQ_STATUS` value.
    pub fn status(&self) -> u32 {
        match &self.ring {
            Some(q) if q.error => CMDQ_STATUS_ERROR,
            Some(_) => CMDQ_STATUS_ENABLED,
            None => 0,
        }
    }

    /// Records a doorbell with producer index `pi`; `false` if refused (disabled, or an overrun,
    /// which stops the queue).
    pub fn doorbell(&mut self, pi: u16) -> bool {
        let Some(cmdq) = self.ring.as_mut() else {
            return false;
        };
        let ring = Ring::new(cmdq.log_size, MAX_LOG_CMDQ);
        // A producer more than a ring ahead of the consumer is a driver bug: stop the queue
        // rather than execute stale entries.
        if ring.is_none_or(|r| !r.advance_valid(cmdq.pi, pi, cmdq.ci)) {
            cmdq.error = true;
            return false;
        }
        cmdq.pi = pi;
        true
    }

    /// Whether commands are waiting.
    pub fn has_pending(&self) -> bool {
        self.ring.as_ref().is_some_and(|q| !q.error && q.ci != q.pi)
    }

    /// The next command waiting, if any.
    pub fn next(&self) -> Option<CmdSlot> {
        let q = self.ring.as_ref()?;
        if q.error || q.ci == q.pi {
            return None;
        }
        self.slot(q.ci)
    }

    /// Where the command at free-running `index` is, and where its completion goes (while the
    /// queue is enabled).
    pub fn slot(&self, index: u16) -> Option<CmdSlot> {
        let q = self.ring.as_ref()?;
        let ring = Ring::new(q.log_size, MAX_LOG_CMDQ)?;
        let slot = u64::from(ring.slot(index));
        Some(CmdSlot {
            index,
            entry_addr: q.sq_base + slot * CMD_ENTRY_SIZE as u64,
            completion_addr: q.cq_base + slot * CmdCompletion::SIZE as u64,
            owner: ring.owner(index),
        })
    }

    /// The command at `index` completed (if the queue is still enabled).
    pub fn consumed(&mut self, index: u16) {
        if let Some(cmdq) = self.ring.as_mut() {
            cmdq.ci = index.wrapping_add(1);
        }
    }
}

impl DeviceCore {
    /// Latches the command queue registers when `REG_CMDQ_CTRL` is written.
    pub fn cmdq_ctrl_write(&mut self, value: u32) {
        if value & CMDQ_CTRL_ENABLE == 0 {
            self.cmdq_mut().disable();
            return;
        }
        let (sq_base, cq_base, log_size) = self.regs().cmdq_setup();
        self.cmdq_mut().enable(sq_base, cq_base, log_size);
    }

    /// Records a command doorbell (new producer index).
    pub fn cmdq_doorbell_write(&mut self, value: u32) {
        self.bus().counters().inc(COUNTER_DOORBELLS);
        let pi = value as u16;
        if !self.cmdq_mut().doorbell(pi) {
            self.bus().counters().inc(COUNTER_BAD_DOORBELLS);
            return;
        }
        self.bus()
            .trace()
            .event("cmdq_doorbell", || serde_json::json!({"pi": pi}));
    }
}

impl DeviceCore {
    /// Writes `completion` to `slot`'s completion entry, body first, then the owner byte; a DMA
    /// failure makes the device fatal (`false`).
    fn write_cmd_completion(&mut self, slot: &CmdSlot, completion: &CmdCompletion) -> bool {
        let bytes = completion.encode();
        let at = slot.completion_addr;
        let body =
            self.bus()
                .dma_write(at, &bytes[..CMD_COMPLETION_OWNER_OFFSET], "cmd_completion");
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        let owner = body.and_then(|()| {
            self.bus().dma_write(
                at + CMD_COMPLETION_OWNER_OFFSET as u64,
                &bytes[CMD_COMPLETION_OWNER_OFFSET..],
                "cmd_completion",
            )
        });
        if owner.is_err() {
            self.fatal(FATAL_CMDQ_DMA);
            return false;
        }
        true
    }
}

impl Device {
    /// Executes up to `budget` commands; returns whether more are waiting.
    pub fn process_cmdq(&mut self, budget: usize) -> bool {
        for _ in 0..budget {
            let Some(slot) = self.core.cmdq().next() else {
                return false;
            };
            let index = slot.index;
            let mut entry = [0u8; CMD_ENTRY_SIZE];
            if self
                .core
                .bus()
                .dma_read(slot.entry_addr, &mut entry, "cmd")
                .is_err()
            {
                self.core.fatal(FATAL_CMDQ_DMA);
                return false;
            }
            let header = CmdHeader::read_from(&entry).unwrap_or_default();
            let payload = command_payload(&entry).to_vec();
            let result = match self.core.lie_instead_of_command(&header) {
                Some(status) => Err(CmdError::new(status)),
                None => self.execute(&header, &payload),
            };
            let (status, syndrome, results) = match result {
                Ok(mut results) => {
                    self.core.lie_about_reply(header.opcode, &mut results);
                    (STATUS_OK, 0, results)
                }
                Err(e) => (e.status, e.syndrome, [0; 3]),
            };
            self.core.bus().counters().inc(COUNTER_COMMANDS);
            if status != STATUS_OK {
                self.core.bus().counters().inc(COUNTER_COMMAND_ERRORS);
            }
            self.core.bus().trace().event("cmd", || {
                serde_json::json!({"index": index, "opcode": header.opcode, "name": command_name(header.opcode), "token": header.token, "status": status, "syndrome": syndrome, "result": results})
            });
            let completion = CmdCompletion {
                token: header.token,
                opcode: header.opcode,
                index,
                status,
                syndrome,
                results,
                owner: slot.owner,
                ..CmdCompletion::default()
            };
            if !self.core.write_cmd_completion(&slot, &completion) {
                return false;
            }
            // A lie: a completion in the next slot, of a command nobody posted.
            let next = index.wrapping_add(1);
            if let Some(next_slot) = self
                .core
                .cmdq()
                .slot(next)
                .filter(|_| self.core.lie_unsolicited())
            {
                let unsolicited = CmdCompletion {
                    token: UNSOLICITED_TOKEN,
                    opcode: CMD_NOP,
                    index: next,
                    owner: next_slot.owner,
                    ..CmdCompletion::default()
                };
                if !self.core.write_cmd_completion(&next_slot, &unsolicited) {
                    return false;
                }
            }
            // A reset command path may have dropped the queue meanwhile.
            self.core.cmdq_mut().consumed(index);
            let eqe = Eqe {
                event_type: EventType::CmdDone.into(),
                data0: header.token,
                data1: u32::from(index),
                ..Eqe::default()
            };
            self.core.post_eqe(EQN_CMD, eqe);
        }
        self.core.cmdq().has_pending()
    }
}
