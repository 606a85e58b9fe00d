//! Which accounting stages this build runs, and whether a frame reads a clock: all of them, but in
//! the benchmark's variants.

use analyzer_common::maps::stage;

/// The accounting stages this build runs: all, except in the variants `cargo xtask
/// bench-kernel` builds to show what each stage costs a frame (a constant: the program built
/// without the cfg is the same code as without stages).
#[cfg(not(any(roce_stages = "classify", roce_stages = "flow")))]
pub(crate) const STAGES: u8 = stage::ALL;

#[cfg(roce_stages = "classify")]
pub(crate) const STAGES: u8 = 0;

#[cfg(roce_stages = "flow")]
pub(crate) const STAGES: u8 = stage::FLOW;

/// Whether a RoCE frame reads a clock: in every build but the benchmark's variants that show
/// what a frame costs without one (`roce_stages = "noclock"`: every stage, the flow's times a
/// constant; `"bare_noclock"`: the bare frame of `floor`).
pub(crate) const CLOCK: bool = !cfg!(any(roce_stages = "noclock", roce_stages = "bare_noclock"));
