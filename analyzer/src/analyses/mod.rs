//! The analyses at packet resolution. They take timeline records (one per RoCE/CNP frame:
//! built from the frame's summary offline, read from the XDP program's ring buffer live) and
//! PFC/PAUSE frames with their times (the frames offline, the kernel's events live), so the two
//! modes run the same code on the same input. The fabric analyses that need the whole picture
//! (congestion trees, ECMP, the audit) are computed from this state when a report is built.

pub mod config;
pub mod dcqcn;
pub mod deadlock;
pub mod ecmp;
pub(crate) mod ecn;
pub mod ecn_lead;
pub mod flows;
pub(crate) mod incast;
pub mod keys;
pub mod marking;
pub mod marking_profile;
pub mod messages;
pub mod pause;
pub mod queueing;
pub mod rtt;
pub mod stats;
pub mod topology;
pub mod trajectory;
pub mod tree;
pub mod vantage;
pub mod vantage_edge;

use analyzer_common::flow::FlowKey;
use analyzer_common::record::Record;

pub use config::Config;
pub use keys::Addr;

#[derive(Debug)]
pub struct Analyses {
    pub config: Config,
    /// The ECN and RTT analyses' state per flow, in one table (one lookup per record).
    pub flows: flows::Flows,
    pub rtt: rtt::Rtt,
    pub ecn: ecn::Ecn,
    pub incast: incast::Incast,
    /// PFC / PAUSE timers (fed by the frames offline, by the kernel's events live).
    pub pause: pause::Pause,
    /// Each sender's reaction to CNPs.
    pub dcqcn: dcqcn::Dcqcn,
    /// Data frames and CE marks over time per class and priority.
    pub marking: marking::Marking,
    /// Messages and their completion times.
    pub messages: messages::Messages,
    /// CE marks per priority in time, and data frames per priority (ECN before PFC).
    pub marks: ecn_lead::Marks,
    /// `--trajectory-sample`: the frames every collector samples alike.
    pub trajectory: trajectory::Trajectory,
}

impl Analyses {
    pub fn new(config: Config) -> Self {
        Analyses {
            flows: flows::Flows::new(config.max_keys),
            rtt: rtt::Rtt::new(config.rtt_timeout_ns, config.max_keys),
            ecn: ecn::Ecn::new(config.cnp_timeout_ns, config.roce_dscp, config.cnp_dscp, config.max_keys)
                .with_interval(config.cnp_interval_ns),
            incast: incast::Incast::new(config.incast_window_ns, config.incast_min_senders, config.max_keys),
            pause: pause::Pause::new(config.link_speed_bps, config.pfc_storm_ns),
            dcqcn: dcqcn::Dcqcn::new(
                config.rate_window_ns,
                config.dcqcn_horizon_ns,
                config.cnp_interval_ns,
                config.max_keys,
            ),
            marking: marking::Marking::new(config.rate_window_ns),
            messages: messages::Messages::new(
                messages::Settings {
                    classes: config.message_classes.clone(),
                    link_bps: config.link_speed_bps,
                    window_ns: config.rate_window_ns,
                },
                config.max_keys,
            ),
            marks: ecn_lead::Marks::new(config.dscp_priority.clone(), config.topology.is_some()),
            trajectory: trajectory::Trajectory::new(config.trajectory_one_in),
            config,
        }
    }

    #[inline]
    pub fn observe(&mut self, r: &Record) {
        self.observe_hinted(r, flows::Hint::None);
    }

    /// Starts fetching the state `r` will need ([`flows::Flows::prefetch`]), by the flow's
    /// index when it has one (`index`, the agent's dense index of the kernel's flow id; 0: none); the hint to observe it
    /// with.
    #[inline]
    pub fn prefetch(&self, r: &Record, index: u32) -> flows::Hint {
        let requests = rtt::Rtt::wants(r);
        if !(ecn::Ecn::wants(r) || requests) {
            return flows::Hint::None;
        }
        match index {
            0 => self.flows.prefetch(&r.flow(), requests).map_or(flows::Hint::None, flows::Hint::Slot),
            i => self.flows.prefetch_index(&r.flow(), i, requests),
        }
    }

    /// [`Analyses::observe`] with a shortcut to the record's entry in [`flows::Flows`]: the
    /// engine's index of its flow offline, the agent's dense index of the kernel's flow id or the slot
    /// [`Analyses::prefetch`] fetched live.
    #[inline]
    pub fn observe_hinted(&mut self, r: &Record, hint: flows::Hint) {
        self.marks.observe(r);
        self.marking.observe(r);
        self.trajectory.observe(r);
        let wants = flows::Wants { marking: ecn::Ecn::wants(r), request: rtt::Rtt::wants(r) };
        // Whether DCQCN watches the record's flow, when the flows table knows (it keeps that
        // equal to the DCQCN analysis: set when an entry is added and when a flow is watched).
        let mut watched = None;
        if wants.marking || wants.request {
            let key = r.flow();
            let mut slot = self.flows.slot(&key, wants, hint);
            if let Some(s) = slot.as_mut() {
                if s.created {
                    s.flow.rate_watched = self.dcqcn.watches(&key);
                }
                watched = Some(s.flow.rate_watched);
            }
            if wants.request {
                self.rtt.request(r, slot.as_mut());
                if let Some(s) = slot.as_mut().filter(|s| s.flow.request.is_some()) {
                    self.messages.request(r, &mut s.flow.messages);
                }
            }
            self.ecn.observe(r, slot.as_mut());
            // The records incast counts (data, CNPs) are ones the ECN analysis wants: their
            // flow's entry keeps the destination's place.
            self.incast.observe_kept(r, slot.map(|s| &mut s.flow.incast));
        } else {
            self.incast.observe(r);
        }
        if messages::Messages::is_transfer(r) {
            self.messages.transfer(r);
        }
        if rtt::Rtt::is_ack(r) {
            if let Some(req) = self.rtt.ack(r, &mut self.flows)
                && let Some(state) = self.flows.get_mut(&req).and_then(|f| f.messages.as_deref_mut())
            {
                self.messages.acked(r, &req, state, self.rtt.min_sample(&req));
            }
        } else if let Some(syn) = r.aeth() {
            self.nak(r, syn);
        }
        // A CNP is about the request flow whose ACKs go to its QP, when the RTT analysis has
        // paired them.
        let paired =
            r.is_cnp().then(|| self.rtt.request_acked_at(&self.flows, &r.dst_ip, &r.src_ip, r.dst_qp)).flatten();
        let flows = &self.flows;
        let history = |k: &FlowKey| -> Vec<(u64, u64)> {
            flows.get(k).and_then(|f| f.messages.as_deref()).map(|m| m.recent()).unwrap_or_default()
        };
        if let Some(k) = self.dcqcn.observe_with(r, paired, watched, &history)
            && let Some(f) = self.flows.get_mut(&k)
        {
            f.rate_watched = true;
        }
    }

    /// A NAK or RNR NAK: the message of its request flow it names (when the flows are paired).
    #[cold]
    fn nak(&mut self, r: &Record, syndrome: u8) {
        use analyzer_common::wire::ext::{AckType, syndrome_type};
        let rnr = match syndrome_type(syndrome) {
            AckType::RnrNak => true,
            AckType::Nak => false,
            _ => return,
        };
        if let Some(req) = self.rtt.pair(r, &self.flows, false)
            && let Some(state) = self.flows.get_mut(&req).and_then(|f| f.messages.as_deref_mut())
        {
            self.messages.nak(r, state, rnr);
        }
    }

    /// Live, flows folded away ([`crate::engine::Engine::fold_idle`]): their per-flow state
    /// goes, so that churn does not fill the analyses' bounded maps.
    pub fn forget(&mut self, gone: &rustc_hash::FxHashSet<analyzer_common::flow::FlowKey>) {
        self.rtt.forget(gone, &self.flows);
        self.flows.forget(gone);
        self.dcqcn.forget(gone);
        self.messages.forget(gone);
    }

    /// Frames whose key found an analysis' state at its bound (`--max-flows` keys).
    pub fn state_full(&self) -> u64 {
        self.rtt.state_full
            + self.ecn.state_full
            + self.incast.state_full
            + self.dcqcn.state_full
            + self.messages.state_full
    }

    /// A PFC or 802.3x PAUSE frame at `ts` (other frames are not for the timers).
    pub fn observe_pause(&mut self, ts: u64, s: &analyzer_common::PacketSummary) {
        if let Some(f) = pause::Frame::of(s) {
            self.pause.observe(ts, &f);
        }
    }
}
