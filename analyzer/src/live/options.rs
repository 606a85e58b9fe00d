//! What a live run is asked to do: the interface, the program's load options, the pace, the
//! analyses' parameters and the outputs fed while it runs. Built from the command line by
//! [`crate::cli::AnalyzeArgs::live_options`].

use std::time::Duration;

use crate::capture::kernel::load::{AttachMode, FragsMode, LoadOptions};

#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub iface: String,
    /// The input's label (`--label`; the interface by default).
    pub label: String,
    pub mode: AttachMode,
    /// The multi-buffer program, the single-buffer one, or the first the driver takes.
    pub frags: FragsMode,
    pub interval: Duration,
    pub duration: Option<Duration>,
    pub idle_timeout: Duration,
    pub load: LoadOptions,
    /// After this long without a RoCE frame on an interface backed by an RDMA device, say
    /// that hardware RoCE bypasses the kernel.
    pub rdma_grace: Duration,
    /// Serve Prometheus metrics on this address, with this many flow series.
    pub metrics: Option<(String, usize)>,
    /// Read the NIC's own counters (RDMA hw_counters, ethtool statistics).
    pub nic_counters: bool,
    /// Run as this user once attached (`--user`).
    pub user: Option<String>,
    /// Parameters of the analyses.
    pub config: crate::analyses::Config,
    /// `--evidence` and how long the kernel copies a finding's frames (ns).
    pub evidence: Option<(crate::report::evidence::Options, u64)>,
    /// `--json FILE`: a checkpoint of the report there every this often while the run goes on.
    pub checkpoint: Option<(crate::report::write::Target, Duration)>,
    /// The live view on standard output, with this many flows (a terminal, no `--json -`,
    /// not `--quiet`).
    pub view_top: Option<usize>,
}
