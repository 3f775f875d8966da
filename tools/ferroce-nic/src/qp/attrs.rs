// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! QP attributes as the device keeps them: the `CMD_QUERY_QP` image itself (hw's
//! [`ModifyQpCmd`], which declares every attribute once). `CMD_MODIFY_QP` is taken at the
//! command boundary: [`QpAttrs::apply`] takes the attributes its mask names, and
//! [`QpAttrs::query_image`] is the image with the QP's number and state.

use ferroce_hw::*;

/// A QP's attributes, as last modified, read as the fields of a [`ModifyQpCmd`]
/// (`attrs.dest_qpn`, `attrs.dgid`). Its `qpn`, `attr_mask`, states and P_Key index are not
/// kept: the QP has its own number and state, and the device only accepts P_Key index 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttrs(ModifyQpCmd);

impl std::ops::Deref for QpAttrs {
    type Target = ModifyQpCmd;

    fn deref(&self) -> &ModifyQpCmd {
        &self.0
    }
}

impl QpAttrs {
    /// The path MTU in bytes (1024 for a code that names none).
    pub fn mtu(&self) -> u32 {
        mtu_bytes(self.path_mtu).unwrap_or(1024)
    }

    /// The attributes of a new QP: all zero, no VLAN.
    pub fn initial() -> Self {
        Self(ModifyQpCmd {
            vlan: VLAN_NONE,
            ..ModifyQpCmd::default()
        })
    }

    /// Takes the attributes `cmd.attr_mask` names (already validated).
    pub fn apply(&mut self, cmd: &ModifyQpCmd) {
        let (a, mask) = (&mut self.0, cmd.attr_mask);
        // Each mask bit and the attributes it names: one, or the address vector's seven.
        macro_rules! take {
            ($($bit:ident => $($field:ident),+;)*) => {
                $(if mask & $bit != 0 {
                    $(a.$field = cmd.$field;)+
                })*
            };
        }
        take! {
            QP_ATTR_PATH_MTU => path_mtu;
            QP_ATTR_AV => sgid_index, dgid, dmac, vlan, flow_label, hop_limit, traffic_class;
            QP_ATTR_DEST_QPN => dest_qpn;
            QP_ATTR_RQ_PSN => rq_psn;
            QP_ATTR_SQ_PSN => sq_psn;
            QP_ATTR_QKEY => qkey;
            QP_ATTR_ACCESS_FLAGS => access_flags;
            QP_ATTR_TIMEOUT => timeout;
            QP_ATTR_RETRY_CNT => retry_cnt;
            QP_ATTR_RNR_RETRY => rnr_retry;
            QP_ATTR_MIN_RNR_TIMER => min_rnr_timer;
            QP_ATTR_MAX_QP_RD_ATOMIC => max_rd_atomic;
            QP_ATTR_MAX_DEST_RD_ATOMIC => max_dest_rd_atomic;
        }
    }

    /// The `CMD_QUERY_QP` output image of QP `qpn` in `state`: every attribute valid.
    pub fn query_image(&self, qpn: u32, state: QpState) -> ModifyQpCmd {
        ModifyQpCmd {
            qpn,
            attr_mask: QP_ATTR_VALID_MASK,
            new_state: state.into(),
            cur_state: state.into(),
            pkey_index: 0,
            rsvd: 0,
            ..self.0
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
        assert_eq!(QpAttrs::initial().vlan, VLAN_NONE);
    }
}
