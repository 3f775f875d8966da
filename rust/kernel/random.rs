// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's CRNG.
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h)

/// A random `u32` (`get_random_u32`): uniformly distributed, from the CRNG. Callable in any
/// context; it never sleeps.
///
/// # Examples
///
/// ```
/// let a = kernel::random::u32();
/// let b = kernel::random::u32();
/// // Equal once in 2^32 runs.
/// # let _ = (a, b);
/// ```
pub fn u32() -> u32 {
    // SAFETY: `get_random_u32` has no preconditions and may be called in any context.
    unsafe { crate::bindings::get_random_u32() }
}

/// A random `u8` (`get_random_u8`), as [`u32()`](fn@u32).
pub fn u8() -> u8 {
    // SAFETY: As for `get_random_u32`.
    unsafe { crate::bindings::get_random_u8() }
}
