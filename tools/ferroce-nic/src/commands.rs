// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Command execution: one handler per command, each validating every field it reads.

use ferroce_hw::*;

use crate::device::Device;
use crate::objects::{
    check_ah, BufferMap, CmdError, Context, GidEntry, Mr, MrBacking, QidEntry, RingBuffer, Srq,
};

/// Command results: up to three words.
pub type CmdResult = Result<[u32; 3], CmdError>;

fn ok(result0: u32) -> CmdResult {
    Ok([result0, 0, 0])
}

fn reserved_zero(value: u64, offset: usize) -> Result<(), CmdError> {
    if value == 0 {
        Ok(())
    } else {
        Err(CmdError::field(STATUS_BAD_PARAM, offset))
    }
}

/// Like [`reserved_zero`] for a reserved byte array at `offset`.
fn reserved_bytes_zero(bytes: &[u8], offset: usize) -> Result<(), CmdError> {
    if bytes.iter().all(|&b| b == 0) {
        Ok(())
    } else {
        Err(CmdError::field(STATUS_BAD_PARAM, offset))
    }
}

impl Device {
    /// Executes one command.
    pub fn execute(&mut self, header: &CmdHeader, payload: &[u8]) -> CmdResult {
        if header.flags != 0 {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        match header.opcode {
            CMD_NOP => ok(0),
            CMD_QUERY_PORT => self.query_port(&QueryPortCmd::from_payload(payload)),
            CMD_SET_PORT => self.set_port(&SetPortCmd::from_payload(payload)),
            CMD_CREATE_EQ => self.cmd_create_eq(&CreateEqCmd::from_payload(payload)),
            CMD_DESTROY_EQ => self.cmd_destroy_eq(&DestroyEqCmd::from_payload(payload)),
            CMD_MODIFY_EQ => self.modify_eq(&ModifyEqCmd::from_payload(payload)),
            CMD_CREATE_CQ => ok(self.core.create_cq(&CreateCqCmd::from_payload(payload))?),
            CMD_DESTROY_CQ => self.cmd_destroy_cq(&DestroyCqCmd::from_payload(payload)),
            CMD_MODIFY_CQ => self.modify_cq(&ModifyCqCmd::from_payload(payload)),
            CMD_CREATE_QP => self.cmd_create_qp(&CreateQpCmd::from_payload(payload)),
            CMD_DESTROY_QP => self.destroy_qp(&DestroyQpCmd::from_payload(payload)),
            CMD_MODIFY_QP => self.cmd_modify_qp(&ModifyQpCmd::from_payload(payload)),
            CMD_QUERY_QP => self.query_qp(header, &QueryQpCmd::from_payload(payload)),
            CMD_CREATE_MR => self.create_mr(&CreateMrCmd::from_payload(payload)),
            CMD_DESTROY_MR => self.destroy_mr(&DestroyMrCmd::from_payload(payload)),
            CMD_CREATE_AH => self.create_ah(&CreateAhCmd::from_payload(payload)),
            CMD_DESTROY_AH => self.destroy_ah(&DestroyAhCmd::from_payload(payload)),
            CMD_CREATE_SRQ => self.create_srq(&CreateSrqCmd::from_payload(payload)),
            CMD_DESTROY_SRQ => self.destroy_srq(&DestroySrqCmd::from_payload(payload)),
            CMD_MODIFY_SRQ => self.modify_srq(&ModifySrqCmd::from_payload(payload)),
            CMD_SET_GID => self.set_gid(&SetGidCmd::from_payload(payload)),
            CMD_CLEAR_GID => self.clear_gid(&ClearGidCmd::from_payload(payload)),
            CMD_QUERY_COUNTERS => {
                self.query_counters(header, &QueryCountersCmd::from_payload(payload))
            }
            CMD_ALLOC_CTX => self.alloc_ctx(&AllocCtxCmd::from_payload(payload)),
            CMD_FREE_CTX => self.free_ctx(&FreeCtxCmd::from_payload(payload)),
            CMD_MAP_QID => self.map_qid(&MapQidCmd::from_payload(payload)),
            CMD_UNMAP_QID => self.unmap_qid(&UnmapQidCmd::from_payload(payload)),
            _ => Err(CmdError::new(STATUS_BAD_OPCODE)),
        }
    }

    fn query_port(&mut self, cmd: &QueryPortCmd) -> CmdResult {
        if cmd.port != 1 {
            return Err(CmdError::field(STATUS_BAD_PARAM, 0));
        }
        reserved_zero(cmd.rsvd.into(), 4)?;
        let port = &self.core.port;
        let info = PortInfo {
            state: port.state,
            active_mtu: port.active_mtu,
            max_mtu: port.max_mtu,
            mac: self.core.config.mac,
        };
        Ok(info.to_results())
    }

    fn set_port(&mut self, cmd: &SetPortCmd) -> CmdResult {
        if cmd.port != 1 {
            return Err(CmdError::field(STATUS_BAD_PARAM, 0));
        }
        if mtu_bytes(cmd.active_mtu).is_none() || cmd.active_mtu > self.core.port.max_mtu {
            return Err(CmdError::field(STATUS_BAD_PARAM, 4));
        }
        reserved_bytes_zero(&cmd.rsvd, 5)?;
        self.core.port.active_mtu = cmd.active_mtu;
        ok(0)
    }

    fn cmd_create_eq(&mut self, cmd: &CreateEqCmd) -> CmdResult {
        reserved_zero(u64::from(cmd.rsvd0) | u64::from(cmd.rsvd1), 17)?;
        ok(self.core.create_eq(
            None,
            &cmd.ring,
            u32::from(cmd.log_size),
            u32::from(cmd.vector),
        )?)
    }

    fn cmd_destroy_eq(&mut self, cmd: &DestroyEqCmd) -> CmdResult {
        reserved_zero(cmd.rsvd.into(), 4)?;
        if cmd.eqn < EQN_FIRST_COMPLETION {
            // EQ 0 and 1 belong to the setup registers.
            return Err(CmdError::field(STATUS_BAD_PARAM, 0));
        }
        self.core.destroy_eq(cmd.eqn)?;
        ok(0)
    }

    fn modify_eq(&mut self, cmd: &ModifyEqCmd) -> CmdResult {
        reserved_zero(cmd.rsvd.into(), 6)?;
        if cmd.vector >= self.core.irq.vectors() {
            return Err(CmdError::field(STATUS_BAD_PARAM, 4));
        }
        let eq = self
            .core
            .eqs
            .get_mut(cmd.eqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        eq.vector = cmd.vector;
        ok(0)
    }

    fn cmd_destroy_cq(&mut self, cmd: &DestroyCqCmd) -> CmdResult {
        reserved_zero(cmd.rsvd.into(), 4)?;
        self.core.destroy_cq(cmd.cqn)?;
        self.core.unmap_qids_of(QID_KIND_CQ, cmd.cqn);
        ok(0)
    }

    fn modify_cq(&mut self, cmd: &ModifyCqCmd) -> CmdResult {
        reserved_zero(u64::from(cmd.rsvd0) | u64::from(cmd.rsvd1), 4)?;
        let cq = self
            .core
            .cqs
            .get_mut(cmd.cqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        cq.moder_count = cmd.moder_count;
        cq.moder_period_us = cmd.moder_period_us;
        ok(0)
    }

    fn cmd_create_qp(&mut self, cmd: &CreateQpCmd) -> CmdResult {
        let qpn = self.core.create_qp(cmd)?;
        self.engine.qp_created(qpn, cmd.qp_type);
        ok(qpn)
    }

    fn destroy_qp(&mut self, cmd: &DestroyQpCmd) -> CmdResult {
        reserved_zero(cmd.rsvd.into(), 4)?;
        self.core.remove_qp(cmd.qpn)?;
        self.engine.qp_destroyed(cmd.qpn);
        ok(0)
    }

    fn cmd_modify_qp(&mut self, cmd: &ModifyQpCmd) -> CmdResult {
        let state = self.core.modify_qp(cmd)?;
        if state == QPS_RESET {
            self.engine.qp_destroyed(cmd.qpn);
        }
        if let Some(qp) = self.core.qps.get(cmd.qpn) {
            self.engine.qp_modified(cmd.qpn, state, &qp.attrs);
        }
        ok(u32::from(state))
    }

    fn query_qp(&mut self, header: &CmdHeader, cmd: &QueryQpCmd) -> CmdResult {
        let qp = self
            .core
            .qps
            .get(cmd.qpn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        let image = ModifyQpCmd {
            qpn: cmd.qpn,
            attr_mask: QP_ATTR_VALID_MASK,
            new_state: qp.state,
            cur_state: qp.state,
            ..qp.attrs
        };
        let state = qp.state;
        if header.out_addr == 0 {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        self.core
            .dma_write(header.out_addr, &image.encode(), "cmd_out")
            .map_err(|_| CmdError::new(STATUS_DMA_ERROR))?;
        ok(u32::from(state))
    }

    fn create_mr(&mut self, cmd: &CreateMrCmd) -> CmdResult {
        if cmd.flags & !MR_FLAGS_VALID != 0 || cmd.flags == MR_FLAGS_VALID {
            return Err(CmdError::field(STATUS_BAD_PARAM, 40));
        }
        if cmd.access & !ACCESS_VALID_MASK != 0 {
            return Err(CmdError::field(STATUS_BAD_PARAM, 36));
        }
        // IB rule: remote write or atomic requires local write.
        if cmd.access & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) != 0
            && cmd.access & ACCESS_LOCAL_WRITE == 0
        {
            return Err(CmdError::field(STATUS_BAD_PARAM, 36));
        }
        reserved_zero(cmd.rsvd.into(), 42)?;
        let reserve = if cmd.flags & MR_FLAG_FAST_REG != 0 {
            cmd.max_pages
        } else {
            cmd.pages.page_count
        };
        self.core.check_translation_budget(u64::from(reserve))?;
        let (backing, iova, length, fast_reg) = if cmd.flags & MR_FLAG_ALL_MEMORY != 0 {
            (MrBacking::AllMemory, 0, u64::MAX, None)
        } else if cmd.flags & MR_FLAG_FAST_REG != 0 {
            if cmd.max_pages == 0 || cmd.max_pages > MAX_MR_PAGES {
                return Err(CmdError::field(STATUS_BAD_PARAM, 44));
            }
            (MrBacking::Invalid, 0, 0, Some(cmd.max_pages))
        } else {
            if cmd.iova.checked_add(cmd.length).is_none() {
                return Err(CmdError::field(STATUS_BAD_PARAM, 8));
            }
            let mut span = cmd.length;
            if cmd.pages.page_count > 0 {
                // The region starts inside the first page at the iova's page offset.
                let log = u32::from(cmd.pages.log_page_size).min(MAX_LOG_PAGE_SIZE);
                span = span.saturating_add(cmd.iova & ((1u64 << log) - 1));
            }
            let map = BufferMap::resolve(&*self.core.mem, &cmd.pages, span, 1, MAX_MR_PAGES)?;
            (MrBacking::Buffer(map), cmd.iova, cmd.length, None)
        };
        let mr = Mr {
            key: 0,
            pd: cmd.pd,
            access: cmd.access,
            iova,
            length,
            backing,
            fast_reg_max_pages: fast_reg,
        };
        let index = self
            .core
            .mrs
            .insert(mr)
            .ok_or(CmdError::new(STATUS_NO_RESOURCES))?;
        let key = mr_key(index, cmd.key_variant);
        if let Some(mr) = self.core.mrs.get_mut(index) {
            mr.key = key;
        }
        ok(key)
    }

    fn destroy_mr(&mut self, cmd: &DestroyMrCmd) -> CmdResult {
        reserved_zero(cmd.rsvd.into(), 4)?;
        // By index: fast registration changes the key's variant byte, and a REG_MR that was
        // flushed leaves the device with an older variant than the driver's MR shows.
        let index = mr_key_index(cmd.key);
        match self.core.mrs.get(index) {
            Some(_) => {
                self.core.mrs.remove(index);
                ok(0)
            }
            None => Err(CmdError::new(STATUS_BAD_RESOURCE)),
        }
    }

    fn create_ah(&mut self, cmd: &CreateAhCmd) -> CmdResult {
        check_ah(cmd)?;
        ok(self
            .core
            .ahs
            .insert(*cmd)
            .ok_or(CmdError::new(STATUS_NO_RESOURCES))?)
    }

    fn destroy_ah(&mut self, cmd: &DestroyAhCmd) -> CmdResult {
        reserved_zero(cmd.rsvd.into(), 4)?;
        self.core
            .ahs
            .remove(cmd.ah)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        ok(0)
    }

    fn create_srq(&mut self, cmd: &CreateSrqCmd) -> CmdResult {
        reserved_zero(u64::from(cmd.rsvd0) | u64::from(cmd.rsvd1), 34)?;
        if cmd.dbrec_addr == 0 || cmd.dbrec_addr % 8 != 0 {
            return Err(CmdError::field(STATUS_BAD_PARAM, 16));
        }
        if !(MIN_LOG_WQE_STRIDE..=MAX_LOG_WQE_STRIDE).contains(&u32::from(cmd.log_stride)) {
            return Err(CmdError::field(STATUS_BAD_PARAM, 33));
        }
        self.core
            .check_translation_budget(u64::from(cmd.ring.page_count))?;
        let buf = RingBuffer::resolve(
            &*self.core.mem,
            &cmd.ring,
            u32::from(cmd.log_size),
            1 << cmd.log_stride,
        )?;
        if cmd.limit >= buf.ring.size() {
            return Err(CmdError::field(STATUS_BAD_PARAM, 28));
        }
        let mut record = [0u8; SrqDbRecord::SIZE];
        self.core
            .dma_read(cmd.dbrec_addr, &mut record, "srq_dbrec")
            .map_err(|_| CmdError::field(STATUS_DMA_ERROR, 16))?;
        let srq = Srq {
            buf,
            dbrec_addr: cmd.dbrec_addr,
            pd: cmd.pd,
            limit: cmd.limit,
            ci: 0,
            users: 0,
            queued: false,
        };
        ok(self
            .core
            .srqs
            .insert(srq)
            .ok_or(CmdError::new(STATUS_NO_RESOURCES))?)
    }

    fn destroy_srq(&mut self, cmd: &DestroySrqCmd) -> CmdResult {
        reserved_zero(cmd.rsvd.into(), 4)?;
        let srq = self
            .core
            .srqs
            .get(cmd.srqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        if srq.users > 0 {
            return Err(CmdError::new(STATUS_BUSY));
        }
        self.core.srqs.remove(cmd.srqn);
        self.core.unmap_qids_of(QID_KIND_SRQ, cmd.srqn);
        self.core
            .work
            .retain(|w| *w != crate::device::Work::Srq(cmd.srqn));
        ok(0)
    }

    fn modify_srq(&mut self, cmd: &ModifySrqCmd) -> CmdResult {
        let srq = self
            .core
            .srqs
            .get_mut(cmd.srqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        if cmd.limit >= srq.buf.ring.size() {
            return Err(CmdError::field(STATUS_BAD_PARAM, 4));
        }
        srq.limit = cmd.limit;
        ok(0)
    }

    fn set_gid(&mut self, cmd: &SetGidCmd) -> CmdResult {
        if cmd.index >= GID_TABLE_LEN {
            return Err(CmdError::field(STATUS_BAD_PARAM, 0));
        }
        if !matches!(cmd.gid_type, GID_TYPE_ROCE_V1 | GID_TYPE_ROCE_V2) {
            return Err(CmdError::field(STATUS_BAD_PARAM, 4));
        }
        let family = if gid_is_ipv4_mapped(&cmd.gid) {
            GID_FAMILY_IPV4
        } else {
            GID_FAMILY_IPV6
        };
        if cmd.family != family {
            return Err(CmdError::field(STATUS_BAD_PARAM, 5));
        }
        reserved_zero(cmd.rsvd.into(), 6)?;
        if cmd.vlan != VLAN_NONE && cmd.vlan > 4095 {
            return Err(CmdError::field(STATUS_BAD_PARAM, 30));
        }
        if cmd.mac[0] & 1 != 0 {
            // A multicast source MAC is never valid.
            return Err(CmdError::field(STATUS_BAD_PARAM, 24));
        }
        let entry = GidEntry {
            gid: cmd.gid,
            gid_type: cmd.gid_type,
            family,
            mac: cmd.mac,
            vlan: cmd.vlan,
        };
        if let Some(slot) = self.core.gids.get_mut(cmd.index as usize) {
            *slot = Some(entry);
        }
        self.core.trace.event(
            "gid",
            || serde_json::json!({"index": cmd.index, "set": true, "type": cmd.gid_type}),
        );
        ok(0)
    }

    fn clear_gid(&mut self, cmd: &ClearGidCmd) -> CmdResult {
        reserved_zero(cmd.rsvd.into(), 4)?;
        let slot = self
            .core
            .gids
            .get_mut(cmd.index as usize)
            .ok_or(CmdError::field(STATUS_BAD_PARAM, 0))?;
        *slot = None;
        self.core.trace.event(
            "gid",
            || serde_json::json!({"index": cmd.index, "set": false}),
        );
        ok(0)
    }

    fn query_counters(&mut self, header: &CmdHeader, cmd: &QueryCountersCmd) -> CmdResult {
        let first = cmd.first as usize;
        let count = cmd.count as usize;
        if first >= NUM_COUNTERS || count == 0 || count > NUM_COUNTERS - first {
            return Err(CmdError::field(STATUS_BAD_PARAM, 0));
        }
        if header.out_addr == 0 || header.out_addr % 8 != 0 {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        let bytes: Vec<u8> = (first..first + count)
            .flat_map(|i| self.core.counters.get(i).to_le_bytes())
            .collect();
        self.core
            .dma_write(header.out_addr, &bytes, "cmd_out")
            .map_err(|_| CmdError::new(STATUS_DMA_ERROR))?;
        ok(count as u32)
    }

    fn alloc_ctx(&mut self, cmd: &AllocCtxCmd) -> CmdResult {
        reserved_zero(cmd.rsvd, 0)?;
        let free = self
            .core
            .contexts
            .iter()
            .position(Option::is_none)
            .ok_or(CmdError::new(STATUS_NO_RESOURCES))?;
        self.core.contexts[free] = Some(Context::new());
        ok(free as u32)
    }

    fn free_ctx(&mut self, cmd: &FreeCtxCmd) -> CmdResult {
        reserved_zero(cmd.rsvd.into(), 4)?;
        if cmd.ctx == 0 {
            return Err(CmdError::field(STATUS_BAD_PARAM, 0));
        }
        let slot = self
            .core
            .contexts
            .get_mut(cmd.ctx as usize)
            .ok_or(CmdError::field(STATUS_BAD_PARAM, 0))?;
        if slot.take().is_none() {
            return Err(CmdError::new(STATUS_BAD_RESOURCE));
        }
        ok(0)
    }

    fn map_qid(&mut self, cmd: &MapQidCmd) -> CmdResult {
        if cmd.local_qid as usize >= QID_TABLE_LEN {
            return Err(CmdError::field(STATUS_BAD_PARAM, 4));
        }
        reserved_bytes_zero(&cmd.rsvd, 13)?;
        let exists = match cmd.kind {
            QID_KIND_QP => self.core.qps.get(cmd.global).is_some(),
            QID_KIND_SRQ => self.core.srqs.get(cmd.global).is_some(),
            QID_KIND_CQ => self.core.cqs.get(cmd.global).is_some(),
            _ => return Err(CmdError::field(STATUS_BAD_PARAM, 12)),
        };
        if !exists {
            return Err(CmdError::field(STATUS_BAD_RESOURCE, 8));
        }
        let context = self
            .core
            .contexts
            .get_mut(cmd.ctx as usize)
            .and_then(Option::as_mut)
            .ok_or(CmdError::field(STATUS_BAD_RESOURCE, 0))?;
        context.qids[cmd.local_qid as usize] = Some(QidEntry {
            kind: cmd.kind,
            global: cmd.global,
        });
        ok(0)
    }

    fn unmap_qid(&mut self, cmd: &UnmapQidCmd) -> CmdResult {
        let context = self
            .core
            .contexts
            .get_mut(cmd.ctx as usize)
            .and_then(Option::as_mut)
            .ok_or(CmdError::field(STATUS_BAD_RESOURCE, 0))?;
        let entry = context
            .qids
            .get_mut(cmd.local_qid as usize)
            .ok_or(CmdError::field(STATUS_BAD_PARAM, 4))?;
        if entry.take().is_none() {
            return Err(CmdError::new(STATUS_BAD_RESOURCE));
        }
        ok(0)
    }
}
