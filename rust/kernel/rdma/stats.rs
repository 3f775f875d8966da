// SPDX-License-Identifier: GPL-2.0

//! Hardware counters (`struct rdma_hw_stats`): the port counters ib_core shows in
//! `/sys/class/infiniband/<dev>/ports/<port>/hw_counters/` and through `rdma statistic`.
//!
//! A driver names its counters once, in a static array of [`StatDesc`]
//! ([`Operations::HW_COUNTERS`]), and fills their values in [`Operations::get_hw_stats`].

use crate::{
    bindings,
    error::from_result,
    prelude::*,
    rdma::{
        Device,
        Operations, //
    },
};

/// The description of one hardware counter (`struct rdma_stat_desc`): its name.
///
/// # Invariants
///
/// `name` points to a NUL-terminated string that lives forever; `priv` is NULL.
#[repr(transparent)]
pub struct StatDesc(bindings::rdma_stat_desc);

// SAFETY: The description is immutable and points only to `'static` data.
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// A counter called `name`.
    pub const fn new(name: &'static CStr) -> Self {
        // INVARIANT: `name` is `'static` and NUL-terminated.
        Self(bindings::rdma_stat_desc {
            name: crate::str::as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

/// How long ib_core may show the same values (ms): `RDMA_HW_STATS_DEFAULT_LIFESPAN`, a small
/// `u32` constant, so the widening cast is exact.
const LIFESPAN: c_ulong = bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as c_ulong;

/// `alloc_hw_port_stats`: one set of the driver's counters for each port.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn alloc_hw_port_stats<T: Operations>(
    _ib: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    let descs = T::HW_COUNTERS;
    let Ok(count) = i32::try_from(descs.len()) else {
        return core::ptr::null_mut();
    };
    // SAFETY: `descs` is a `'static` array of `count` descriptions (`StatDesc` is transparent);
    // ib_core keeps the pointer for the life of the stats, which is shorter.
    unsafe { bindings::rdma_alloc_hw_stats_struct(descs.as_ptr().cast(), count, LIFESPAN) }
}

/// `get_hw_stats`: refreshes every counter of `stats` (ib_core holds `stats->lock`).
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn get_hw_stats<T: Operations>(
    ib: *mut bindings::ib_device,
    stats: *mut bindings::rdma_hw_stats,
    port: u32,
    _index: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core calls this with a registered device of this driver.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        // SAFETY: `stats` came from `alloc_hw_port_stats` (or the device variant): a valid
        // struct with `num_counters` values after it, which ib_core's lock gives us alone.
        let (count, values) = unsafe {
            let count = (*stats).num_counters;
            let len = usize::try_from(count)?;
            let values = (&raw mut (*stats).value).cast::<u64>();
            (count, core::slice::from_raw_parts_mut(values, len))
        };
        T::get_hw_stats(dev, port, values)?;
        Ok(count)
    })
}
