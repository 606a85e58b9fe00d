//! One frame's way through the program: classified, filtered, counted by class, then accounted by
//! its kind (RoCE/CNP, PFC/PAUSE).

use analyzer_common::filter::Filter;
use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{counter, event_kind, evidence_ctl, stage};
use analyzer_common::wire::cm;
use analyzer_common::{FrameClass, PacketSummary, classify};
use aya_ebpf::helpers::bpf_ktime_get_ns;
use aya_ebpf::helpers::generated::{bpf_ktime_get_coarse_ns, bpf_xdp_get_buff_len};
use aya_ebpf::macros::map;
use aya_ebpf::maps::Array;
use aya_ebpf::programs::XdpContext;

use crate::counters::count;
use crate::evidence::{EVIDENCE_CTL, EVIDENCE_ON, evidence_copy, evidence_flow};
use crate::extra::restate_ecn;
use crate::flow_table::account_flow;
use crate::logs::{TIMELINE_ON, cm_event, event_at, keyed_record, record};
use crate::pfc::account_pfc;
use crate::psn::account_psn;
use crate::scratch::{Packet, SCRATCH, Word};
use crate::sightings::matched_copy;
use crate::stages::{CLOCK, STAGES};

/// Whether `--filter` is given (set by the loader; the verifier prunes the branch when not).
#[unsafe(no_mangle)]
pub(crate) static FILTER_ON: u8 = 0;

/// The `--filter` (entry 0), written by the loader.
#[map]
pub(crate) static FILTER: Array<Filter> = Array::with_max_entries(1, 0);

#[inline(always)]
pub(crate) fn try_roce_analyzer(ctx: &XdpContext) -> Result<(), ()> {
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(())?;
    // SAFETY: this CPU's scratch, used by this run only; the summary and the word are distinct
    // fields (the word is only reached through its raw pointer).
    let (s, word) = unsafe { (&mut (*scratch).summary, Word(core::ptr::addr_of_mut!((*scratch).widen))) };
    let pkt = Packet { start: ctx.data(), end: ctx.data_end(), word };
    // data_end - data would be arithmetic on pkt_end, which the verifier refuses.
    // SAFETY: helper on the program's own context.
    let wire_len = unsafe { bpf_xdp_get_buff_len(ctx.ctx) } as u32;
    let class = classify(&pkt, wire_len, s);
    // SAFETY: a read-only global of this program.
    if unsafe { core::ptr::read_volatile(&FILTER_ON) } != 0
        && let Some(f) = FILTER.get(0)
        && !f.admits(s)
    {
        // Left out by --filter: counted, not analysed (the host does the same offline).
        count(counter::FILTERED);
        return Ok(());
    }
    count(class as u32);
    if s.encap != 0 {
        count(counter::ENCAPSULATED);
    }
    if s.cut != 0 {
        count(counter::CUT_COPIES);
    }
    if s.bth_cut != 0 {
        count(counter::BTH_CUT);
    }
    match class {
        FrameClass::Roce | FrameClass::Cnp => roce_frame(ctx, s, class, word),
        FrameClass::Pfc | FrameClass::Pause => {
            pause_frame(ctx, s, class, wire_len);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A RoCE frame or CNP: its sighting when a mirrored copy, its flow's counters and PSN
/// accounting, evidence, its timeline record, a CM message.
#[inline(always)]
fn roce_frame(ctx: &XdpContext, s: &PacketSummary, class: FrameClass, word: Word) -> Result<(), ()> {
    if s.ext_missing != 0 {
        count(counter::EXT_CUT);
    }
    let key = FlowKey::from_summary(s);
    // SAFETY: a read-only global of this program.
    let timeline = unsafe { core::ptr::read_volatile(&TIMELINE_ON) } != 0;
    // One clock read per frame. The timeline record needs the precise clock (RTT and
    // incast need nanoseconds), and then the flow's first/last times take it too;
    // without records they use the coarse one (the kernel tick), which is cheaper.
    let now = match CLOCK {
        // SAFETY: helpers without arguments.
        true => unsafe { if timeline { bpf_ktime_get_ns() } else { bpf_ktime_get_coarse_ns() } },
        false => 1,
    };
    if s.encap != 0 {
        // Every mirrored copy, at the precise time: the agent's vantage points and hops.
        // The frame's own clock read when records take the precise one (a second read
        // was ≈ 20 ns more for every copy).
        // SAFETY: helper without arguments.
        let precise = if timeline { now } else { unsafe { bpf_ktime_get_ns() } };
        event_at(s, precise, event_kind::SIGHTING);
        if let Some(previous_ecn) = matched_copy(s, now) {
            // Counted already from another mirror origin: only its ECN is the newer.
            count(counter::MATCHED_COPIES);
            restate_ecn(&key, previous_ecn, s.ecn & 3);
            return Ok(());
        }
    }
    let entry = if STAGES & stage::FLOW != 0 { account_flow(ctx, &key, s, now, word) } else { None };
    if let Some(entry) = entry
        && class == FrameClass::Roce
        && STAGES & stage::PSN != 0
    {
        account_psn(&key, entry, s);
    }
    // SAFETY: a read-only global of this program.
    if unsafe { core::ptr::read_volatile(&EVIDENCE_ON) } != 0 {
        evidence_flow(ctx, &key, s, now);
    }
    if timeline {
        // SAFETY: the flow's map value (its id is written once, at its insertion).
        match entry.map_or(0, |e| unsafe { (*e).counters.id }) {
            // The benchmark's variants without flows: a record of no flow.
            _ if STAGES & stage::FLOW == 0 => record(0, s, now),
            0 => keyed_record(s, now),
            id => record(id, s, now),
        }
    }
    if cm::is_carrier(s.opcode, s.dst_qp) {
        cm_event(ctx, s);
    }
    Ok(())
}

/// A PFC or PAUSE frame: its sender's counters, its event, evidence of pauses asked for.
#[inline(always)]
fn pause_frame(ctx: &XdpContext, s: &PacketSummary, class: FrameClass, wire_len: u32) {
    // Rare frames whose timing the analyses need: the precise clock.
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    account_pfc(s, now);
    let kind = if class == FrameClass::Pfc { event_kind::PFC } else { event_kind::PAUSE };
    event_at(s, now, kind);
    // SAFETY: a read-only global of this program.
    if unsafe { core::ptr::read_volatile(&EVIDENCE_ON) } != 0
        && EVIDENCE_CTL.get(evidence_ctl::PAUSE_UNTIL).is_some_and(|u| now <= *u)
    {
        evidence_copy(ctx, s, &FlowKey::from_summary(s), now, wire_len);
    }
}
