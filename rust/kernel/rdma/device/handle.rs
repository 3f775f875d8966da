// SPDX-License-Identifier: GPL-2.0

//! A handle to a registered device for code that cannot borrow it (notifiers, work items,
//! interrupt handlers).

use super::*;

/// A `Device<T>` pointer that may be sent across threads.
pub(super) struct DevicePtr<T: Operations>(pub(super) NonNull<Device<T>>);

// SAFETY: `Device<T>` is `Send + Sync`; the pointer is only dereferenced under `DeviceHandle`'s
// lock while the device is registered.
unsafe impl<T: Operations> Send for DevicePtr<T> {}

/// Where a [`DeviceHandle`] finds the device: one pointer for code that may sleep, one for
/// code that may not (interrupt handlers), both cleared before the device is unregistered.
#[pin_data]
pub(super) struct HandleState<T: Operations> {
    #[pin]
    pub(super) sleeping: Mutex<Option<DevicePtr<T>>>,
    #[pin]
    atomic: SpinLockIrq<Option<DevicePtr<T>>>,
}

impl<T: Operations> HandleState<T> {
    pub(super) fn set(&self, dev: Option<NonNull<Device<T>>>) {
        *self.sleeping.lock() = dev.map(DevicePtr);
        *self.atomic.lock() = dev.map(DevicePtr);
    }
}

/// A handle to a registered device for code that outlives no registration but cannot borrow it:
/// notifier callbacks, work items, interrupt handlers. [`DeviceHandle::with`] and
/// [`DeviceHandle::with_atomic`] run code on the device while it is registered and do nothing
/// once [`Registration`] started to drop.
pub struct DeviceHandle<T: Operations>(pub(super) Arc<HandleState<T>>);

impl<T: Operations> Clone for DeviceHandle<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T: Operations> DeviceHandle<T> {
    pub(super) fn new() -> Result<Self> {
        Ok(Self(Arc::pin_init(
            try_pin_init!(HandleState {
                sleeping <- new_mutex!(None, "rdma::DeviceHandle"),
                atomic <- crate::new_spinlock_irq!(None, "rdma::DeviceHandle::atomic"),
            }),
            GFP_KERNEL,
        )?))
    }

    /// Runs `f` on the device if it is still registered; `f` may sleep. Returns `None` when the
    /// device is being (or has been) unregistered.
    pub fn with<R>(&self, f: impl FnOnce(&Device<T>) -> R) -> Option<R> {
        let guard = self.0.sleeping.lock();
        let ptr = guard.as_ref()?;
        // SAFETY: The pointer is set while the device is registered and cleared under this lock
        // before `Registration` unregisters it, so it is valid while we hold the lock.
        Some(f(unsafe { ptr.0.as_ref() }))
    }

    /// As [`DeviceHandle::with`], from any context (interrupt handlers included): `f` runs with
    /// interrupts disabled and must not sleep.
    pub fn with_atomic<R>(&self, f: impl FnOnce(&Device<T>) -> R) -> Option<R> {
        let guard = self.0.atomic.lock();
        let ptr = guard.as_ref()?;
        // SAFETY: As in `with`, for the atomic pointer and its lock.
        Some(f(unsafe { ptr.0.as_ref() }))
    }
}
