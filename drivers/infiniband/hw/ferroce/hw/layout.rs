// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Little-endian layouts: the field codec and the `hw_layout!`/`hw_command!` macros every
//! structure of the interface is declared with.

/// A field type that can be stored little-endian at a byte offset.
///
/// Out-of-range accesses read as zero and are ignored on write; the layouts below only use
/// offsets checked at compile time, so this never happens for them.
pub trait LeField: Sized {
    /// Reads the field at `off`.
    fn get(buf: &[u8], off: usize) -> Self;
    /// Writes the field at `off`.
    fn put(&self, buf: &mut [u8], off: usize);
}

pub(super) fn get_bytes<const N: usize>(buf: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = off.checked_add(N).and_then(|end| buf.get(off..end)) {
        out.copy_from_slice(src);
    }
    out
}

/// The first `N` bytes of `buf`, zero-padded if it is shorter.
#[cfg(userspace)] // Command decoding, on the device side.
pub(super) fn get_prefix<const N: usize>(buf: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = if buf.len() < N { buf.len() } else { N };
    if let (Some(dst), Some(src)) = (out.get_mut(..n), buf.get(..n)) {
        dst.copy_from_slice(src);
    }
    out
}

pub(super) fn put_bytes<const N: usize>(buf: &mut [u8], off: usize, bytes: &[u8; N]) {
    if let Some(dst) = off.checked_add(N).and_then(|end| buf.get_mut(off..end)) {
        dst.copy_from_slice(bytes);
    }
}

impl LeField for u8 {
    fn get(buf: &[u8], off: usize) -> Self {
        u8::from_le_bytes(get_bytes(buf, off))
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, &self.to_le_bytes());
    }
}

impl LeField for u16 {
    fn get(buf: &[u8], off: usize) -> Self {
        u16::from_le_bytes(get_bytes(buf, off))
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, &self.to_le_bytes());
    }
}

impl LeField for u32 {
    fn get(buf: &[u8], off: usize) -> Self {
        u32::from_le_bytes(get_bytes(buf, off))
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, &self.to_le_bytes());
    }
}

impl LeField for u64 {
    fn get(buf: &[u8], off: usize) -> Self {
        u64::from_le_bytes(get_bytes(buf, off))
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, &self.to_le_bytes());
    }
}

impl LeField for [u32; 3] {
    fn get(buf: &[u8], off: usize) -> Self {
        [0, 4, 8].map(|at| u32::get(buf, off.saturating_add(at)))
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        for (i, word) in self.iter().enumerate() {
            word.put(buf, off.saturating_add(i * 4));
        }
    }
}

impl<const N: usize> LeField for [u8; N] {
    fn get(buf: &[u8], off: usize) -> Self {
        get_bytes(buf, off)
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, self);
    }
}

/// Reads a little-endian `u32` at `off` of `buf` (zero if out of range).
#[cfg(userspace)] // The NIC model reads guest memory with it.
pub fn read_u32(buf: &[u8], off: usize) -> u32 {
    u32::get(buf, off)
}

/// Reads a little-endian `u64` at `off` of `buf` (zero if out of range).
#[cfg(userspace)] // The NIC model reads guest memory with it.
pub fn read_u64(buf: &[u8], off: usize) -> u64 {
    u64::get(buf, off)
}

/// Defines a `#[repr(C)]` little-endian layout with compile-time size checks and safe
/// `encode`/`decode`. Local to this file; uses only `core`.
macro_rules! hw_layout {
    (
        $(#[$meta:meta])*
        pub struct $name:ident ($size:expr) {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        const _: () = assert!(::core::mem::size_of::<$name>() == $size);
        // No implicit padding: the fields fill the struct exactly.
        const _: () = assert!(0 $( + ::core::mem::size_of::<$ty>() )* == $size);

        impl $name {
            /// Size of the encoded layout in bytes.
            #[cfg_attr(not(userspace), allow(dead_code, reason = "each side uses part of a layout's codec"))]
            pub const SIZE: usize = $size;

            /// Encodes into little-endian bytes.
            pub fn encode(&self) -> [u8; $size] {
                let mut buf = [0u8; $size];
                $( super::layout::LeField::put(&self.$field, &mut buf, ::core::mem::offset_of!($name, $field)); )*
                buf
            }

            /// Decodes from little-endian bytes.
            pub fn decode(buf: &[u8; $size]) -> Self {
                Self { $( $field: super::layout::LeField::get(buf, ::core::mem::offset_of!($name, $field)), )* }
            }

            /// Decodes from the start of `buf`; `None` if it is too short.
            #[cfg_attr(not(userspace), allow(dead_code, reason = "each side uses part of a layout's codec"))]
            pub fn read_from(buf: &[u8]) -> Option<Self> {
                let bytes: &[u8; $size] = buf.get(..$size)?.try_into().ok()?;
                Some(Self::decode(bytes))
            }

            /// Encodes into the start of `buf`; `false` (nothing written) if it is too short.
            #[must_use]
            #[cfg_attr(not(userspace), allow(dead_code, reason = "each side uses part of a layout's codec"))]
            pub fn write_to(&self, buf: &mut [u8]) -> bool {
                match buf.get_mut(..$size) {
                    Some(dst) => {
                        dst.copy_from_slice(&self.encode());
                        true
                    }
                    None => false,
                }
            }
        }

        impl super::layout::LeField for $name {
            fn get(buf: &[u8], off: usize) -> Self {
                Self::decode(&super::layout::get_bytes(buf, off))
            }
            fn put(&self, buf: &mut [u8], off: usize) {
                super::layout::put_bytes(buf, off, &self.encode());
            }
        }
    };
}

/// Implements [`Command`](super::Command) for a payload layout: `hw_command!(Payload, OPCODE)`
/// for a command without results, `hw_command!(Payload, OPCODE, Reply)` otherwise.
macro_rules! hw_command {
    ($name:ident, $opcode:expr) => {
        hw_command!($name, $opcode, ());
    };
    ($name:ident, $opcode:expr, $reply:ty) => {
        const _: () = assert!($name::SIZE <= super::CMD_PAYLOAD_SIZE);

        impl super::Command for $name {
            const OPCODE: u16 = $opcode;
            type Reply = $reply;

            fn to_payload(&self) -> [u8; super::CMD_PAYLOAD_SIZE] {
                let mut buf = [0u8; super::CMD_PAYLOAD_SIZE];
                let _ = self.write_to(&mut buf);
                buf
            }

            #[cfg(userspace)]
            fn from_payload(payload: &[u8]) -> Self {
                Self::decode(&super::layout::get_prefix(payload))
            }
        }
    };
}

/// Declares a `#[repr(u8)]` enum of interface values, with `TryFrom<u8>` (the undefined value
/// is the error) and `From<Self> for u8`.
macro_rules! hw_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $value, )*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// Decodes an encoding; `None` if it is undefined.
            pub const fn from_raw(raw: u8) -> Option<Self> {
                match raw {
                    $( x if x == $value => Some(Self::$variant), )*
                    _ => None,
                }
            }
        }

        impl From<$name> for u8 {
            fn from(value: $name) -> u8 {
                value as u8
            }
        }

        impl TryFrom<u8> for $name {
            type Error = u8;

            fn try_from(raw: u8) -> Result<Self, u8> {
                Self::from_raw(raw).ok_or(raw)
            }
        }
    };
}

/// Declares the codes of one kind (command opcodes, statuses, ...), each once: a constant per
/// code, optionally a list of them all, and the function that names each for messages and
/// traces (`"unknown"` for any other value). A code may be `#[cfg(...)]` (then it is named only
/// where it exists, and it cannot be in a list).
macro_rules! hw_codes {
    (
        $(#[$name_meta:meta])*
        fn $name_fn:ident($ty:ty);
        $($(#[$list_meta:meta])* const $list:ident;)?
        {
            $(
                $(#[doc = $doc:literal])*
                $(#[cfg($cfg:meta)])?
                $code:ident = $value:literal => $short:literal,
            )*
        }
    ) => {
        $( $(#[doc = $doc])* $(#[cfg($cfg)])? pub const $code: $ty = $value; )*

        hw_codes!(@list [$($(#[$list_meta])* $list)?] $ty; $($code)*);

        $(#[$name_meta])*
        pub const fn $name_fn(code: $ty) -> &'static str {
            match code {
                $( $(#[cfg($cfg)])? $code => $short, )*
                _ => "unknown",
            }
        }
    };
    (@list [] $ty:ty; $($code:ident)*) => {};
    (@list [$(#[$meta:meta])* $list:ident] $ty:ty; $($code:ident)*) => {
        $(#[$meta])*
        pub const $list: [$ty; [$($code),*].len()] = [$($code),*];
    };
}

/// Declares a reply that is one object number in result word 0.
macro_rules! hw_number_reply {
    ($(#[$meta:meta])* $name:ident { $field:ident }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            /// The number of the object the command created.
            pub $field: u32,
        }

        impl super::Reply for $name {
            #[cfg(userspace)]
            fn to_results(&self) -> [u32; 3] {
                [self.$field, 0, 0]
            }

            fn from_results(results: [u32; 3]) -> Option<Self> {
                Some(Self { $field: results[0] })
            }
        }
    };
}
