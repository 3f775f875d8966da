// SPDX-License-Identifier: GPL-2.0

//! Numbers that name protection: PD tags, which the driver hands out, and MR keys, whose
//! variant byte the driver picks. Neither repeats while it can still reach old state: a PD tag
//! is never one in use, and an MR key is never the last key of its MR table slot, so that a
//! stale rkey does not reach the next MR there.

use kernel::{
    id_pool::IdPool,
    prelude::*,
    random, //
};

use crate::hw;

/// Numbers `first..end` for objects the driver names itself, none handed out twice while in
/// use. The search starts after the number last handed out, so a freed number comes back as
/// late as the others allow.
pub(crate) struct NumberPool {
    pool: IdPool,
    first: usize,
    end: usize,
    next: usize,
}

impl NumberPool {
    /// The numbers `first..end`.
    pub(crate) fn new(first: u32, end: u32) -> Result<Self> {
        let (first, end) = (usize::try_from(first)?, usize::try_from(end)?);
        if first >= end {
            return Err(EINVAL);
        }
        Ok(Self {
            pool: IdPool::with_capacity(end, GFP_KERNEL)?,
            first,
            end,
            next: first,
        })
    }

    /// A number not in use, or `None` if all are.
    pub(crate) fn take(&mut self) -> Option<u32> {
        let (first, end, next) = (self.first, self.end, self.next);
        let mut found = None;
        for start in [next, first] {
            if let Some(id) = self.pool.find_unused_id(start) {
                if (first..end).contains(&id.as_usize()) {
                    found = Some(id.acquire());
                    break;
                }
            }
        }
        let id = found?;
        self.next = if id + 1 < end { id + 1 } else { first };
        u32::try_from(id).ok()
    }

    /// Returns `number`, handed out by [`NumberPool::take`].
    pub(crate) fn give_back(&mut self, number: u32) {
        if let Ok(id) = usize::try_from(number) {
            if (self.first..self.end).contains(&id) {
                self.pool.release_id(id);
            }
        }
    }
}

/// The variant byte of the last key of each MR table slot.
pub(crate) struct MrKeys {
    last: KVVec<Option<u8>>,
}

impl MrKeys {
    /// Slots for an MR table of `max_mr` entries.
    pub(crate) fn new(max_mr: u32) -> Result<Self> {
        Ok(Self {
            last: KVVec::from_elem(None, usize::try_from(max_mr)?, GFP_KERNEL)?,
        })
    }

    /// A random variant byte for the next key.
    pub(crate) fn variant() -> u8 {
        random::u8()
    }

    /// Takes `key`, which the device made with `variant` for a new MR, if it is fresh: not the
    /// last key of its slot. `Err` if the device made up the key (a slot it does not have, or
    /// another variant).
    pub(crate) fn accept(&mut self, key: u32, variant: u8) -> Result<bool> {
        let slot = self
            .last
            .get_mut(usize::try_from(hw::mr_key_index(key))?)
            .ok_or(EIO)?;
        if key as u8 != variant {
            return Err(EIO);
        }
        if *slot == Some(variant) {
            return Ok(false);
        }
        *slot = Some(variant);
        Ok(true)
    }
}

#[kunit_tests(ferroce_ids)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_use_are_never_handed_out() -> Result {
        let mut pool = NumberPool::new(1, 5)?;
        let taken = [pool.take(), pool.take(), pool.take(), pool.take()];
        assert_eq!(taken, [Some(1), Some(2), Some(3), Some(4)]);
        // All in use.
        assert_eq!(pool.take(), None);
        pool.give_back(2);
        assert_eq!(pool.take(), Some(2));
        // Round robin: after a number comes back, the ones after the last handed out go first.
        pool.give_back(1);
        pool.give_back(3);
        assert_eq!(pool.take(), Some(3));
        assert_eq!(pool.take(), Some(1));
        // Numbers outside the range are not the pool's.
        pool.give_back(0);
        pool.give_back(9);
        assert_eq!(pool.take(), None);
        Ok(())
    }

    #[test]
    fn a_slot_never_gets_its_last_key_again() -> Result {
        let mut keys = MrKeys::new(4)?;
        let key = |index: u32, variant: u8| (index << 8) | u32::from(variant);
        assert!(keys.accept(key(2, 0x17), 0x17)?);
        // The same key again.
        assert!(!keys.accept(key(2, 0x17), 0x17)?);
        assert!(keys.accept(key(2, 0x18), 0x18)?);
        // Another slot's.
        assert!(keys.accept(key(3, 0x17), 0x17)?);
        // The device's inventions.
        assert!(keys.accept(key(4, 1), 1).is_err());
        assert!(keys.accept(key(1, 1), 2).is_err());
        Ok(())
    }
}
