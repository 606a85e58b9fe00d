//! roce-analyzer as a library: the binary is a thin layer over these modules.
//!
//! Data flow, one way (docs/ARCHITECTURE.md; `cargo xtask layers` checks the imports):
//! [`capture`] sources (pcap files; the XDP program's maps live) → [`frames`] (link layer onto
//! the shared classifier of `analyzer_common`) → [`engine`] (flows, classes, PFC, drops, PSN
//! state) → [`analyses`] (RTT, CE/CNP, pause time, incast, trees, ECMP) → [`pipeline`] (engine
//! and analyses of one run) → [`report`] (the v1 model, its assembly and renderings). The
//! drivers [`offline`] and [`live`] run it.

pub mod analyses;
pub mod capture;
pub mod cli;
pub mod engine;
pub mod exit;
pub mod frames;
pub mod live;
pub(crate) mod metrics_server;
pub mod model;
pub mod offline;
pub mod pipeline;
pub mod privilege;
pub mod replay;
pub mod report;
