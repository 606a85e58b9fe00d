//! ECMP polarization: what several labelled captures (one per uplink) observed, what a hash
//! configuration predicts per tier (`--ecmp-tier HASH:FANOUT[:SEED[:SHIFT]]`), and what the
//! flows' UDP source ports allow at all.
//!
//! [`section`] builds the report's ECMP section from narrow inputs (bytes per label, flows with
//! their bytes, the tiers), so a run and `merge` compute it, findings included, with the same
//! code: [`observed`], [`predicted`] and [`spread`] each give their part and its findings.
//!
//! The hash key is the 5-tuple: source IP (4 or 16 bytes) ‖ destination IP ‖ protocol 17 ‖
//! UDP source port (big endian) ‖ UDP destination port (big endian); path = (H(key, seed) >>
//! shift) mod fanout.

pub mod observed;
pub mod predicted;
pub mod spread;

use analyzer_common::flow::FlowKey;
use std::collections::BTreeMap;

use analyzer_common::wire::udp::ROCE_V2_PORT;

use crate::report::model::{Ecmp, LabelShare};

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

/// max / mean of `values` (1 when all are zero or there is one).
pub fn imbalance(values: &[u64]) -> f64 {
    let sum: u64 = values.iter().sum();
    if values.is_empty() || sum == 0 {
        return 1.0;
    }
    let mean = sum as f64 / values.len() as f64;
    *values.iter().max().expect("not empty") as f64 / mean
}

/// Shannon entropy (bits) of a distribution given by counts.
pub fn entropy_bits(counts: impl Iterator<Item = u64>) -> f64 {
    let c: Vec<u64> = counts.collect();
    let n: u64 = c.iter().sum();
    if n == 0 {
        return 0.0;
    }
    let h: f64 = c.iter().filter(|x| **x > 0).map(|&x| x as f64 / n as f64).map(|p| -p * p.log2()).sum();
    // One value has no entropy: 0, never -0 (which a report would print as "-0.0").
    if h == 0.0 { 0.0 } else { h }
}

/// The report's ECMP section. `by_label` (bytes and flows per vantage-point label) and
/// `multi_label_flows` give the observed shares, `tiers` the prediction, `flows` (key, bytes)
/// the spread; findings come in the order observed, predicted, spread.
pub fn section(
    by_label: &BTreeMap<String, LabelShare>,
    multi_label_flows: u64,
    tiers: &[Tier],
    flows: &[(FlowKey, u64)],
    list_host_pairs: bool,
) -> Ecmp {
    let mut findings = Vec::new();
    let observed = observed::observed(by_label, multi_label_flows, &mut findings);
    let predicted = predicted::predicted(tiers, flows, &mut findings);
    let spread = spread::spread(flows, list_host_pairs, &mut findings);
    Ecmp {
        observed,
        predicted,
        distinct_sports: spread.distinct_sports,
        sport_entropy_bits: spread.sport_entropy_bits,
        // (A report streamed to its file writes them from the flows instead: `list_host_pairs`
        // false keeps one string pair per host pair out of memory.)
        host_pairs: spread.pairs.iter().map(|p| p.json()).collect(),
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::predicted::predict;
    use super::*;

    #[test]
    fn hashes_match_their_references() {
        assert_eq!(hash(Hash::Crc32, b"123456789", 0), 0xCBF4_3926);
        assert_eq!(hash(Hash::Crc32c, b"123456789", 0), 0xE306_9283);
        // zlib: crc32(crc32(0, "1234"), "56789") == crc32(0, "123456789").
        assert_eq!(hash(Hash::Crc32, b"56789", hash(Hash::Crc32, b"1234", 0)), 0xCBF4_3926);
        assert_eq!(hash(Hash::Xor16, &[0x12, 0x34, 0x56, 0x78, 0x9a], 0x1), 0x1234 ^ 0x5678 ^ 0x9a00 ^ 1);
        // Microsoft's RSS verification suite (IPv4, and IPv4 with ports).
        let v4 = |s: [u8; 4], d: [u8; 4]| [s, d].concat();
        assert_eq!(toeplitz(&v4([66, 9, 149, 187], [161, 142, 100, 80])), 0x323e_8fc2);
        let mut k = v4([66, 9, 149, 187], [161, 142, 100, 80]);
        k.extend_from_slice(&2794u16.to_be_bytes());
        k.extend_from_slice(&1766u16.to_be_bytes());
        assert_eq!(toeplitz(&k), 0x51cc_c178);
        let mut k = v4([199, 92, 111, 2], [65, 69, 140, 83]);
        k.extend_from_slice(&14230u16.to_be_bytes());
        k.extend_from_slice(&4739u16.to_be_bytes());
        assert_eq!(toeplitz(&k), 0xc626_b0ea);
    }

    #[test]
    fn tier_parse() {
        assert_eq!(Tier::parse("crc32c:8:0x5a:16"), Ok(Tier { hash: Hash::Crc32c, fanout: 8, seed: 0x5a, shift: 16 }));
        assert_eq!(Tier::parse("toeplitz:2").unwrap().seed, 0);
        assert!(Tier::parse("md5:2").is_err() && Tier::parse("crc32:0").is_err() && Tier::parse("crc32").is_err());
        assert!(Tier::parse("crc32:4000000000").unwrap_err().contains("1 to 4096"), "a huge fan-out is refused");
        assert!(Tier::parse("crc32:4096").is_ok());
    }

    #[test]
    fn crc_tiers_with_different_seeds_polarize() {
        let flows: Vec<(Vec<u8>, u64)> = (0..64u16)
            .map(|i| {
                let k = FlowKey {
                    src: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                    dst: [10, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                    udp_sport: 0xC000 + i,
                    ip_version: 4,
                    ..Default::default()
                };
                (key(&k), 100)
            })
            .collect();
        let crc = [Tier::parse("crc32:4:1").unwrap(), Tier::parse("crc32:4:2").unwrap()];
        let p = predict(&crc, &flows);
        assert!(p.polarized, "crc(k, s2) = crc(k, s1) ^ c for keys of one length");
        assert_eq!(p.combinations_used, 4);
        let mixed = [Tier::parse("crc32:4:1").unwrap(), Tier::parse("crc32c:4:0:8").unwrap()];
        let p = predict(&mixed, &flows);
        assert!(!p.polarized && p.combinations_used > 8, "{}", p.combinations_used);
        assert_eq!(imbalance(&[10, 0, 0, 10]), 2.0);
        assert!((entropy_bits([1, 1, 1, 1].into_iter()) - 2.0).abs() < 1e-12);
        assert!(entropy_bits([7].into_iter()).is_sign_positive(), "one port: 0, not -0");
    }
}
