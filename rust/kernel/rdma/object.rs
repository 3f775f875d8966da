// SPDX-License-Identifier: GPL-2.0

//! What every verbs object shares: the layout ib_core allocates, and tables that find objects
//! by number.
//!
//! ib_core allocates PDs, CQs, QPs, AHs, SRQs and user contexts itself, with the size the driver
//! declares in `ib_device_ops` (`INIT_RDMA_OBJ_SIZE`): the core structure first, the driver's
//! data right after it. [`verbs_object!`] defines such a type for each kind of object; the driver
//! only names its data type ([`Operations::Pd`](super::Operations::Pd) and so on).

use crate::{
    prelude::*,
    sync::SpinLockIrq, //
};
use core::ptr::NonNull;

/// Defines a verbs object ib_core allocates: `struct $raw` followed by `T::$data`.
macro_rules! verbs_object {
    ($(#[$meta:meta])* $name:ident, $raw:ident, $data:ident) => {
        $(#[$meta])*
        ///
        /// Dereferences to the driver's data.
        ///
        /// # Invariants
        ///
        /// `ib` is a live object of a registered [`Device<T>`](crate::rdma::Device) (its
        /// `device` field points to it), allocated by ib_core with the size of `Self`, and
        /// `data` is initialised.
        #[repr(C)]
        pub struct $name<T: $crate::rdma::Operations> {
            ib: $crate::types::Opaque<$crate::bindings::$raw>,
            data: T::$data,
        }

        impl<T: $crate::rdma::Operations> $name<T> {
            /// The size ib_core allocates for the object (`INIT_RDMA_OBJ_SIZE`).
            pub(crate) const ALLOC_SIZE: usize = {
                // ib_core allocates with `kzalloc()`, which aligns to at least 8 bytes.
                assert!(core::mem::align_of::<Self>() <= 8);
                core::mem::size_of::<Self>()
            };

            /// The raw core structure.
            pub fn as_raw(&self) -> *mut $crate::bindings::$raw {
                self.ib.get()
            }

            /// Returns the object from a pointer to its core structure.
            ///
            /// # Safety
            ///
            /// `ptr` must point to the core structure of a live `Self` whose data is initialised,
            /// and stay so for `'a`.
            pub(crate) unsafe fn from_raw<'a>(ptr: *mut $crate::bindings::$raw) -> &'a Self {
                // SAFETY: `ib` is the first field of the `repr(C)` struct; the caller guarantees
                // the object is live and initialised.
                unsafe { &*ptr.cast::<Self>() }
            }

            /// The device the object belongs to.
            pub fn device(&self) -> &$crate::rdma::Device<T> {
                // SAFETY: By the type invariant `device` points to the live `Device<T>` the
                // object was created on, which outlives its objects.
                unsafe { $crate::rdma::Device::from_raw((*self.as_raw()).device) }
            }

            /// Moves the driver's data into an object ib_core allocated.
            ///
            /// # Safety
            ///
            /// `ptr` must point to an allocation of [`Self::ALLOC_SIZE`] bytes whose data part
            /// is not initialised.
            pub(crate) unsafe fn write_data(ptr: *mut $crate::bindings::$raw, data: T::$data) {
                // SAFETY: The allocation is large and aligned enough for `Self` (see
                // `ALLOC_SIZE`); the data part is uninitialised, so nothing is overwritten.
                unsafe { core::ptr::write(&raw mut (*ptr.cast::<Self>()).data, data) }
            }

            /// Drops the driver's data of an object ib_core is about to free.
            ///
            /// # Safety
            ///
            /// `ptr` must point to a `Self` whose data is initialised and is not used after
            /// this call.
            pub(crate) unsafe fn drop_data(ptr: *mut $crate::bindings::$raw) {
                // SAFETY: The data is initialised and dropped once, per the caller.
                unsafe { core::ptr::drop_in_place(&raw mut (*ptr.cast::<Self>()).data) }
            }
        }

        impl<T: $crate::rdma::Operations> core::ops::Deref for $name<T> {
            type Target = T::$data;

            fn deref(&self) -> &T::$data {
                &self.data
            }
        }

        // SAFETY: ib_core synchronises its part of the object; the driver's data is
        // `Send + Sync` (bound of the associated type).
        unsafe impl<T: $crate::rdma::Operations> Send for $name<T> {}
        // SAFETY: As above.
        unsafe impl<T: $crate::rdma::Operations> Sync for $name<T> {}
    };
}
pub(crate) use verbs_object;

/// Driver data of objects that the device knows by number (CQs, QPs, SRQs): completions and
/// events name them by it.
pub trait Numbered {
    /// The object's number in the device.
    fn number(&self) -> u32;
}

/// A pointer to a registered object that may cross threads.
struct Entry<O>(NonNull<O>);

// SAFETY: The objects put in tables are `Send + Sync` verbs objects; the pointer is only
// dereferenced under the table's lock while the object is registered.
unsafe impl<O> Send for Entry<O> {}

/// Objects of one kind by number, so that completions and events from the device reach them.
///
/// The abstraction inserts an object once the driver created it and removes it before the
/// driver destroys it, so a lookup never sees an object ib_core is freeing. Lookups may run in
/// interrupt context.
///
/// # Invariants
///
/// Every entry points to a live object whose data is initialised.
#[pin_data]
pub struct Table<O> {
    #[pin]
    slots: SpinLockIrq<KVec<Option<Entry<O>>>>,
}

impl<O> Table<O> {
    /// A table for numbers below `len`.
    pub(crate) fn new(len: u32) -> Result<impl PinInit<Self, Error>> {
        let mut slots = KVec::with_capacity(len as usize, GFP_KERNEL)?;
        for _ in 0..len {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(try_pin_init!(Self {
            slots <- crate::new_spinlock_irq!(slots, "rdma::Table"),
        }))
    }

    /// Inserts `object` as number `number`.
    ///
    /// # Errors
    ///
    /// `ERANGE` when the number is too large for the table, `EEXIST` when it is taken (the
    /// device handed out a number twice).
    ///
    /// # Safety
    ///
    /// `object` must stay live until [`Table::remove`] removed it.
    pub(crate) unsafe fn insert(&self, number: u32, object: &O) -> Result {
        let mut slots = self.slots.lock();
        let slot = slots.get_mut(number as usize).ok_or(ERANGE)?;
        if slot.is_some() {
            return Err(EEXIST);
        }
        // INVARIANT: The caller keeps the object live until it is removed.
        *slot = Some(Entry(NonNull::from(object)));
        Ok(())
    }

    /// Removes number `number` if it is `object`; waits for lookups of it that run.
    pub(crate) fn remove(&self, number: u32, object: &O) {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots.get_mut(number as usize) {
            if slot.as_ref().is_some_and(|e| e.0 == NonNull::from(object)) {
                *slot = None;
            }
        }
    }

    /// Enters an object the driver just created under the number the device gave it. If that
    /// number cannot be used (out of range, or taken: a buggy device), `undo` destroys the object
    /// again and the creation fails with `EIO`.
    ///
    /// # Safety
    ///
    /// As [`Table::insert`].
    pub(crate) unsafe fn enter_or_undo(
        &self,
        kind: &str,
        number: u32,
        object: &O,
        undo: impl FnOnce(),
    ) -> Result {
        // SAFETY: Guaranteed by the caller.
        if let Err(e) = unsafe { self.insert(number, object) } {
            pr_err!(
                "rdma: the device numbered a new {} {}: {:?}\n",
                kind,
                number,
                e
            );
            undo();
            return Err(EIO);
        }
        Ok(())
    }

    /// Takes `object` out of the table for `destroy`, and puts it back if destruction fails
    /// (ib_core then keeps the object).
    pub(crate) fn leave_for(
        &self,
        number: u32,
        object: &O,
        destroy: impl FnOnce() -> Result,
    ) -> Result {
        self.remove(number, object);
        destroy().inspect_err(|_| {
            // SAFETY: The object stays live: ib_core keeps objects whose destruction failed.
            let _ = unsafe { self.insert(number, object) };
        })
    }

    /// Runs `f` on object `number` if it is registered. `f` runs with interrupts disabled and
    /// must not sleep.
    pub fn with<R>(&self, number: u32, f: impl FnOnce(&O) -> R) -> Option<R> {
        let slots = self.slots.lock();
        let entry = slots.get(number as usize)?.as_ref()?;
        // SAFETY: By the type invariant the object is live; it cannot be removed (and then
        // freed) while we hold the lock.
        Some(f(unsafe { entry.0.as_ref() }))
    }
}
