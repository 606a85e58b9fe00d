//! DCQCN reaction per flow, as the wire shows it: the sending rate of a data flow (bytes per
//! `--rate-window`), the CNPs its receiver sends back to its sender, and per CNP the rate
//! before it, the lowest rate within `--dcqcn-horizon` after it, how soon the rate fell and
//! how long it took to come back.
//!
//! A data flow is watched from its first CE mark (CNPs answer CE marks) or the first CNP to
//! its sender, its history seeded then with the latest windows the messages analysis keeps for
//! every request flow ([`Dcqcn::observe_with`]: the first CNP, often the only one, is judged
//! too); a flow without such history (not a request flow), and a CNP without one — or with a window
//! without data among the ones before it (a sparse flow has no rate at this resolution) — is
//! counted (`no_rate_before`), not judged. A CNP goes from the receiver R to the sender S's QP: it is
//! the flow whose ACKs go to that QP (the RTT analysis pairs them), else the one data flow
//! S → R being watched; otherwise it is counted as unattributed.
//!
//! Per CNP at time t, window w = ⌊t / window⌋: the rate before is the mean of the
//! [`BEFORE_WINDOWS`] windows before w; after are the windows w+1 … w+horizon up to the flow's
//! last data (a flow that ends its message is not cut), each averaged with the window before
//! it ([`SMOOTH`]: a frame that a pacing hiccup pushes into the next window is no cut). The cut
//! ratio is the lowest of those over the rate before (0.5 is a halving); the CNP is reacted to
//! when that is below [`REACTED`]; the reaction delay is the start of the first such window
//! below it minus t, the recovery time the start of the first later single window back at
//! [`REACTED`] of the rate before minus t (at window resolution).

pub mod edge;

use std::collections::VecDeque;

use analyzer_common::flow::FlowKey;
use analyzer_common::opcode;
use analyzer_common::record::Record;
use rustc_hash::FxHashMap;

use super::keys::Addr;
use super::marking::{SERIES_POINTS, Series};
use super::stats::Samples;

/// Windows before a CNP that make its "rate before".
pub const BEFORE_WINDOWS: u64 = 5;
/// A window below this share of the rate before is a cut; back at it, recovered.
pub const REACTED: f64 = 0.9;
/// Windows the rate after a CNP is averaged over (the window and the one before it).
pub const SMOOTH: u64 = 2;
/// CNPs waiting for their horizon per flow, at most (older ones are judged early).
const MAX_PENDING: usize = 1024;
/// Flows that keep a series, at most (the first watched): about 5 KB a flow.
pub const SERIES_FLOWS: usize = 64;

/// One CNP's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    pub cut_ratio: f64,
    /// None: not below [`REACTED`] of the rate before within the horizon.
    pub reaction_ns: Option<u64>,
    /// None: not back within the horizon (or no reaction).
    pub recovery_ns: Option<u64>,
}

/// What one flow's CNPs showed.
#[derive(Debug, Clone, Default)]
pub struct FlowSummary {
    pub cnps: u64,
    pub reacted: u64,
    pub unreacted: u64,
    /// CNPs with no steady rate before them (the flow was not watched yet, or a window among
    /// the [`BEFORE_WINDOWS`] before had no data).
    pub no_rate_before: u64,
    pub not_recovered: u64,
    /// Cut ratios in millionths, reaction and recovery times.
    pub cuts: Samples,
    pub reactions: Samples,
    pub recoveries: Samples,
    /// CNPs that came sooner than half the pacing interval after the previous one.
    pub close_cnps: u64,
}

impl FlowSummary {
    /// One CNP's outcome (none: no rate before it).
    pub fn add(&mut self, o: Option<Outcome>) {
        self.cnps += 1;
        let Some(o) = o else {
            self.no_rate_before += 1;
            return;
        };
        self.cuts.push((o.cut_ratio * 1e6).round() as u64);
        match o.reaction_ns {
            Some(r) => {
                self.reacted += 1;
                self.reactions.push(r);
                match o.recovery_ns {
                    Some(t) => self.recoveries.push(t),
                    None => self.not_recovered += 1,
                }
            }
            None => self.unreacted += 1,
        }
    }

    /// Another flow's CNPs (a host's summary over its flows).
    pub fn absorb(&mut self, o: &FlowSummary) {
        self.cnps += o.cnps;
        self.reacted += o.reacted;
        self.unreacted += o.unreacted;
        self.no_rate_before += o.no_rate_before;
        self.not_recovered += o.not_recovered;
        self.close_cnps += o.close_cnps;
        self.cuts.extend(&o.cuts);
        self.reactions.extend(&o.reactions);
        self.recoveries.extend(&o.recoveries);
    }
}

#[derive(Debug, Default)]
struct RateFlow {
    /// (window index, bytes) of the windows with data, oldest first: those a pending CNP or
    /// the next one still needs.
    windows: VecDeque<(u64, u64)>,
    /// CNPs whose horizon has not passed yet.
    pending: VecDeque<u64>,
    last_cnp: Option<u64>,
    /// The window it is watched from: a CNP needs [`BEFORE_WINDOWS`] of history.
    since: u64,
    done: FlowSummary,
    series: Option<Box<Series>>,
    /// Its rate cuts, [CNP + reaction, CNP + recovery (or the horizon)), the latest
    /// [`MAX_CUTS`] (for the messages' tail).
    cuts: VecDeque<(u64, u64)>,
    /// When it began to be watched.
    watched_ns: u64,
    /// `--edges`: its CNPs in order, as attributed and (those judged) as judged.
    log: Option<Vec<Logged>>,
    /// How many of them are judged.
    logged: usize,
}

/// Windows from either end of a report within which a CNP's judgement may need another
/// report's windows (`--edges`): the windows before a CNP, the horizon after it, and the window
/// its flow's latest data is looked for in.
pub fn reach(horizon_windows: u64) -> u64 {
    horizon_windows + BEFORE_WINDOWS + 2
}

/// A CNP as one report attributed and judged it (`--edges`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Logged {
    pub ts_ns: u64,
    /// Attributed as the one watched flow between its hosts (no ACK pairing told its flow).
    pub by_hosts: bool,
    pub outcome: Option<Outcome>,
}

/// Rate cuts one flow keeps for the tail, at most (the latest).
const MAX_CUTS: usize = 1024;

/// The interval a CNP at `t` cut the rate in, if it did.
fn cut_of(t: u64, o: Option<Outcome>, horizon_ns: u64) -> Option<(u64, u64)> {
    let o = o?;
    let r = o.reaction_ns?;
    Some((t + r, t + o.recovery_ns.unwrap_or(horizon_ns).max(r)))
}

/// Keeps the cut of a CNP at `t` judged `o`, if it cut the rate, among a flow's latest
/// [`MAX_CUTS`] (a run's flow, or `merge`'s stitched one).
pub(crate) fn keep_cut(cuts: &mut VecDeque<(u64, u64)>, t: u64, o: Option<Outcome>, horizon_ns: u64) {
    if let Some(c) = cut_of(t, o, horizon_ns) {
        if cuts.len() == MAX_CUTS {
            cuts.pop_front();
        }
        cuts.push_back(c);
    }
}

impl RateFlow {
    /// A CNP at `t` judged: its outcome counted, its cut kept.
    fn judged(&mut self, t: u64, o: Option<Outcome>, horizon_ns: u64) {
        keep_cut(&mut self.cuts, t, o, horizon_ns);
        self.done.add(o);
        if let Some(e) = self.log.as_mut().and_then(|l| l.get_mut(self.logged)) {
            e.outcome = o;
            self.logged += 1;
        }
    }
}

#[derive(Debug, Default)]
pub struct Dcqcn {
    window_ns: u64,
    horizon_ns: u64,
    /// The NP's CNP pacing interval, for `close_cnps` (`--cnp-interval`, else 50 µs).
    pacing_ns: u64,
    flows: FxHashMap<FlowKey, RateFlow>,
    /// Watched data flows by (source, destination).
    by_hosts: FxHashMap<(Addr, Addr), smallvec::SmallVec<[FlowKey; 2]>>,
    /// CNPs that no single watched flow could take.
    pub unattributed: u64,
    cap: usize,
    pub state_full: u64,
    /// `--edges`: the data flows' windows near the report's ends ([`edge`]).
    edge: Option<Box<edge::Edges>>,
}

/// A flow's latest rate windows with data (window, bytes), oldest first, when kept elsewhere.
pub type History<'a> = &'a dyn Fn(&FlowKey) -> Vec<(u64, u64)>;

/// The DCQCN paper's CNP interval, used when `--cnp-interval` is not given.
pub const DEFAULT_PACING_NS: u64 = 50_000;

impl Dcqcn {
    pub fn new(window_ns: u64, horizon_ns: u64, pacing_ns: Option<u64>, cap: usize) -> Self {
        Dcqcn {
            window_ns: window_ns.max(1),
            horizon_ns,
            pacing_ns: pacing_ns.unwrap_or(DEFAULT_PACING_NS),
            cap,
            ..Default::default()
        }
    }

    /// `--edges`: keep what `merge` of captures cut in time needs ([`edge`]).
    pub fn keep_edges(&mut self) {
        self.edge.get_or_insert_with(Default::default);
    }

    /// The flows watched (from their first CE mark or CNP).
    pub fn watched(&self) -> impl Iterator<Item = &FlowKey> {
        self.flows.keys()
    }

    /// What `--edges` kept.
    pub fn edges(&self) -> Option<&edge::Edges> {
        self.edge.as_deref()
    }

    /// The windows within which a CNP's judgement may need another report's ([`reach()`]).
    pub fn reach(&self) -> u64 {
        reach(self.horizon_windows())
    }

    /// A watched flow's CNPs as attributed and judged (those still within their horizon judged
    /// on the windows seen until now), and when it began to be watched: with `--edges`.
    pub fn log(&self, key: &FlowKey) -> Option<(u64, Vec<Logged>)> {
        let f = self.flows.get(key)?;
        let mut log = f.log.clone()?;
        let h = self.horizon_windows();
        for e in log.iter_mut().skip(f.logged) {
            e.outcome = judge(f, e.ts_ns, self.window_ns, h);
        }
        Some((f.watched_ns, log))
    }

    /// Flows folded away live: their state goes.
    pub fn forget(&mut self, gone: &rustc_hash::FxHashSet<FlowKey>) {
        self.flows.retain(|k, _| !gone.contains(k));
        self.by_hosts.retain(|_, keys| {
            keys.retain(|k| !gone.contains(k));
            !keys.is_empty()
        });
    }

    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    pub fn horizon_ns(&self) -> u64 {
        self.horizon_ns
    }

    pub fn horizon_windows(&self) -> u64 {
        self.horizon_ns.div_ceil(self.window_ns)
    }

    /// Starts to watch a flow (from `ts`), its rate history seeded with `history`'s windows
    /// (window, bytes) when the caller kept them: a CNP is then judged on the windows before
    /// it even when it is the flow's first sign of congestion. `minus` is a record's own
    /// (window, bytes), already in the history and added again by the caller.
    fn watch(&mut self, key: FlowKey, ts: u64, history: History, minus: Option<(u64, u64)>) -> Option<&mut RateFlow> {
        if !self.flows.contains_key(&key) {
            if self.flows.len() >= self.cap {
                self.state_full += 1;
                return None;
            }
            let hosts = ((key.src, key.ip_version), (key.dst, key.ip_version));
            self.by_hosts.entry(hosts).or_default().push(key);
            let mut windows: VecDeque<(u64, u64)> = history(&key).into_iter().collect();
            if let Some((w, b)) = minus
                && let Some(e) = windows.iter_mut().find(|e| e.0 == w)
            {
                e.1 = e.1.saturating_sub(b);
            }
            windows.retain(|e| e.1 > 0);
            let since = windows.front().map_or(ts / self.window_ns, |e| e.0);
            let series = (self.flows.len() < SERIES_FLOWS).then(|| Box::new(Series::new(ts / self.window_ns)));
            let log = self.edge.as_ref().map(|_| Vec::new());
            self.flows.insert(key, RateFlow { since, series, windows, watched_ns: ts, log, ..Default::default() });
        }
        self.flows.get_mut(&key)
    }

    /// Whether the flow's rate is watched (it had a CE mark or a CNP).
    pub fn watches(&self, key: &FlowKey) -> bool {
        self.flows.contains_key(key)
    }

    /// A data packet or CNP; `paired` is the data flow whose ACKs go where this CNP goes (from
    /// the RTT analysis), when known; `watched` is [`Dcqcn::watches`] of the record's flow, when
    /// the caller knows it (saving a lookup). Returns the flow it started to watch, if any.
    pub fn observe(&mut self, r: &Record, paired: Option<FlowKey>, watched: Option<bool>) -> Option<FlowKey> {
        self.observe_with(r, paired, watched, &|_| Vec::new())
    }

    /// [`Dcqcn::observe`], with the rate history of flows not watched yet (their latest
    /// windows with data, as the messages analysis keeps them, this record included).
    pub fn observe_with(
        &mut self,
        r: &Record,
        paired: Option<FlowKey>,
        watched: Option<bool>,
        history: History,
    ) -> Option<FlowKey> {
        let before = self.flows.len();
        let key = self.observe_inner(r, paired, watched, history)?;
        (self.flows.len() > before).then_some(key)
    }

    /// [`Dcqcn::observe`]; the flow the record was about, if any.
    fn observe_inner(
        &mut self,
        r: &Record,
        paired: Option<FlowKey>,
        watched: Option<bool>,
        history: History,
    ) -> Option<FlowKey> {
        let (wn, h, horizon_ns) = (self.window_ns, self.horizon_windows(), self.horizon_ns);
        let w = r.ts_ns / wn;
        if let Some(e) = self.edge.as_deref_mut() {
            e.record(r, w, reach(h), self.cap);
        }
        if r.is_cnp() {
            return self.cnp(r, paired, history);
        }
        if !opcode::is_data(r.opcode) {
            return None;
        }
        if watched == Some(false) && !r.ce() {
            return None;
        }
        let key = r.flow();
        let f = if r.ce() {
            self.watch(key, r.ts_ns, history, Some((w, r.frame_len as u64)))?
        } else {
            self.flows.get_mut(&key)?
        };
        // Kept in window order (a record a little out of order — live, from another CPU — adds
        // to its own window), so that judging finds a window by binary search.
        match f.windows.binary_search_by_key(&w, |(i, _)| *i) {
            Ok(at) => f.windows[at].1 += r.frame_len as u64,
            Err(at) => f.windows.insert(at, (w, r.frame_len as u64)),
        }
        if let Some(s) = f.series.as_mut() {
            s.add(w, r.frame_len as u64, r.ce());
        }
        // CNPs whose horizon has passed are judged now, with every window they need.
        while let Some(&t) = f.pending.front() {
            if t / wn + h >= w {
                break;
            }
            f.pending.pop_front();
            let o = judge(f, t, wn, h);
            f.judged(t, o, horizon_ns);
        }
        // Keep what the oldest pending CNP (or the next one) needs: its windows before.
        let from = f.pending.front().map_or(w, |t| t / wn).saturating_sub(BEFORE_WINDOWS);
        while f.windows.front().is_some_and(|(i, _)| *i < from) {
            f.windows.pop_front();
        }
        Some(key)
    }

    /// A CNP: to the flow whose ACKs go to its QP (`paired`), else the one watched flow between
    /// the two hosts; it waits for its horizon to be judged.
    fn cnp(&mut self, r: &Record, paired: Option<FlowKey>, history: History) -> Option<FlowKey> {
        let (wn, h, horizon_ns) = (self.window_ns, self.horizon_windows(), self.horizon_ns);
        let candidates = self.by_hosts.get(&((r.dst_ip, r.ip_version), (r.src_ip, r.ip_version)));
        let key = match (paired, candidates.map(|c| c.as_slice())) {
            (Some(k), _) => k,
            (None, Some([k])) => *k,
            _ => {
                self.unattributed += 1;
                if let Some(e) = self.edge.as_deref_mut() {
                    let (sender, receiver, qp, several) =
                        (r.dst_ip, r.src_ip, r.dst_qp, candidates.is_some_and(|c| c.len() > 1));
                    e.stray(edge::Stray { sender, receiver, ip_version: r.ip_version, qp, ts_ns: r.ts_ns, several });
                }
                return None;
            }
        };
        let pacing = self.pacing_ns;
        let f = self.watch(key, r.ts_ns, history, None)?;
        if f.last_cnp.is_some_and(|l| r.ts_ns.saturating_sub(l) < pacing / 2) {
            f.done.close_cnps += 1;
        }
        f.last_cnp = Some(r.ts_ns);
        if let Some(s) = f.series.as_mut().filter(|s| s.cnps.len() < SERIES_POINTS) {
            s.cnps.push(r.ts_ns);
        }
        if f.pending.len() == MAX_PENDING
            && let Some(t) = f.pending.pop_front()
        {
            let o = judge(f, t, wn, h);
            f.judged(t, o, horizon_ns);
        }
        f.pending.push_back(r.ts_ns);
        if let Some(log) = f.log.as_mut() {
            log.push(Logged { ts_ns: r.ts_ns, by_hosts: paired.is_none(), outcome: None });
        }
        Some(key)
    }

    /// A watched flow's rate series, when it keeps one.
    pub fn series(&self, key: &FlowKey) -> Option<&Series> {
        self.flows.get(key)?.series.as_deref()
    }

    /// A flow's rate cuts: those judged and (read-only) those of CNPs still within their
    /// horizon, judged on the windows seen until now.
    pub fn cuts(&self, key: &FlowKey) -> Vec<(u64, u64)> {
        let Some(f) = self.flows.get(key) else { return Vec::new() };
        let h = self.horizon_windows();
        let pending = f.pending.iter().filter_map(|t| cut_of(*t, judge(f, *t, self.window_ns, h), self.horizon_ns));
        f.cuts.iter().copied().chain(pending).collect()
    }

    /// Every flow with CNPs, with its CNPs judged so far and (read-only) those still within
    /// their horizon, judged on the windows seen until now.
    pub fn flows(&self) -> Vec<(FlowKey, FlowSummary)> {
        let h = self.horizon_windows();
        let mut out: Vec<(FlowKey, FlowSummary)> = self
            .flows
            .iter()
            .filter(|(_, f)| f.done.cnps + f.pending.len() as u64 > 0)
            .map(|(k, f)| {
                let mut s = f.done.clone();
                for t in &f.pending {
                    s.add(judge(f, *t, self.window_ns, h));
                }
                (*k, s)
            })
            .collect();
        out.sort_unstable_by_key(|(k, _)| *k);
        out
    }
}

/// One CNP at `t` judged on a flow's windows (see the module's description); none without a
/// rate before it or a window after it.
fn judge(f: &RateFlow, t: u64, window_ns: u64, horizon: u64) -> Option<Outcome> {
    judge_on(&f.windows, f.since, t, window_ns, horizon)
}

/// A CNP judged (see the module's description) on a flow's windows with data (window, bytes;
/// in window order), watched from window `since`: `merge` judges a CNP near a cut so, on the
/// windows of the reports around it.
pub fn judge_on(windows: &VecDeque<(u64, u64)>, since: u64, t: u64, window_ns: u64, horizon: u64) -> Option<Outcome> {
    let wc = t / window_ns;
    if wc < since + BEFORE_WINDOWS {
        return None;
    }
    // (The windows are in order: a CNP storm judges many CNPs on ~100 windows each.)
    let bytes = |i: u64| windows.binary_search_by_key(&i, |(w, _)| *w).map_or(0, |at| windows[at].1);
    // A steady rate before: data in every one of those windows (a sparse or bursty flow has no
    // rate at this resolution to be cut from).
    if (wc.saturating_sub(BEFORE_WINDOWS)..wc).any(|i| bytes(i) == 0) {
        return None;
    }
    let before: u64 = (wc.saturating_sub(BEFORE_WINDOWS)..wc).map(bytes).sum();
    let before = before as f64 / BEFORE_WINDOWS as f64;
    // After: up to the window before the flow's latest data within the horizon (a flow that
    // ends is not cut, and its last window — or, live, the one still filling — is partial).
    let latest = windows.iter().rev().map(|(w, _)| *w).find(|w| *w > wc && *w <= wc + horizon + 1)?;
    let last = latest.checked_sub(1).filter(|l| *l > wc)?;
    if before <= 0.0 {
        return None;
    }
    // The rate after, smoothed over [`SMOOTH`] windows ending at each (a frame a pacing hiccup
    // pushes into the next window does not look like a cut); recovery on single windows.
    let smoothed = |i: u64| (i + 1 - SMOOTH..=i).map(bytes).sum::<u64>() as f64 / SMOOTH as f64;
    let after: Vec<(u64, f64)> = (wc + 1..=last).map(|i| (i, smoothed(i))).collect();
    let (low_at, low) = after.iter().copied().fold((wc + 1, f64::MAX), |m, (i, b)| if b < m.1 { (i, b) } else { m });
    let start = |i: u64| (i * window_ns).saturating_sub(t);
    let reaction = after.iter().find(|(_, b)| *b < REACTED * before).map(|(i, _)| start(*i));
    let recovery = reaction.and_then(|_| (low_at + 1..=last).find(|i| bytes(*i) as f64 >= REACTED * before).map(start));
    Some(Outcome { cut_ratio: low / before, reaction_ns: reaction, recovery_ns: recovery })
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    fn data(sender: u8, ts: u64, ce: bool) -> Record {
        let mut r =
            Record { ts_ns: ts, opcode: 0x07, frame_len: 500, ip_version: 4, dst_qp: 0x99, ..Default::default() };
        r.src_ip[..4].copy_from_slice(&[10, 0, 5, sender]);
        r.dst_ip[..4].copy_from_slice(&[10, 0, 5, 9]);
        r.ecn = if ce { 3 } else { 2 };
        r
    }

    fn cnp(sender: u8, ts: u64) -> Record {
        let mut r =
            Record { ts_ns: ts, opcode: 0x81, frame_len: 64, ip_version: 4, dst_qp: 0x11, ..Default::default() };
        r.src_ip[..4].copy_from_slice(&[10, 0, 5, 9]);
        r.dst_ip[..4].copy_from_slice(&[10, 0, 5, sender]);
        r
    }

    /// `per_window` frames of 500 B spread over each 10 µs window in [from, to).
    fn send(d: &mut Dcqcn, sender: u8, from_us: u64, to_us: u64, per_window: u64, ce_at: Option<u64>) {
        for w in from_us / 10..to_us / 10 {
            for i in 0..per_window {
                let t = w * 10 * US + i * 10 * US / per_window;
                d.observe(&data(sender, t, ce_at == Some(t)), None, None);
            }
        }
    }

    #[test]
    fn a_halving_with_staged_recovery_is_measured_to_the_window() {
        let mut d = Dcqcn::new(10 * US, 1_000 * US, None, usize::MAX);
        send(&mut d, 1, 0, 100, 20, Some(50 * US)); // CE mark at 50 µs: watched from there
        d.observe(&cnp(1, 100 * US), None, None);
        send(&mut d, 1, 100, 110, 20, None); // 10 µs until the sender reacts
        send(&mut d, 1, 110, 310, 10, None); // halved
        send(&mut d, 1, 310, 510, 15, None); // three quarters
        send(&mut d, 1, 510, 1200, 20, None); // back
        let flows = d.flows();
        let (_, s) = &flows[0];
        assert_eq!((s.cnps, s.reacted, s.unreacted, s.no_rate_before), (1, 1, 0, 0));
        assert_eq!(s.cuts.values(), vec![500_000], "cut to 10 of 20 frames a window");
        assert_eq!(s.reactions.values(), vec![10 * US]);
        assert_eq!(s.recoveries.values(), vec![410 * US], "back at 20 a window from 510 µs");
        // The plot's series: 120 windows from the CE mark at 50 µs in 256 points, 1 window each.
        let series = d.series(&flows[0].0).unwrap();
        assert_eq!((series.start_window, series.windows, series.bytes.len()), (5, 1, 115));
        assert_eq!((series.bytes[0], series.bytes[6], series.bytes[10], series.bytes[30]), (10_000, 5000, 5000, 7500));
        assert_eq!(series.ce.iter().sum::<u64>(), 1);
        assert_eq!(series.cnps, vec![100 * US]);
    }

    /// A flow first seen by its CNP, 300 µs into steady traffic: judged on the history the
    /// caller kept (as the messages analysis keeps each request flow's latest windows).
    #[test]
    fn a_first_cnp_is_judged_on_the_history_kept_elsewhere() {
        let mut d = Dcqcn::new(10 * US, 1_000 * US, None, usize::MAX);
        let key = data(5, 0, false).flow();
        // 20 frames of 500 B a window up to 300 µs, kept by the caller, not seen here.
        let history = |k: &FlowKey| if *k == key { (24..30).map(|w| (w, 10_000)).collect() } else { Vec::new() };
        d.observe_with(&cnp(5, 300 * US), Some(key), None, &history);
        send(&mut d, 5, 300, 1500, 10, None);
        let (_, s) = &d.flows()[0];
        assert_eq!((s.cnps, s.reacted, s.no_rate_before), (1, 1, 0));
        assert_eq!(s.cuts.values(), vec![500_000], "halved");
        // Without it, the same CNP has no rate before.
        let mut e = Dcqcn::new(10 * US, 1_000 * US, None, usize::MAX);
        e.observe(&cnp(5, 300 * US), Some(key), None);
        send(&mut e, 5, 300, 1500, 10, None);
        assert_eq!(e.flows()[0].1.no_rate_before, 1);
    }

    #[test]
    fn ignored_cnps_and_unattributed_ones() {
        let mut d = Dcqcn::new(10 * US, 1_000 * US, None, usize::MAX);
        send(&mut d, 2, 0, 100, 20, Some(0));
        for t in [100, 200, 300] {
            d.observe(&cnp(2, t * US), None, None);
            send(&mut d, 2, t, t + 100, 20, None);
        }
        send(&mut d, 2, 400, 1400, 20, None);
        let (_, s) = &d.flows()[0];
        assert_eq!((s.cnps, s.reacted, s.unreacted), (3, 0, 3));
        assert_eq!(s.cuts.values(), vec![1_000_000; 3], "no window below the rate before");
        // A CNP to a host with no watched flow: counted, not attributed.
        d.observe(&cnp(7, 500 * US), None, None);
        assert_eq!(d.unattributed, 1);
    }

    #[test]
    fn a_flow_that_ends_is_not_cut_and_a_cnp_without_history_is_counted() {
        let mut d = Dcqcn::new(10 * US, 1_000 * US, None, usize::MAX);
        send(&mut d, 3, 0, 100, 20, Some(0));
        d.observe(&cnp(3, 100 * US), None, None);
        send(&mut d, 3, 100, 150, 20, None); // the message ends at 150 µs
        let (_, s) = &d.flows()[0];
        assert_eq!((s.reacted, s.unreacted), (0, 1), "the windows after its end are not a cut");
        // A CNP before any data of its flow was watched has no rate before.
        let mut e = Dcqcn::new(10 * US, 1_000 * US, None, usize::MAX);
        send(&mut e, 4, 0, 100, 20, Some(99 * US)); // watched from its last packet only
        e.observe(&cnp(4, 100 * US), None, None);
        send(&mut e, 4, 100, 200, 20, None);
        let (_, s) = &e.flows()[0];
        assert_eq!((s.cnps, s.no_rate_before, s.reacted, s.unreacted), (1, 1, 0, 0));
    }
}
