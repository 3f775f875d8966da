// SPDX-License-Identifier: GPL-2.0

//! Setting a PCI device's DMA masks from `probe()`.

use super::Device;
use crate::{
    device::Core,
    dma::{
        self,
        DmaMask, //
    },
    prelude::*,
};

impl<'a> Device<Core<'a>> {
    /// Sets the streaming and coherent DMA masks (`dma_set_mask_and_coherent()`), as drivers do
    /// first thing in `probe()`.
    ///
    /// This is the safe form of [`dma::Device::dma_set_mask_and_coherent`]: its requirement that
    /// no DMA allocation or mapping runs concurrently holds in the `Core` context of `probe()`,
    /// where the driver core holds the device lock and the driver is the only code that can
    /// allocate for the device; allocating needs a `&Device<Bound>`, and nothing can take one to
    /// another thread (threads and work items need `'static` data).
    ///
    /// # Errors
    ///
    /// `EIO` if the platform cannot address the device with `mask`.
    pub fn set_dma_mask_and_coherent(&self, mask: DmaMask) -> Result {
        // SAFETY: See above: no concurrent DMA allocation or mapping can exist in this context.
        unsafe { <Self as dma::Device<'a>>::dma_set_mask_and_coherent(self, mask) }
    }
}
