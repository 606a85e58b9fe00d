//! The incast section of a run: its episodes and, with `--edges`, what `merge` of captures cut
//! in time needs to give the episodes at a cut as one run does
//! (`analyses::incast::edge`, `report::incast_stitch`).

use std::collections::BTreeMap;

use crate::analyses::incast::edge::{DestState, Event, OpenState, TallyState};
use crate::analyses::incast::{Addr, Episode as Counted, Incast as Counting};
use crate::model::{
    Episode, Incast, IncastEdge, IncastEdgeDest, IncastHeadEvent, IncastOpen, IncastTally, IncastWindowed, addr_string,
};
use crate::pipeline::Pipeline;

pub fn incast(run: &Pipeline) -> Incast {
    let a = &run.analyses;
    section(&a.incast, &a.pause.frame_times, run.engine.last_ns.unwrap_or(0), a.config.link_speed_bps)
}

/// The section of the analysis `i`, with the PFC/PAUSE frames at `frames` (in time order),
/// the run's last frame at `end` and a link of `speed` bit/s.
pub fn section(i: &Counting, frames: &[u64], end: u64, speed: u64) -> Incast {
    let w = i.window_ns();
    let pfc = |start: u64, end: u64| frames.iter().filter(|&&t| t >= start && t <= end).count() as u64;
    let episodes = i
        .episodes()
        .into_iter()
        .map(|(dst, e)| {
            let n = pfc(e.start_ns, e.end_ns);
            episode(dst, &e, (w, speed), n)
        })
        .collect();
    let edge = i.edges.as_ref().map(|heads| {
        let until = heads.until_ns.unwrap_or(end);
        // Each destination with a head or a state at the end, in address order.
        let mut by_dst: BTreeMap<Addr, (&[Event], Option<DestState>)> = BTreeMap::new();
        for (d, head) in &heads.heads {
            by_dst.entry(*d).or_default().0 = head;
        }
        for (d, state) in i.states(end) {
            by_dst.entry(d).or_default().1 = Some(state);
        }
        let dests = by_dst.into_iter().map(|(d, (head, state))| edge_dest(d, head, state.as_ref(), frames)).collect();
        IncastEdge {
            until_ns: until,
            end_ns: end,
            complete: !heads.over,
            unkept: i.state_full + i.episodes_dropped() + i.episodes_with_senders_capped(),
            pauses: frames.iter().copied().filter(|&t| t <= until).collect(),
            pauses_at_end: frames.iter().filter(|&&t| t == end).count() as u64,
            dests,
        }
    });
    Incast { window_ns: w, min_senders: i.min_senders(), episodes, edge }
}

/// An episode as the report gives it (`w`: the window, `speed`: the link speed in bit/s),
/// with the PFC/PAUSE frames in its span.
pub fn episode(dst: Addr, e: &Counted, (w, speed): (u64, u64), pfc_frames: u64) -> Episode {
    let (peak_gbps, peak_link_ratio) = peak(e.peak_window_bytes, w, speed);
    Episode {
        dst: ip(dst),
        start_ns: e.start_ns,
        end_ns: e.end_ns,
        peak_senders: e.peak_senders,
        senders: e.senders().iter().map(|s| ip(*s)).collect(),
        bytes: e.bytes(),
        peak_gbps,
        peak_link_ratio,
        ce_packets: e.ce(),
        cnp_packets: e.cnp(),
        pfc_frames,
        evidence: None,
    }
}

/// The peak rate of `bytes` in one window `w`, in Gbit/s and over the link speed (bit/s).
pub fn peak(bytes: u64, w: u64, speed: u64) -> (f64, f64) {
    let gbps = bytes as f64 * 8.0 / w as f64;
    (gbps, gbps * 1e9 / speed.max(1) as f64)
}

fn ip(a: Addr) -> String {
    addr_string(a.1, &a.0)
}

/// A destination's edge: its head, and its state at the end (`frames`: the report's PFC/PAUSE
/// frames' times).
fn edge_dest(dst: Addr, head: &[Event], state: Option<&DestState>, frames: &[u64]) -> IncastEdgeDest {
    // An open episode's frames up to when it fell below the minimum, and the times after.
    let pfc = |o: &OpenState| {
        let below = o.below_since.unwrap_or(u64::MAX);
        let from = frames.iter().copied().filter(|&t| t >= o.start_ns);
        (from.clone().filter(|&t| t <= below).count() as u64, from.filter(|&t| t > below).collect())
    };
    let tally = |t: &TallyState| IncastTally {
        bytes: t.bytes,
        ce: t.ce,
        cnp: t.cnp,
        senders: t.senders.iter().map(|s| ip(*s)).collect(),
        capped: t.capped,
    };
    let open = state.and_then(|s| s.open.as_ref()).map(|o| {
        let (pfc_frames, pfc_after) = pfc(o);
        IncastOpen {
            start_ns: o.start_ns,
            peak_senders: o.peak_senders,
            peak_window_bytes: o.peak_window_bytes,
            tally: tally(&o.tally),
            below_since: o.below_since,
            pending: tally(&o.pending),
            pfc_frames,
            pfc_after,
        }
    });
    IncastEdgeDest {
        dst: ip(dst),
        head: head.iter().map(|e| IncastHeadEvent(e.ts_ns, e.src.map(ip), e.len, e.ce as u8)).collect(),
        window: state.iter().flat_map(|s| &s.window).map(|&(ts, src, len)| IncastWindowed(ts, ip(src), len)).collect(),
        open,
    }
}
