// SPDX-License-Identifier: GPL-2.0

//! What every verbs object shares: the layout ib_core allocates, and tables that find objects
//! by number.
//!
//! ib_core allocates PDs, CQs, QPs, AHs, SRQs, MWs and user contexts itself, with the size the
//! driver declares in `ib_device_ops` (`INIT_RDMA_OBJ_SIZE`): the core structure first, the
//! driver's data right after it. `verbs_object!` defines such a type for each kind of object;
//! the driver only names its data type ([`Operations::Pd`](super::Operations::Pd) and so on).

use crate::{
    bindings,
    prelude::*,
    sync::LockClassKey,
    types::Opaque, //
};
use core::{
    ffi::c_void,
    marker::PhantomData,
    ptr::NonNull, //
};

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

/// Objects of one kind by number, so that completions and events from the device reach them.
///
/// An XArray with an interrupt-safe lock (`XA_FLAGS_LOCK_IRQ`): its memory follows the objects
/// there are, not the numbers the device could hand out. The abstraction inserts an object once
/// the driver created it and removes it before the driver destroys it, so a lookup never sees
/// an object ib_core is freeing. Lookups may run in interrupt context.
///
/// # Invariants
///
/// `xa` is an initialised XArray with `XA_FLAGS_LOCK_IRQ`; every entry points to a live object
/// of type `O` whose data is initialised.
#[pin_data(PinnedDrop)]
pub struct Table<O> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    _objects: PhantomData<*const O>,
}

// SAFETY: The objects put in tables are `Send + Sync` verbs objects; entries are only
// dereferenced under the XArray's lock while the object is registered.
unsafe impl<O> Send for Table<O> {}
// SAFETY: As above; every access takes the XArray's lock.
unsafe impl<O> Sync for Table<O> {}

/// The XArray's lock, with interrupts disabled while it is held.
struct XaGuard<'a> {
    xa: *mut bindings::xarray,
    flags: usize,
    _table: PhantomData<&'a ()>,
}

impl XaGuard<'_> {
    fn new(xa: *mut bindings::xarray) -> Self {
        let mut flags = 0;
        // SAFETY: `xa` is an initialised XArray (the table's invariant).
        unsafe { bindings::xa_lock_irqsave(xa, &mut flags) };
        Self {
            xa,
            flags,
            _table: PhantomData,
        }
    }
}

impl Drop for XaGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: The lock was taken in `new` with these flags.
        unsafe { bindings::xa_unlock_irqrestore(self.xa, self.flags) };
    }
}

impl<O> Table<O> {
    /// An empty table; numbers go up to `max` (the device's limit, kept for the error).
    ///
    /// Its lock is of class `key`, named `name`: one class per kind of table, so that lockdep
    /// tells the tables apart (every XArray initialised through one `xa_init_flags` call would
    /// otherwise share its class, and taking the QP table's lock under a CQ's, as polling does,
    /// would look like the inverse of taking a CQ's under the CQ table's).
    pub(crate) fn new(
        _max: u32,
        name: &'static CStr,
        key: Pin<&'static LockClassKey>,
    ) -> Result<impl PinInit<Self, Error>> {
        Ok(try_pin_init!(Self {
            // SAFETY: `xa_init_flags` initialises the XArray in place; it cannot fail. Its lock
            // is then initialised again, unused yet, with the table's class: `name` and `key`
            // are static.
            xa <- unsafe {
                Opaque::ffi_init(|xa: *mut bindings::xarray| {
                    bindings::xa_init_flags(xa, bindings::XA_FLAGS_LOCK_IRQ);
                    bindings::__spin_lock_init(
                        &raw mut (*xa).xa_lock,
                        name.as_char_ptr(),
                        key.as_ptr(),
                    );
                })
            },
            _objects: PhantomData,
        }? Error))
    }

    fn lock(&self) -> XaGuard<'_> {
        XaGuard::new(self.xa.get())
    }

    /// Inserts `object` as number `number`.
    ///
    /// # Errors
    ///
    /// `EEXIST` when the number is taken (the device handed out a number twice), `ENOMEM`.
    ///
    /// # Safety
    ///
    /// `object` must stay live until [`Table::remove`] removed it.
    pub(crate) unsafe fn insert(&self, number: u32, object: &O) -> Result {
        let entry = core::ptr::from_ref(object).cast_mut().cast::<c_void>();
        let guard = self.lock();
        // SAFETY: The lock is held (`__xa_insert` may drop and retake it to allocate, with
        // `GFP_ATOMIC` it does not); `entry` is an aligned pointer, a valid XArray entry.
        let ret =
            unsafe { bindings::__xa_insert(guard.xa, number as usize, entry, GFP_ATOMIC.as_raw()) };
        drop(guard);
        match ret {
            0 => Ok(()),
            e if e == -(bindings::EBUSY as i32) => Err(EEXIST),
            e => Err(Error::from_errno(e)),
        }
        // INVARIANT: The caller keeps the object live until it is removed.
    }

    /// Removes number `number` if it is `object`; waits for lookups of it that run (they hold
    /// the lock).
    pub(crate) fn remove(&self, number: u32, object: &O) {
        let entry = core::ptr::from_ref(object).cast_mut().cast::<c_void>();
        let guard = self.lock();
        // SAFETY: The lock is held; `xa_load` may run under it.
        if unsafe { bindings::xa_load(guard.xa, number as usize) } == entry {
            // SAFETY: The lock is held.
            unsafe { bindings::__xa_erase(guard.xa, number as usize) };
        }
    }

    /// Enters an object the driver just created under the number the device gave it. If that
    /// number cannot be used, the creation fails: with `EIO` and nothing undone when another
    /// object has it (a buggy device gave it twice; undoing would destroy the other object in
    /// the device, and the device may use this one's memory: the object's data is leaked, never
    /// dropped), and for other errors after `undo` destroyed the object again.
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
        match unsafe { self.insert(number, object) } {
            Ok(()) => Ok(()),
            Err(e) if e == EEXIST => {
                pr_err!(
                    "rdma: the device numbered a new {} {}, which another has; leaking it\n",
                    kind,
                    number
                );
                Err(EIO)
            }
            Err(e) => {
                pr_err!(
                    "rdma: the device numbered a new {} {}: {:?}\n",
                    kind,
                    number,
                    e
                );
                undo();
                Err(e)
            }
        }
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

    /// Whether an object is registered as number `number`.
    pub fn contains(&self, number: u32) -> bool {
        self.with(number, |_| ()).is_some()
    }

    /// Runs `f` on object `number` if it is registered. `f` runs with interrupts disabled and
    /// must not sleep.
    pub fn with<R>(&self, number: u32, f: impl FnOnce(&O) -> R) -> Option<R> {
        let guard = self.lock();
        // SAFETY: The lock is held.
        let entry = unsafe { bindings::xa_load(guard.xa, number as usize) };
        let object = NonNull::new(entry.cast::<O>())?;
        // SAFETY: By the type invariant the object is live; it cannot be removed (and then
        // freed) while we hold the lock.
        Some(f(unsafe { object.as_ref() }))
    }
}

#[pinned_drop]
impl<O> PinnedDrop for Table<O> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: The XArray is initialised; nothing uses the table any more. Entries are
        // borrowed, not owned: destroying the XArray frees only its nodes.
        unsafe { bindings::xa_destroy(self.xa.get()) };
    }
}
