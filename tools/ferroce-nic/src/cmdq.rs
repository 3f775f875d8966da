// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The command queue: a ring of 128-byte commands and a ring of 32-byte completions in guest
//! memory, a producer-index doorbell, and a command-done EQE on EQ 1.

use ferroce_hw::*;

use crate::device::{CmdQueue, Device, DeviceCore};

impl DeviceCore {
    /// Latches the command queue registers when `REG_CMDQ_CTRL` is written.
    pub fn cmdq_ctrl_write(&mut self, value: u32) {
        if value & CMDQ_CTRL_ENABLE == 0 {
            self.cmdq = None;
            return;
        }
        let (sq_base, cq_base, log_size) = self.regs().cmdq_setup();
        let span = |entry: usize| (entry as u64) << log_size.min(MAX_LOG_CMDQ);
        let error = log_size > MAX_LOG_CMDQ
            || sq_base == 0
            || cq_base == 0
            || sq_base % CMD_ENTRY_SIZE as u64 != 0
            || cq_base % CmdCompletion::SIZE as u64 != 0
            || sq_base.checked_add(span(CMD_ENTRY_SIZE)).is_none()
            || cq_base.checked_add(span(CmdCompletion::SIZE)).is_none();
        self.cmdq = Some(CmdQueue {
            sq_base,
            cq_base,
            log_size: log_size.min(MAX_LOG_CMDQ),
            ci: 0,
            pi: 0,
            error,
        });
    }

    /// Records a command doorbell (new producer index).
    pub fn cmdq_doorbell_write(&mut self, value: u32) {
        self.counters.inc(COUNTER_DOORBELLS);
        let Some(cmdq) = self.cmdq.as_mut() else {
            self.counters.inc(COUNTER_BAD_DOORBELLS);
            return;
        };
        let pi = value as u16;
        let ring = Ring::new(cmdq.log_size, MAX_LOG_CMDQ);
        // A producer more than a ring ahead of the consumer is a driver bug: stop the queue
        // rather than execute stale entries.
        if ring.is_none_or(|r| !r.advance_valid(cmdq.pi, pi, cmdq.ci)) {
            cmdq.error = true;
            self.counters.inc(COUNTER_BAD_DOORBELLS);
            return;
        }
        cmdq.pi = pi;
        self.trace
            .event("cmdq_doorbell", || serde_json::json!({"pi": pi}));
    }

    /// `REG_CMDQ_STATUS` value.
    pub fn cmdq_status(&self) -> u32 {
        match &self.cmdq {
            Some(q) if q.error => CMDQ_STATUS_ERROR,
            Some(_) => CMDQ_STATUS_ENABLED,
            None => 0,
        }
    }
}

impl Device {
    /// Executes up to `budget` commands; returns whether more are waiting.
    pub fn process_cmdq(&mut self, budget: usize) -> bool {
        for _ in 0..budget {
            let Some(q) = self.core.cmdq.clone() else {
                return false;
            };
            if q.error || q.ci == q.pi {
                return false;
            }
            let Some(ring) = Ring::new(q.log_size, MAX_LOG_CMDQ) else {
                return false;
            };
            let index = q.ci;
            let slot = u64::from(ring.slot(index));
            let mut entry = [0u8; CMD_ENTRY_SIZE];
            if self
                .core
                .dma_read(q.sq_base + slot * CMD_ENTRY_SIZE as u64, &mut entry, "cmd")
                .is_err()
            {
                self.core.fatal(FATAL_CMDQ_DMA);
                return false;
            }
            let header = CmdHeader::read_from(&entry).unwrap_or_default();
            let payload = command_payload(&entry).to_vec();
            let result = self.execute(&header, &payload);
            let (status, syndrome, results) = match result {
                Ok(results) => (STATUS_OK, 0, results),
                Err(e) => (e.status, e.syndrome, [0; 3]),
            };
            self.core.counters.inc(COUNTER_COMMANDS);
            if status != STATUS_OK {
                self.core.counters.inc(COUNTER_COMMAND_ERRORS);
            }
            self.core.trace.event("cmd", || {
                serde_json::json!({"index": index, "opcode": header.opcode, "name": command_name(header.opcode), "token": header.token, "status": status, "syndrome": syndrome, "result": results})
            });
            let completion = CmdCompletion {
                token: header.token,
                opcode: header.opcode,
                index,
                status,
                syndrome,
                results,
                owner: ring.owner(index),
                ..CmdCompletion::default()
            };
            let bytes = completion.encode();
            let at = q.cq_base + slot * CmdCompletion::SIZE as u64;
            let body =
                self.core
                    .dma_write(at, &bytes[..CMD_COMPLETION_OWNER_OFFSET], "cmd_completion");
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            let owner = body.and_then(|()| {
                self.core.dma_write(
                    at + CMD_COMPLETION_OWNER_OFFSET as u64,
                    &bytes[CMD_COMPLETION_OWNER_OFFSET..],
                    "cmd_completion",
                )
            });
            if owner.is_err() {
                self.core.fatal(FATAL_CMDQ_DMA);
                return false;
            }
            // A reset command path may have dropped the queue meanwhile.
            if let Some(cmdq) = self.core.cmdq.as_mut() {
                cmdq.ci = index.wrapping_add(1);
            }
            let eqe = Eqe {
                event_type: EventType::CmdDone.into(),
                data0: header.token,
                data1: u32::from(index),
                ..Eqe::default()
            };
            self.core.post_eqe(EQN_CMD, eqe);
        }
        self.core
            .cmdq
            .as_ref()
            .is_some_and(|q| !q.error && q.ci != q.pi)
    }
}
