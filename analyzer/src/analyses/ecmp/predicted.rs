//! What a hash configuration predicts per tier (`--ecmp-tier`), and whether later tiers are
//! polarized by earlier ones.

use std::collections::{BTreeMap, BTreeSet};

use analyzer_common::flow::FlowKey;

use super::hash::{Hash, Tier, key};
use super::measure::imbalance;
use crate::model::{EcmpPredicted, Finding, FindingCode, LabelShare, Severity, TierJson, TierPairJson};

/// Per tier: (flows, bytes) per path; across tiers: combinations, their spread per pair of
/// tiers, and polarization.
pub struct Prediction {
    pub per_path: Vec<Vec<(u64, u64)>>,
    pub combinations_used: u64,
    pub combinations_total: u64,
    /// Combinations independent uniform hashing would use for this many flows, on average.
    pub combinations_expected: f64,
    pub polarized: bool,
    /// Per pair of tiers (earlier, later): later-tier members used per earlier branch.
    pub pairs: Vec<PairSpread>,
}

/// How the flows of each branch of an earlier tier spread over a later tier's members.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairSpread {
    pub earlier: usize,
    pub later: usize,
    /// Fewest and mean later-tier members used by the flows of one earlier branch (branches
    /// with flows).
    pub members_min: u32,
    pub members_mean: f64,
    /// The share of the later tier's capacity the branches leave idle: 1 - mean / fan-out.
    pub idle_ratio: f64,
}

/// Occupied cells when `n` flows fall uniformly and independently into `cells`: the mean and
/// the standard deviation.
fn occupancy(cells: f64, n: f64) -> (f64, f64) {
    if cells <= 1.0 {
        return (cells.min(1.0), 0.0);
    }
    let q1 = (1.0 - 1.0 / cells).powf(n);
    let q2 = (1.0 - 2.0 / cells).powf(n);
    let mean = cells * (1.0 - q1);
    let var = cells * (cells - 1.0) * q2 + cells * q1 - cells * cells * q1 * q1;
    (mean, var.max(0.0).sqrt())
}

/// Predicts the paths of `flows` (key, bytes) through `tiers`. The tiers are polarized when
/// the flows use fewer path combinations than independent uniform hashing would: more than
/// four standard deviations, and at least one, below its expectation for that many flows
/// (a later tier that follows an earlier one, or uses half its members per earlier branch).
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
    let (expected, sd) = occupancy(total as f64, flows.len() as f64);
    let used = combos.len() as u64;
    let polarized = tiers.len() >= 2 && (used as f64) < expected - (4.0 * sd).max(1.0);
    let mut pairs = Vec::new();
    for j in 1..tiers.len() {
        for i in 0..j {
            let mut members: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
            for p in &paths {
                members.entry(p[i]).or_default().insert(p[j]);
            }
            let counts: Vec<u32> = members.values().map(|s| s.len() as u32).collect();
            let mean = if counts.is_empty() { 0.0 } else { counts.iter().sum::<u32>() as f64 / counts.len() as f64 };
            pairs.push(PairSpread {
                earlier: i,
                later: j,
                members_min: counts.iter().copied().min().unwrap_or(0),
                members_mean: mean,
                idle_ratio: 1.0 - mean / tiers[j].fanout as f64,
            });
        }
    }
    Prediction {
        per_path,
        combinations_used: used,
        combinations_total: total,
        combinations_expected: expected,
        polarized,
        pairs,
    }
}

/// The predicted section for `flows` (key, bytes) through `tiers` (none without tiers), with
/// its findings: `ecmp_polarized`, and `crc_seed` where a tier hashes with a CRC.
pub fn predicted(tiers: &[Tier], flows: &[(&FlowKey, u64)], findings: &mut Vec<Finding>) -> Option<EcmpPredicted> {
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
                "the tiers' hashes are correlated: {} flows use {} of {} path combinations where independent hashing would use {:.1}{}",
                flows.len(),
                p.combinations_used,
                p.combinations_total,
                p.combinations_expected,
                p.pairs
                    .iter()
                    .filter(|x| x.idle_ratio > 0.0)
                    .map(|x| format!(
                        "; tier {} uses {:.1} of its {} members per branch of tier {} ({:.0}% idle)",
                        x.later + 1,
                        x.members_mean,
                        tiers[x.later].fanout,
                        x.earlier + 1,
                        x.idle_ratio * 100.0
                    ))
                    .collect::<String>()
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
        combinations_expected: p.combinations_expected,
        polarized: p.polarized,
        pairs: p
            .pairs
            .iter()
            .map(|x| TierPairJson {
                earlier: x.earlier as u32,
                later: x.later as u32,
                members_min: x.members_min,
                members_mean: x.members_mean,
                idle_ratio: x.idle_ratio,
            })
            .collect(),
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
