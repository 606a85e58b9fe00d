//! The XDP program's evidence copies as the agent drives them: which flows to copy until when
//! (`EVIDENCE_FLOWS`, `EVIDENCE_CTL`), and the ring the copies arrive in. Behind a trait, so
//! the agent's side is tested with a fake kernel.

use analyzer_common::flow::FlowKey;
use analyzer_common::maps::{EvidenceFrame, MAP_EVIDENCE, MAP_EVIDENCE_CTL, MAP_EVIDENCE_FLOWS, evidence_ctl};
use aya::maps::{Array, HashMap, MapData, RingBuf};

use super::KernelError;
use super::access::{map_err, take};

/// Where copies are asked for and come from.
pub trait EvidenceSource {
    /// Copies the frames of `keys` until `until` (kernel monotonic ns); returns how many of
    /// them the flow map took (it is bounded).
    fn watch_flows(&mut self, keys: &[FlowKey], until: u64) -> Result<usize, KernelError>;
    /// Copies every PFC and PAUSE frame until `until`.
    fn watch_pause(&mut self, until: u64) -> Result<(), KernelError>;
    /// Forgets the flows whose deadline is before `now`.
    fn expire(&mut self, now: u64) -> Result<(), KernelError>;
    /// Hands at most `max` copies to `f`; returns how many it read.
    fn drain(&mut self, max: u64, f: &mut dyn FnMut(&EvidenceFrame)) -> u64;
}

/// What the kernel's evidence flow map holds, mirrored here (the program only reads it): each
/// flow's deadline, and whether the map refused a flow since the last expiry freed room. So a
/// flow watched already until as late costs no system call, and once the map is full the
/// flows it cannot take are counted without one each: a fabric-wide incast names thousands of
/// flows in hundreds of episodes, and a system call per flow per episode stalled the agent's
/// loop for seconds (3.3 s every tenth interval at 500 k frames/s over 10 000 flows).
#[derive(Debug, Default)]
pub struct Watched {
    deadlines: rustc_hash::FxHashMap<FlowKey, u64>,
    full: bool,
}

/// What [`Watched::plan`] decides for one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Watched until as late already: nothing to write.
    Kept,
    /// To write with this deadline.
    Write(u64),
    /// Not watched: the map refused a flow since the last expiry.
    Refused,
}

impl Watched {
    /// What watching `key` until `until` needs.
    pub fn plan(&self, key: &FlowKey, until: u64) -> Plan {
        match self.deadlines.get(key) {
            Some(d) if *d >= until => Plan::Kept,
            Some(_) => Plan::Write(until),
            None if self.full => Plan::Refused,
            None => Plan::Write(until),
        }
    }

    /// The map took `key` until `until`.
    pub fn wrote(&mut self, key: FlowKey, until: u64) {
        self.deadlines.insert(key, until);
    }

    /// The map refused a new flow: full until an expiry frees room.
    pub fn refused(&mut self) {
        self.full = true;
    }

    /// The flows whose deadline is before `now`, forgotten here (to be removed from the map).
    pub fn expire(&mut self, now: u64) -> Vec<FlowKey> {
        let mut old = Vec::new();
        self.deadlines.retain(|k, d| {
            let keep = *d >= now;
            if !keep {
                old.push(*k);
            }
            keep
        });
        self.full &= old.is_empty();
        old
    }
}

/// The program's evidence maps.
pub struct EvidenceMaps {
    flows: HashMap<MapData, FlowKey, u64>,
    /// What `flows` holds.
    watched: Watched,
    ctl: Array<MapData, u64>,
    ring: RingBuf<MapData>,
    /// The copy being read: its head and bytes, as long as the ring's entry (the program puts
    /// only the bytes it copied on the ring).
    copy: Box<EvidenceFrame>,
    /// The latest deadline asked for, of flows and of PFC.
    flows_until: u64,
    pause_until: u64,
}

impl EvidenceMaps {
    pub fn new(ebpf: &mut aya::Ebpf) -> Result<Self, KernelError> {
        Ok(EvidenceMaps {
            flows: HashMap::try_from(take(ebpf, MAP_EVIDENCE_FLOWS)?).map_err(map_err(MAP_EVIDENCE_FLOWS))?,
            ctl: Array::try_from(take(ebpf, MAP_EVIDENCE_CTL)?).map_err(map_err(MAP_EVIDENCE_CTL))?,
            ring: RingBuf::try_from(take(ebpf, MAP_EVIDENCE)?).map_err(map_err(MAP_EVIDENCE))?,
            copy: Box::new(EvidenceFrame::zeroed()),
            watched: Watched::default(),
            flows_until: 0,
            pause_until: 0,
        })
    }
}

impl EvidenceSource for EvidenceMaps {
    fn watch_flows(&mut self, keys: &[FlowKey], until: u64) -> Result<usize, KernelError> {
        let mut taken = 0;
        for k in keys {
            let later = match self.watched.plan(k, until) {
                Plan::Kept => {
                    taken += 1;
                    continue;
                }
                Plan::Refused => continue,
                Plan::Write(later) => later,
            };
            match self.flows.insert(k, later, 0) {
                Ok(()) => {
                    self.watched.wrote(*k, later);
                    taken += 1;
                }
                // E2BIG: the map is full; the flows not in it are not watched (the caller
                // counts them) until an expiry frees room.
                Err(aya::maps::MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::E2BIG) => {
                    self.watched.refused()
                }
                Err(e) => return Err(KernelError::Map { map: MAP_EVIDENCE_FLOWS, source: e }),
            }
        }
        if taken > 0 && until > self.flows_until {
            self.flows_until = until;
            self.ctl.set(evidence_ctl::FLOWS_UNTIL, until, 0).map_err(map_err(MAP_EVIDENCE_CTL))?;
        }
        Ok(taken)
    }

    fn watch_pause(&mut self, until: u64) -> Result<(), KernelError> {
        if until > self.pause_until {
            self.pause_until = until;
            self.ctl.set(evidence_ctl::PAUSE_UNTIL, until, 0).map_err(map_err(MAP_EVIDENCE_CTL))?;
        }
        Ok(())
    }

    fn expire(&mut self, now: u64) -> Result<(), KernelError> {
        if self.flows_until != 0 && now > self.flows_until {
            // Nothing watched any more: the program's check ends at the array read again.
            self.flows_until = 0;
            self.ctl.set(evidence_ctl::FLOWS_UNTIL, 0, 0).map_err(map_err(MAP_EVIDENCE_CTL))?;
        }
        for k in self.watched.expire(now) {
            // Gone already (another expiry): nothing to do.
            let _ = self.flows.remove(&k);
        }
        Ok(())
    }

    fn drain(&mut self, max: u64, f: &mut dyn FnMut(&EvidenceFrame)) -> u64 {
        let mut n = 0;
        while n < max
            && let Some(item) = self.ring.next()
        {
            let e = &mut *self.copy;
            // An entry is the head and `caplen` bytes; a shorter one is read and skipped.
            if item.len() >= EvidenceFrame::HEAD {
                let bytes = e.as_bytes_mut();
                let len = item.len().min(bytes.len());
                bytes[..len].copy_from_slice(&item[..len]);
                e.caplen = e.caplen.min((len - EvidenceFrame::HEAD) as u16);
                f(e);
            }
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> FlowKey {
        let mut k = FlowKey::default();
        k.src[0] = i;
        k
    }

    /// A flow watched until as late needs no write; a later deadline does; once the map
    /// refused a flow, new flows are refused without a write until an expiry frees room.
    #[test]
    fn the_mirror_spares_writes_and_knows_a_full_map() {
        let mut w = Watched::default();
        assert_eq!(w.plan(&key(1), 100), Plan::Write(100));
        w.wrote(key(1), 100);
        assert_eq!(w.plan(&key(1), 90), Plan::Kept);
        assert_eq!(w.plan(&key(1), 100), Plan::Kept);
        assert_eq!(w.plan(&key(1), 150), Plan::Write(150), "a later deadline extends it");
        w.refused();
        assert_eq!(w.plan(&key(2), 100), Plan::Refused, "full: no write for a new flow");
        assert_eq!(w.plan(&key(1), 200), Plan::Write(200), "a flow in the map may still be extended");
        assert!(w.expire(50).is_empty());
        assert_eq!(w.plan(&key(2), 100), Plan::Refused, "nothing expired: still full");
        assert_eq!(w.expire(101), vec![key(1)]);
        assert_eq!(w.plan(&key(2), 300), Plan::Write(300), "room again");
        assert_eq!(w.plan(&key(1), 300), Plan::Write(300), "the expired flow is gone here too");
    }
}
