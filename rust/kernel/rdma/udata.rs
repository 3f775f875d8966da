// SPDX-License-Identifier: GPL-2.0

//! Driver-specific request and response data of a uverbs command (`struct ib_udata`).

use crate::{
    bindings,
    prelude::*,
    rdma::{
        Device,
        Operations,
        Ucontext, //
    },
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

/// The driver's part of a uverbs command from userspace: a request to read and a response to
/// write, each laid out as in the driver's `include/uapi/rdma/<driver>-abi.h`.
///
/// Verbs called by kernel users carry no `Udata` (the operations get `None`).
///
/// # Invariants
///
/// `self.0` points to a valid `struct ib_udata` whose buffers are userspace addresses of the
/// calling process, for `'a`.
pub struct Udata<'a>(NonNull<bindings::ib_udata>, PhantomData<&'a mut ()>);

impl Udata<'_> {
    /// Wraps the `udata` ib_core passes, `None` for a kernel caller (NULL).
    ///
    /// # Safety
    ///
    /// `udata` must be NULL or point to a valid `struct ib_udata` for `'a`.
    pub(crate) unsafe fn from_raw<'a>(udata: *mut bindings::ib_udata) -> Option<Udata<'a>> {
        // INVARIANT: Guaranteed by the caller.
        NonNull::new(udata).map(|p| Udata(p, PhantomData))
    }

    /// The raw `struct ib_udata`.
    pub fn as_raw(&self) -> *mut bindings::ib_udata {
        self.0.as_ptr()
    }

    /// The user context of the process that made the call, if it is one of `dev`'s (always, for
    /// the `udata` of an operation of `dev`).
    pub fn ucontext<'b, T: Operations>(&self, dev: &'b Device<T>) -> Option<&'b Ucontext<T>> {
        // SAFETY: By the type invariant `udata` is the driver data of a uverbs call, which is
        // embedded in its attribute bundle; the bundle's context is valid for the call.
        let ctx = unsafe { bindings::rdma_udata_to_ucontext(self.as_raw()) };
        if ctx.is_null() {
            return None;
        }
        // SAFETY: `ctx` is valid (above). A context of `dev` is a context of a `T` device, set up
        // by our `alloc_ucontext` before any call that carries it.
        unsafe { ((*ctx).device == dev.as_raw()).then(|| Ucontext::<T>::from_raw(ctx)) }
    }

    /// Length of the request userspace sent.
    pub fn in_len(&self) -> usize {
        // SAFETY: By the type invariant the pointer is valid.
        unsafe { (*self.as_raw()).inlen }
    }

    /// Room for the response.
    pub fn out_len(&self) -> usize {
        // SAFETY: By the type invariant the pointer is valid.
        unsafe { (*self.as_raw()).outlen }
    }

    /// Reads the request as an `R`.
    ///
    /// An older, shorter request is zero-extended; a newer, longer one is accepted only if the
    /// bytes this driver does not know are zero (the rule of `ib_is_udata_cleared()`).
    ///
    /// # Errors
    ///
    /// `EFAULT` when userspace memory cannot be read; `EOPNOTSUPP` when unknown trailing bytes
    /// are set.
    pub fn read<R: FromBytes + AsBytes + Default>(&self) -> Result<R> {
        let mut value = R::default();
        let len = self.in_len().min(size_of::<R>());
        // SAFETY: By the type invariant `inbuf` is a userspace address.
        let inbuf = UserPtr::from_ptr(unsafe { (*self.as_raw()).inbuf }.cast_mut());
        let mut reader = UserSlice::new(inbuf, self.in_len()).reader();
        reader.read_slice(&mut value.as_bytes_mut()[..len])?;
        let mut rest = [0u8; 64];
        while !reader.is_empty() {
            let n = reader.len().min(rest.len());
            reader.read_slice(&mut rest[..n])?;
            if rest[..n].iter().any(|&b| b != 0) {
                return Err(EOPNOTSUPP);
            }
        }
        Ok(value)
    }

    /// Writes the response; a shorter response buffer (an older library) gets its prefix.
    ///
    /// # Errors
    ///
    /// `EFAULT` when userspace memory cannot be written.
    pub fn write<W: AsBytes>(&mut self, value: &W) -> Result {
        let len = self.out_len().min(size_of::<W>());
        // SAFETY: By the type invariant `outbuf` is a userspace address.
        let outbuf = UserPtr::from_ptr(unsafe { (*self.as_raw()).outbuf });
        UserSlice::new(outbuf, len)
            .writer()
            .write_slice(&value.as_bytes()[..len])
    }
}
