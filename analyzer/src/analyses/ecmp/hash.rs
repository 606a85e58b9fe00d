//! The switches' ECMP hashes (CRC-16/32, XOR, Toeplitz) over a RoCE v2 flow's 5-tuple, and
//! a fabric tier's hash, fan-out, seed and shift.

use analyzer_common::flow::FlowKey;
use analyzer_common::wire::udp::ROCE_V2_PORT;

/// A hash function of a switch tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    /// zlib's `crc32(seed, key)`.
    Crc32,
    /// CRC-32C (Castagnoli), same conventions.
    Crc32c,
    /// XOR of the key's 16-bit big-endian words (an odd last byte is the high byte of a word),
    /// XOR the seed.
    Xor16,
    /// Toeplitz with the common 40-byte RSS key (repeated for keys longer than 36 bytes); the
    /// seed is ignored.
    Toeplitz,
}

impl Hash {
    pub fn name(self) -> &'static str {
        match self {
            Hash::Crc32 => "crc32",
            Hash::Crc32c => "crc32c",
            Hash::Xor16 => "xor16",
            Hash::Toeplitz => "toeplitz",
        }
    }
}

/// The Microsoft RSS verification key, used by most NICs and switches as the default.
pub const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

pub fn toeplitz(input: &[u8]) -> u32 {
    let key_bit = |i: usize| (RSS_KEY[(i / 8) % RSS_KEY.len()] >> (7 - i % 8)) & 1;
    let mut window: u32 = 0;
    for i in 0..32 {
        window = (window << 1) | key_bit(i) as u32;
    }
    let mut h = 0u32;
    for (n, byte) in input.iter().enumerate() {
        for b in 0..8 {
            if byte & (0x80 >> b) != 0 {
                h ^= window;
            }
            window = (window << 1) | key_bit(n * 8 + b + 32) as u32;
        }
    }
    h
}

pub fn hash(kind: Hash, key: &[u8], seed: u32) -> u32 {
    match kind {
        Hash::Crc32 => {
            let mut h = crc32fast::Hasher::new_with_initial(seed);
            h.update(key);
            h.finalize()
        }
        Hash::Crc32c => crc32c::crc32c_append(seed, key),
        Hash::Xor16 => {
            let x = key.chunks(2).fold(0u16, |acc, w| acc ^ u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
            x as u32 ^ seed
        }
        Hash::Toeplitz => toeplitz(key),
    }
}

/// The 5-tuple key of a RoCE v2 flow.
pub fn key(k: &FlowKey) -> Vec<u8> {
    let n = if k.ip_version == 4 { 4 } else { 16 };
    let mut v = Vec::with_capacity(2 * n + 5);
    v.extend_from_slice(&k.src[..n]);
    v.extend_from_slice(&k.dst[..n]);
    v.push(17);
    v.extend_from_slice(&k.udp_sport.to_be_bytes());
    v.extend_from_slice(&ROCE_V2_PORT.to_be_bytes());
    v
}

/// The largest fan-out a tier may have: switch ECMP groups hold at most a few hundred members,
/// and each path costs the prediction memory.
pub const MAX_FANOUT: u32 = 4096;

/// One tier of the fabric: its hash, fan-out, seed and shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub hash: Hash,
    pub fanout: u32,
    pub seed: u32,
    pub shift: u32,
}

impl Tier {
    /// `HASH:FANOUT[:SEED[:SHIFT]]`, e.g. `crc32:4`, `crc32c:8:0x5a5a:16`, `toeplitz:2`.
    pub fn parse(s: &str) -> Result<Tier, String> {
        let parts: Vec<&str> = s.split(':').collect();
        if !(2..=4).contains(&parts.len()) {
            return Err(format!("{s:?}: use HASH:FANOUT[:SEED[:SHIFT]]"));
        }
        let hash = match parts[0] {
            "crc32" => Hash::Crc32,
            "crc32c" => Hash::Crc32c,
            "xor16" => Hash::Xor16,
            "toeplitz" => Hash::Toeplitz,
            h => return Err(format!("{h:?}: the hash is one of crc32, crc32c, xor16, toeplitz")),
        };
        let num = |t: &str, what: &str| -> Result<u32, String> {
            let r = match t.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16),
                None => t.parse(),
            };
            r.map_err(|_| format!("{s:?}: {what} {t:?} is not a number"))
        };
        let fanout = num(parts[1], "fan-out")?;
        if fanout == 0 || fanout > MAX_FANOUT {
            return Err(format!("{s:?}: the fan-out must be 1 to {MAX_FANOUT} (ECMP groups are far smaller)"));
        }
        let seed = parts.get(2).map(|t| num(t, "seed")).transpose()?.unwrap_or(0);
        let shift = parts.get(3).map(|t| num(t, "shift")).transpose()?.unwrap_or(0);
        if shift > 31 {
            return Err(format!("{s:?}: the shift must be below 32"));
        }
        Ok(Tier { hash, fanout, seed, shift })
    }

    pub fn path(&self, key: &[u8]) -> u32 {
        (hash(self.hash, key, self.seed) >> self.shift) % self.fanout
    }
}
