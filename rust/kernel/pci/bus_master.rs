// SPDX-License-Identifier: GPL-2.0

//! Turning bus mastering off: a device the driver no longer trusts to stop by itself must not
//! reach memory that is about to be freed.

use super::Device;
use crate::{bindings, device};

impl<Ctx: device::DeviceContext> Device<Ctx> {
    /// Disables bus mastering (`pci_clear_master()`): from now on the device cannot reach memory
    /// by DMA (if it honours the command register, as PCIe functions must). A driver whose device
    /// stopped answering calls this before it frees the memory the device knew. Callable in any
    /// context: config space accesses take a raw spinlock.
    pub fn clear_master(&self) {
        // SAFETY: `self.as_raw()` is a valid `struct pci_dev`.
        unsafe { bindings::pci_clear_master(self.as_raw()) };
    }
}
