//! The frame classifier: Ethernet (≤ 2 VLAN tags) → MAC control | RoCE v1 | IPv4/IPv6 → UDP →
//! BTH → extended headers, following one GRE/ERSPAN mirror encapsulation.
//!
//! It is generic over [`FrameBytes`], which only copies fixed-size arrays out of the frame at
//! an offset. The host implements it for byte slices; the XDP program implements it with a
//! bounds check against `data_end` that the verifier accepts. Both therefore run this very
//! code, and every frame ends in exactly one [`FrameClass`].

use crate::FrameClass;
use crate::opcode::{self, ext as x};
use crate::summary::{PacketSummary, encap};
use crate::wire::ethernet::{ethertype as et, is_vlan_tpid};
use crate::wire::{self, bth, ext, gre, ipv4, ipv6, mac_control, udp};

/// Every header offset the classifier computes is below this bound (the largest is the RoCE
/// transport start of an ERSPAN III frame with options: well under 300 bytes).
pub const MAX_HEADER_OFFSET: usize = 1024;

/// Read access to a frame's captured bytes.
pub trait FrameBytes {
    /// The `N` bytes at `offset`, or `None` when the capture ends before them.
    fn read<const N: usize>(&self, offset: usize) -> Option<[u8; N]>;

    /// Returns `offset` (always below [`MAX_HEADER_OFFSET`]) unchanged. The kernel
    /// implementation hides the value from the BPF verifier at the points where parse paths
    /// join (after VLAN tags, at the transport header, at an inner frame), so the verifier
    /// explores what follows once for all paths instead of once per path.
    #[inline(always)]
    fn widen(&self, offset: usize) -> usize {
        offset
    }
}

impl FrameBytes for [u8] {
    #[inline(always)]
    fn read<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        let end = offset.checked_add(N)?;
        let s = self.get(offset..end)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Some(a)
    }
}

/// The most VLAN tags followed in one frame.
pub const MAX_VLAN_TAGS: usize = 2;

/// Classifies one frame. `wire_len` is its original length on the wire (≥ captured bytes).
/// `out` is overwritten completely; the class is also returned.
#[inline(always)]
pub fn classify<B: FrameBytes + ?Sized>(b: &B, wire_len: u32, out: &mut PacketSummary) -> FrameClass {
    out.clear();
    out.frame_len = wire_len;
    let class = match parse_frame(b, 0, wire_len, out) {
        Step::Done(c) => c,
        Step::Inner { offset, kind, session } => {
            // The mirrored frame: its own L2..L4, but no further encapsulation. The outer
            // source (who sent the copy) is kept: it names the vantage point.
            let inner_len = wire_len.saturating_sub(offset as u32);
            let keep_encap = kind;
            let origin = out.src_ip;
            out.clear();
            out.frame_len = inner_len;
            out.encap = keep_encap;
            out.origin_ip = origin;
            out.origin_session = session;
            match parse_frame(b, b.widen(offset), inner_len, out) {
                Step::Done(c) => c,
                Step::Inner { .. } => FrameClass::UnsupportedEncap,
            }
        }
    };
    out.class = class as u8;
    class
}

enum Step {
    Done(FrameClass),
    /// A mirror encapsulation: the inner Ethernet frame starts at `offset`.
    Inner {
        offset: usize,
        kind: u8,
        /// ERSPAN session id + 1, or 0.
        session: u16,
    },
}

macro_rules! read_or {
    ($b:expr, $n:literal, $off:expr, $class:expr) => {
        match $b.read::<$n>($off) {
            Some(v) => v,
            None => return Step::Done($class),
        }
    };
}

/// Parses the Ethernet frame at `start`. `frame_len` is the frame's original length; for the
/// outer frame it also bounds the IP length fields. `out.encap != NONE` marks an inner frame.
#[inline(always)]
fn parse_frame<B: FrameBytes + ?Sized>(b: &B, start: usize, frame_len: u32, out: &mut PacketSummary) -> Step {
    const TRUNC: FrameClass = FrameClass::TruncatedHeader;
    let outer = out.encap == encap::NONE;
    let eth = read_or!(b, 14, start, TRUNC);
    let eth = wire::ethernet::Packet::new_unchecked(&eth);
    out.dst_mac = eth.dst();
    out.src_mac = eth.src();
    let mut ethertype = eth.ethertype();
    let mut off = start + 14;
    if is_vlan_tpid(ethertype) {
        let tag = read_or!(b, 4, off, TRUNC);
        let tag = wire::ethernet::vlan::Packet::new_unchecked(&tag);
        out.pcp = tag.pcp();
        out.vlan_id = tag.vid();
        out.vlan_tags = 1;
        ethertype = tag.ethertype();
        off += 4;
        if is_vlan_tpid(ethertype) {
            let tag = read_or!(b, 4, off, TRUNC);
            ethertype = wire::ethernet::vlan::Packet::new_unchecked(&tag).ethertype();
            out.vlan_tags = 2;
            off += 4;
            if is_vlan_tpid(ethertype) {
                return Step::Done(FrameClass::TooManyVlanTags);
            }
        }
    }
    let off = b.widen(off);
    let l2_len = (off - start) as u32;
    match ethertype {
        et::MAC_CONTROL => Step::Done(parse_mac_control(b, off, out)),
        et::ROCE_V1 => parse_grh(b, off, l2_len, outer, out),
        et::IPV4 => parse_ipv4(b, start, off, l2_len, frame_len, outer, out),
        et::IPV6 => parse_ipv6(b, start, off, l2_len, frame_len, outer, out),
        _ => Step::Done(FrameClass::NonRoce),
    }
}

/// RoCE v1: the GRH (an IPv6 header whose next header is the BTH) at `off`.
#[inline(always)]
fn parse_grh<B: FrameBytes + ?Sized>(b: &B, off: usize, l2_len: u32, outer: bool, out: &mut PacketSummary) -> Step {
    const TRUNC: FrameClass = FrameClass::TruncatedHeader;
    let grh = read_or!(b, 40, off, TRUNC);
    let grh = ipv6::Packet::new_unchecked(&grh);
    out.ip_version = 6;
    out.src_ip = grh.src();
    out.dst_ip = grh.dst();
    out.dscp = grh.dscp();
    out.ecn = grh.ecn();
    if grh.next_header() != ipv6::NEXT_HEADER_IB_BTH {
        return Step::Done(FrameClass::NonRoce);
    }
    if !outer {
        out.frame_len = l2_len + 40 + grh.payload_len() as u32;
    }
    out.roce_version = 1;
    Step::Done(parse_bth(b, b.widen(off + 40), grh.payload_len() as usize, out))
}

/// IPv4 at `off` (the frame starting at `start`, `l2_len` bytes of Ethernet and VLAN tags).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn parse_ipv4<B: FrameBytes + ?Sized>(
    b: &B,
    start: usize,
    off: usize,
    l2_len: u32,
    frame_len: u32,
    outer: bool,
    out: &mut PacketSummary,
) -> Step {
    const TRUNC: FrameClass = FrameClass::TruncatedHeader;
    let ip = read_or!(b, 20, off, TRUNC);
    let ip = ipv4::Packet::new_unchecked(&ip);
    let ihl = ip.header_len();
    let total = ip.total_len() as usize;
    if ip.version() != 4 || ihl < 20 || total < ihl {
        return Step::Done(FrameClass::BadIpHeader);
    }
    if (off - start) + total > frame_len as usize {
        // A copy cut short by a truncating mirror session (no original length comes
        // with it): the IP header says how long the frame was.
        out.cut = 1;
    }
    out.ip_version = 4;
    let src = ip.src();
    let dst = ip.dst();
    out.src_ip[..4].copy_from_slice(&src);
    out.dst_ip[..4].copy_from_slice(&dst);
    out.dscp = ip.dscp();
    out.ecn = ip.ecn();
    out.ip_id = ip.ident();
    if !outer || out.cut != 0 {
        out.frame_len = l2_len + total as u32;
    }
    if ip.frag_offset() != 0 {
        return Step::Done(FrameClass::Fragment);
    }
    let more_frags = ip.more_frags();
    l4(b, off + ihl, ip.protocol(), total - ihl, more_frags, outer, out)
}

/// IPv6 at `off`, with a hop-by-hop options header followed.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn parse_ipv6<B: FrameBytes + ?Sized>(
    b: &B,
    start: usize,
    off: usize,
    l2_len: u32,
    frame_len: u32,
    outer: bool,
    out: &mut PacketSummary,
) -> Step {
    const TRUNC: FrameClass = FrameClass::TruncatedHeader;
    let ip = read_or!(b, 40, off, TRUNC);
    let ip = ipv6::Packet::new_unchecked(&ip);
    let payload = ip.payload_len() as usize;
    if ip.version() != 6 {
        return Step::Done(FrameClass::BadIpHeader);
    }
    if (off - start) + 40 + payload > frame_len as usize {
        out.cut = 1;
    }
    out.ip_version = 6;
    out.src_ip = ip.src();
    out.dst_ip = ip.dst();
    out.dscp = ip.dscp();
    out.ecn = ip.ecn();
    if !outer || out.cut != 0 {
        out.frame_len = l2_len + 40 + payload as u32;
    }
    let mut next = ip.next_header();
    let mut at = off + 40;
    let mut rest = payload;
    // A hop-by-hop options header (MLD's router alert, in almost every Linux capture)
    // is followed; other extension headers are counted apart.
    if next == ipv6::HOP_BY_HOP {
        let h = read_or!(b, 2, at, TRUNC);
        let len = (h[1] as usize + 1) * 8;
        if len > rest {
            return Step::Done(FrameClass::BadIpHeader);
        }
        next = h[0];
        at = b.widen(at + len);
        rest -= len;
    }
    if ipv6::is_extension_header(next) {
        return Step::Done(FrameClass::UnsupportedIpv6Ext);
    }
    l4(b, at, next, rest, false, outer, out)
}

/// The transport layer after IP: UDP (maybe RoCE v2) or GRE (maybe a mirror session).
#[inline(always)]
fn l4<B: FrameBytes + ?Sized>(
    b: &B,
    off: usize,
    protocol: u8,
    ip_payload: usize,
    more_frags: bool,
    outer: bool,
    out: &mut PacketSummary,
) -> Step {
    match protocol {
        ipv4::protocol::UDP => {
            let u = read_or!(b, 8, off, FrameClass::TruncatedHeader);
            let u = udp::Packet::new_unchecked(&u);
            let len = u.len() as usize;
            out.udp_sport = u.src_port();
            out.udp_dport = u.dst_port();
            if len < 8 || (len > ip_payload && !more_frags) {
                return Step::Done(FrameClass::BadUdpLength);
            }
            if u.dst_port() != udp::ROCE_V2_PORT {
                return Step::Done(FrameClass::NonRoce);
            }
            out.roce_version = 2;
            Step::Done(parse_bth(b, b.widen(off + 8), len - 8, out))
        }
        ipv4::protocol::GRE if outer => parse_gre(b, off),
        ipv4::protocol::GRE => Step::Done(FrameClass::UnsupportedEncap),
        _ => Step::Done(FrameClass::NonRoce),
    }
}

#[inline(always)]
fn parse_gre<B: FrameBytes + ?Sized>(b: &B, off: usize) -> Step {
    const TRUNC: FrameClass = FrameClass::TruncatedHeader;
    let g = read_or!(b, 4, off, TRUNC);
    let g = gre::Packet::new_unchecked(&g);
    let Some(len) = g.header_len() else {
        return Step::Done(FrameClass::UnsupportedEncap);
    };
    let at = off + len;
    match g.protocol() {
        et::TEB => Step::Inner { offset: at, kind: encap::GRE_TEB, session: 0 },
        et::ERSPAN_II if g.flags() & gre::flags::SEQUENCE == 0 => {
            Step::Inner { offset: at, kind: encap::ERSPAN_I, session: 0 }
        }
        et::ERSPAN_II => {
            let h = read_or!(b, 8, at, TRUNC);
            if gre::erspan_version(h[0]) != 1 {
                return Step::Done(FrameClass::UnsupportedEncap);
            }
            let session = gre::ErspanII::parse(&h).session + 1;
            Step::Inner { offset: at + gre::ERSPAN_II_LEN, kind: encap::ERSPAN_II, session }
        }
        et::ERSPAN_III => {
            let h = read_or!(b, 12, at, TRUNC);
            let e = gre::ErspanIII::parse(&h);
            if gre::erspan_version(h[0]) != 2 || e.frame_type != 0 {
                return Step::Done(FrameClass::UnsupportedEncap);
            }
            Step::Inner { offset: at + e.header_len(), kind: encap::ERSPAN_III, session: e.session + 1 }
        }
        _ => Step::Done(FrameClass::NonRoce),
    }
}

#[inline(always)]
fn parse_mac_control<B: FrameBytes + ?Sized>(b: &B, off: usize, out: &mut PacketSummary) -> FrameClass {
    let Some(op) = b.read::<2>(off) else {
        return FrameClass::TruncatedHeader;
    };
    match u16::from_be_bytes(op) {
        mac_control::opcode::PFC => {
            let Some(p) = b.read::<20>(off) else {
                return FrameClass::TruncatedHeader;
            };
            let p = mac_control::Packet::new_unchecked(&p);
            out.pfc_enable = p.class_enable();
            let mut i = 0;
            while i < 8 {
                out.pfc_quanta[i] = p.pfc_quanta(i);
                i += 1;
            }
            FrameClass::Pfc
        }
        mac_control::opcode::PAUSE => {
            let Some(p) = b.read::<4>(off) else {
                return FrameClass::TruncatedHeader;
            };
            out.pfc_quanta[0] = u16::from_be_bytes([p[2], p[3]]);
            FrameClass::Pause
        }
        _ => FrameClass::NonRoce,
    }
}

/// The BTH at `off` and the extended headers of its opcode; `len` is the transport length
/// (UDP payload for v2, GRH payload for v1) including ICRC.
#[inline(always)]
fn parse_bth<B: FrameBytes + ?Sized>(b: &B, off: usize, len: usize, out: &mut PacketSummary) -> FrameClass {
    if len < bth::Packet::<&[u8]>::LEN {
        return FrameClass::ShortBth;
    }
    let Some(h) = b.read::<12>(off) else {
        // RoCE all the same: say so, and how many bytes a capture must keep for its BTH.
        out.bth_cut = 1;
        out.payload_off = (off + 12).min(u16::MAX as usize) as u16;
        return FrameClass::TruncatedHeader;
    };
    let h = bth::Packet::new_unchecked(&h);
    let opc = h.opcode();
    out.opcode = opc;
    out.bth_flags = h.flags();
    out.pkey = h.pkey();
    out.fecn = h.fecn() as u8;
    out.becn = h.becn() as u8;
    out.dst_qp = h.dst_qp();
    out.ack_req = h.ack_req() as u8;
    out.psn = h.psn();
    let layout = opcode::layout(opc);
    let hdrs = 12 + layout.len as usize;
    if layout.defined != 0 && len < hdrs + ext::ICRC_LEN {
        return FrameClass::ShortExtHeader;
    }
    let tail = hdrs + h.pad_count() as usize + ext::ICRC_LEN;
    out.payload_len = if len > tail { (len - tail) as u32 } else { 0 };
    out.payload_off = (off + hdrs) as u16;
    parse_ext(b, off + 12, layout, out);
    if opc == opcode::CNP { FrameClass::Cnp } else { FrameClass::Roce }
}

/// Decodes the extended headers of the opcode's `layout`. Each header's offset is the
/// layout's (not a cursor advanced header by header), so a header the capture cut off does
/// not hide the others' positions; those cut off are recorded in `ext_missing`.
#[inline(always)]
fn parse_ext<B: FrameBytes + ?Sized>(b: &B, base: usize, layout: &opcode::Layout, out: &mut PacketSummary) {
    let mask = layout.mask;
    macro_rules! hdr {
        ($flag:expr, $n:expr, |$a:ident| $body:expr) => {
            if mask & $flag != 0 {
                match b.read::<{ $n }>(base + layout.at[$flag.trailing_zeros() as usize] as usize) {
                    Some($a) => {
                        $body;
                        out.ext |= $flag;
                    }
                    None => out.ext_missing |= $flag,
                }
            }
        };
    }
    hdr!(x::RDETH, ext::RDETH_LEN, |a| out.rdeth_ee = ext::parse_u24(&a));
    hdr!(x::DETH, ext::DETH_LEN, |a| {
        let d = ext::Deth::parse(&a);
        out.deth_qkey = d.qkey;
        out.deth_src_qp = d.src_qp;
    });
    hdr!(x::XRCETH, ext::XRCETH_LEN, |a| out.xrc_srq = ext::parse_u24(&a));
    hdr!(x::FETH, ext::FETH_LEN, |a| out.feth = ext::parse_u32(&a));
    hdr!(x::RETH, ext::RETH_LEN, |a| {
        let r = ext::Reth::parse(&a);
        out.reth_va = r.va;
        out.reth_rkey = r.rkey;
        out.reth_dma_len = r.dma_len;
    });
    hdr!(x::ATOMIC_ETH, ext::ATOMIC_ETH_LEN, |a| {
        let r = ext::AtomicEth::parse(&a);
        out.atomic_va = r.va;
        out.atomic_rkey = r.rkey;
        out.atomic_swap_add = r.swap_add;
        out.atomic_compare = r.compare;
    });
    hdr!(x::AETH, ext::AETH_LEN, |a| {
        let r = ext::Aeth::parse(&a);
        out.aeth_syndrome = r.syndrome;
        out.aeth_msn = r.msn;
    });
    hdr!(x::ATOMIC_ACK_ETH, ext::ATOMIC_ACK_ETH_LEN, |a| out.atomic_ack_orig = ext::parse_atomic_ack(&a));
    hdr!(x::IMMDT, ext::IMMDT_LEN, |a| out.immdt = ext::parse_u32(&a));
    hdr!(x::IETH, ext::IETH_LEN, |a| out.ieth_rkey = ext::parse_u32(&a));
    hdr!(x::CNP_RESERVED, ext::CNP_RESERVED_LEN, |_a| {});
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opcode::ext as x;

    /// Ethernet (one 802.1Q tag, PCP 3) / IPv4 (DSCP 26, CE) / UDP 49152 → 4791 / `transport`.
    fn v2_frame(transport: &[u8], buf: &mut [u8; 256]) -> usize {
        let head: [u8; 46] = [
            0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x81, 0x00, 0x60, 0x64, 0x08, 0x00, // eth + tag
            0x45, 0x6B, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4
            0xC0, 0x00, 0x12, 0xB7, 0, 0, 0, 0, // UDP
        ];
        buf[..46].copy_from_slice(&head);
        buf[46..46 + transport.len()].copy_from_slice(transport);
        let udp_len = (8 + transport.len()) as u16;
        buf[18 + 2..18 + 4].copy_from_slice(&(20 + udp_len).to_be_bytes());
        buf[38 + 4..38 + 6].copy_from_slice(&udp_len.to_be_bytes());
        46 + transport.len()
    }

    fn run(frame: &[u8]) -> PacketSummary {
        let mut s = PacketSummary::zeroed();
        classify(frame, frame.len() as u32, &mut s);
        s
    }

    #[test]
    fn rc_write_only_every_field() {
        let t = [
            0x0A, 0x80, 0xFF, 0xFF, 0x40, 0x00, 0x01, 0x23, 0x80, 0x00, 0x00, 0x07, // BTH
            0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0x42, 0, 0, 0x10, 0, // RETH va 0x1000 rkey 0x42 len 4096
            1, 2, 3, 4, 5, 6, 7, 8, // payload
            0, 0, 0, 0, // ICRC
        ];
        let mut buf = [0u8; 256];
        let n = v2_frame(&t, &mut buf);
        let s = run(&buf[..n]);
        assert_eq!(s.class(), FrameClass::Roce);
        assert_eq!((s.roce_version, s.ip_version, s.vlan_tags, s.pcp, s.vlan_id), (2, 4, 1, 3, 100));
        assert_eq!((&s.src_ip[..4], &s.dst_ip[..4]), (&[10, 0, 0, 1][..], &[10, 0, 0, 2][..]));
        assert_eq!((s.dscp, s.ecn, s.udp_sport, s.udp_dport), (26, 3, 49152, 4791));
        assert_eq!((s.opcode, s.bth_flags, s.pkey, s.fecn, s.becn), (0x0A, 0x80, 0xFFFF, 0, 1));
        assert_eq!((s.dst_qp, s.ack_req, s.psn), (0x123, 1, 7));
        assert_eq!((s.ext, s.ext_missing), (x::RETH, 0));
        assert_eq!((s.reth_va, s.reth_rkey, s.reth_dma_len), (0x1000, 0x42, 4096));
        assert_eq!((s.payload_len, s.frame_len), (8, n as u32));
    }

    #[test]
    fn rd_headers_follow_the_bth_in_ibta_order() {
        // RD RDMA WRITE FIRST: BTH, RDETH (EE 0x44), DETH (Q_Key, src QP 0x33), RETH.
        let mut t = [0u8; 12 + 4 + 8 + 16 + 4];
        t[0] = 0x46;
        t[12..16].copy_from_slice(&[0, 0, 0, 0x44]);
        t[16..24].copy_from_slice(&[0x11, 0x11, 0x11, 0x11, 0, 0, 0, 0x33]);
        t[24 + 12..24 + 16].copy_from_slice(&4096u32.to_be_bytes());
        let mut buf = [0u8; 256];
        let n = v2_frame(&t, &mut buf);
        let s = run(&buf[..n]);
        assert_eq!(s.ext, x::RDETH | x::DETH | x::RETH);
        assert_eq!((s.rdeth_ee, s.deth_qkey, s.deth_src_qp, s.reth_dma_len), (0x44, 0x1111_1111, 0x33, 4096));
    }

    #[test]
    fn xrc_request_carries_xrceth_before_reth() {
        let mut t = [0u8; 12 + 4 + 16 + 4];
        t[0] = 0xAC; // XRC RDMA READ REQUEST
        t[12..16].copy_from_slice(&[0, 0, 0, 0x66]);
        t[16 + 12..16 + 16].copy_from_slice(&12288u32.to_be_bytes());
        let mut buf = [0u8; 256];
        let n = v2_frame(&t, &mut buf);
        let s = run(&buf[..n]);
        assert_eq!((s.ext, s.xrc_srq, s.reth_dma_len), (x::XRCETH | x::RETH, 0x66, 12288));
    }

    #[test]
    fn aeth_atomic_ack_and_cnp() {
        let mut t = [0u8; 12 + 4 + 8 + 4];
        t[0] = 0x12; // RC ATOMIC ACKNOWLEDGE
        t[12..16].copy_from_slice(&[0x60, 0, 0, 9]); // NAK PSN sequence error, MSN 9
        t[16..24].copy_from_slice(&7u64.to_be_bytes());
        let mut buf = [0u8; 256];
        let n = v2_frame(&t, &mut buf);
        let s = run(&buf[..n]);
        assert_eq!((s.aeth_syndrome, s.aeth_msn, s.atomic_ack_orig), (0x60, 9, 7));

        let mut c = [0u8; 12 + 16 + 4];
        c[0] = 0x81;
        c[4] = 0x40;
        let n = v2_frame(&c, &mut buf);
        let s = run(&buf[..n]);
        assert_eq!((s.class(), s.ext, s.payload_len), (FrameClass::Cnp, x::CNP_RESERVED, 0));
        // A CNP without its 16 reserved bytes is too short.
        let n = v2_frame(&c[..16], &mut buf);
        assert_eq!(run(&buf[..n]).class(), FrameClass::ShortExtHeader);
    }

    #[test]
    fn pfc_and_pause() {
        let mut f = [0u8; 60];
        f[..6].copy_from_slice(&crate::wire::mac_control::MAC_CONTROL_DST);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 7, 0xd1]);
        f[12..14].copy_from_slice(&[0x88, 0x08]);
        f[14..18].copy_from_slice(&[0x01, 0x01, 0x00, 0x88]); // PFC, priorities 3 and 7
        f[18 + 6..18 + 8].copy_from_slice(&0xFFFFu16.to_be_bytes());
        f[18 + 14..18 + 16].copy_from_slice(&0x10u16.to_be_bytes());
        let s = run(&f);
        assert_eq!((s.class(), s.pfc_enable, s.src_mac), (FrameClass::Pfc, 0x88, [2, 0, 0, 0, 7, 0xd1]));
        assert_eq!(s.pfc_quanta, [0, 0, 0, 0xFFFF, 0, 0, 0, 0x10]);
        f[14..18].copy_from_slice(&[0x00, 0x01, 0x12, 0x34]);
        let s = run(&f);
        assert_eq!((s.class(), s.pfc_quanta[0]), (FrameClass::Pause, 0x1234));
        assert_eq!(run(&f[..15]).class(), FrameClass::TruncatedHeader);
    }

    #[test]
    fn capture_cut_inside_extended_headers() {
        let t = [0x0Au8; 12 + 16 + 4];
        let mut buf = [0u8; 256];
        let n = v2_frame(&t, &mut buf);
        let mut s = PacketSummary::zeroed();
        // Wire length is the whole frame; only 60 bytes were captured (BTH ends at 58).
        assert_eq!(classify(&buf[..60], n as u32, &mut s), FrameClass::Roce);
        assert_eq!((s.ext, s.ext_missing, s.frame_len), (0, x::RETH, n as u32));
        assert_eq!(classify(&buf[..50], n as u32, &mut s), FrameClass::TruncatedHeader);
    }

    #[test]
    fn unknown_opcode_is_still_roce() {
        let mut t = [0u8; 12 + 4];
        t[0] = 0xC0;
        let mut buf = [0u8; 256];
        let n = v2_frame(&t, &mut buf);
        let s = run(&buf[..n]);
        assert_eq!((s.class(), s.opcode, s.ext), (FrameClass::Roce, 0xC0, 0));
    }
}
