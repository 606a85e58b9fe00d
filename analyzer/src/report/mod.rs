//! Reports: the versioned JSON document (schema `roce-analyzer/report/v1`) and everything made
//! of it. The document itself is [`crate::model`], the ground floor every layer uses; [`assemble`] builds it
//! from a run's [`crate::pipeline::Pipeline`]; [`render`] turns it into the human summary, HTML,
//! Graphviz, metrics and the live view; [`merge`] combines several; [`gates`] and [`mod@write`]
//! serve the command line.
//!
//! v1 is a contract: later versions add sections, never rename fields. Numbers are integers
//! (but for ratios and rates: `imbalance`, `combinations_expected`, `members_mean`, `idle_ratio`,
//! `peak_gbps`, `peak_link_ratio`, `sport_entropy_bits`, the messages' `share`, `slowdown_*`, `fluctuation`,
//! `straggler_ratio`, `capture.loss.ratio`, `pfc.rates`' per-million rates),
//! timestamps Unix ns, flows sorted by key so that two runs give byte-identical JSON.

pub mod assemble;
pub mod audit_merge;
pub mod dcqcn_merge;
pub mod dcqcn_stitch;
pub mod diagnose;
pub mod ecn_merge;
pub mod evidence;
pub mod export;
pub mod first_acks;
pub mod gap_replay;
pub mod gates;
pub mod incast_merge;
pub mod incast_stitch;
pub mod lb_stitch;
pub mod lead_stitch;
pub mod load_balancing_merge;
pub mod loss_stitch;
pub mod marking_merge;
pub mod merge;
pub mod messages_merge;
pub mod messages_stitch;
pub mod out_dir;
pub mod pause_merge;
pub mod psn_stitch;
pub mod render;
pub mod rtt_karn;
pub mod rtt_merge;
pub mod rtt_stitch;
pub mod steady_stitch;
pub mod tail_merge;
pub mod uc_stitch;
pub mod validate;
pub mod vantage_merge;
pub mod write;

pub use assemble::RunKind;
