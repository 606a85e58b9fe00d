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

/// The program's evidence maps.
pub struct EvidenceMaps {
    flows: HashMap<MapData, FlowKey, u64>,
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
            flows_until: 0,
            pause_until: 0,
        })
    }
}

impl EvidenceSource for EvidenceMaps {
    fn watch_flows(&mut self, keys: &[FlowKey], until: u64) -> Result<usize, KernelError> {
        let mut taken = 0;
        for k in keys {
            let later = self.flows.get(k, 0).map_or(until, |d| d.max(until));
            match self.flows.insert(k, later, 0) {
                Ok(()) => taken += 1,
                // E2BIG: the map is full; the rest are not watched (the caller counts them).
                Err(aya::maps::MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::E2BIG) => break,
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
        let old: Vec<FlowKey> =
            self.flows.iter().filter_map(|e| e.ok()).filter(|(_, d)| *d < now).map(|(k, _)| k).collect();
        for k in old {
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
