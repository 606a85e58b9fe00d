//! The analyses at packet resolution. They take timeline records (one per RoCE/CNP frame:
//! built from the frame's summary offline, read from the XDP program's ring buffer live), so
//! the two modes run the same code on the same input.

pub mod audit;
pub mod config;
pub mod ecn;
pub mod rtt;
pub mod stats;

use analyzer_common::record::Record;

pub use config::Config;

#[derive(Debug)]
pub struct Analyses {
    pub config: Config,
    pub rtt: rtt::Rtt,
    pub ecn: ecn::Ecn,
    /// Timeline records analysed.
    pub records: u64,
}

impl Analyses {
    pub fn new(config: Config) -> Self {
        Analyses {
            rtt: rtt::Rtt::new(config.rtt_timeout_ns),
            ecn: ecn::Ecn::new(config.cnp_timeout_ns, config.roce_dscp, config.cnp_dscp),
            config,
            records: 0,
        }
    }

    #[inline]
    pub fn observe(&mut self, r: &Record) {
        self.records += 1;
        self.rtt.observe(r);
        self.ecn.observe(r);
    }
}

impl Default for Analyses {
    fn default() -> Self {
        Analyses::new(Config::default())
    }
}
