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
pub mod frames;
pub mod live;
pub mod metrics_server;
pub mod offline;
pub mod pipeline;
pub mod replay;
pub mod report;

/// Exit codes of the `roce-analyzer` binary (documented in the README and `--help`).
pub mod exit {
    /// The analysis ran; the report is complete.
    pub const OK: u8 = 0;
    /// An error: unreadable or malformed input, I/O failure, missing privilege.
    pub const ERROR: u8 = 1;
    /// Usage error (bad flags or arguments).
    pub const USAGE: u8 = 2;
    /// The report was written but is partial: an input ended inside a record.
    pub const PARTIAL: u8 = 3;
    /// A `--fail-on` gate tripped (takes precedence over PARTIAL).
    pub const GATE: u8 = 4;
}
