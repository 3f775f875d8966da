// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Packet sequence numbers: 24-bit counters compared modulo 2^24, as IBA 9.7.1 defines them
//! (a PSN is "before" another when it is less than 2^23 behind it).

use ferroce_hw::PSN_MASK;

/// `psn + n`, wrapped to 24 bits.
pub const fn add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & PSN_MASK
}

/// `psn - n`, wrapped to 24 bits.
pub const fn sub(psn: u32, n: u32) -> u32 {
    psn.wrapping_sub(n) & PSN_MASK
}

/// Signed distance `a - b` in the 24-bit PSN space, in `-2^23..2^23`.
pub const fn diff(a: u32, b: u32) -> i32 {
    // Shift the 24-bit difference into the top of an i32 and back to sign-extend it.
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// Whether `a` comes before `b`.
pub const fn before(a: u32, b: u32) -> bool {
    diff(a, b) < 0
}

/// Whether `a` comes after `b`.
pub const fn after(a: u32, b: u32) -> bool {
    diff(a, b) > 0
}

/// Whether `psn` lies in the inclusive window `first..=last`.
pub const fn within(psn: u32, first: u32, last: u32) -> bool {
    diff(psn, first) >= 0 && diff(last, psn) >= 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_wraps_at_24_bits() {
        assert_eq!(add(PSN_MASK, 1), 0);
        assert_eq!(add(PSN_MASK - 1, 5), 3);
        assert_eq!(sub(0, 1), PSN_MASK);
        assert_eq!(sub(2, 5), PSN_MASK - 2);
    }

    #[test]
    fn comparison_across_the_wrap() {
        assert_eq!(diff(0, PSN_MASK), 1);
        assert_eq!(diff(PSN_MASK, 0), -1);
        assert!(before(PSN_MASK, 0));
        assert!(after(2, PSN_MASK - 2));
        assert_eq!(diff(5, 5), 0);
        // Half the space away is the furthest "behind".
        assert_eq!(diff(0, 1 << 23), -(1 << 23));
        assert_eq!(diff(0, (1 << 23) + 1), (1 << 23) - 1);
        assert!(within(0, PSN_MASK - 1, 1));
        assert!(within(PSN_MASK, PSN_MASK - 1, 1));
        assert!(!within(2, PSN_MASK - 1, 1));
        assert!(!within(PSN_MASK - 2, PSN_MASK - 1, 1));
    }

    #[test]
    fn inputs_above_24_bits_do_not_matter() {
        assert_eq!(diff(0x0100_0005, 5), 0);
        assert_eq!(add(0xff00_0000, 1), 1);
    }
}
