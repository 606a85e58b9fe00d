//! What a hash configuration predicts per tier (`--ecmp-tier`), and whether later tiers are
//! polarized by earlier ones.

use std::collections::{BTreeMap, BTreeSet};

use analyzer_common::flow::FlowKey;

use super::{Hash, Tier, imbalance, key};
use crate::report::model::{EcmpPredicted, Finding, FindingCode, LabelShare, Severity, TierJson};

/// Per tier: (flows, bytes) per path; across tiers: combinations and polarization.
pub struct Prediction {
    pub per_path: Vec<Vec<(u64, u64)>>,
    pub combinations_used: u64,
    pub combinations_total: u64,
    pub polarized: bool,
}

/// Predicts the paths of `flows` (key, bytes) through `tiers`. A later tier is polarized by an
/// earlier one when its choice is a function of the earlier choice over all flows, with at
/// least fan-out(earlier) × fan-out(later) flows (independent hashes would almost surely show
/// every pair then).
pub fn predict(tiers: &[Tier], flows: &[(Vec<u8>, u64)]) -> Prediction {
    let paths: Vec<Vec<u32>> = flows.iter().map(|(k, _)| tiers.iter().map(|t| t.path(k)).collect()).collect();
    let per_path = tiers
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut v = vec![(0u64, 0u64); t.fanout as usize];
            for (p, (_, bytes)) in paths.iter().zip(flows) {
                v[p[i] as usize].0 += 1;
                v[p[i] as usize].1 += bytes;
            }
            v
        })
        .collect();
    let combos: BTreeSet<&Vec<u32>> = paths.iter().collect();
    let total = tiers.iter().fold(1u64, |a, t| a.saturating_mul(t.fanout as u64));
    let mut polarized = false;
    for j in 1..tiers.len() {
        for i in 0..j {
            if tiers[j].fanout < 2 || (flows.len() as u64) < tiers[i].fanout as u64 * tiers[j].fanout as u64 {
                continue;
            }
            let mut f: BTreeMap<u32, u32> = BTreeMap::new();
            if paths.iter().all(|p| *f.entry(p[i]).or_insert(p[j]) == p[j]) {
                polarized = true;
            }
        }
    }
    Prediction { per_path, combinations_used: combos.len() as u64, combinations_total: total, polarized }
}

/// The predicted section for `flows` (key, bytes) through `tiers` (none without tiers), with
/// its findings: `ecmp_polarized`, and `crc_seed` where a tier hashes with a CRC.
pub fn predicted(tiers: &[Tier], flows: &[(FlowKey, u64)], findings: &mut Vec<Finding>) -> Option<EcmpPredicted> {
    if tiers.is_empty() {
        return None;
    }
    let keyed: Vec<(Vec<u8>, u64)> = flows.iter().map(|(k, b)| (key(k), *b)).collect();
    let p = predict(tiers, &keyed);
    let tiers_json: Vec<TierJson> = tiers
        .iter()
        .zip(&p.per_path)
        .map(|(t, per)| {
            let bytes: Vec<u64> = per.iter().map(|x| x.1).collect();
            TierJson {
                hash: t.hash.name().into(),
                fanout: t.fanout,
                seed: t.seed,
                shift: t.shift,
                per_path: per.iter().map(|(f, b)| LabelShare { flows: *f, bytes: *b }).collect(),
                imbalance: imbalance(&bytes),
                idle: per.iter().enumerate().filter(|(_, x)| x.0 == 0).map(|(i, _)| i as u32).collect(),
            }
        })
        .collect();
    if p.polarized {
        findings.push(Finding::new(
            Severity::Warning,
            FindingCode::EcmpPolarized,
            format!(
                "a later tier's path is determined by an earlier tier's: {} of {} path combinations used by {} flows",
                p.combinations_used,
                p.combinations_total,
                flows.len()
            ),
            Vec::new(),
        ));
    }
    if tiers.iter().any(|t| matches!(t.hash, Hash::Crc32 | Hash::Crc32c)) {
        findings.push(Finding::new(
            Severity::Info,
            FindingCode::CrcSeed,
            "with CRC hashes a different seed alone does not decorrelate equal-length keys: crc(k, s1) xor crc(k, s2) \
             is the same for every key of one length, so tiers taking the same bits split flows the same way; use \
             other bits (shift), another hash or another key"
                .into(),
            Vec::new(),
        ));
    }
    Some(EcmpPredicted {
        tiers: tiers_json,
        combinations_used: p.combinations_used,
        combinations_total: p.combinations_total,
        polarized: p.polarized,
    })
}

/// The tiers a report's prediction was made with (for `merge` to predict again).
pub fn tiers_of(p: &EcmpPredicted) -> Vec<Tier> {
    p.tiers
        .iter()
        .filter_map(|t| {
            let hash = match t.hash.as_str() {
                "crc32" => Hash::Crc32,
                "crc32c" => Hash::Crc32c,
                "xor16" => Hash::Xor16,
                "toeplitz" => Hash::Toeplitz,
                _ => return None,
            };
            Some(Tier { hash, fanout: t.fanout, seed: t.seed, shift: t.shift })
        })
        .collect()
}
