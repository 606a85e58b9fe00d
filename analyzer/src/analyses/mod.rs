//! The analyses at packet resolution. They take timeline records (one per RoCE/CNP frame:
//! built from the frame's summary offline, read from the XDP program's ring buffer live) and
//! PFC/PAUSE frames with their times (the frames offline, the kernel's events live), so the two
//! modes run the same code on the same input. The fabric analyses that need the whole picture
//! (congestion trees, ECMP, the audit) are computed from this state when a report is built.

pub mod config;
pub mod ecmp;
pub(crate) mod ecn;
pub(crate) mod incast;
pub mod pause;
pub mod rtt;
pub(crate) mod stats;
pub mod topology;
pub mod tree;

use analyzer_common::record::Record;

pub use config::Config;

#[derive(Debug)]
pub struct Analyses {
    pub config: Config,
    pub rtt: rtt::Rtt,
    pub ecn: ecn::Ecn,
    pub incast: incast::Incast,
    /// PFC / PAUSE timers (fed by the frames offline, by the kernel's events live).
    pub pause: pause::Pause,
}

impl Analyses {
    pub fn new(config: Config) -> Self {
        Analyses {
            rtt: rtt::Rtt::new(config.rtt_timeout_ns),
            ecn: ecn::Ecn::new(config.cnp_timeout_ns, config.roce_dscp, config.cnp_dscp),
            incast: incast::Incast::new(config.incast_window_ns, config.incast_min_senders),
            pause: pause::Pause::new(config.link_speed_bps, config.pfc_storm_ns),
            config,
        }
    }

    #[inline]
    pub fn observe(&mut self, r: &Record) {
        self.rtt.observe(r);
        self.ecn.observe(r);
        self.incast.observe(r);
    }

    /// A PFC or 802.3x PAUSE frame at `ts`.
    pub fn observe_pause(&mut self, ts: u64, s: &analyzer_common::PacketSummary) {
        match s.class() {
            analyzer_common::FrameClass::Pfc => self.pause.pfc(ts, s.src_mac, s.pfc_enable, &s.pfc_quanta),
            analyzer_common::FrameClass::Pause => self.pause.pause(ts, s.src_mac, s.pfc_quanta[0]),
            _ => {}
        }
    }
}
