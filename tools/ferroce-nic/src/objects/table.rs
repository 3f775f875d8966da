// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! A fixed-capacity table of numbered objects, as every object kind of the device keeps.

/// A fixed-capacity table of objects numbered from `first`.
pub struct Table<T> {
    slots: Vec<Option<T>>,
    first: u32,
    /// For a cyclic table, where the search for a free number starts: after the last one
    /// handed out.
    next: Option<u32>,
}

impl<T> Table<T> {
    /// A table whose numbers run from `first` to `capacity - 1`; a new object takes the lowest
    /// free number.
    pub fn new(capacity: u32, first: u32) -> Self {
        Self {
            slots: (0..capacity).map(|_| None).collect(),
            first,
            next: None,
        }
    }

    /// As [`Table::new`], but numbers are handed out in turn, wrapping at the end: a number
    /// comes back only after every other free one was used. QP numbers are such numbers (as
    /// RNICs' and rxe's are): a peer's connection manager still knows a QPN whose connection
    /// it has not torn down, and refuses a new connection from it as stale (IBTA 12.6.7,
    /// `IB_CM_REJ_STALE_CONN`).
    pub fn new_cyclic(capacity: u32, first: u32) -> Self {
        Self {
            next: Some(first),
            ..Self::new(capacity, first)
        }
    }

    /// Number of slots, including reserved ones below `first`.
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Inserts at the lowest free number, or for a cyclic table at the next free one in
    /// turn; `None` if full.
    pub fn insert(&mut self, item: T) -> Option<u32> {
        let index = self.free_number()?;
        self.slots[index as usize] = Some(item);
        if self.next.is_some() {
            self.next = Some(index + 1);
        }
        Some(index)
    }

    /// The number [`Table::insert`] would take now, if any is free.
    pub fn free_number(&self) -> Option<u32> {
        self.free_numbers().next()
    }

    /// The free numbers, in the order [`Table::insert`] would take them.
    pub fn free_numbers(&self) -> impl Iterator<Item = u32> + '_ {
        let first = self.first as usize;
        let from = self.next.map_or(first, |n| (n as usize).max(first));
        (from..self.slots.len())
            .chain(first..from)
            .filter(|&i| self.slots[i].is_none())
            .map(|i| i as u32)
    }

    /// Inserts at a given number (reserved numbers such as the GSI QP); `false` if taken.
    pub fn insert_at(&mut self, number: u32, item: T) -> bool {
        match self.slots.get_mut(number as usize) {
            Some(slot @ None) => {
                *slot = Some(item);
                true
            }
            _ => false,
        }
    }

    /// The object numbered `number`.
    pub fn get(&self, number: u32) -> Option<&T> {
        self.slots.get(number as usize)?.as_ref()
    }

    /// The object numbered `number`, mutably.
    pub fn get_mut(&mut self, number: u32) -> Option<&mut T> {
        self.slots.get_mut(number as usize)?.as_mut()
    }

    /// Removes and returns the object numbered `number`.
    pub fn remove(&mut self, number: u32) -> Option<T> {
        self.slots.get_mut(number as usize)?.take()
    }

    /// Live objects with their numbers.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|o| (i as u32, o)))
    }

    /// Live objects with their numbers, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| s.as_mut().map(|o| (i as u32, o)))
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Whether no object is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every object.
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_takes_the_lowest_free_number() {
        let mut t = Table::new(8, 1);
        assert_eq!((t.insert('a'), t.insert('b')), (Some(1), Some(2)));
        t.remove(1);
        assert_eq!(t.insert('c'), Some(1));
    }

    #[test]
    fn a_cyclic_table_hands_a_freed_number_out_last() {
        let mut t = Table::new_cyclic(5, 2);
        assert_eq!((t.insert('a'), t.insert('b')), (Some(2), Some(3)));
        t.remove(2);
        // The freed 2 comes back only after 4, the last free number.
        assert_eq!(t.insert('c'), Some(4));
        assert_eq!(t.insert('d'), Some(2));
        assert_eq!(t.insert('e'), None);
        t.remove(3);
        assert!(
            t.insert_at(1, 'r'),
            "numbers below `first` stay reserved for insert_at"
        );
        assert_eq!(t.insert('f'), Some(3));
    }
}
