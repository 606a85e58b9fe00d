//! The timeline record: what the packet-resolution analyses (RTT, incast, CE → CNP timing)
//! need of one RoCE or CNP frame, with its timestamp. The XDP program writes one per frame to
//! a ring buffer; offline, the host builds the same record from the same summary, so both
//! modes feed the analyses identical input.

use crate::PacketSummary;
use crate::flow::FlowKey;

pub mod flag {
    /// BTH AckReq.
    pub const ACK_REQ: u8 = 1 << 0;
    /// The packet carries an AETH (`aeth_syndrome` is valid).
    pub const AETH: u8 = 1 << 1;
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
    pub _pad: [u8; 3],
}

const _: () = assert!(core::mem::size_of::<Record>() == 64);
// No implicit padding: the fields end where the record does.
const _: () = assert!(core::mem::offset_of!(Record, _pad) + 3 == core::mem::size_of::<Record>());

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
        let flags = (s.ack_req & 1) | if s.ext & crate::opcode::ext::AETH != 0 { flag::AETH } else { 0 };
        // SAFETY: the caller guarantees `dst`; the addresses are words 1–4 of a Record.
        unsafe {
            core::ptr::write_volatile(dst as *mut u64, ts_ns);
            write_addresses((dst as *mut u64).add(1), s);
            (*dst).frame_len = s.frame_len;
            (*dst).dst_qp = s.dst_qp;
            (*dst).psn = s.psn;
            (*dst).udp_sport = if s.roce_version == 2 { s.udp_sport } else { 0 };
            (*dst).opcode = s.opcode;
            (*dst).ecn = s.ecn;
            (*dst).dscp = s.dscp;
            (*dst).flags = flags;
            (*dst).aeth_syndrome = s.aeth_syndrome;
            (*dst).ip_version = s.ip_version;
            (*dst).pcp = crate::maps::pcp_of(s);
            (*dst)._pad = [0; 3];
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
}
