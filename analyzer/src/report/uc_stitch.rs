//! `merge` of the UC transfers of a capture cut in time, as one run counts them. A UC message
//! being sent at a report's end (its FIRST seen, its LAST not yet: `uc_open`) goes on in the
//! next report, which never saw its FIRST: its MIDDLEs there extend it and its LAST completes it
//! in one run (a message, its bytes and its transfer time), where that report counts the LAST
//! partial (`uc_partial`). A FIRST of the flow there replaces it in one run; a frame of another
//! kind leaves it. The reports' edges (`messages.edge.uc`) give each flow's message being sent
//! at the end and its first frames up to its first FIRST, replayed here with the run's rules
//! (`analyses::messages::kept::Transfer`); the transfer times add from the edges'
//! samples (`uc_times`).

use std::collections::BTreeMap;

use crate::analyses::messages::kept::{Kind, Msg, uc_continues, uc_kind, uc_opens};
use crate::analyses::stats::Samples;
use crate::model::*;

/// The UC transfers of reports in series, one run's.
#[derive(Debug, Default, PartialEq)]
pub struct Uc {
    pub messages: u64,
    pub bytes: u64,
    pub partial: u64,
    pub open: u64,
    pub times: Percentiles,
}

/// What a message being sent at a cut meets in the next report's first frames of its flow.
enum Replayed {
    /// A LAST of its kind completed it.
    Completed(Msg),
    /// A FIRST came: one run sends another from there.
    Replaced,
    /// Neither: it is still being sent (extended by the MIDDLEs of its kind).
    Sending(Msg),
}

fn replay(mut m: Msg, head: &[[u64; 3]]) -> Replayed {
    for &[opcode, ts, payload] in head {
        let o = (opcode & 0x1F) as u8;
        match uc_continues(o) {
            Some(last) if uc_kind(o) == m.kind => {
                m.extend(m.psn_last, ts, payload);
                if last {
                    return Replayed::Completed(m);
                }
            }
            None if uc_opens(o) => return Replayed::Replaced,
            _ => {}
        }
    }
    Replayed::Sending(m)
}

/// A message an edge lists as being sent (`[kind, start_ns, last_ns, bytes]`).
/// None for a kind no run writes (a report not of this tool's making).
fn sending(s: &[u64; 4]) -> Option<Msg> {
    let kind = *Kind::ALL.get(s[0] as usize)?;
    let mut m = Msg::sent(kind, 0, s[1], s[3], 0, 0);
    m.extend(0, s[2], 0);
    Some(m)
}

/// The UC transfers of reports that follow each other in time (`sections`: each report's span
/// and section), each with its edge; none otherwise (or where a flow's first frames outran its
/// edge while a message of the report before was still being sent, or an edge names a kind of
/// message no run writes).
pub fn stitch(sections: &[(u64, u64, Messages)]) -> Option<Uc> {
    let mut sorted: Vec<&(u64, u64, Messages)> = sections.iter().collect();
    sorted.sort_by_key(|(s, e, _)| (*s, *e));
    if sorted.windows(2).any(|w| w[0].1 > w[1].0) {
        return None;
    }
    let mut u = Uc::default();
    let mut times = Vec::new();
    let mut carried: BTreeMap<FlowRef, Msg> = BTreeMap::new();
    for (_, _, m) in sorted {
        let e = m.edge.as_ref()?;
        let t = &m.transfers;
        match &e.uc_times {
            Some(samples) => times.push(Samples::from_edge(samples)),
            None if t.uc_messages > 0 => return None,
            None => {}
        }
        (u.messages, u.bytes, u.partial) = (u.messages + t.uc_messages, u.bytes + t.uc_bytes, u.partial + t.uc_partial);
        let here: BTreeMap<&FlowRef, &UcEdge> = e.uc.iter().map(|f| (&f.flow, f)).collect();
        let mut next = BTreeMap::new();
        for (flow, msg) in carried {
            let Some(f) = here.get(&flow) else {
                next.insert(flow, msg);
                continue;
            };
            match replay(msg, &f.head) {
                Replayed::Completed(done) => {
                    (u.messages, u.bytes, u.partial) =
                        (u.messages + 1, u.bytes + done.bytes(), u.partial.checked_sub(1)?);
                    let mut one = Samples::default();
                    one.push(done.last_ns() - done.start_ns);
                    times.push(one);
                }
                Replayed::Replaced => {}
                Replayed::Sending(_) if f.head_cut => return None,
                Replayed::Sending(m) => _ = next.insert(flow, m),
            }
        }
        for f in &e.uc {
            if let Some(s) = &f.sending {
                next.insert(f.flow.clone(), sending(s)?);
            }
        }
        carried = next;
    }
    u.open = carried.len() as u64;
    u.times = super::assemble::messages::pct(&Samples::merged(&times));
    Some(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SEND being sent since 100 ns (1000 bytes, last frame at 200 ns).
    fn send() -> Msg {
        sending(&[Kind::Send as u64, 100, 200, 1000]).unwrap()
    }

    /// An edge naming a kind no run writes is not read as some other kind.
    #[test]
    fn an_unknown_kind_being_sent_is_not_stitched() {
        assert!(sending(&[Kind::ALL.len() as u64, 100, 200, 1000]).is_none());
        let ok = [Kind::Write as u64, 100, 200, 1000];
        assert!(matches!(sending(&ok), Some(m) if m.kind == Kind::Write && m.last_ns() == 200));
    }

    /// Frames of the other kind and ONLYs leave it; its own MIDDLE and LAST extend and end it.
    #[test]
    fn a_message_being_sent_is_completed_by_its_own_last() {
        let (wm, sm, wl, so, sl) = (0x27, 0x21, 0x28, 0x24, 0x22);
        let head = [[wm, 300, 64], [sm, 400, 500], [wl, 500, 64], [so, 550, 32], [sl, 600, 250]];
        let Replayed::Completed(m) = replay(send(), &head) else { panic!("not completed") };
        assert_eq!((m.start_ns, m.last_ns(), m.bytes()), (100, 600, 1750));
        assert!(matches!(replay(send(), &head[..3]), Replayed::Sending(m) if m.bytes() == 1500 && m.last_ns() == 400));
    }

    /// A FIRST of either kind before its LAST: one run sends another message from there.
    #[test]
    fn a_first_replaces_a_message_being_sent() {
        for first in [0x20, 0x26] {
            assert!(matches!(replay(send(), &[[0x21, 300, 8], [first, 400, 8], [0x22, 500, 8]]), Replayed::Replaced));
        }
    }
}
