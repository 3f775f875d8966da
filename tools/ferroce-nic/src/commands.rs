// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Command execution: one handler per command, each validating every field it reads. The
//! handlers of memory regions and windows are in `mr` (commands/mr.rs).

mod mr;

use core::mem::offset_of;

use ferroce_hw::*;

use crate::device::Device;
use crate::mcast::McastError;
use crate::objects::{
    check_ah, field_error, reserved_bytes_zero, reserved_zero, CmdError, GidEntry, QidEntry,
    RingBuffer, Srq, XrcSrq,
};

/// Command results: the three result words of the completion, or why the command failed.
pub type CmdResult = Result<[u32; 3], CmdError>;

/// Decodes command `C` from `payload`, runs `handler` on it and encodes its typed reply.
fn run<C: Command>(
    payload: &[u8],
    handler: impl FnOnce(&C) -> Result<C::Reply, CmdError>,
) -> CmdResult {
    handler(&C::from_payload(payload)).map(|reply| reply.to_results())
}

impl Device {
    /// Executes one command.
    pub fn execute(&mut self, header: &CmdHeader, payload: &[u8]) -> CmdResult {
        if header.flags != 0 {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        // Each command type once: its opcode is its own (`Command::OPCODE`, from hw).
        macro_rules! dispatch {
            ($($cmd:ty => $handler:expr,)*) => {
                match header.opcode {
                    $(<$cmd as Command>::OPCODE => run::<$cmd>(payload, $handler),)*
                    _ => Err(CmdError::new(STATUS_BAD_OPCODE)),
                }
            };
        }
        dispatch! {
            NopCmd => |_| Ok(()),
            QueryPortCmd => |c| self.query_port(c),
            SetPortCmd => |c| self.set_port(c),
            CreateEqCmd => |c| self.cmd_create_eq(c),
            DestroyEqCmd => |c| self.cmd_destroy_eq(c),
            ModifyEqCmd => |c| self.modify_eq(c),
            CreateCqCmd => |c| Ok(CreateCqReply {
                cqn: self.core.create_cq(c)?,
            }),
            DestroyCqCmd => |c| self.cmd_destroy_cq(c),
            ModifyCqCmd => |c| self.modify_cq(c),
            ResizeCqCmd => |c| self.core.resize_cq(c),
            CreateQpCmd => |c| self.cmd_create_qp(c),
            DestroyQpCmd => |c| self.destroy_qp(c),
            ModifyQpCmd => |c| self.cmd_modify_qp(c),
            QueryQpCmd => |c| self.query_qp(header, c),
            AttachMcastCmd => |c| self.attach_mcast(c),
            DetachMcastCmd => |c| self.detach_mcast(c),
            CreateMrCmd => |c| self.create_mr(c),
            DestroyMrCmd => |c| self.destroy_mr(c),
            CreateMwCmd => |c| self.create_mw(c),
            DestroyMwCmd => |c| self.destroy_mw(c),
            UpdateMrPagesCmd => |c| self.update_mr_pages(c),
            CreateAhCmd => |c| self.create_ah(c),
            DestroyAhCmd => |c| self.destroy_ah(c),
            CreateSrqCmd => |c| self.create_srq(c),
            DestroySrqCmd => |c| self.destroy_srq(c),
            ModifySrqCmd => |c| self.modify_srq(c),
            ResizeSrqCmd => |c| self.resize_srq(c),
            SetGidCmd => |c| self.set_gid(c),
            ClearGidCmd => |c| self.clear_gid(c),
            QueryCountersCmd => |c| self.query_counters(header, c),
            AllocCtxCmd => |c| self.alloc_ctx(c),
            FreeCtxCmd => |c| self.free_ctx(c),
            MapQidCmd => |c| self.map_qid(c),
            UnmapQidCmd => |c| self.unmap_qid(c),
        }
    }

    fn query_port(&mut self, cmd: &QueryPortCmd) -> Result<PortInfo, CmdError> {
        if cmd.port != 1 {
            return Err(field_error!(STATUS_BAD_PARAM, QueryPortCmd, port));
        }
        reserved_zero(cmd.rsvd.into(), offset_of!(QueryPortCmd, rsvd))?;
        let port = self.core.port();
        let info = PortInfo {
            state: port.state(),
            active_mtu: port.active_mtu(),
            max_mtu: port.max_mtu(),
            mac: self.core.config().mac,
        };
        Ok(info)
    }

    fn set_port(&mut self, cmd: &SetPortCmd) -> Result<(), CmdError> {
        if cmd.port != 1 {
            return Err(field_error!(STATUS_BAD_PARAM, SetPortCmd, port));
        }
        if mtu_bytes(cmd.active_mtu).is_none() || cmd.active_mtu > self.core.port().max_mtu() {
            return Err(field_error!(STATUS_BAD_PARAM, SetPortCmd, active_mtu));
        }
        reserved_bytes_zero(&cmd.rsvd, offset_of!(SetPortCmd, rsvd))?;
        self.core.set_active_mtu(cmd.active_mtu);
        Ok(())
    }

    fn cmd_create_eq(&mut self, cmd: &CreateEqCmd) -> Result<CreateEqReply, CmdError> {
        reserved_zero(
            u64::from(cmd.rsvd0) | u64::from(cmd.rsvd1),
            offset_of!(CreateEqCmd, rsvd0),
        )?;
        Ok(CreateEqReply {
            eqn: self.core.create_eq(
                None,
                &cmd.ring,
                u32::from(cmd.log_size),
                u32::from(cmd.vector),
            )?,
        })
    }

    fn cmd_destroy_eq(&mut self, cmd: &DestroyEqCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(DestroyEqCmd, rsvd))?;
        if cmd.eqn < EQN_FIRST_COMPLETION {
            // EQ 0 and 1 belong to the setup registers.
            return Err(field_error!(STATUS_BAD_PARAM, DestroyEqCmd, eqn));
        }
        self.core.destroy_eq(cmd.eqn)?;
        Ok(())
    }

    fn modify_eq(&mut self, cmd: &ModifyEqCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(ModifyEqCmd, rsvd))?;
        if cmd.vector >= self.core.bus().irq().vectors() {
            return Err(field_error!(STATUS_BAD_PARAM, ModifyEqCmd, vector));
        }
        let eq = self
            .core
            .objects_mut()
            .eqs_mut()
            .get_mut(cmd.eqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        eq.set_vector(cmd.vector);
        Ok(())
    }

    fn cmd_destroy_cq(&mut self, cmd: &DestroyCqCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(DestroyCqCmd, rsvd))?;
        self.core.destroy_cq(cmd.cqn)?;
        self.core.objects_mut().unmap_qids_of(QID_KIND_CQ, cmd.cqn);
        Ok(())
    }

    fn modify_cq(&mut self, cmd: &ModifyCqCmd) -> Result<(), CmdError> {
        reserved_zero(
            u64::from(cmd.rsvd0) | u64::from(cmd.rsvd1),
            offset_of!(ModifyCqCmd, rsvd0),
        )?;
        let cq = self
            .core
            .objects_mut()
            .cqs_mut()
            .get_mut(cmd.cqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        cq.moder_count = cmd.moder_count;
        cq.moder_period_us = cmd.moder_period_us;
        Ok(())
    }

    fn cmd_create_qp(&mut self, cmd: &CreateQpCmd) -> Result<CreateQpReply, CmdError> {
        let qpn = self.core.create_qp(cmd)?;
        if let Some(qp) = self.core.objects().qps().get(qpn) {
            self.engine.qp_created(qpn, qp.qp_type);
        }
        Ok(CreateQpReply { qpn })
    }

    fn destroy_qp(&mut self, cmd: &DestroyQpCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(DestroyQpCmd, rsvd))?;
        self.core.remove_qp(cmd.qpn)?;
        self.engine.qp_destroyed(cmd.qpn);
        Ok(())
    }

    fn cmd_modify_qp(&mut self, cmd: &ModifyQpCmd) -> Result<QpStateReply, CmdError> {
        let state = self.core.modify_qp(cmd)?;
        // Commands run between the engine's turns: the transport is the QP's.
        if let Some(transport) = self
            .core
            .objects()
            .qps()
            .get(cmd.qpn)
            .and_then(|qp| qp.transport.as_ref())
        {
            self.engine.qp_modified(cmd.qpn, state, transport);
        }
        Ok(QpStateReply { state })
    }

    /// Attaches a UD QP to a multicast group.
    fn attach_mcast(&mut self, cmd: &AttachMcastCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(AttachMcastCmd, rsvd))?;
        let qp = self.core.objects().qps().get(cmd.qpn);
        match qp.map(|qp| qp.qp_type) {
            None => return Err(CmdError::new(STATUS_BAD_RESOURCE)),
            Some(QpType::Ud) => {}
            Some(_) => return Err(field_error!(STATUS_BAD_PARAM, AttachMcastCmd, qpn)),
        }
        let groups = self.core.objects_mut().mcast_mut();
        groups.attach(cmd.mgid, cmd.qpn).map_err(|e| match e {
            McastError::Full => CmdError::new(STATUS_NO_RESOURCES),
            _ => field_error!(STATUS_BAD_PARAM, AttachMcastCmd, mgid),
        })
    }

    /// Detaches a QP from a multicast group it is attached to.
    fn detach_mcast(&mut self, cmd: &DetachMcastCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(DetachMcastCmd, rsvd))?;
        let groups = self.core.objects_mut().mcast_mut();
        groups
            .detach(&cmd.mgid, cmd.qpn)
            .map_err(|_| CmdError::new(STATUS_BAD_RESOURCE))
    }

    fn query_qp(&mut self, header: &CmdHeader, cmd: &QueryQpCmd) -> Result<QpStateReply, CmdError> {
        let qp = self
            .core
            .objects()
            .qps()
            .get(cmd.qpn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        let image = qp.attrs.query_image(cmd.qpn, qp.state);
        let state = qp.state;
        if header.out_addr == 0 {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        self.core
            .bus()
            .dma_write(header.out_addr, &image.encode(), "cmd_out")
            .map_err(|_| CmdError::new(STATUS_DMA_ERROR))?;
        Ok(QpStateReply { state })
    }

    fn create_ah(&mut self, cmd: &CreateAhCmd) -> Result<CreateAhReply, CmdError> {
        check_ah(cmd)?;
        Ok(CreateAhReply {
            ah: self
                .core
                .objects_mut()
                .ahs_mut()
                .insert(*cmd)
                .ok_or(CmdError::new(STATUS_NO_RESOURCES))?,
        })
    }

    fn destroy_ah(&mut self, cmd: &DestroyAhCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(DestroyAhCmd, rsvd))?;
        self.core
            .objects_mut()
            .ahs_mut()
            .remove(cmd.ah)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        Ok(())
    }

    fn create_srq(&mut self, cmd: &CreateSrqCmd) -> Result<CreateSrqReply, CmdError> {
        reserved_zero(cmd.rsvd0.into(), offset_of!(CreateSrqCmd, rsvd0))?;
        reserved_zero(cmd.rsvd1.into(), offset_of!(CreateSrqCmd, rsvd1))?;
        let srq_type = SrqType::from_raw(cmd.srq_type).ok_or(field_error!(
            STATUS_BAD_PARAM,
            CreateSrqCmd,
            srq_type
        ))?;
        let xrc = match srq_type {
            SrqType::Basic => {
                reserved_zero(cmd.xrcd.into(), offset_of!(CreateSrqCmd, xrcd))?;
                reserved_zero(cmd.cqn.into(), offset_of!(CreateSrqCmd, cqn))?;
                None
            }
            SrqType::Xrc if !self.core.config().xrc => {
                return Err(field_error!(STATUS_NOT_SUPPORTED, CreateSrqCmd, srq_type));
            }
            SrqType::Xrc => {
                if cmd.xrcd == 0 {
                    return Err(field_error!(STATUS_BAD_PARAM, CreateSrqCmd, xrcd));
                }
                let cq = self.core.objects().cqs().get(cmd.cqn);
                if cq.is_none_or(|cq| cq.error) {
                    return Err(field_error!(STATUS_BAD_RESOURCE, CreateSrqCmd, cqn));
                }
                Some(XrcSrq {
                    xrcd: cmd.xrcd,
                    cqn: cmd.cqn,
                })
            }
        };
        if cmd.dbrec_addr == 0 || cmd.dbrec_addr % 8 != 0 {
            return Err(field_error!(STATUS_BAD_PARAM, CreateSrqCmd, dbrec_addr));
        }
        if !(MIN_LOG_WQE_STRIDE..=MAX_LOG_WQE_STRIDE).contains(&u32::from(cmd.log_stride)) {
            return Err(field_error!(STATUS_BAD_PARAM, CreateSrqCmd, log_stride));
        }
        self.core
            .objects()
            .check_translation_budget(u64::from(cmd.ring.page_count))?;
        let buf = RingBuffer::resolve(
            self.core.bus().mem(),
            &cmd.ring,
            u32::from(cmd.log_size),
            1 << cmd.log_stride,
        )?;
        if cmd.limit >= buf.ring.size() {
            return Err(field_error!(STATUS_BAD_PARAM, CreateSrqCmd, limit));
        }
        let mut record = [0u8; SrqDbRecord::SIZE];
        self.core
            .bus()
            .dma_read(cmd.dbrec_addr, &mut record, "srq_dbrec")
            .map_err(|_| field_error!(STATUS_DMA_ERROR, CreateSrqCmd, dbrec_addr))?;
        let srq = Srq {
            buf,
            dbrec_addr: cmd.dbrec_addr,
            pd: cmd.pd,
            limit: cmd.limit,
            ci: 0,
            xrc,
            users: 0,
            queued: false,
        };
        let srqn = self
            .core
            .objects_mut()
            .srqs_mut()
            .insert(srq)
            .ok_or(CmdError::new(STATUS_NO_RESOURCES))?;
        // An XRC SRQ's CQ takes its completions: it cannot go while the SRQ is there.
        if let Some(cq) = xrc.and_then(|x| self.core.objects_mut().cqs_mut().get_mut(x.cqn)) {
            cq.users += 1;
        }
        Ok(CreateSrqReply { srqn })
    }

    fn destroy_srq(&mut self, cmd: &DestroySrqCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(DestroySrqCmd, rsvd))?;
        let srq = self
            .core
            .objects()
            .srqs()
            .get(cmd.srqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        if srq.users > 0 {
            return Err(CmdError::new(STATUS_BUSY));
        }
        if let Some(xrc) = self
            .core
            .objects_mut()
            .srqs_mut()
            .remove(cmd.srqn)
            .and_then(|s| s.xrc)
        {
            if let Some(cq) = self.core.objects_mut().cqs_mut().get_mut(xrc.cqn) {
                cq.users = cq.users.saturating_sub(1);
            }
            // A message being received into it ends there: its next packet finds no SRQ.
            for (_, qp) in self.core.objects_mut().qps_mut().iter_mut() {
                if let (QpType::XrcTgt, Some(transport)) = (qp.qp_type, qp.transport.as_mut()) {
                    transport.srq_destroyed(cmd.srqn);
                }
            }
        }
        self.core
            .objects_mut()
            .unmap_qids_of(QID_KIND_SRQ, cmd.srqn);
        self.core.cancel_work(crate::device::Work::Srq(cmd.srqn));
        Ok(())
    }

    fn modify_srq(&mut self, cmd: &ModifySrqCmd) -> Result<(), CmdError> {
        let srq = self
            .core
            .objects_mut()
            .srqs_mut()
            .get_mut(cmd.srqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        if cmd.limit >= srq.buf.ring.size() {
            return Err(field_error!(STATUS_BAD_PARAM, ModifySrqCmd, limit));
        }
        srq.limit = cmd.limit;
        Ok(())
    }

    /// Moves an SRQ to a new ring and record (`CMD_RESIZE_SRQ`, see [`ResizeSrqCmd`]): the
    /// WQEs not taken yet are copied to the new ring at their indices. Nothing changes if the
    /// command is refused.
    fn resize_srq(&mut self, cmd: &ResizeSrqCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(ResizeSrqCmd, rsvd))?;
        if cmd.dbrec_addr == 0 || cmd.dbrec_addr % 8 != 0 {
            return Err(field_error!(STATUS_BAD_PARAM, ResizeSrqCmd, dbrec_addr));
        }
        let (old, ci, limit, old_record) = match self.core.objects().srqs().get(cmd.srqn) {
            Some(srq) => (srq.buf.clone(), srq.ci, srq.limit, srq.dbrec_addr),
            None => return Err(field_error!(STATUS_BAD_RESOURCE, ResizeSrqCmd, srqn)),
        };
        let stride = 1u32 << cmd.log_stride.min(31);
        if !(MIN_LOG_WQE_STRIDE..=MAX_LOG_WQE_STRIDE).contains(&u32::from(cmd.log_stride))
            || stride < old.stride
        {
            return Err(field_error!(STATUS_BAD_PARAM, ResizeSrqCmd, log_stride));
        }
        self.core.objects().check_translation_budget(
            u64::from(cmd.ring.page_count).saturating_sub(old.map.page_entries()),
        )?;
        let new = RingBuffer::resolve(
            self.core.bus().mem(),
            &cmd.ring,
            u32::from(cmd.log_size),
            stride,
        )?;
        let mut record = [0u8; SrqDbRecord::SIZE];
        self.core
            .bus()
            .dma_read(old_record, &mut record, "srq_dbrec")
            .map_err(|_| CmdError::new(STATUS_DMA_ERROR))?;
        let pi = SrqDbRecord::decode(&record).pi as u16;
        if !old.ring.producer_valid(pi, ci) {
            return Err(CmdError::new(STATUS_BAD_STATE));
        }
        if old.ring.used(pi, ci) > new.ring.size() || limit >= new.ring.size() {
            return Err(field_error!(STATUS_BAD_PARAM, ResizeSrqCmd, log_size));
        }
        self.core
            .bus()
            .dma_read(cmd.dbrec_addr, &mut record, "srq_dbrec")
            .map_err(|_| field_error!(STATUS_DMA_ERROR, ResizeSrqCmd, dbrec_addr))?;
        let mut wqe = vec![0u8; old.stride as usize];
        let mut index = ci;
        while index != pi {
            let copied = old
                .map
                .read(self.core.bus().mem(), old.offset(index), &mut wqe)
                .and_then(|()| {
                    new.map
                        .write(self.core.bus().mem(), new.offset(index), &wqe)
                });
            if copied.is_err() {
                return Err(CmdError::new(STATUS_DMA_ERROR));
            }
            index = index.wrapping_add(1);
        }
        self.core.bus().trace().event(
            "srq_resize",
            || serde_json::json!({"srqn": cmd.srqn, "ci": ci, "pi": pi, "log_size": cmd.log_size}),
        );
        let Some(srq) = self.core.objects_mut().srqs_mut().get_mut(cmd.srqn) else {
            return Err(CmdError::new(STATUS_BAD_RESOURCE));
        };
        srq.buf = new;
        srq.dbrec_addr = cmd.dbrec_addr;
        Ok(())
    }

    fn set_gid(&mut self, cmd: &SetGidCmd) -> Result<(), CmdError> {
        if cmd.index >= GID_TABLE_LEN {
            return Err(field_error!(STATUS_BAD_PARAM, SetGidCmd, index));
        }
        if !matches!(cmd.gid_type, GID_TYPE_ROCE_V1 | GID_TYPE_ROCE_V2) {
            return Err(field_error!(STATUS_BAD_PARAM, SetGidCmd, gid_type));
        }
        let family = if gid_is_ipv4_mapped(&cmd.gid) {
            GID_FAMILY_IPV4
        } else {
            GID_FAMILY_IPV6
        };
        if cmd.family != family {
            return Err(field_error!(STATUS_BAD_PARAM, SetGidCmd, family));
        }
        reserved_zero(cmd.rsvd.into(), offset_of!(SetGidCmd, rsvd))?;
        if cmd.vlan != VLAN_NONE && cmd.vlan > 4095 {
            return Err(field_error!(STATUS_BAD_PARAM, SetGidCmd, vlan));
        }
        if cmd.mac[0] & 1 != 0 {
            // A multicast source MAC is never valid.
            return Err(field_error!(STATUS_BAD_PARAM, SetGidCmd, mac));
        }
        let entry = GidEntry {
            gid: cmd.gid,
            gid_type: cmd.gid_type,
            family,
            mac: cmd.mac,
            vlan: cmd.vlan,
        };
        self.core.objects_mut().set_gid(cmd.index, Some(entry));
        self.core.bus().trace().event(
            "gid",
            || serde_json::json!({"index": cmd.index, "set": true, "type": cmd.gid_type}),
        );
        Ok(())
    }

    fn clear_gid(&mut self, cmd: &ClearGidCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(ClearGidCmd, rsvd))?;
        if !self.core.objects_mut().set_gid(cmd.index, None) {
            return Err(field_error!(STATUS_BAD_PARAM, ClearGidCmd, index));
        }
        self.core.bus().trace().event(
            "gid",
            || serde_json::json!({"index": cmd.index, "set": false}),
        );
        Ok(())
    }

    fn query_counters(
        &mut self,
        header: &CmdHeader,
        cmd: &QueryCountersCmd,
    ) -> Result<QueryCountersReply, CmdError> {
        let first = cmd.first as usize;
        let count = cmd.count as usize;
        if first >= NUM_COUNTERS || count == 0 || count > NUM_COUNTERS - first {
            return Err(field_error!(STATUS_BAD_PARAM, QueryCountersCmd, first));
        }
        if header.out_addr == 0 || header.out_addr % 8 != 0 {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        let bytes: Vec<u8> = (first..first + count)
            .flat_map(|i| self.core.bus().counters().get(i).to_le_bytes())
            .collect();
        self.core
            .bus()
            .dma_write(header.out_addr, &bytes, "cmd_out")
            .map_err(|_| CmdError::new(STATUS_DMA_ERROR))?;
        Ok(QueryCountersReply {
            copied: count as u32,
        })
    }

    fn alloc_ctx(&mut self, cmd: &AllocCtxCmd) -> Result<AllocCtxReply, CmdError> {
        reserved_zero(cmd.rsvd, offset_of!(AllocCtxCmd, rsvd))?;
        let ctx = self
            .core
            .objects_mut()
            .alloc_context()
            .ok_or(CmdError::new(STATUS_NO_RESOURCES))?;
        // Whatever was written to the page while it had no tenant is not the new one's.
        self.core.doorbells_mut().clear_context(ctx as usize);
        Ok(AllocCtxReply { ctx })
    }

    fn free_ctx(&mut self, cmd: &FreeCtxCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(FreeCtxCmd, rsvd))?;
        if cmd.ctx == 0 {
            return Err(field_error!(STATUS_BAD_PARAM, FreeCtxCmd, ctx));
        }
        self.core
            .objects_mut()
            .free_context(cmd.ctx)
            .map_err(|status| match status {
                STATUS_BAD_PARAM => field_error!(STATUS_BAD_PARAM, FreeCtxCmd, ctx),
                status => CmdError::new(status),
            })?;
        // The QID table went with the context; its push window and doorbell notes go too.
        self.core.doorbells_mut().clear_context(cmd.ctx as usize);
        Ok(())
    }

    fn map_qid(&mut self, cmd: &MapQidCmd) -> Result<(), CmdError> {
        let len = self.core.config().qid_table_len.min(QID_TABLE_LEN as u32);
        if cmd.local_qid >= len {
            return Err(field_error!(STATUS_BAD_PARAM, MapQidCmd, local_qid));
        }
        reserved_bytes_zero(&cmd.rsvd, offset_of!(MapQidCmd, rsvd))?;
        let exists = match cmd.kind {
            QID_KIND_QP => match self.core.objects().qps().get(cmd.global) {
                // An XRC_TGT QP has no queue to ring.
                Some(qp) if qp.sq.is_none() => {
                    return Err(field_error!(STATUS_BAD_PARAM, MapQidCmd, global))
                }
                qp => qp.is_some(),
            },
            QID_KIND_SRQ => self.core.objects().srqs().get(cmd.global).is_some(),
            QID_KIND_CQ => self.core.objects().cqs().get(cmd.global).is_some(),
            _ => return Err(field_error!(STATUS_BAD_PARAM, MapQidCmd, kind)),
        };
        if !exists {
            return Err(field_error!(STATUS_BAD_RESOURCE, MapQidCmd, global));
        }
        let context = self
            .core
            .objects_mut()
            .context_mut(cmd.ctx)
            .ok_or(field_error!(STATUS_BAD_RESOURCE, MapQidCmd, ctx))?;
        context.qids[cmd.local_qid as usize] = Some(QidEntry {
            kind: cmd.kind,
            global: cmd.global,
        });
        Ok(())
    }

    fn unmap_qid(&mut self, cmd: &UnmapQidCmd) -> Result<(), CmdError> {
        let context = self
            .core
            .objects_mut()
            .context_mut(cmd.ctx)
            .ok_or(field_error!(STATUS_BAD_RESOURCE, UnmapQidCmd, ctx))?;
        let entry = context
            .qids
            .get_mut(cmd.local_qid as usize)
            .ok_or(field_error!(STATUS_BAD_PARAM, UnmapQidCmd, local_qid))?;
        if entry.take().is_none() {
            return Err(CmdError::new(STATUS_BAD_RESOURCE));
        }
        Ok(())
    }
}
