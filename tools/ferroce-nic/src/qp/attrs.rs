// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! QP attributes as the device keeps them. `CMD_MODIFY_QP` ([`ModifyQpCmd`]) is converted at the
//! command boundary: [`QpAttrs::apply`] takes the attributes its mask names, and
//! [`QpAttrs::query_image`] builds the `CMD_QUERY_QP` output image.

use ferroce_hw::*;

/// The address vector of a connected QP (the primary path's addressing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddressVector {
    /// Source GID index.
    pub sgid_index: u8,
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Destination MAC (the next hop's).
    pub dmac: [u8; 6],
    /// VLAN ID, or [`VLAN_NONE`].
    pub vlan: u16,
    /// Flow label (20 bits); 0 lets the device choose one.
    pub flow_label: u32,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2 | ECN).
    pub traffic_class: u8,
}

/// A QP's attributes, as last modified. The P_Key index is not kept: the device only accepts 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttrs {
    /// Path MTU (`MTU_*`).
    pub path_mtu: u8,
    /// Address vector.
    pub av: AddressVector,
    /// Destination QP number.
    pub dest_qpn: u32,
    /// Expected receive PSN.
    pub rq_psn: u32,
    /// Send PSN.
    pub sq_psn: u32,
    /// Q_Key (UD, GSI).
    pub qkey: u32,
    /// Remote access flags (`ACCESS_REMOTE_*`).
    pub access_flags: u32,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Transport retry count.
    pub retry_cnt: u8,
    /// RNR retry count (7 = infinite).
    pub rnr_retry: u8,
    /// Minimum RNR NAK timer (IB encoding).
    pub min_rnr_timer: u8,
    /// Outstanding RDMA READ / atomic as requester.
    pub max_rd_atomic: u8,
    /// Outstanding RDMA READ / atomic as responder.
    pub max_dest_rd_atomic: u8,
}

impl QpAttrs {
    /// The attributes of a new QP: all zero, no VLAN.
    pub fn initial() -> Self {
        Self {
            av: AddressVector {
                vlan: VLAN_NONE,
                ..AddressVector::default()
            },
            ..Self::default()
        }
    }

    /// Takes the attributes `cmd.attr_mask` names (already validated).
    pub fn apply(&mut self, cmd: &ModifyQpCmd) {
        let mask = cmd.attr_mask;
        let set = |bit: u32| mask & bit != 0;
        if set(QP_ATTR_PATH_MTU) {
            self.path_mtu = cmd.path_mtu;
        }
        if set(QP_ATTR_AV) {
            self.av = AddressVector {
                sgid_index: cmd.sgid_index,
                dgid: cmd.dgid,
                dmac: cmd.dmac,
                vlan: cmd.vlan,
                flow_label: cmd.flow_label,
                hop_limit: cmd.hop_limit,
                traffic_class: cmd.traffic_class,
            };
        }
        if set(QP_ATTR_DEST_QPN) {
            self.dest_qpn = cmd.dest_qpn;
        }
        if set(QP_ATTR_RQ_PSN) {
            self.rq_psn = cmd.rq_psn;
        }
        if set(QP_ATTR_SQ_PSN) {
            self.sq_psn = cmd.sq_psn;
        }
        if set(QP_ATTR_QKEY) {
            self.qkey = cmd.qkey;
        }
        if set(QP_ATTR_ACCESS_FLAGS) {
            self.access_flags = cmd.access_flags;
        }
        if set(QP_ATTR_TIMEOUT) {
            self.timeout = cmd.timeout;
        }
        if set(QP_ATTR_RETRY_CNT) {
            self.retry_cnt = cmd.retry_cnt;
        }
        if set(QP_ATTR_RNR_RETRY) {
            self.rnr_retry = cmd.rnr_retry;
        }
        if set(QP_ATTR_MIN_RNR_TIMER) {
            self.min_rnr_timer = cmd.min_rnr_timer;
        }
        if set(QP_ATTR_MAX_QP_RD_ATOMIC) {
            self.max_rd_atomic = cmd.max_rd_atomic;
        }
        if set(QP_ATTR_MAX_DEST_RD_ATOMIC) {
            self.max_dest_rd_atomic = cmd.max_dest_rd_atomic;
        }
    }

    /// The `CMD_QUERY_QP` output image of QP `qpn` in `state`: every attribute valid.
    pub fn query_image(&self, qpn: u32, state: QpState) -> ModifyQpCmd {
        let av = &self.av;
        ModifyQpCmd {
            qpn,
            attr_mask: QP_ATTR_VALID_MASK,
            new_state: state.into(),
            cur_state: state.into(),
            path_mtu: self.path_mtu,
            sgid_index: av.sgid_index,
            dgid: av.dgid,
            dmac: av.dmac,
            vlan: av.vlan,
            flow_label: av.flow_label,
            dest_qpn: self.dest_qpn,
            rq_psn: self.rq_psn,
            sq_psn: self.sq_psn,
            qkey: self.qkey,
            access_flags: self.access_flags,
            hop_limit: av.hop_limit,
            traffic_class: av.traffic_class,
            timeout: self.timeout,
            retry_cnt: self.retry_cnt,
            rnr_retry: self.rnr_retry,
            min_rnr_timer: self.min_rnr_timer,
            max_rd_atomic: self.max_rd_atomic,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
            pkey_index: 0,
            rsvd: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modify_then_query_image_round_trips() {
        let cmd = ModifyQpCmd {
            qpn: 0x42,
            attr_mask: QP_ATTR_VALID_MASK,
            new_state: QpState::Rts.into(),
            cur_state: QpState::Rts.into(),
            path_mtu: MTU_4096,
            sgid_index: 3,
            dgid: [7; 16],
            dmac: [2, 0, 0, 0, 0, 9],
            vlan: 100,
            flow_label: 0x12345,
            dest_qpn: 0x00ab_cdef,
            rq_psn: 11,
            sq_psn: 22,
            qkey: 0x1111_2222,
            access_flags: ACCESS_REMOTE_WRITE,
            hop_limit: 64,
            traffic_class: 0x88,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 6,
            min_rnr_timer: 12,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 8,
            pkey_index: 0,
            rsvd: 0,
        };
        let mut attrs = QpAttrs::initial();
        attrs.apply(&cmd);
        assert_eq!(attrs.query_image(0x42, QpState::Rts), cmd);
        // Fields the mask does not name stay.
        attrs.apply(&ModifyQpCmd {
            attr_mask: QP_ATTR_STATE,
            ..ModifyQpCmd::default()
        });
        assert_eq!(attrs.query_image(0x42, QpState::Rts), cmd);
        assert_eq!(QpAttrs::initial().av.vlan, VLAN_NONE);
    }
}
