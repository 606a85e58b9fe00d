//! Zero-copy header views in the smoltcp style.
//!
//! Each header has a `Packet<T: AsRef<[u8]>>` view: `new_unchecked` wraps bytes, `new_checked`
//! verifies the buffer is long enough for the fixed part, accessors read fields through the byte
//! offsets in a private `field` module, and setters (for `T: AsMut<[u8]>`) write them. A `Repr`
//! is the parsed, owned form with `parse` and `emit` (which writes through the setters), used to
//! build frames in tests and fixtures. The extended transport headers ([`ext`]) and the CM MAD
//! ([`cm`]) are read where they sit, with the same `field` tables.

pub mod bth;
pub mod cm;
pub mod ethernet;
pub mod ext;
pub mod gre;
pub mod ipv4;
pub mod ipv6;
pub mod mac_control;
pub mod udp;

/// The buffer is shorter than the header it should hold, or a field has an impossible value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Fewer bytes than the fixed part of the header.
    Truncated,
    /// A length or version field that cannot be right.
    Malformed,
}

pub type Result<T> = core::result::Result<T, Error>;

#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
pub(crate) fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

#[inline(always)]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn put24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

#[inline(always)]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Defines `Packet<T>` with `new_unchecked`, `new_checked` (length ≥ `$len`), `into_inner`
/// and the `LEN` constant — the part every fixed-size header view shares.
macro_rules! fixed_header_view {
    ($(#[$m:meta])* ; $len:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Length of the fixed header in bytes.
            pub const LEN: usize = $len;

            /// Wraps `buffer` without checking its length; accessors may panic on short input.
            #[inline(always)]
            pub const fn new_unchecked(buffer: T) -> Self {
                Packet { buffer }
            }

            /// Wraps `buffer` after checking it holds the whole fixed header.
            #[inline(always)]
            pub fn new_checked(buffer: T) -> $crate::wire::Result<Self> {
                if buffer.as_ref().len() < Self::LEN {
                    Err($crate::wire::Error::Truncated)
                } else {
                    Ok(Packet { buffer })
                }
            }

            /// Gives the wrapped buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
pub(crate) use fixed_header_view;
