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

pub mod hash;
pub mod measure;
pub mod observed;
pub mod predicted;
pub mod spread;

use analyzer_common::flow::FlowKey;
use std::collections::BTreeMap;

use crate::model::{Ecmp, LabelShare};

pub use hash::*;
pub use measure::*;

/// The report's ECMP section. `by_label` (bytes and flows per vantage-point label) and
/// `multi_label_flows` give the observed shares, `tiers` the prediction, `flows` (key, bytes)
/// the spread; findings come in the order observed, predicted, spread. The keys are borrowed:
/// a copy of 200 000 flows' keys was 13 MB at the report's peak.
pub fn section(
    (by_label, in_series): (&BTreeMap<String, LabelShare>, Vec<crate::model::InSeries>),
    multi_label_flows: u64,
    tiers: &[Tier],
    flows: &[(&FlowKey, u64)],
    list_host_pairs: bool,
) -> Ecmp {
    let mut findings = Vec::new();
    let observed = observed::observed(by_label, multi_label_flows, in_series, &mut findings);
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
