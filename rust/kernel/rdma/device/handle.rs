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
/// code that may not (interrupt handlers), both cleared once the device is unregistered
/// (`ib_unregister_device()` has returned), before its data is dropped.
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

/// A counted reference to a registered device, as ib_core's `ib_device_try_get()` and
/// `ib_device_put()` make: unregistration waits until every one is dropped, so the device stays
/// registered and its data alive while one is held. Unlike [`DeviceHandle::with`], holding one
/// excludes nothing: work that may wait long (for a process's memory) holds a reference, not a
/// device-wide lock.
///
/// # Invariants
///
/// `ptr` points to a registered `Device<T>` whose ib_core reference count this object holds
/// one of.
pub struct DeviceRef<T: Operations> {
    ptr: NonNull<Device<T>>,
}

// SAFETY: `Device<T>` is `Send + Sync`, and the reference may be dropped (`ib_device_put()`) on
// any thread.
unsafe impl<T: Operations> Send for DeviceRef<T> {}
// SAFETY: As for `Send`: a shared `DeviceRef` only gives `&Device<T>`.
unsafe impl<T: Operations> Sync for DeviceRef<T> {}

impl<T: Operations> core::ops::Deref for DeviceRef<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: By the type invariant, the device is registered (unregistration waits for
        // this reference) and so valid.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Operations> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, this object holds one of the device's references,
        // given back here; `ib_device_put()` may be called from any context.
        unsafe { bindings::ib_device_put(self.ptr.as_ref().as_raw()) };
    }
}

/// A handle to a registered device for code that outlives no registration but cannot borrow it:
/// notifier callbacks, work items, interrupt handlers. [`DeviceHandle::with`] and
/// [`DeviceHandle::with_atomic`] run code on the device while it is registered, also while
/// ib_core unregisters it ([`Registration`]'s drop): its clients then drain their QPs and
/// destroy their objects, and wait for the completions and events the driver delivers through
/// a handle, as ib_core's drivers deliver them until `ib_unregister_device()` returns. Once it
/// has, they do nothing.
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

    /// Runs `f` on the device if it is registered or being unregistered; `f` may sleep. Returns
    /// `None` once the device is unregistered.
    pub fn with<R>(&self, f: impl FnOnce(&Device<T>) -> R) -> Option<R> {
        let guard = self.0.sleeping.lock();
        let ptr = guard.as_ref()?;
        // SAFETY: The pointer is set while the device is registered and cleared under this lock
        // once `Registration` has unregistered it, before the device's data is dropped and its
        // allocation freed, so it is valid while we hold the lock.
        Some(f(unsafe { ptr.0.as_ref() }))
    }

    /// A counted reference to the device ([`DeviceRef`]), or `None` once its unregistration
    /// takes no more (`ib_device_try_get()` fails once ib_core has removed its clients and
    /// dropped its own reference; unregistration waits for those taken before). Callable from
    /// any context (interrupt handlers included).
    pub fn get(&self) -> Option<DeviceRef<T>> {
        let guard = self.0.atomic.lock();
        let ptr = guard.as_ref()?.0;
        // SAFETY: The pointer is set while the device is registered and cleared under this lock
        // once `Registration` has unregistered it, before the allocation is freed, so it is
        // valid while we hold the lock.
        let raw = unsafe { ptr.as_ref() }.as_raw();
        // SAFETY: `raw` is a registered `ib_device` (above). Its reference count drops to zero
        // only in unregistration, which then waits for the references taken here.
        if !unsafe { bindings::ib_device_try_get(raw) } {
            return None;
        }
        // INVARIANT: The device is registered and a reference was taken for the new object.
        Some(DeviceRef { ptr })
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
