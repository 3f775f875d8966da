// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! PCI configuration space (VFIO region 7): identity, class, command/status, BAR0 sizing and an
//! MSI-X capability whose table and PBA live in BAR0. QEMU emulates the MSI-X table; the enable
//! and function-mask bits written here are forwarded to the MSI-X controller.

use ferroce_hw::*;

/// Size of the configuration space we serve (conventional PCI).
pub const CONFIG_SIZE: usize = 256;
/// Offset of the MSI-X capability.
pub const MSIX_CAP_OFFSET: usize = 0x40;
const PCI_CAP_ID_MSIX: u8 = 0x11;
const PCI_STATUS_CAP_LIST: u16 = 1 << 4;
const MSIX_CTRL_ENABLE: u8 = 0x80;
/// Bus Master Enable in the command register's low byte.
const COMMAND_BUS_MASTER: u8 = 1 << 2;
const MSIX_CTRL_FUNCTION_MASK: u8 = 0x40;

/// Config space with a write mask.
pub struct ConfigSpace {
    bytes: [u8; CONFIG_SIZE],
    writable: [u8; CONFIG_SIZE],
}

impl ConfigSpace {
    /// Config space of a ferroce function (`device_id`: `PCI_DEVICE_ID` or
    /// `PCI_VF_DEVICE_ID`) with `msix_vectors` vectors.
    pub fn new(msix_vectors: u16, device_id: u16) -> Self {
        let mut bytes = [0u8; CONFIG_SIZE];
        let mut writable = [0u8; CONFIG_SIZE];
        let mut put = |off: usize, data: &[u8]| bytes[off..off + data.len()].copy_from_slice(data);
        put(0x00, &PCI_VENDOR_ID.to_le_bytes());
        put(0x02, &device_id.to_le_bytes());
        put(0x06, &PCI_STATUS_CAP_LIST.to_le_bytes());
        put(0x08, &[PCI_REVISION]);
        put(
            0x09,
            &[
                (PCI_CLASS_CODE & 0xff) as u8,
                (PCI_CLASS_CODE >> 8) as u8,
                (PCI_CLASS_CODE >> 16) as u8,
            ],
        );
        // BAR0: 32-bit non-prefetchable memory; the low bits read 0.
        put(0x2c, &PCI_SUBSYSTEM_VENDOR_ID.to_le_bytes());
        put(0x2e, &PCI_SUBSYSTEM_ID.to_le_bytes());
        put(0x34, &[MSIX_CAP_OFFSET as u8]);
        put(0x3d, &[1]); // INTA#
                         // MSI-X: table size N-1, table and PBA in BAR0 (BIR 0).
        put(MSIX_CAP_OFFSET, &[PCI_CAP_ID_MSIX, 0]);
        put(
            MSIX_CAP_OFFSET + 2,
            &(msix_vectors.saturating_sub(1)).to_le_bytes(),
        );
        put(
            MSIX_CAP_OFFSET + 4,
            &(MSIX_TABLE_OFFSET as u32).to_le_bytes(),
        );
        put(MSIX_CAP_OFFSET + 8, &(MSIX_PBA_OFFSET as u32).to_le_bytes());
        // Writable: command (I/O, memory, bus master, parity, SERR, INTx disable), BAR0 address
        // bits, interrupt line, MSI-X enable + function mask.
        writable[0x04] = 0x47;
        writable[0x05] = 0x05;
        let bar_mask = !(BAR0_SIZE as u32 - 1) & 0xffff_fff0;
        writable[0x10..0x14].copy_from_slice(&bar_mask.to_le_bytes());
        writable[0x3c] = 0xff;
        writable[MSIX_CAP_OFFSET + 3] = MSIX_CTRL_ENABLE | MSIX_CTRL_FUNCTION_MASK;
        Self { bytes, writable }
    }

    /// Reads; bytes past the end read as 0.
    pub fn read(&self, offset: u64, data: &mut [u8]) {
        for (i, byte) in data.iter_mut().enumerate() {
            *byte = usize::try_from(offset)
                .ok()
                .and_then(|o| o.checked_add(i))
                .and_then(|o| self.bytes.get(o))
                .copied()
                .unwrap_or(0);
        }
    }

    /// Writes through the write mask; returns the MSI-X (enable, function mask) bits if the
    /// write touched them.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Option<(bool, bool)> {
        let control = MSIX_CAP_OFFSET + 3;
        let mut touched_msix = false;
        for (i, byte) in data.iter().enumerate() {
            let Some(o) = usize::try_from(offset).ok().and_then(|o| o.checked_add(i)) else {
                continue;
            };
            if let (Some(cur), Some(mask)) =
                (self.bytes.get(o).copied(), self.writable.get(o).copied())
            {
                self.bytes[o] = (cur & !mask) | (byte & mask);
                touched_msix |= o == control;
            }
        }
        touched_msix.then(|| self.msix_control())
    }

    /// The command register's Bus Master Enable.
    pub fn bus_master(&self) -> bool {
        self.bytes[0x04] & COMMAND_BUS_MASTER != 0
    }

    /// MSI-X (enable, function mask).
    pub fn msix_control(&self) -> (bool, bool) {
        let control = self.bytes[MSIX_CAP_OFFSET + 3];
        (
            control & MSIX_CTRL_ENABLE != 0,
            control & MSIX_CTRL_FUNCTION_MASK != 0,
        )
    }

    /// Back to power-on values (command register and MSI-X control cleared, BAR kept).
    pub fn reset(&mut self) {
        self.bytes[0x04] = 0;
        self.bytes[0x05] = 0;
        self.bytes[MSIX_CAP_OFFSET + 3] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_bar_sizing_and_msix() {
        let mut id = [0u8; 4];
        ConfigSpace::new(8, PCI_VF_DEVICE_ID).read(0, &mut id);
        assert_eq!(
            u32::from_le_bytes(id),
            u32::from(PCI_VF_DEVICE_ID) << 16 | u32::from(PCI_VENDOR_ID)
        );
        let mut cfg = ConfigSpace::new(8, PCI_DEVICE_ID);
        cfg.read(0, &mut id);
        assert_eq!(
            u32::from_le_bytes(id),
            u32::from(PCI_DEVICE_ID) << 16 | u32::from(PCI_VENDOR_ID)
        );
        let mut class = [0u8; 4];
        cfg.read(8, &mut class);
        assert_eq!(u32::from_le_bytes(class) >> 8, PCI_CLASS_CODE);
        // BAR sizing: write all ones, read back the size mask.
        cfg.write(0x10, &[0xff; 4]);
        let mut bar = [0u8; 4];
        cfg.read(0x10, &mut bar);
        assert_eq!(!u32::from_le_bytes(bar) + 1, BAR0_SIZE as u32);
        // Read-only identity.
        cfg.write(0, &[0; 4]);
        cfg.read(0, &mut id);
        assert_eq!(u16::from_le_bytes([id[0], id[1]]), PCI_VENDOR_ID);
        let mut size = [0u8; 2];
        cfg.read((MSIX_CAP_OFFSET + 2) as u64, &mut size);
        assert_eq!(u16::from_le_bytes(size), 7);
        assert_eq!(
            cfg.write((MSIX_CAP_OFFSET + 2) as u64, &[0x07, 0xc0]),
            Some((true, true))
        );
        cfg.reset();
        assert_eq!(cfg.msix_control(), (false, false));
        // Past the end.
        let mut past = [0xaau8; 4];
        cfg.read(0x1000, &mut past);
        assert_eq!(past, [0; 4]);
    }
}
