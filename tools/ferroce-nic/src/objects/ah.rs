// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! An address handle's checks, shared by `CMD_CREATE_AH` and the inline address vector of a UD
//! WQE, which the engine converts.

use core::mem::offset_of;

use ferroce_hw::*;

use super::errors::{field_error, reserved_zero, CmdError};

/// Address handle: the address vector as created (the `CMD_CREATE_AH` payload).
pub type Ah = CreateAhCmd;

/// Checks an address vector as `CMD_CREATE_AH` does; the inline address vector of a UD WQE
/// ([`WQE_FLAG_AV`]) gets the same checks through [`ah_from_av`]. The error names the field by
/// its offset in the `CMD_CREATE_AH` payload. Whether `sgid_index` names a valid GID entry is
/// checked when a datagram is routed, as the GID table may change after an AH is created.
pub fn check_ah(ah: &Ah) -> Result<(), CmdError> {
    if u32::from(ah.sgid_index) >= GID_TABLE_LEN {
        return Err(field_error!(STATUS_BAD_PARAM, CreateAhCmd, sgid_index));
    }
    if ah.flow_label > FLOW_LABEL_MASK {
        return Err(field_error!(STATUS_BAD_PARAM, CreateAhCmd, flow_label));
    }
    if ah.vlan != VLAN_NONE && ah.vlan > 4095 {
        return Err(field_error!(STATUS_BAD_PARAM, CreateAhCmd, vlan));
    }
    reserved_zero(ah.rsvd0.into(), offset_of!(CreateAhCmd, rsvd0))?;
    reserved_zero(ah.rsvd1.into(), offset_of!(CreateAhCmd, rsvd1))
}

/// The address handle an inline address vector stands for, in protection domain `pd`, if it
/// passes the checks of `CMD_CREATE_AH` ([`check_ah`]).
pub fn ah_from_av(pd: u32, av: &UdAvSeg) -> Result<Ah, CmdError> {
    let ah = Ah {
        pd,
        flow_label: av.flow_label,
        dgid: av.dgid,
        dmac: av.dmac,
        vlan: av.vlan,
        sgid_index: av.sgid_index,
        hop_limit: av.hop_limit,
        traffic_class: av.traffic_class,
        rsvd0: av.rsvd,
        rsvd1: 0,
    };
    check_ah(&ah)?;
    Ok(ah)
}
