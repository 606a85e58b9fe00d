//! One run's state: the [`Engine`]'s counters and the [`Analyses`] above them, fed the same
//! frames. Offline every classified frame goes to both; live the kernel keeps the counters and
//! its timeline records, PFC events and CM MADs reach the analyses here, so both modes run the
//! same analysis code on the same input. Reports are assembled from a pipeline.

use analyzer_common::filter::Filter;
use analyzer_common::maps::{Event, event_kind};
use analyzer_common::record::Record;
use analyzer_common::wire::cm;
use analyzer_common::{FrameClass, PacketSummary};

use crate::analyses::flows::Hint;
use crate::analyses::vantage::{Held, Vantage};
use crate::analyses::{Analyses, Config};
use crate::engine::Engine;
use crate::frames::FrameMeta;

pub mod queue;

#[derive(Debug)]
pub struct Pipeline {
    pub engine: Engine,
    /// Vantage points and the frames several of them saw: frames are matched here before the
    /// engine counts them and the analyses take them.
    pub vantage: Vantage,
    pub analyses: Analyses,
    /// `--filter`'s test (the config's, copied: frames pass it while the analyses may be on a
    /// thread of their own).
    filter: Option<Filter>,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new(Config::default())
    }
}

impl Pipeline {
    pub fn new(config: Config) -> Self {
        let mut engine = Engine::with_pmtu(config.pmtu);
        engine.max_flows = config.max_keys;
        Pipeline {
            engine,
            vantage: Vantage::new(config.match_window_ns, config.rate_window_ns),
            filter: config.filter.as_ref().map(|f| f.filter),
            analyses: Analyses::new(config),
        }
    }

    /// The side of the run that frames meet first, handing what the analyses take straight
    /// to them.
    pub fn front(&mut self) -> Front<'_, &mut Analyses> {
        let (front, analyses) = self.split();
        front.into(analyses)
    }

    /// The front (without a sink yet) and the analyses borrowed apart: offline the analyses
    /// take the front's output on a thread of their own ([`queue`]).
    pub fn split(&mut self) -> (Front<'_, ()>, &mut Analyses) {
        let Pipeline { engine, vantage, analyses, filter } = self;
        (Front { engine, vantage, filter: *filter, sink: () }, analyses)
    }

    /// Offline: one classified frame (in time order). False when `--filter` left it out.
    #[inline]
    pub fn observe(&mut self, meta: FrameMeta, s: &PacketSummary) -> bool {
        self.front().observe(meta, s)
    }

    /// Offline with `--edges`: keep what `merge` of captures cut in time needs (each flow's
    /// head, the frames before the first CE mark, the CE/CNP timing of each pair, the data
    /// flows' rate windows near the ends, each destination's incast head and state at the end).
    pub fn keep_edges(&mut self) {
        self.engine.heads = Some(Default::default());
        self.vantage.keep_edges();
        self.analyses.marking.keep_before();
        self.analyses.dcqcn.keep_edges();
        self.analyses.incast.keep_edges();
        self.analyses.ecn.edges = true;
        self.analyses.rtt.edges = Some(Default::default());
        self.analyses.messages.log = Some(Vec::new());
        self.analyses.messages.overall = crate::analyses::messages::steady::Windows::with_early();
    }

    /// Several inputs are several vantage points: match their frames from the first on.
    pub fn expect_vantage_points(&mut self) {
        self.vantage.activate();
    }

    /// Offline, at the end of the inputs: counts the frames still held for matching.
    pub fn finish(&mut self) {
        self.front().finish();
    }

    /// Live: a PFC or PAUSE frame the kernel sent with its precise timestamp. Its counters are
    /// in the kernel maps already.
    pub fn observe_event(&mut self, meta: FrameMeta, event: &Event) {
        if event.kind == event_kind::SIGHTING {
            return self.observe_sighting(meta, &event.summary);
        }
        self.analyses.observe_pause(meta.ts_ns, &event.summary);
    }

    /// Live: a mirrored copy the kernel saw (and counted, once per frame). Matched here only for
    /// the vantage points and their hops; the frames the matching lets go are not counted again.
    fn observe_sighting(&mut self, meta: FrameMeta, s: &PacketSummary) {
        let vantage = &mut self.vantage;
        vantage.activate_live();
        let label = self.engine.sources.get(meta.source as usize).map_or("", |s| s.label.as_str());
        vantage.offer(meta, s, label);
        while vantage.due(Some(meta.ts_ns)).is_some() {}
    }

    /// Live, before a report: the sightings still held are matched as they stand.
    pub fn settle_sightings(&mut self) {
        while self.vantage.due(None).is_some() {}
    }

    /// A CM MAD (UD SEND ONLY to QP 1) from `src` to `dst`: REQ and REP pair QPs for RTT.
    pub fn observe_cm(&mut self, src: &[u8; 16], dst: &[u8; 16], mad: &[u8]) {
        self.front().observe_cm(src, dst, mad);
    }
}

/// Where the front hands what the analyses take: the analyses themselves, or a queue to
/// their thread ([`queue::Queue`]), in the order the frames came.
pub trait Sink {
    fn record(&mut self, r: &Record, hint: Hint);
    fn pause(&mut self, ts: u64, s: &PacketSummary);
    fn cm(&mut self, src: &[u8; 16], dst: &[u8; 16], m: cm::Repr);
}

impl Sink for &mut Analyses {
    #[inline]
    fn record(&mut self, r: &Record, hint: Hint) {
        self.observe_hinted(r, hint);
    }

    fn pause(&mut self, ts: u64, s: &PacketSummary) {
        self.observe_pause(ts, s);
    }

    fn cm(&mut self, src: &[u8; 16], dst: &[u8; 16], m: cm::Repr) {
        self.rtt.cm(src, dst, &m);
    }
}

/// What a frame meets before the analyses: `--filter`, the vantage matching and the engine's
/// counters; the records, pause frames and CM MADs go on to `sink`.
pub struct Front<'a, S> {
    pub engine: &'a mut Engine,
    vantage: &'a mut Vantage,
    filter: Option<Filter>,
    pub sink: S,
}

impl<'a> Front<'a, ()> {
    /// This front, handing what the analyses take to `sink`.
    pub fn into<S: Sink>(self, sink: S) -> Front<'a, S> {
        Front { engine: self.engine, vantage: self.vantage, filter: self.filter, sink }
    }
}

impl<S: Sink> Front<'_, S> {
    /// Offline: one classified frame (in time order). With several vantage points it is held
    /// for the match window first, so that its copies count once ([`crate::analyses::vantage`]).
    /// False when `--filter` left it out.
    #[inline]
    pub fn observe(&mut self, meta: FrameMeta, s: &PacketSummary) -> bool {
        if let Some(f) = &self.filter
            && !f.admits(s)
        {
            // As the XDP program does: counted, not analysed.
            self.engine.filtered += 1;
            return false;
        }
        if !self.vantage.active() && s.encap != 0 {
            self.vantage.activate();
        }
        if !self.vantage.active() {
            self.count(meta, s);
            return true;
        }
        let label = self.engine.sources.get(meta.source as usize).map_or("", |s| s.label.as_str());
        self.vantage.offer(meta, s, label);
        while let Some((h, s)) = self.vantage.due_kept(Some(meta.ts_ns)) {
            self.count_held(h, &s);
        }
        true
    }

    /// At the end of the inputs: counts the frames still held for matching.
    pub fn finish(&mut self) {
        while let Some((h, s)) = self.vantage.due_kept(None) {
            self.count_held(h, &s);
        }
    }

    /// A frame whose match window closed: once, with its copies' per-input shares.
    fn count_held(&mut self, h: Held, s: &PacketSummary) {
        self.count(h.meta, s);
        // Each input's byte share counts the frame once, however many of its origins sent it.
        let mut inputs: smallvec::SmallVec<[u16; 2]> = smallvec::smallvec![h.meta.source];
        for c in &h.copies {
            let first_of_input = !inputs.contains(&c.source);
            if first_of_input {
                inputs.push(c.source);
            }
            self.engine.observe_copy(c.source, first_of_input.then_some(c.frame_len), (c.encap, c.cut), s);
        }
    }

    /// One frame to the counters and to the analyses.
    #[inline]
    fn count(&mut self, meta: FrameMeta, s: &PacketSummary) {
        let flow = self.engine.observe(meta, s);
        match s.class() {
            FrameClass::Roce | FrameClass::Cnp => {
                self.sink.record(&Record::from_summary(meta.ts_ns, s), flow.map_or(Hint::None, Hint::Index));
            }
            FrameClass::Pfc | FrameClass::Pause => self.sink.pause(meta.ts_ns, s),
            _ => {}
        }
    }

    /// A CM MAD (UD SEND ONLY to QP 1) from `src` to `dst`: REQ and REP pair QPs for RTT.
    pub fn observe_cm(&mut self, src: &[u8; 16], dst: &[u8; 16], mad: &[u8]) {
        if let Some(m) = cm::Repr::parse(mad) {
            self.sink.cm(src, dst, m);
        }
    }
}

/// Live: timeline records wait here until [`Lookahead::AHEAD`] more have arrived, so that the
/// memory of each record's flow entry is requested while the records before it are analysed
/// (with thousands of flows taking turns every entry is a cache miss, which was most of the
/// agent's CPU). The order is kept; [`Lookahead::finish`] analyses what is left.
#[derive(Debug, Default)]
pub struct Lookahead {
    /// Each record with the hint its prefetch gave (its flow's index or the slot fetched).
    queue: std::collections::VecDeque<(Record, Hint)>,
}

impl Lookahead {
    pub const AHEAD: usize = 8;

    /// `r`, of the flow with index `index` (the agent's dense index of the kernel's flow id; 0: none known).
    pub fn push(&mut self, run: &mut Pipeline, r: Record, index: u32) {
        let hint = run.analyses.prefetch(&r, index);
        self.queue.push_back((r, hint));
        if self.queue.len() > Self::AHEAD
            && let Some((first, hint)) = self.queue.pop_front()
        {
            run.analyses.observe_hinted(&first, hint);
        }
    }

    pub fn finish(&mut self, run: &mut Pipeline) {
        while let Some((r, hint)) = self.queue.pop_front() {
            run.analyses.observe_hinted(&r, hint);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyzer_common::record::flag;

    /// Records through the lookahead reach the analyses in the same order as one by one: the
    /// same RTT samples (order-sensitive: an ACK before its request pairs with nothing) and
    /// ECN counts, also when a drain ends with fewer than AHEAD records waiting.
    #[test]
    fn lookahead_keeps_order_and_loses_nothing() {
        let rec = |src: u8, dst: u8, qp: u32, opcode: u8, psn: u32, ts: u64, flags: u8| {
            let mut r = Record { ts_ns: ts, psn, opcode, flags, ip_version: 4, dst_qp: qp, ..Default::default() };
            r.src_ip[..4].copy_from_slice(&[10, 0, 0, src]);
            r.dst_ip[..4].copy_from_slice(&[10, 0, 0, dst]);
            r
        };
        // 20 flows, each a request with AckReq answered 3 records later.
        let mut records = Vec::new();
        for i in 0..20u32 {
            let h = 10 + i as u8;
            records.push(rec(1, h, 0x100 + i, 0x0A, i, 1000 * i as u64, flag::ACK_REQ));
            records.push(rec(1, h, 0x100 + i, 0x06, i + 1, 1000 * i as u64 + 10, 0));
            records.push(rec(h, 1, 0x200 + i, 0x11, i, 1000 * i as u64 + 500, flag::AETH));
        }
        let mut one_by_one = Pipeline::default();
        for r in &records {
            one_by_one.analyses.observe(r);
        }
        let mut ahead_run = Pipeline::default();
        let mut ahead = Lookahead::default();
        // Two drains: the first ends with records still waiting.
        for chunk in records.chunks(31) {
            for r in chunk {
                ahead.push(&mut ahead_run, *r, 0);
            }
            ahead.finish(&mut ahead_run);
        }
        let view = |p: &Pipeline| {
            let mut samples = p.analyses.rtt.all_samples();
            samples.sort_unstable();
            let data: u64 = p.analyses.flows.markings().map(|(_, m)| m.data).sum();
            (samples, data, p.analyses.rtt.unpaired_acks)
        };
        assert_eq!(view(&one_by_one).0.len(), 20, "every request answered");
        assert_eq!(view(&ahead_run), view(&one_by_one));
    }
}
