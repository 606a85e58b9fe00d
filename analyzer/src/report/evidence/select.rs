//! Which frames a piece of evidence takes: the flows a finding names with the replies that
//! travel back to their senders (ACKs, NAKs, CNPs), the frames into an incast's destination,
//! or PFC / PAUSE frames of a sender and priority. Offline and live route frames alike, by a
//! [`Tag`] of what selection needs of a frame.

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::EvidenceFrame;
use analyzer_common::{FrameClass, PacketSummary};
use rustc_hash::{FxHashMap, FxHashSet};

/// What selection needs of one frame (taken from its summary, before any snap length cut it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    pub class: FrameClass,
    /// RoCE and CNP frames: their flow.
    pub flow: FlowKey,
    /// The frame carries an AETH (ACK, NAK, READ RESPONSE FIRST/LAST/ONLY).
    pub aeth: bool,
    /// PFC / PAUSE frames: the sender and the priorities paused (bit 8: an 802.3x PAUSE).
    pub src_mac: [u8; 6],
    pub priorities: u16,
}

/// The bit of an 802.3x PAUSE (all priorities) in [`Tag::priorities`].
pub const PAUSE_BIT: u16 = analyzer_common::maps::PAUSE_PRIORITIES;

impl Tag {
    /// The tag of a frame's summary, as the XDP program fills it ([`EvidenceFrame::fill_head`]).
    pub fn of(s: &PacketSummary) -> Tag {
        // Only the head is filled and read: a copy's 16 KiB of bytes are neither zeroed nor
        // touched for each frame.
        let mut e = std::mem::MaybeUninit::<EvidenceFrame>::uninit();
        let p = e.as_mut_ptr();
        // SAFETY: `p` is valid for writes of one EvidenceFrame; fill_head writes every field
        // the tag reads (class, flow, aeth, src_mac, priorities), read back through `p`.
        unsafe {
            EvidenceFrame::fill_head(p, 0, 0, s, &FlowKey::from_summary(s));
            Tag {
                class: FrameClass::from_u8((*p).class).unwrap_or(FrameClass::NonRoce),
                flow: (*p).flow,
                aeth: (*p).aeth != 0,
                src_mac: (*p).src_mac,
                priorities: (*p).priorities,
            }
        }
    }

    /// The tag an evidence copy carries (the kernel's, or the offline spool's).
    pub fn of_frame(e: &EvidenceFrame) -> Tag {
        Tag {
            class: FrameClass::from_u8(e.class).unwrap_or(FrameClass::NonRoce),
            flow: e.flow,
            aeth: e.aeth != 0,
            src_mac: e.src_mac,
            priorities: e.priorities,
        }
    }

    /// Whether evidence can be about this frame at all (RoCE, CNP, PFC, PAUSE).
    pub fn wanted(class: FrameClass) -> bool {
        matches!(class, FrameClass::Roce | FrameClass::Cnp | FrameClass::Pfc | FrameClass::Pause)
    }
}

/// The frames of one piece of evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Select {
    /// Frames of these flows.
    pub flows: FxHashSet<FlowKey>,
    /// Replies from the first address to the second (CNPs and frames with an AETH), to this QP
    /// (the sender's, when its ACK flow is known) or to any (`None`).
    pub replies: FxHashSet<([u8; 16], [u8; 16], Option<u32>)>,
    /// RoCE frames to this address and the CNPs it sends (an incast's destination).
    pub host: Option<[u8; 16]>,
    /// PFC / PAUSE frames: of these senders (empty: any), pausing any of these priorities
    /// ([`Tag::priorities`] bits).
    pub pause: Option<(Vec<[u8; 6]>, u16)>,
}

/// (from, to) addresses.
type HostPair = ([u8; 16], [u8; 16]);

/// Requests by what a frame is looked up with, so that routing a frame costs a few hash
/// lookups however many findings there are.
#[derive(Debug, Default)]
pub struct Router {
    flows: FxHashMap<FlowKey, Vec<usize>>,
    replies: FxHashMap<HostPair, Vec<(Option<u32>, usize)>>,
    hosts: FxHashMap<[u8; 16], Vec<usize>>,
    pause: Vec<(Vec<[u8; 6]>, u16, usize)>,
}

impl Router {
    pub fn new<'a>(selects: impl IntoIterator<Item = &'a Select>) -> Router {
        let mut r = Router::default();
        for (i, s) in selects.into_iter().enumerate() {
            r.add(i, s);
        }
        r
    }

    /// Routes frames to `s` as request `i` too (live: requests come as findings open).
    pub fn add(&mut self, i: usize, s: &Select) {
        for k in &s.flows {
            self.flows.entry(*k).or_default().push(i);
        }
        for (a, b, qp) in &s.replies {
            self.replies.entry((*a, *b)).or_default().push((*qp, i));
        }
        if let Some(h) = s.host {
            self.hosts.entry(h).or_default().push(i);
        }
        if let Some((macs, prios)) = &s.pause {
            self.pause.push((macs.clone(), *prios, i));
        }
    }

    /// The requests `t` belongs to, into `out` (cleared first; each once).
    pub fn route(&self, t: &Tag, out: &mut Vec<usize>) {
        out.clear();
        match t.class {
            FrameClass::Roce | FrameClass::Cnp => {
                if let Some(v) = self.flows.get(&t.flow) {
                    out.extend_from_slice(v);
                }
                if (t.class == FrameClass::Cnp || t.aeth)
                    && let Some(v) = self.replies.get(&(t.flow.src, t.flow.dst))
                {
                    out.extend(v.iter().filter(|(qp, _)| qp.is_none_or(|q| q == t.flow.dst_qp)).map(|(_, i)| *i));
                }
                let to = if t.class == FrameClass::Cnp { &t.flow.src } else { &t.flow.dst };
                if let Some(v) = self.hosts.get(to) {
                    out.extend_from_slice(v);
                }
            }
            FrameClass::Pfc | FrameClass::Pause => out.extend(
                self.pause
                    .iter()
                    .filter(|(macs, prios, _)| {
                        (macs.is_empty() || macs.contains(&t.src_mac)) && prios & t.priorities != 0
                    })
                    .map(|(_, _, i)| *i),
            ),
            _ => {}
        }
        if out.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(src: u8, dst: u8, qp: u32) -> FlowKey {
        let mut k = FlowKey { src: [0; 16], dst: [0; 16], dst_qp: qp, udp_sport: 0xC000, ip_version: 4, _pad: 0 };
        k.src[..4].copy_from_slice(&[10, 0, 0, src]);
        k.dst[..4].copy_from_slice(&[10, 0, 0, dst]);
        k
    }

    fn tag(class: FrameClass, flow: FlowKey, aeth: bool) -> Tag {
        Tag { class, flow, aeth, src_mac: [0; 6], priorities: 0 }
    }

    #[test]
    fn a_flow_takes_its_frames_and_the_replies_to_its_sender_qp() {
        let data = key(1, 2, 0x11);
        let mut s = Select::default();
        s.flows.insert(data);
        s.replies.insert((data.dst, data.src, Some(0x22)));
        let r = Router::new([&s]);
        let mut out = Vec::new();
        for (t, want) in [
            (tag(FrameClass::Roce, data, false), true),
            (tag(FrameClass::Roce, key(1, 2, 0x12), false), false),
            (tag(FrameClass::Roce, key(2, 1, 0x22), true), true),
            (tag(FrameClass::Cnp, key(2, 1, 0x22), false), true),
            (tag(FrameClass::Cnp, key(2, 1, 0x23), false), false),
            (tag(FrameClass::Roce, key(2, 1, 0x22), false), false),
        ] {
            r.route(&t, &mut out);
            assert_eq!(!out.is_empty(), want, "{t:?}");
        }
    }

    #[test]
    fn a_host_takes_what_comes_to_it_and_its_cnps_and_pause_goes_by_sender_and_priority() {
        let incast = Select { host: Some(key(9, 9, 0).src), ..Default::default() };
        let storm = Select { pause: Some((vec![[2, 0, 0, 0, 0, 1]], 1 << 3)), ..Default::default() };
        let r = Router::new([&incast, &storm]);
        let mut out = Vec::new();
        r.route(&tag(FrameClass::Roce, key(1, 9, 5), false), &mut out);
        assert_eq!(out, vec![0]);
        r.route(&tag(FrameClass::Cnp, key(9, 1, 5), false), &mut out);
        assert_eq!(out, vec![0]);
        r.route(&tag(FrameClass::Roce, key(9, 1, 5), true), &mut out);
        assert!(out.is_empty(), "an ACK from the destination is not its incast");
        let pfc = |mac: [u8; 6], prios: u16| Tag {
            class: FrameClass::Pfc,
            flow: key(0, 0, 0),
            aeth: false,
            src_mac: mac,
            priorities: prios,
        };
        r.route(&pfc([2, 0, 0, 0, 0, 1], 0b1000), &mut out);
        assert_eq!(out, vec![1]);
        r.route(&pfc([2, 0, 0, 0, 0, 1], 0b0100), &mut out);
        assert!(out.is_empty(), "another priority");
        r.route(&pfc([2, 0, 0, 0, 0, 2], 0b1000), &mut out);
        assert!(out.is_empty(), "another sender");
    }
}
