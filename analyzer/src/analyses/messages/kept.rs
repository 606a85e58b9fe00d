//! What the messages analysis keeps in each request flow's entry of the analyses' flows table:
//! the message being sent (FIRST … LAST), the messages sent and not yet completed, in PSN
//! order, and the flow's current rate window. The wire's rules, in one place:
//!
//! - SEND and WRITE: FIRST … MIDDLE … LAST, or ONLY; bytes are the payload for SEND, the RETH
//!   length for WRITE. READ: one READ REQUEST (bytes from its RETH); the requester's next PSN
//!   runs ahead by the READ's response count, so a READ's last PSN is learned from the next
//!   request (until then its span is its first PSN). Atomics: one PSN, 8 bytes.
//! - A request PSN behind the flow's next one is a retransmission: it marks the message whose
//!   span holds it (its start stays the first transmission's, as Karn's rule for RTT). A PSN
//!   ahead of it is a gap: frames this capture did not hold (or lost before this point).
//! - A response with an ACK-type AETH at PSN p (ACK, ATOMIC ACK, READ RESPONSE FIRST/LAST/ONLY)
//!   completes, in order, every message whose last PSN is at or before p (coalesced ACKs
//!   complete all they cover; a READ RESPONSE FIRST does not complete its own READ). A NAK or
//!   an RNR NAK completes none: it marks the message it names.

use analyzer_common::opcode::op;
use analyzer_common::psn::{PSN_HALF, PSN_MASK, psn_diff};
use analyzer_common::record::Record;
use smallvec::SmallVec;

/// Messages sent and not completed that one flow keeps, at most: the oldest is let go (and
/// counted, `in_flight_evicted`) beyond it. An RNIC's send queue is shorter; more means the
/// completions are not seen here.
pub const MAX_IN_FLIGHT: usize = 1024;

/// What kind of verb a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Send,
    Write,
    Read,
    Atomic,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Send, Kind::Write, Kind::Read, Kind::Atomic];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Send => "send",
            Kind::Write => "write",
            Kind::Read => "read",
            Kind::Atomic => "atomic",
        }
    }
}

/// A message's marks (a bit each).
pub mod mark {
    /// Some of its PSNs were sent again.
    pub const RETRANSMITTED: u8 = 1 << 0;
    /// A NAK (PSN sequence error) named one of its PSNs.
    pub const NAK: u8 = 1 << 1;
    /// An RNR NAK named it.
    pub const RNR: u8 = 1 << 2;
    /// PSNs of its span were never seen here (a gap in the capture or before it).
    pub const GAP: u8 = 1 << 3;
    /// Its first packets were not seen (it began before the capture, or they were missed):
    /// no start, no completion time.
    pub const PARTIAL: u8 = 1 << 4;
    /// A READ whose last PSN is known (from the next request).
    pub const END_KNOWN: u8 = 1 << 5;
}

/// One message as the wire showed it, in 40 bytes: a flow keeps one per message in flight,
/// and a capture of 200 000 one-message flows keeps 200 000 of them. Its times after the start
/// are 32-bit nanoseconds (saturated at 4.29 s, longer than any completion the report deems
/// normal); its bytes 32-bit, as the verbs bound a message (2^31).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub psn_first: u32,
    pub psn_last: u32,
    /// Its first packet's time here.
    pub start_ns: u64,
    bytes: u32,
    /// Its last packet's time after the start; the first retransmission of one of its PSNs or
    /// NAK naming it, and the first RNR NAK, after the start plus one (0: none).
    last_after: u32,
    retx_after: u32,
    rnr_after: u32,
    pub kind: Kind,
    pub marks: u8,
    /// Its frames' outer PCP (or untagged) and DSCP.
    pub pcp: u8,
    pub dscp: u8,
}

const _: () = assert!(core::mem::size_of::<Msg>() == 40, "a message in flight grew");

/// `t` after `start`, in 32 bits (saturated).
fn after(start: u64, t: u64) -> u32 {
    u32::try_from(t.saturating_sub(start)).unwrap_or(u32::MAX)
}

impl Msg {
    fn new(kind: Kind, r: &Record, bytes: u64) -> Msg {
        Msg::sent(kind, r.psn, r.ts_ns, bytes, r.pcp, r.dscp)
    }

    /// A message of one packet: `psn` at `start_ns`, of `bytes`, its frame's PCP and DSCP.
    pub fn sent(kind: Kind, psn: u32, start_ns: u64, bytes: u64, pcp: u8, dscp: u8) -> Msg {
        Msg {
            psn_first: psn,
            psn_last: psn,
            start_ns,
            bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
            last_after: 0,
            retx_after: 0,
            rnr_after: 0,
            kind,
            marks: 0,
            pcp,
            dscp,
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes as u64
    }

    /// With its first retransmission (or NAK naming it) and first RNR NAK at these times: a
    /// message `merge` rebuilt from a report's edge.
    pub fn with_times(mut self, retx_ns: Option<u64>, rnr_ns: Option<u64>) -> Msg {
        let at = |t: Option<u64>| t.map_or(0, |t| after(self.start_ns, t).saturating_add(1));
        (self.retx_after, self.rnr_after) = (at(retx_ns), at(rnr_ns));
        self
    }

    /// Its last packet's time here.
    pub fn last_ns(&self) -> u64 {
        self.start_ns + self.last_after as u64
    }

    /// The first retransmission of one of its PSNs or NAK naming it (None: none).
    pub fn retx_ns(&self) -> Option<u64> {
        (self.retx_after > 0).then(|| self.start_ns + self.retx_after as u64 - 1)
    }

    /// The first RNR NAK naming it (None: none).
    pub fn rnr_ns(&self) -> Option<u64> {
        (self.rnr_after > 0).then(|| self.start_ns + self.rnr_after as u64 - 1)
    }

    /// A further packet of it: `psn` at `ts`, adding `payload` bytes to a SEND.
    pub(crate) fn extend(&mut self, psn: u32, ts: u64, payload: u64) {
        self.last_after = after(self.start_ns, ts);
        self.psn_last = psn;
        if self.kind == Kind::Send {
            self.bytes = self.bytes.saturating_add(u32::try_from(payload).unwrap_or(u32::MAX));
        }
    }

    /// Whether its span holds `psn`.
    pub fn holds(&self, psn: u32) -> bool {
        psn_diff(self.psn_first, psn) <= psn_diff(self.psn_first, self.psn_last)
    }

    /// A retransmission or NAK (`mark`) at `ts`; the first one's time is kept.
    pub fn note_retx(&mut self, ts: u64, mark: u8) {
        self.marks |= mark;
        if self.retx_after == 0 {
            self.retx_after = after(self.start_ns, ts).saturating_add(1);
        }
    }

    fn note_rnr(&mut self, ts: u64) {
        self.marks |= mark::RNR;
        if self.rnr_after == 0 {
            self.rnr_after = after(self.start_ns, ts).saturating_add(1);
        }
    }

    /// Whether a response with an ACK-type AETH at `psn`, of operation `o`, completes it.
    fn completed_by(&self, psn: u32, o: u8) -> bool {
        let d = psn_diff(self.psn_last, psn);
        d < PSN_HALF && !(d == 0 && self.kind == Kind::Read && o == op::RDMA_READ_RESPONSE_FIRST)
    }
}

/// What a request record did to its flow's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Step {
    /// In-flight messages let go at [`MAX_IN_FLIGHT`].
    pub evicted: u32,
    /// A message whose LAST this capture did not hold, given up when the next began.
    pub abandoned: u32,
    /// A PSN behind the flow's next one sent again (not a gap's arriving late): no new payload.
    pub retransmission: bool,
    /// PSNs skipped ahead of the flow's next one.
    pub gap: u32,
    /// A PSN of a gap arriving late (first seen now, not a retransmission): how many PSNs
    /// after it had come before it (its displacement, as RFC 5236 counts it).
    pub late: Option<u32>,
}

/// PSN gaps one flow keeps until a response tells them apart, at most (the oldest beyond it
/// stays undecided: a `psn_gap`).
pub const MAX_GAPS: usize = 64;

/// PSNs a flow skipped, not yet told apart: delivered and missed by this capture (a later ACK
/// covers them, no NAK, no retransmission), or lost before this point (a NAK or a
/// retransmission touched them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Gap {
    first: u32,
    n: u32,
    lost: bool,
}

impl Gap {
    fn holds(&self, psn: u32) -> bool {
        psn_diff(self.first, psn) < self.n
    }
}

/// What a response told of a flow's gaps: PSNs this capture missed (delivered), PSNs lost
/// before this point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Told {
    pub capture_missed: u32,
    pub lost: u32,
}

/// Windows of frame bytes a request flow keeps for DCQCN ([`MsgFlow::recent`]): those a CNP's
/// rate before needs, and the one it falls in.
pub const RECENT: usize = super::super::dcqcn::BEFORE_WINDOWS as usize + 1;

/// A flow's rates: its request payload per window (steadiness), and its latest windows with
/// data frames' bytes (window, bytes), oldest first, which DCQCN judges a CNP on when it
/// starts to watch the flow only at that CNP.
#[derive(Debug, Default)]
pub(crate) struct Rate {
    windows: super::steady::Windows,
    recent: [(u64, u64); RECENT],
}

impl Rate {
    fn note(&mut self, w: u64, frame: u64, payload: u64, window_ns: u64) {
        if payload > 0 {
            self.windows.add(w, payload, window_ns);
        }
        if frame == 0 {
            return;
        }
        let last = &mut self.recent[RECENT - 1];
        if last.1 == 0 || w > last.0 {
            self.recent.rotate_left(1);
            self.recent[RECENT - 1] = (w, frame);
        } else if let Some(e) = self.recent.iter_mut().find(|e| e.0 == w && e.1 > 0) {
            e.1 += frame;
        }
    }
}

/// Messages in flight, oldest first: a ring over a vector whose first message is held inline,
/// so that the one message most flows have costs no allocation of its own, and a flow at
/// [`MAX_IN_FLIGHT`] (a one-way capture never sees its completions: it takes one message and
/// lets the oldest go at each) neither moves its messages nor holds more room than they take.
#[derive(Debug, Default)]
struct Fifo {
    v: SmallVec<[Msg; 1]>,
    /// Where the oldest is, and how many there are from it on (wrapping at `v.len()`).
    head: u32,
    len: u32,
}

impl Fifo {
    fn len(&self) -> usize {
        self.len as usize
    }
    fn front(&self) -> Option<&Msg> {
        if self.len == 0 { None } else { self.v.get(self.head as usize) }
    }
    fn front_mut(&mut self) -> Option<&mut Msg> {
        if self.len == 0 { None } else { self.v.get_mut(self.head as usize) }
    }
    fn back_mut(&mut self) -> Option<&mut Msg> {
        let n = self.v.len();
        if self.len == 0 { None } else { self.v.get_mut((self.head as usize + self.len as usize - 1) % n) }
    }
    fn pop_front(&mut self) -> Option<Msg> {
        let m = self.front()?.clone();
        self.head = ((self.head as usize + 1) % self.v.len()) as u32;
        self.len -= 1;
        if self.len == 0 {
            self.v.clear();
            self.head = 0;
        }
        Some(m)
    }
    /// At the end: in the ring's free place, or (the ring full) after its oldest moved to the
    /// front, growing the vector.
    fn push_back(&mut self, m: Msg) {
        let n = self.v.len();
        if self.len() < n {
            let at = (self.head as usize + self.len()) % n;
            self.v[at] = m;
        } else {
            self.v.rotate_left(self.head as usize);
            self.head = 0;
            self.v.push(m);
        }
        self.len += 1;
    }
    /// How many messages lie from the oldest to the vector's end, and how many wrapped to its
    /// start.
    fn split(&self) -> (usize, usize) {
        let wrapped = (self.head as usize + self.len()).saturating_sub(self.v.len());
        (self.len() - wrapped, wrapped)
    }
    fn iter(&self) -> impl Iterator<Item = &Msg> {
        let ((to_end, wrapped), head) = (self.split(), self.head as usize);
        self.v[head..head + to_end].iter().chain(&self.v[..wrapped])
    }
    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Msg> {
        let (to_end, wrapped) = self.split();
        let (start, from_head) = self.v.split_at_mut(self.head as usize);
        from_head[..to_end].iter_mut().chain(&mut start[..wrapped])
    }
}

/// A request flow's flags (a bit each).
mod flag {
    /// The open message (`MsgFlow::open`) is live.
    pub const OPEN: u8 = 1 << 0;
    /// The last request was a READ REQUEST: the next request tells its span.
    pub const AFTER_READ: u8 = 1 << 1;
    /// `MsgFlow::first` holds its first data frame.
    pub const FIRST: u8 = 1 << 2;
    /// Its first frame's payload went to its host pair's windows (the pair was placed before).
    pub const FIRST_PAIRED: u8 = 1 << 3;
    /// It had a frame (`MsgFlow::first` was set once).
    pub const NOTED: u8 = 1 << 4;
}

/// A request flow's messages: 112 bytes and its first message inline (200 000 one-message
/// flows are a capture the report must hold within 1 KB a flow).
#[derive(Debug, Default)]
pub(crate) struct MsgFlow {
    /// The SEND or WRITE whose LAST has not come yet, when [`flag::OPEN`] is set: boxed, and
    /// the box kept for the flow's next one (most flows send none of several packets).
    open: Option<Box<Msg>>,
    /// Sent, not completed, in PSN order.
    in_flight: Fifo,
    /// The PSN the next new request should carry, once a request was seen.
    next_psn: Option<u32>,
    flags: u8,
    /// Its place in the analysis' host pairs (u32::MAX: not placed yet).
    pub(super) pair: u32,
    /// Its rates, from its second data frame on (boxed: most flows of a large capture have one
    /// frame); its first frame's (window, frame bytes, payload) until then ([`flag::FIRST`]).
    rate: Option<Box<Rate>>,
    first: (u64, u32, u32),
    /// PSNs skipped and not told apart yet (boxed: few flows have any).
    #[allow(clippy::box_collection)]
    gaps: Option<Box<Vec<Gap>>>,
}

const _: () = assert!(core::mem::size_of::<MsgFlow>() <= 112, "a request flow's messages state grew");

impl MsgFlow {
    pub(super) fn new() -> MsgFlow {
        MsgFlow { pair: u32::MAX, ..Default::default() }
    }

    /// A frame in rate window `w`: `frame` bytes of a data frame (0: not data), `payload` bytes
    /// of request payload (0: none, or a retransmission). True once the flow has its rates
    /// (`early`: which keep their first full windows' bytes, `--edges`).
    pub(super) fn note(&mut self, w: u64, frame: u64, payload: u64, (window_ns, early): (u64, bool)) -> bool {
        let rate = match self.rate.as_mut() {
            Some(r) => r,
            None if self.flags & flag::FIRST == 0 => {
                self.first = (w, frame as u32, payload as u32);
                self.flags |= flag::FIRST | flag::NOTED;
                return false;
            }
            None => {
                let (w0, f0, p0) = self.first;
                let mut r = Box::<Rate>::default();
                if early {
                    r.windows = super::steady::Windows::with_early();
                }
                r.note(w0, f0 as u64, p0 as u64, window_ns);
                self.flags &= !flag::FIRST;
                self.rate.insert(r)
            }
        };
        rate.note(w, frame, payload, window_ns);
        true
    }

    /// `--edges`: its first frame's (window, payload), whether that payload went to its host
    /// pair's windows, and whether its pair is placed.
    pub(crate) fn first_frame(&self) -> (Option<(u64, u64)>, bool, bool) {
        let first = (self.flags & flag::NOTED != 0).then_some((self.first.0, self.first.2 as u64));
        (first, self.flags & flag::FIRST_PAIRED != 0, self.pair != u32::MAX)
    }

    /// Its first frame's payload went to its host pair's windows.
    pub(super) fn first_paired(&mut self) {
        self.flags |= flag::FIRST_PAIRED;
    }

    /// Its windows as `merge` across a cut needs them: its rates', or its one frame's.
    pub(crate) fn ends(&self) -> Option<super::steady::Ends> {
        match &self.rate {
            Some(r) => r.windows.ends(),
            None if self.flags & flag::FIRST != 0 && self.first.2 > 0 => Some(super::steady::Ends {
                first: (self.first.0, self.first.2 as u64),
                counts: Vec::new(),
                open: None,
                early: Vec::new(),
            }),
            None => None,
        }
    }

    /// Its payload per window, once it has its rates.
    pub(crate) fn windows(&self) -> Option<&super::steady::Windows> {
        self.rate.as_ref().map(|r| &r.windows)
    }

    /// The latest windows with data frames (window, bytes), oldest first.
    pub(crate) fn recent(&self) -> Vec<(u64, u64)> {
        match &self.rate {
            Some(r) => r.recent.iter().copied().filter(|e| e.1 > 0).collect(),
            None if self.flags & flag::FIRST != 0 && self.first.1 > 0 => vec![(self.first.0, self.first.1 as u64)],
            None => Vec::new(),
        }
    }

    fn open_ref(&self) -> Option<&Msg> {
        self.open.as_deref().filter(|_| self.flags & flag::OPEN != 0)
    }

    fn open_mut(&mut self) -> Option<&mut Msg> {
        self.open.as_deref_mut().filter(|_| self.flags & flag::OPEN != 0)
    }

    /// The open message, no longer open.
    fn take_open(&mut self) -> Option<Msg> {
        let m = self.open_ref().cloned();
        self.flags &= !flag::OPEN;
        m
    }

    fn set_open(&mut self, m: Msg) -> &mut Msg {
        self.flags |= flag::OPEN;
        match &mut self.open {
            Some(b) => {
                **b = m;
                b
            }
            none => none.insert(Box::new(m)),
        }
    }

    /// A request of a reliable transport.
    #[inline]
    pub(super) fn request(&mut self, r: &Record) -> Step {
        let mut step = Step::default();
        let psn = r.psn & PSN_MASK;
        if !self.in_sequence(psn, r.ts_ns, &mut step) {
            return step;
        }
        self.flags &= !flag::AFTER_READ;
        self.next_psn = Some(psn.wrapping_add(1) & PSN_MASK);
        let o = r.opcode & 0x1F;
        let payload = r.payload_len as u64;
        match o {
            op::SEND_FIRST | op::RDMA_WRITE_FIRST => {
                step.abandoned += self.take_open().is_some() as u32;
                let (kind, bytes) =
                    if o == op::SEND_FIRST { (Kind::Send, payload) } else { (Kind::Write, r.reth_len as u64) };
                self.set_open(Msg::new(kind, r, bytes));
            }
            op::SEND_MIDDLE | op::RDMA_WRITE_MIDDLE => {
                self.open_or_partial(o == op::SEND_MIDDLE, r).extend(psn, r.ts_ns, payload);
            }
            op::SEND_LAST
            | op::SEND_LAST_WITH_IMMEDIATE
            | op::SEND_LAST_WITH_INVALIDATE
            | op::RDMA_WRITE_LAST
            | op::RDMA_WRITE_LAST_WITH_IMMEDIATE => {
                let is_send = matches!(o, op::SEND_LAST | op::SEND_LAST_WITH_IMMEDIATE | op::SEND_LAST_WITH_INVALIDATE);
                self.open_or_partial(is_send, r).extend(psn, r.ts_ns, payload);
                let m = self.take_open().expect("opened above");
                step.evicted += self.sent(m);
            }
            op::SEND_ONLY | op::SEND_ONLY_WITH_IMMEDIATE | op::SEND_ONLY_WITH_INVALIDATE => {
                step.evicted += self.sent(Msg::new(Kind::Send, r, payload));
            }
            op::RDMA_WRITE_ONLY | op::RDMA_WRITE_ONLY_WITH_IMMEDIATE => {
                step.evicted += self.sent(Msg::new(Kind::Write, r, r.reth_len as u64));
            }
            op::RDMA_READ_REQUEST => {
                step.evicted += self.sent(Msg::new(Kind::Read, r, r.reth_len as u64));
                self.flags |= flag::AFTER_READ;
            }
            op::COMPARE_SWAP | op::FETCH_ADD | op::ATOMIC_WRITE => {
                step.evicted += self.sent(Msg::new(Kind::Atomic, r, 8));
            }
            _ => {}
        }
        step
    }

    /// Where a request's PSN stands against the flow's next one: false for one behind it (a
    /// retransmission, or a gap's PSN arriving late: `step` says which); a PSN ahead opens a gap;
    /// the first request after a READ gives the READ its span.
    fn in_sequence(&mut self, psn: u32, ts: u64, step: &mut Step) -> bool {
        let Some(next) = self.next_psn else { return true };
        let d = psn_diff(next, psn);
        if d >= PSN_HALF {
            match self.arrived_late(psn) {
                true => step.late = Some(psn_diff(psn, next).saturating_sub(1)),
                false => {
                    step.retransmission = true;
                    self.retransmitted(psn, ts);
                }
            }
            return false;
        }
        if self.flags & flag::AFTER_READ != 0 {
            // The READ's responses took the PSNs up to this one.
            if let Some(m) = self.in_flight.back_mut().filter(|m| m.kind == Kind::Read) {
                m.psn_last = psn.wrapping_sub(1) & PSN_MASK;
                m.marks |= mark::END_KNOWN;
            }
        } else if d > 0 {
            step.gap = d;
            let gaps = self.gaps.get_or_insert_with(Default::default);
            if gaps.len() == MAX_GAPS {
                gaps.remove(0);
            }
            gaps.push(Gap { first: next, n: d, lost: false });
            if let Some(m) = self.open_mut() {
                m.marks |= mark::GAP;
            }
        }
        true
    }

    /// The open message a MIDDLE or LAST continues; a partial one when its FIRST was not seen
    /// (or belonged to another kind).
    fn open_or_partial(&mut self, is_send: bool, r: &Record) -> &mut Msg {
        let kind = if is_send { Kind::Send } else { Kind::Write };
        if self.open_ref().is_none_or(|m| m.kind != kind) {
            let mut m = Msg::new(kind, r, 0);
            m.marks |= mark::PARTIAL;
            return self.set_open(m);
        }
        self.open_mut().expect("open checked")
    }

    /// A message fully sent: it waits for its completion. 1 when the oldest had to go.
    fn sent(&mut self, m: Msg) -> u32 {
        let evicted = self.in_flight.len() == MAX_IN_FLIGHT;
        if evicted {
            self.in_flight.pop_front();
        }
        self.in_flight.push_back(m);
        evicted as u32
    }

    /// Whether `psn`, behind the flow's next one, is one of a gap's never seen (reordered, not
    /// sent again): it leaves the gap.
    fn arrived_late(&mut self, psn: u32) -> bool {
        let Some(gaps) = self.gaps.as_mut() else { return false };
        let Some(i) = gaps.iter().position(|g| g.holds(psn) && !g.lost) else { return false };
        let g = gaps.remove(i);
        let k = psn_diff(g.first, psn);
        let right = Gap { first: psn.wrapping_add(1) & PSN_MASK, n: g.n - k - 1, lost: false };
        for part in [Gap { n: k, ..g }, right] {
            if part.n > 0 {
                gaps.push(part);
            }
        }
        true
    }

    /// A retransmitted PSN: marks the message holding it (none when it completed already or
    /// was never seen). A gap holding it was loss, not the capture.
    fn retransmitted(&mut self, psn: u32, ts: u64) {
        self.lost(psn);
        if let Some(m) = self.holder(psn) {
            m.note_retx(ts, mark::RETRANSMITTED);
        }
    }

    /// The gaps holding `psn` were loss before this point, not the capture's.
    fn lost(&mut self, psn: u32) {
        self.gaps.iter_mut().flat_map(|g| g.iter_mut()).filter(|g| g.holds(psn)).for_each(|g| g.lost = true);
    }

    fn holder(&mut self, psn: u32) -> Option<&mut Msg> {
        if self.open_ref().is_some_and(|m| m.holds(psn)) {
            return self.open.as_deref_mut();
        }
        self.in_flight.iter_mut().find(|m| m.holds(psn))
    }

    /// A response with an ACK-type AETH: the messages it completes, oldest first; what it
    /// tells of the gaps it covers (the responder acknowledges PSN p only after every PSN up to p
    /// arrived: a gap it covers with no NAK and no retransmission was delivered, and this
    /// capture missed it).
    pub(super) fn acked(&mut self, r: &Record, done: &mut impl FnMut(Msg)) -> Told {
        let (psn, o) = (r.psn & PSN_MASK, r.opcode & 0x1F);
        while self.in_flight.front().is_some_and(|m| m.completed_by(psn, o)) {
            done(self.in_flight.pop_front().expect("front checked"));
        }
        let mut told = Told::default();
        let Some(gaps) = self.gaps.as_mut() else { return told };
        gaps.retain(|g| {
            let last = g.first.wrapping_add(g.n - 1) & PSN_MASK;
            if psn_diff(last, psn) >= PSN_HALF {
                return true;
            }
            if g.lost {
                told.lost += g.n
            } else {
                told.capture_missed += g.n
            }
            false
        });
        told
    }

    /// A NAK (`rnr` false: a PSN sequence error or another NAK) or an RNR NAK naming `psn`:
    /// the message it names, or else the oldest in flight, is marked.
    pub(super) fn nak(&mut self, psn: u32, ts: u64, rnr: bool) {
        let psn = psn & PSN_MASK;
        if !rnr {
            // A sequence NAK names the first PSN the responder misses: the gap that starts there.
            self.lost(psn);
        }
        let holder = self.holder(psn).is_some();
        let m = if holder { self.holder(psn) } else { self.in_flight.front_mut() };
        if let Some(m) = m {
            if rnr {
                m.note_rnr(ts);
            } else {
                m.note_retx(ts, mark::NAK);
            }
        }
    }

    /// `--edges`: its messages not completed, partial ones too: in flight oldest first, then
    /// the one being sent (true).
    pub(crate) fn held(&self) -> impl Iterator<Item = (&Msg, bool)> {
        self.in_flight.iter().map(|m| (m, false)).chain(self.open_ref().map(|m| (m, true)))
    }

    /// Messages sent and not completed (the open one included when its start was seen).
    pub(super) fn pending(&self) -> impl Iterator<Item = &Msg> {
        self.in_flight.iter().chain(self.open_ref()).filter(|m| m.marks & mark::PARTIAL == 0)
    }

    /// PSNs skipped and not told apart yet, as `[first, count, lost]` (`--edges`: an ACK after
    /// a cut may tell them).
    pub(crate) fn open_gaps(&self) -> Vec<[u32; 3]> {
        self.gaps.iter().flat_map(|g| g.iter()).map(|g| [g.first, g.n, g.lost as u32]).collect()
    }

    /// Partial messages still held (their start was not seen).
    pub(super) fn partial(&self) -> usize {
        self.in_flight.iter().chain(self.open_ref()).filter(|m| m.marks & mark::PARTIAL != 0).count()
    }
}

/// The kind of a UC request of (transport-less) operation `o`: a SEND's or a WRITE's.
pub fn uc_kind(o: u8) -> Kind {
    if matches!(o, op::SEND_FIRST..=op::SEND_ONLY_WITH_IMMEDIATE) { Kind::Send } else { Kind::Write }
}

/// Whether a UC frame of operation `o` starts a message of several frames (a FIRST): one
/// being sent is given up for it.
pub fn uc_opens(o: u8) -> bool {
    matches!(o, op::SEND_FIRST | op::RDMA_WRITE_FIRST)
}

/// A UC frame of operation `o` continuing a message being sent: whether it ends it (LAST), or
/// none for a frame that is no MIDDLE or LAST.
pub fn uc_continues(o: u8) -> Option<bool> {
    match o {
        op::SEND_MIDDLE | op::RDMA_WRITE_MIDDLE => Some(false),
        op::SEND_LAST | op::SEND_LAST_WITH_IMMEDIATE | op::RDMA_WRITE_LAST | op::RDMA_WRITE_LAST_WITH_IMMEDIATE => {
            Some(true)
        }
        _ => None,
    }
}

/// The unreliable transports' messages (UC: FIRST … LAST, or ONLY; UD: always ONLY): no
/// completion, their transfer time from first to last packet.
#[derive(Debug, Default)]
pub(crate) struct Transfer {
    open: Option<Msg>,
}

impl Transfer {
    /// Whether a message is being sent (its FIRST seen, its LAST not yet).
    pub(super) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The message being sent.
    pub(super) fn sending(&self) -> Option<&Msg> {
        self.open.as_ref()
    }

    /// A UC or UD request; returns a message fully sent. `partial` counts a LAST whose FIRST
    /// was not seen.
    pub(super) fn request(&mut self, r: &Record, partial: &mut u64) -> Option<Msg> {
        let o = r.opcode & 0x1F;
        let payload = r.payload_len as u64;
        let kind = uc_kind(o);
        let bytes = if kind == Kind::Send { payload } else { r.reth_len as u64 };
        if let Some(last) = uc_continues(o) {
            let Some(m) = self.open.as_mut().filter(|m| m.kind == kind) else {
                *partial += u64::from(last);
                return None;
            };
            m.extend(r.psn, r.ts_ns, payload);
            return if last { self.open.take() } else { None };
        }
        if uc_opens(o) {
            self.open = Some(Msg::new(kind, r, bytes));
            return None;
        }
        match o {
            op::SEND_ONLY | op::SEND_ONLY_WITH_IMMEDIATE | op::RDMA_WRITE_ONLY | op::RDMA_WRITE_ONLY_WITH_IMMEDIATE => {
                Some(Msg::new(kind, r, bytes))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod fifo_tests {
    use super::*;

    /// A flow at the bound for a long time: the oldest goes at each new message, the order is
    /// kept (iterated and changed in place across the ring's wrap), and the room stays that of
    /// the bound (a vector with a head doubled it to 2048).
    #[test]
    fn a_flow_at_the_bound_keeps_its_order_in_bounded_room() {
        let mut f = Fifo::default();
        for i in 0..20 * MAX_IN_FLIGHT as u32 {
            if f.len() == MAX_IN_FLIGHT {
                let oldest = f.pop_front().expect("full");
                assert_eq!(oldest.psn_first, i - MAX_IN_FLIGHT as u32, "the oldest goes first");
            }
            f.push_back(Msg::sent(Kind::Write, i, i as u64, 1, 0, 0));
            assert!(f.v.capacity() <= MAX_IN_FLIGHT, "room {} at message {i}", f.v.capacity());
            if i % 1000 == 999 {
                let first = (i + 1).saturating_sub(MAX_IN_FLIGHT as u32);
                let psns: Vec<u32> = f.iter().map(|m| m.psn_first).collect();
                assert!(psns == (first..=i).collect::<Vec<_>>(), "in order at message {i}");
                f.iter_mut().for_each(|m| m.bytes += 1);
                assert!(f.iter().all(|m| m.bytes == 2), "each changed once at message {i}");
                f.iter_mut().for_each(|m| m.bytes = 1);
                assert_eq!(f.back_mut().map(|m| m.psn_first), Some(i), "the newest at the back");
            }
        }
        // Emptied as completions come: the taken ones are let go too.
        while f.pop_front().is_some() {}
        assert_eq!((f.len(), f.v.len()), (0, 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(opcode: u8, psn: u32, ts: u64) -> Record {
        Record { ts_ns: ts, opcode, psn, payload_len: 100, reth_len: 100, ip_version: 4, ..Default::default() }
    }

    #[test]
    fn gaps_are_told_apart_by_the_responses() {
        let mut f = MsgFlow::new();
        let mut done = Vec::new();
        // 0 1 _ 3: the ACK of 3 covers 2 with no NAK and no retransmission: missed here.
        for p in [0, 1, 3] {
            f.request(&rec(op::RDMA_WRITE_ONLY, p, p as u64));
        }
        let told = f.acked(&rec(op::ACKNOWLEDGE, 3, 10), &mut |m| done.push(m));
        assert_eq!(told, Told { capture_missed: 1, lost: 0 });
        assert_eq!(done.len(), 3);
        // 4 _ 6, a NAK of 5, 5 and 6 again: lost before this point.
        for p in [4, 6] {
            f.request(&rec(op::RDMA_WRITE_ONLY, p, 20 + p as u64));
        }
        f.nak(5, 30, false);
        for p in [5, 6] {
            f.request(&rec(op::RDMA_WRITE_ONLY, p, 40 + p as u64));
        }
        assert_eq!(f.acked(&rec(op::ACKNOWLEDGE, 6, 50), &mut |m| done.push(m)), Told { capture_missed: 0, lost: 1 });
        // 7 _ 9 then 8 late (reordered, never seen): not a retransmission, no gap left.
        let steps: Vec<Step> =
            [7, 9, 8].iter().map(|p| f.request(&rec(op::RDMA_WRITE_ONLY, *p, 60 + *p as u64))).collect();
        assert_eq!((steps[1].gap, steps[2].late, steps[2].retransmission), (1, Some(1), false));
        assert_eq!(f.acked(&rec(op::ACKNOWLEDGE, 9, 70), &mut |m| done.push(m)), Told::default());
        assert!(done.iter().all(|m| m.marks & mark::RETRANSMITTED == 0 || m.psn_first == 5 || m.psn_first == 6));
    }

    #[test]
    fn the_latest_windows_are_kept_for_dcqcn() {
        let mut f = MsgFlow::new();
        assert!(!f.note(0, 100, 0, (10, false)), "one frame: no rates yet");
        assert_eq!(f.recent(), [(0, 100)]);
        f.note(0, 50, 0, (10, false));
        for w in 1..10u64 {
            f.note(w, 100, 0, (10, false));
            f.note(w, 50, 0, (10, false));
        }
        f.note(8, 1, 0, (10, false)); // a little late: its window is still kept
        let recent = f.recent();
        assert_eq!(recent, [(4, 150), (5, 150), (6, 150), (7, 150), (8, 151), (9, 150)]);
    }
}
