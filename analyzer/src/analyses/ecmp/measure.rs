//! How uneven a spread is: max over mean, and Shannon entropy.

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
