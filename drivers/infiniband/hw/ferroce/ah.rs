// SPDX-License-Identifier: GPL-2.0

//! Address handles. A kernel AH lives in the driver only: the kernel's UD send WQEs carry the
//! whole address vector (`hw::UdAvSeg`), so creating one needs no command and never sleeps, as
//! ib_cm needs. A process's AH is also created in the device (`CMD_CREATE_AH`, from the vector
//! the kernel resolved and checked): its UD QPs can name destinations only by such handles.

use kernel::{prelude::*, rdma::AddressVector};

use crate::{cmdq::Cmdq, hw};

/// The driver's part of an AH: the destination, as the UD segment will carry it.
pub(crate) struct AhData {
    dgid: [u8; 16],
    dmac: [u8; 6],
    vlan: u16,
    flow_label: u32,
    sgid_index: u8,
    hop_limit: u8,
    traffic_class: u8,
    /// The device's number of a process's AH.
    handle: Option<u32>,
}

impl AhData {
    /// The AH of a RoCE address vector.
    pub(crate) fn new(av: &AddressVector<'_>, gid_table_len: u32) -> Result<Self> {
        if !av.is_roce() || !av.has_grh() || u32::from(av.sgid_index()) >= gid_table_len {
            return Err(EINVAL);
        }
        let vlan = av
            .sgid_attr()
            .and_then(|attr| attr.l2_fields().ok())
            .map_or(hw::VLAN_NONE, |(vlan, _)| {
                if vlan < 4096 {
                    vlan
                } else {
                    hw::VLAN_NONE
                }
            });
        Ok(Self {
            dgid: av.dgid(),
            dmac: av.dmac(),
            vlan,
            flow_label: av.flow_label() & hw::FLOW_LABEL_MASK,
            sgid_index: av.sgid_index(),
            hop_limit: av.hop_limit(),
            traffic_class: av.traffic_class(),
            handle: None,
        })
    }

    /// Creates the AH in the device too, in PD `pd`, for a process; returns its number.
    pub(crate) fn create_in_device(&mut self, cmdq: &Cmdq, pd: u32) -> Result<u32> {
        let handle = cmdq
            .exec(&hw::CreateAhCmd {
                pd,
                flow_label: self.flow_label,
                dgid: self.dgid,
                dmac: self.dmac,
                vlan: self.vlan,
                sgid_index: self.sgid_index,
                hop_limit: self.hop_limit,
                traffic_class: self.traffic_class,
                ..Default::default()
            })?
            .ah;
        self.handle = Some(handle);
        Ok(handle)
    }

    /// Destroys the device's part of a process's AH.
    pub(crate) fn destroy(&self, cmdq: &Cmdq) -> Result {
        match self.handle {
            Some(ah) => cmdq.exec_destroy(&hw::DestroyAhCmd { ah, rsvd: 0 }),
            None => Ok(()),
        }
    }
}

impl AhData {
    /// The UD segment sending to this AH's destination.
    pub(crate) fn segment(&self, remote_qpn: u32, remote_qkey: u32) -> hw::UdAvSeg {
        hw::UdAvSeg {
            dgid: self.dgid,
            dmac: self.dmac,
            vlan: self.vlan,
            remote_qpn,
            remote_qkey,
            flow_label: self.flow_label,
            sgid_index: self.sgid_index,
            hop_limit: self.hop_limit,
            traffic_class: self.traffic_class,
            rsvd: 0,
        }
    }
}
