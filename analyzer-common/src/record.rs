//! The timeline record: what the packet-resolution analyses (RTT, incast, CE → CNP timing)
//! need of one RoCE or CNP frame, with its timestamp. Offline the host builds it from the
//! frame's summary; live the XDP program writes a [`CompactRecord`] per frame, which names the
//! flow by the id the kernel gave it, and the agent expands it with the flow's key into the
//! same record: both modes feed the analyses identical input.

use crate::PacketSummary;
use crate::flow::FlowKey;

pub mod flag {
    /// BTH AckReq.
    pub const ACK_REQ: u8 = 1 << 0;
    /// The packet carries an AETH (`aeth_syndrome` is valid).
    pub const AETH: u8 = 1 << 1;

    /// A frame's flags, as both record layouts carry them.
    #[inline(always)]
    pub fn of(s: &crate::PacketSummary) -> u8 {
        (s.ack_req & 1) | if s.ext & crate::opcode::ext::AETH != 0 { AETH } else { 0 }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    pub ts_ns: u64,
    pub src_ip: [u8; 16],
    pub dst_ip: [u8; 16],
    pub frame_len: u32,
    pub dst_qp: u32,
    pub psn: u32,
    /// UDP source port for RoCE v2, 0 for v1 (as in [`FlowKey`]).
    pub udp_sport: u16,
    pub opcode: u8,
    pub ecn: u8,
    pub dscp: u8,
    pub flags: u8,
    pub aeth_syndrome: u8,
    pub ip_version: u8,
    /// The outer VLAN tag's PCP 0..7, or [`crate::maps::UNTAGGED`].
    pub pcp: u8,
    pub _pad: u8,
    /// The BTH payload's bytes (headers, pad and ICRC left out; at most 65535): what a SEND
    /// message or a READ response carries.
    pub payload_len: u16,
    /// The RETH's DMA length (a WRITE's or READ's message size), 0 without a RETH.
    pub reth_len: u32,
    pub _pad2: [u8; 4],
}

const _: () = assert!(core::mem::size_of::<Record>() == 72);
// No implicit padding: the fields end where the record does.
const _: () = assert!(core::mem::offset_of!(Record, _pad2) + 4 == core::mem::size_of::<Record>());
const _: () = assert!(core::mem::offset_of!(Record, payload_len) == 62);

/// The payload length a record carries (clamped to its 16 bits).
#[inline(always)]
pub fn payload_of(s: &PacketSummary) -> u16 {
    if s.payload_len > 0xffff { 0xffff } else { s.payload_len as u16 }
}

/// The RETH DMA length a record carries: 0 when the frame has no RETH.
#[inline(always)]
pub fn reth_of(s: &PacketSummary) -> u32 {
    if s.ext & crate::opcode::ext::RETH != 0 { s.reth_dma_len } else { 0 }
}

/// Writes the summary's source and destination addresses as four 8-byte words at `dst`
/// (ring-buffer memory in the XDP program, where a 16-byte array copy would become a byte-loop
/// `memcpy` call).
///
/// # Safety
/// `dst` must be valid for writes of four `u64`s.
#[inline(always)]
pub unsafe fn write_addresses(dst: *mut u64, s: &PacketSummary) {
    let src = &s.src_ip as *const [u8; 16] as *const u64;
    let dip = &s.dst_ip as *const [u8; 16] as *const u64;
    // SAFETY: the caller guarantees `dst`; each address is two unaligned 8-byte words.
    unsafe {
        core::ptr::write_volatile(dst, core::ptr::read_unaligned(src));
        core::ptr::write_volatile(dst.add(1), core::ptr::read_unaligned(src.add(1)));
        core::ptr::write_volatile(dst.add(2), core::ptr::read_unaligned(dip));
        core::ptr::write_volatile(dst.add(3), core::ptr::read_unaligned(dip.add(1)));
    }
}

impl Record {
    /// Fills `*dst` from a summary, field by field (the XDP program writes straight into
    /// ring-buffer memory; a struct copy would become a byte-loop `memcpy` there).
    ///
    /// # Safety
    /// `dst` must be valid for writes of one `Record`.
    #[inline(always)]
    pub unsafe fn fill(dst: *mut Record, ts_ns: u64, s: &PacketSummary) {
        // SAFETY: the caller guarantees `dst`; the addresses are words 1–4 of a Record.
        unsafe {
            core::ptr::write_volatile(dst as *mut u64, ts_ns);
            write_addresses((dst as *mut u64).add(1), s);
            (*dst).frame_len = s.frame_len;
            (*dst).dst_qp = s.dst_qp;
            (*dst).psn = s.psn;
            (*dst).udp_sport = FlowKey::port(s.udp_sport, s.roce_version);
            (*dst).opcode = s.opcode;
            (*dst).ecn = s.ecn;
            (*dst).dscp = s.dscp;
            (*dst).flags = flag::of(s);
            (*dst).aeth_syndrome = s.aeth_syndrome;
            (*dst).ip_version = s.ip_version;
            (*dst).pcp = crate::summary::pcp_of(s);
            (*dst)._pad = 0;
            (*dst).payload_len = payload_of(s);
            (*dst).reth_len = reth_of(s);
            (*dst)._pad2 = [0; 4];
        }
    }

    #[inline]
    pub fn from_summary(ts_ns: u64, s: &PacketSummary) -> Self {
        let mut r = Record::default();
        // SAFETY: `r` is a valid Record.
        unsafe { Record::fill(&mut r, ts_ns, s) };
        r
    }

    #[inline]
    pub fn flow(&self) -> FlowKey {
        FlowKey {
            src: self.src_ip,
            dst: self.dst_ip,
            dst_qp: self.dst_qp,
            udp_sport: self.udp_sport,
            ip_version: self.ip_version,
            _pad: 0,
        }
    }

    #[inline]
    pub fn ack_req(&self) -> bool {
        self.flags & flag::ACK_REQ != 0
    }

    /// The AETH syndrome, if the packet carries an AETH.
    #[inline]
    pub fn aeth(&self) -> Option<u8> {
        (self.flags & flag::AETH != 0).then_some(self.aeth_syndrome)
    }

    #[inline]
    pub fn is_cnp(&self) -> bool {
        self.opcode == crate::opcode::CNP
    }

    /// CE-marked (ECN codepoint 3).
    #[inline]
    pub fn ce(&self) -> bool {
        self.ecn & 3 == 3
    }
}

#[cfg(feature = "user")]
// SAFETY: repr(C), integers only, no implicit padding (size asserted above).
unsafe impl aya::Pod for Record {}

/// A timeline record as the XDP program writes it: half a [`Record`], because the 40 bytes of
/// the flow's key are replaced by the id the kernel gave the flow when it inserted its entry
/// ([`crate::maps::FlowCounters::id`], announced to the agent with its key:
/// [`crate::maps::FlowId`]). Half the bytes for the program to write and the agent to read, and
/// two records a cache line.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactRecord {
    pub ts_ns: u64,
    /// The flow's id ([`crate::maps::FlowCounters::id`]; 0: none, a record nobody can name).
    pub flow: u32,
    pub frame_len: u32,
    pub psn: u32,
    pub opcode: u8,
    pub ecn: u8,
    pub dscp: u8,
    pub flags: u8,
    pub aeth_syndrome: u8,
    pub pcp: u8,
    /// As [`Record::payload_len`] and [`Record::reth_len`].
    pub payload_len: u16,
    pub reth_len: u32,
}

const _: () = assert!(core::mem::size_of::<CompactRecord>() == 32);
// No implicit padding: the fields end where the record does.
const _: () = assert!(core::mem::offset_of!(CompactRecord, reth_len) + 4 == core::mem::size_of::<CompactRecord>());
// The words `CompactRecord::fill` builds: the fields' offsets, on a little-endian target.
const _: () = {
    use core::mem::offset_of;
    assert!(cfg!(target_endian = "little"));
    assert!(offset_of!(CompactRecord, flow) == 8 && offset_of!(CompactRecord, frame_len) == 12);
    assert!(offset_of!(CompactRecord, psn) == 16 && offset_of!(CompactRecord, opcode) == 20);
    assert!(offset_of!(CompactRecord, ecn) == 21 && offset_of!(CompactRecord, dscp) == 22);
    assert!(offset_of!(CompactRecord, flags) == 23 && offset_of!(CompactRecord, aeth_syndrome) == 24);
    assert!(offset_of!(CompactRecord, pcp) == 25 && offset_of!(CompactRecord, payload_len) == 26);
    assert!(offset_of!(CompactRecord, reth_len) == 28);
};

impl CompactRecord {
    /// Fills `*dst` from a summary (ring or log memory in the XDP program) as four 8-byte
    /// stores of words built in registers: field by field it was eleven stores and a call to a
    /// byte loop for the padding. The words are the little-endian layout of the fields (the
    /// BPF target and the hosts this runs on are little-endian; asserted below).
    ///
    /// # Safety
    /// `dst` must be valid for writes of one `CompactRecord`, 8-byte aligned.
    #[inline(always)]
    pub unsafe fn fill(dst: *mut CompactRecord, ts_ns: u64, flow: u32, s: &PacketSummary) {
        let w = dst as *mut u64;
        let ids = flow as u64 | (s.frame_len as u64) << 32;
        let psn = s.psn as u64
            | (s.opcode as u64) << 32
            | (s.ecn as u64) << 40
            | (s.dscp as u64) << 48
            | (flag::of(s) as u64) << 56;
        let tail = s.aeth_syndrome as u64
            | (crate::summary::pcp_of(s) as u64) << 8
            | (payload_of(s) as u64) << 16
            | (reth_of(s) as u64) << 32;
        // SAFETY: the caller guarantees `dst`: four words, the record's 32 bytes.
        unsafe {
            core::ptr::write_volatile(w, ts_ns);
            core::ptr::write_volatile(w.add(1), ids);
            core::ptr::write_volatile(w.add(2), psn);
            core::ptr::write_volatile(w.add(3), tail);
        }
    }

    /// The record of a frame of flow `flow`.
    #[inline]
    pub fn from_summary(ts_ns: u64, flow: u32, s: &PacketSummary) -> Self {
        let mut r = CompactRecord::default();
        // SAFETY: `r` is a valid CompactRecord.
        unsafe { CompactRecord::fill(&mut r, ts_ns, flow, s) };
        r
    }

    /// A record's fields, under the id `flow` (the agent names a record the kernel could not
    /// give a flow entry by an id of its own).
    #[inline]
    pub fn of(r: &Record, flow: u32) -> Self {
        CompactRecord {
            ts_ns: r.ts_ns,
            flow,
            frame_len: r.frame_len,
            psn: r.psn,
            opcode: r.opcode,
            ecn: r.ecn,
            dscp: r.dscp,
            flags: r.flags,
            aeth_syndrome: r.aeth_syndrome,
            pcp: r.pcp,
            payload_len: r.payload_len,
            reth_len: r.reth_len,
        }
    }

    /// The whole record, with the key of the flow it names.
    #[inline]
    pub fn expand(&self, key: &FlowKey) -> Record {
        Record {
            ts_ns: self.ts_ns,
            src_ip: key.src,
            dst_ip: key.dst,
            frame_len: self.frame_len,
            dst_qp: key.dst_qp,
            psn: self.psn,
            udp_sport: key.udp_sport,
            opcode: self.opcode,
            ecn: self.ecn,
            dscp: self.dscp,
            flags: self.flags,
            aeth_syndrome: self.aeth_syndrome,
            ip_version: key.ip_version,
            pcp: self.pcp,
            _pad: 0,
            payload_len: self.payload_len,
            reth_len: self.reth_len,
            _pad2: [0; 4],
        }
    }
}

#[cfg(feature = "user")]
// SAFETY: repr(C), integers only, no implicit padding (asserted above).
unsafe impl aya::Pod for CompactRecord {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_the_summary_fields() {
        let mut s = PacketSummary::zeroed();
        s.src_ip[..4].copy_from_slice(&[10, 0, 0, 1]);
        s.dst_ip[..4].copy_from_slice(&[10, 0, 0, 2]);
        s.ip_version = 4;
        s.roce_version = 2;
        s.udp_sport = 0xC001;
        s.dst_qp = 0x123;
        s.psn = 77;
        s.opcode = 0x11;
        s.ext = crate::opcode::ext::AETH;
        s.aeth_syndrome = 0x60;
        s.ecn = 3;
        s.frame_len = 62;
        let r = Record::from_summary(5, &s);
        assert_eq!(r.flow(), FlowKey::from_summary(&s));
        assert_eq!((r.ts_ns, r.psn, r.aeth(), r.ack_req(), r.ce(), r.frame_len), (5, 77, Some(0x60), false, true, 62));
        s.roce_version = 1;
        assert_eq!(Record::from_summary(5, &s).udp_sport, 0);
    }

    /// The compact record the kernel writes, expanded with its flow's key, is the record the
    /// host builds from the same summary; and a record re-named by the agent expands back.
    #[test]
    fn a_compact_record_expands_to_the_hosts_record() {
        let mut s = PacketSummary::zeroed();
        s.src_ip = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        s.dst_ip = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        s.ip_version = 6;
        s.roce_version = 2;
        s.udp_sport = 0xC002;
        s.dst_qp = 0xabcdef;
        s.psn = 0xfffffe;
        s.opcode = 0x0a;
        s.ack_req = 1;
        s.ext = crate::opcode::ext::AETH;
        s.aeth_syndrome = 0x1f;
        s.ecn = 2;
        s.dscp = 26;
        s.vlan_tags = 1;
        s.pcp = 3;
        s.frame_len = 4154;
        for version in [2, 1] {
            s.roce_version = version;
            let c = CompactRecord::from_summary(9, 77, &s);
            assert_eq!(c.flow, 77);
            let want = Record::from_summary(9, &s);
            assert_eq!(c.expand(&FlowKey::from_summary(&s)), want, "RoCE v{version}");
            assert_eq!(CompactRecord::of(&want, 5).expand(&want.flow()), want);
            // Filled in place over other bytes (as a lapped log slot is), every byte is written:
            // the fields' words and the zero padding.
            let mut slot = [u64::MAX; 4];
            // SAFETY: four aligned words are one CompactRecord's bytes.
            let filled = unsafe {
                CompactRecord::fill(slot.as_mut_ptr() as *mut CompactRecord, 9, 77, &s);
                *(slot.as_ptr() as *const CompactRecord)
            };
            assert_eq!(filled, CompactRecord::of(&want, 77), "RoCE v{version}");
        }
    }
}
