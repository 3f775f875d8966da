// SPDX-License-Identifier: GPL-2.0

//! Interrupt handlers for a PCI device's vectors, owned together with the vectors.

use super::{
    Device,
    IrqTypes,
    IrqVectorRegistration, //
};
use crate::{
    device::Bound,
    irq::{
        self,
        IrqRequest, //
    },
    prelude::*, //
};

/// A PCI device's interrupt vectors with one handler each.
///
/// Dropping it frees every handler (waiting for running ones) and then the vectors. The handlers
/// are `'static`, so that nothing they use can go away while they may run: should this be leaked
/// instead of dropped, the handlers stay registered with valid data.
///
/// # Examples
///
/// ```
/// # use kernel::{device::Bound, irq, pci, prelude::*};
/// struct Eq(u32);
/// impl irq::Handler for Eq {
///     fn handle(&self) -> irq::IrqReturn {
///         irq::IrqReturn::Handled
///     }
/// }
/// # fn no_run(pdev: &pci::Device<Bound>) -> Result {
/// let msix = pci::IrqTypes::default().with(pci::IrqType::MsiX);
/// let irqs = pci::IrqHandlers::new(pdev, 2, 8, msix, c"ferroce", |vector| Ok(Eq(vector)))?;
/// assert!(irqs.len() >= 2);
/// # Ok(())
/// # }
/// ```
pub struct IrqHandlers<'a, T: irq::Handler + 'static> {
    // Declared before `vectors`: the handlers are freed first.
    handlers: KVec<Pin<KBox<irq::Registration<'a, T>>>>,
    vectors: IrqVectorRegistration<'a>,
}

impl<'a, T: irq::Handler + 'static> IrqHandlers<'a, T> {
    /// Allocates between `min` and `max` vectors of `types` and registers `handler(i)` for
    /// vector `i` of each, named `name`.
    ///
    /// # Errors
    ///
    /// Fails when fewer than `min` vectors are available, or a handler cannot be created or
    /// registered; whatever was set up is undone.
    pub fn new(
        dev: &'a Device<Bound>,
        min: u32,
        max: u32,
        types: IrqTypes,
        name: &'static CStr,
        mut handler: impl FnMut(u32) -> Result<T>,
    ) -> Result<Self> {
        let vectors = dev.alloc_irq_vectors(min, max, types)?;
        let mut handlers = KVec::with_capacity(vectors.len(), GFP_KERNEL)?;
        for index in 0..vectors.len() {
            // Upstream's safe path resolves the vector's interrupt number; its request borrows
            // `vectors`, which `Self` owns next to the handlers, so the handlers' request is
            // made for the device's lifetime instead (the handlers are dropped first).
            let irq = IrqRequest::from(vectors.index(index)?).irq();
            // SAFETY: `irq` is vector `index` of `dev`, allocated by `vectors` (which `Self`
            // frees only after the handlers) and not requested yet.
            let request = unsafe { IrqRequest::new(dev.as_ref(), irq) };
            let index = u32::try_from(index)?;
            let data = handler(index)?;
            // SAFETY: The registration is kept in `handlers` and dropped (never forgotten) by
            // `Self`'s drop or, on error, right here; `T: 'static` covers a leaked `Self`.
            let registration = unsafe {
                irq::Registration::new(
                    request,
                    irq::Flags::TRIGGER_NONE,
                    name,
                    Ok::<T, Error>(data),
                )
            };
            handlers.push(KBox::pin_init(registration, GFP_KERNEL)?, GFP_KERNEL)?;
        }
        Ok(Self { handlers, vectors })
    }

    /// The number of vectors (and handlers).
    #[expect(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// The handler of vector `index`.
    pub fn handler(&self, index: usize) -> Option<&T> {
        self.handlers.get(index).map(|r| r.handler())
    }

    /// Waits until no handler runs on any CPU.
    pub fn synchronize(&self) {
        for registration in self.handlers.iter() {
            registration.synchronize();
        }
    }
}
