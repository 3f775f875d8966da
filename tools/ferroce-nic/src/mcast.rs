// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Multicast groups: which UD QPs are attached to each multicast GID, within the interface's
//! limits (`MAX_MCAST_GROUPS`, `MAX_MCAST_QP_ATTACH`, `MAX_TOTAL_MCAST_QP_ATTACH`).

use std::collections::BTreeMap;

use ferroce_hw::{
    is_multicast_gid, MAX_MCAST_GROUPS, MAX_MCAST_QP_ATTACH, MAX_TOTAL_MCAST_QP_ATTACH,
};

/// Why an attachment or detachment was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McastError {
    /// Not a multicast GID.
    NotMulticast,
    /// The group, the device or the group's QP list is full.
    Full,
    /// The QP is not attached to the group.
    NotAttached,
}

/// The groups and their QPs (each list sorted, no QP twice).
#[derive(Debug, Default)]
pub struct McastGroups {
    groups: BTreeMap<[u8; 16], Vec<u32>>,
    total: usize,
}

impl McastGroups {
    /// Attaches `qpn` to `mgid` (already attached: no change).
    pub fn attach(&mut self, mgid: [u8; 16], qpn: u32) -> Result<(), McastError> {
        if !is_multicast_gid(&mgid) {
            return Err(McastError::NotMulticast);
        }
        let known = self.groups.contains_key(&mgid);
        if !known && self.groups.len() >= MAX_MCAST_GROUPS as usize {
            return Err(McastError::Full);
        }
        let qps = self.groups.entry(mgid).or_default();
        let Err(at) = qps.binary_search(&qpn) else {
            return Ok(());
        };
        if qps.len() >= MAX_MCAST_QP_ATTACH as usize
            || self.total >= MAX_TOTAL_MCAST_QP_ATTACH as usize
        {
            if qps.is_empty() {
                self.groups.remove(&mgid);
            }
            return Err(McastError::Full);
        }
        qps.insert(at, qpn);
        self.total += 1;
        Ok(())
    }

    /// Detaches `qpn` from `mgid`; a group left without QPs is gone.
    pub fn detach(&mut self, mgid: &[u8; 16], qpn: u32) -> Result<(), McastError> {
        let qps = self.groups.get_mut(mgid).ok_or(McastError::NotAttached)?;
        let at = qps
            .binary_search(&qpn)
            .map_err(|_| McastError::NotAttached)?;
        qps.remove(at);
        self.total -= 1;
        if qps.is_empty() {
            self.groups.remove(mgid);
        }
        Ok(())
    }

    /// Detaches `qpn` from every group (the QP is destroyed).
    pub fn detach_all(&mut self, qpn: u32) {
        let groups: Vec<[u8; 16]> = self
            .groups
            .iter()
            .filter(|(_, qps)| qps.binary_search(&qpn).is_ok())
            .map(|(mgid, _)| *mgid)
            .collect();
        for mgid in groups {
            let _ = self.detach(&mgid, qpn);
        }
    }

    /// The QPs attached to `mgid`, in QPN order.
    pub fn members(&self, mgid: &[u8; 16]) -> &[u32] {
        self.groups.get(mgid).map_or(&[], Vec::as_slice)
    }

    /// Forgets every group (reset).
    pub fn clear(&mut self) {
        self.groups.clear();
        self.total = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(n: u32) -> [u8; 16] {
        let mut gid = [0u8; 16];
        gid[10..12].copy_from_slice(&[0xff, 0xff]);
        gid[12..16].copy_from_slice(&(0xef00_0000 | n).to_be_bytes());
        gid
    }

    #[test]
    fn attachments_are_sets_within_the_limits() {
        let mut g = McastGroups::default();
        assert_eq!(g.attach(group(1), 9), Ok(()));
        assert_eq!(g.attach(group(1), 5), Ok(()));
        assert_eq!(g.attach(group(1), 9), Ok(()));
        assert_eq!(g.members(&group(1)), [5, 9]);
        // A unicast GID (IPv4-mapped 10.0.0.1) is no group.
        let mut unicast = group(0);
        unicast[12..16].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(g.attach(unicast, 9), Err(McastError::NotMulticast));
        assert_eq!(g.detach(&group(1), 7), Err(McastError::NotAttached));
        assert_eq!(g.detach(&group(2), 9), Err(McastError::NotAttached));
        for qpn in 100..100 + MAX_MCAST_QP_ATTACH - 2 {
            assert_eq!(g.attach(group(1), qpn), Ok(()));
        }
        assert_eq!(g.attach(group(1), 1000), Err(McastError::Full));
        g.detach_all(9);
        assert_eq!(g.attach(group(1), 1000), Ok(()));
        for qpn in [5, 1000] {
            g.detach_all(qpn);
        }
        assert_eq!(g.members(&group(1)).len(), MAX_MCAST_QP_ATTACH as usize - 2);
        g.clear();
        assert!(g.members(&group(1)).is_empty());
        // The group table and the attachments overall are bounded too.
        for n in 0..MAX_MCAST_GROUPS {
            assert_eq!(g.attach(group(n), 1), Ok(()), "group {n}");
        }
        assert_eq!(g.attach(group(MAX_MCAST_GROUPS), 1), Err(McastError::Full));
        let mut total = MAX_MCAST_GROUPS;
        'fill: for n in 0..MAX_MCAST_GROUPS {
            for qpn in 2..MAX_MCAST_QP_ATTACH + 1 {
                if total == MAX_TOTAL_MCAST_QP_ATTACH {
                    break 'fill;
                }
                assert_eq!(g.attach(group(n), qpn), Ok(()));
                total += 1;
            }
        }
        assert_eq!(
            g.attach(group(MAX_MCAST_GROUPS - 1), 999),
            Err(McastError::Full)
        );
    }
}
