//! Frame builders: RoCE v1/v2 (every opcode with the extended headers the IBTA table puts
//! after it), PFC and 802.3x PAUSE, plain UDP, and GRE/ERSPAN mirror copies.

use analyzer_common::opcode::{self, ext as x};
use analyzer_common::wire::ethernet::{self, ethertype, vlan};
use analyzer_common::wire::{bth, ext, gre, ipv4, ipv6, mac_control, udp};

/// The minimum Ethernet frame without FCS; shorter frames are zero-padded, as NICs do.
pub const MIN_FRAME: usize = 60;

/// A VLAN tag: TPID (0x8100, 0x88A8), PCP and VID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vlan {
    pub tpid: u16,
    pub pcp: u8,
    pub vid: u16,
}

impl Vlan {
    pub fn dot1q(pcp: u8, vid: u16) -> Self {
        Vlan { tpid: ethertype::VLAN, pcp, vid }
    }
    pub fn qinq(pcp: u8, vid: u16) -> Self {
        Vlan { tpid: ethertype::QINQ, pcp, vid }
    }
}

/// A CM MAD (REQ or REP) from `src` to `dst`: a RoCE v2 UD SEND ONLY to QP 1 carrying a
/// 256-byte MAD with `cm`'s fields.
pub fn cm_mad(src: [u8; 4], dst: [u8; 4], cm: &analyzer_common::wire::cm::Repr) -> Vec<u8> {
    const MAD: usize = 256;
    let mut r = Roce::v4(src, dst, 0xC0C0, 0x64, analyzer_common::wire::cm::CM_QP, 0);
    r.ext.deth = ext::Deth { qkey: 0x8001_0000, src_qp: 1 };
    r.payload_len = MAD;
    let mut f = r.build();
    let at = f.len() - ext::ICRC_LEN - MAD;
    f[at..at + MAD].fill(0);
    cm.emit(&mut f[at..at + MAD]);
    f
}

/// Builds an Ethernet frame: header, VLAN tags, payload, zero padding to 60 bytes.
pub fn ethernet(src: [u8; 6], dst: [u8; 6], vlans: &[Vlan], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let hdr = 14 + 4 * vlans.len();
    let mut f = vec![0u8; (hdr + payload.len()).max(MIN_FRAME)];
    let first = vlans.first().map_or(ethertype, |v| v.tpid);
    ethernet::Repr { dst, src, ethertype: first }.emit(&mut f);
    for (i, v) in vlans.iter().enumerate() {
        let next = vlans.get(i + 1).map_or(ethertype, |n| n.tpid);
        vlan::Repr { pcp: v.pcp, vid: v.vid, ethertype: next }.emit(&mut f[14 + 4 * i..]);
    }
    f[hdr..hdr + payload.len()].copy_from_slice(payload);
    f
}

/// Source and destination addresses of an IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpAddrs {
    V4([u8; 4], [u8; 4]),
    V6([u8; 16], [u8; 16]),
}

/// Values of the extended headers; each is emitted only when the opcode carries it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ext {
    pub rdeth_ee: u32,
    pub deth: ext::Deth,
    pub xrc_srq: u32,
    pub feth: u32,
    pub reth: ext::Reth,
    pub atomic: ext::AtomicEth,
    pub aeth: ext::Aeth,
    pub atomic_ack: u64,
    pub immdt: u32,
    pub ieth: u32,
}

/// A RoCE packet. `build` gives RoCE v2 (UDP 4791) over IPv4/IPv6, `build_v1` RoCE v1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roce {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub vlans: Vec<Vlan>,
    pub ip: IpAddrs,
    pub dscp: u8,
    pub ecn: u8,
    pub ttl: u8,
    pub ident: u16,
    /// Bytes of IPv4 options (multiple of 4).
    pub ip_options: u8,
    pub udp_sport: u16,
    pub udp_dport: u16,
    pub bth: bth::Repr,
    pub ext: Ext,
    /// Payload bytes after the extended headers (pad is added to reach a multiple of 4).
    pub payload_len: usize,
}

impl Roce {
    /// Flow number `i` (below 65536) of a set of distinct flows: a 64-byte RDMA WRITE MIDDLE from
    /// 10.1.x.y (`i`'s bytes) to QP 0x100 + `i` of 10.0.0.2 (kernel memory per flow is
    /// measured and tested with these).
    pub fn numbered(i: u32) -> Self {
        let src = [10, 1, (i >> 8) as u8, i as u8];
        Roce::v4(src, [10, 0, 0, 2], 49152, analyzer_common::opcode::op::RDMA_WRITE_MIDDLE, 0x100 + i, 1).payload(64)
    }

    /// A RoCE v2 packet over IPv4 with DSCP 26 and ECT(0), the usual lossless-class marking.
    pub fn v4(src: [u8; 4], dst: [u8; 4], udp_sport: u16, opcode: u8, dst_qp: u32, psn: u32) -> Self {
        Roce {
            src_mac: [0x02, 0, 0, 0, src[2], src[3]],
            dst_mac: [0x02, 0, 0, 0, dst[2], dst[3]],
            vlans: Vec::new(),
            ip: IpAddrs::V4(src, dst),
            dscp: 26,
            ecn: 2,
            ttl: 64,
            ident: 0,
            ip_options: 0,
            udp_sport,
            udp_dport: udp::ROCE_V2_PORT,
            bth: bth::Repr { opcode, pkey: 0xFFFF, dst_qp, psn, ..Default::default() },
            ext: Ext::default(),
            payload_len: 0,
        }
    }

    /// The same over IPv6.
    pub fn v6(src: [u8; 16], dst: [u8; 16], udp_sport: u16, opcode: u8, dst_qp: u32, psn: u32) -> Self {
        let mut r = Roce::v4([0; 4], [0; 4], udp_sport, opcode, dst_qp, psn);
        r.src_mac = [0x02, 0, 0, 0, src[14], src[15]];
        r.dst_mac = [0x02, 0, 0, 0, dst[14], dst[15]];
        r.ip = IpAddrs::V6(src, dst);
        r
    }

    pub fn payload(mut self, n: usize) -> Self {
        self.payload_len = n;
        self
    }

    /// BTH, extended headers, payload, pad and ICRC (zero: not verified by the analyzer).
    pub fn transport(&self) -> Vec<u8> {
        let mask = opcode::headers(self.bth.opcode);
        let hdrs = 12 + opcode::headers_len(mask);
        let pad = (4 - self.payload_len % 4) % 4;
        let mut t = vec![0u8; hdrs + self.payload_len + pad + ext::ICRC_LEN];
        let mut b = self.bth;
        b.pad_count = pad as u8;
        b.emit(&mut t);
        let e = &self.ext;
        let at = |flag: u16| 12 + opcode::headers_len(mask & (flag - 1));
        if mask & x::RDETH != 0 {
            ext::emit_u24(e.rdeth_ee, &mut t[at(x::RDETH)..]);
        }
        if mask & x::DETH != 0 {
            e.deth.emit(&mut t[at(x::DETH)..]);
        }
        if mask & x::XRCETH != 0 {
            ext::emit_u24(e.xrc_srq, &mut t[at(x::XRCETH)..]);
        }
        if mask & x::FETH != 0 {
            ext::emit_u32(e.feth, &mut t[at(x::FETH)..]);
        }
        if mask & x::RETH != 0 {
            e.reth.emit(&mut t[at(x::RETH)..]);
        }
        if mask & x::ATOMIC_ETH != 0 {
            e.atomic.emit(&mut t[at(x::ATOMIC_ETH)..]);
        }
        if mask & x::AETH != 0 {
            e.aeth.emit(&mut t[at(x::AETH)..]);
        }
        if mask & x::ATOMIC_ACK_ETH != 0 {
            ext::emit_atomic_ack(e.atomic_ack, &mut t[at(x::ATOMIC_ACK_ETH)..]);
        }
        if mask & x::IMMDT != 0 {
            ext::emit_u32(e.immdt, &mut t[at(x::IMMDT)..]);
        }
        if mask & x::IETH != 0 {
            ext::emit_u32(e.ieth, &mut t[at(x::IETH)..]);
        }
        for (i, byte) in t[hdrs..hdrs + self.payload_len].iter_mut().enumerate() {
            *byte = i as u8;
        }
        t
    }

    /// The RoCE v2 frame.
    pub fn build(&self) -> Vec<u8> {
        let t = self.transport();
        let mut u = vec![0u8; 8 + t.len()];
        udp::Repr { src_port: self.udp_sport, dst_port: self.udp_dport, payload_len: t.len() as u16, checksum: 0 }
            .emit(&mut u);
        u[8..].copy_from_slice(&t);
        self.ip_packet(ipv4::protocol::UDP, &u)
    }

    /// The RoCE v1 frame: GRH (with the IPv6 addresses as GIDs, IPv4 ones mapped) + transport.
    pub fn build_v1(&self) -> Vec<u8> {
        let t = self.transport();
        let (src, dst) = match self.ip {
            IpAddrs::V6(s, d) => (s, d),
            IpAddrs::V4(s, d) => (v4_mapped(s), v4_mapped(d)),
        };
        let mut p = vec![0u8; 40 + t.len()];
        ipv6::Repr {
            src,
            dst,
            next_header: ipv6::NEXT_HEADER_IB_BTH,
            dscp: self.dscp,
            ecn: self.ecn,
            flow_label: 0,
            payload_len: t.len() as u16,
            hop_limit: self.ttl,
        }
        .emit(&mut p);
        p[40..].copy_from_slice(&t);
        ethernet(self.src_mac, self.dst_mac, &self.vlans, ethertype::ROCE_V1, &p)
    }

    /// Wraps `l4` (UDP or other) in this packet's IP header and Ethernet framing.
    pub fn ip_packet(&self, protocol: u8, l4: &[u8]) -> Vec<u8> {
        match self.ip {
            IpAddrs::V4(src, dst) => {
                let r = ipv4::Repr {
                    src,
                    dst,
                    protocol,
                    dscp: self.dscp,
                    ecn: self.ecn,
                    ttl: self.ttl,
                    ident: self.ident,
                    payload_len: l4.len() as u16,
                    options_len: self.ip_options,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                };
                let hl = r.header_len();
                let mut p = vec![0u8; hl + l4.len()];
                r.emit(&mut p);
                p[hl..].copy_from_slice(l4);
                ethernet(self.src_mac, self.dst_mac, &self.vlans, ethertype::IPV4, &p)
            }
            IpAddrs::V6(src, dst) => {
                let mut p = vec![0u8; 40 + l4.len()];
                ipv6::Repr {
                    src,
                    dst,
                    next_header: protocol,
                    dscp: self.dscp,
                    ecn: self.ecn,
                    flow_label: 0,
                    payload_len: l4.len() as u16,
                    hop_limit: self.ttl,
                }
                .emit(&mut p);
                p[40..].copy_from_slice(l4);
                if protocol == ipv4::protocol::UDP {
                    let c = udp6_checksum(&src, &dst, &p[40..]);
                    p[46..48].copy_from_slice(&c.to_be_bytes());
                }
                ethernet(self.src_mac, self.dst_mac, &self.vlans, ethertype::IPV6, &p)
            }
        }
    }
}

fn v4_mapped(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xFF;
    g[11] = 0xFF;
    g[12..].copy_from_slice(&a);
    g
}

/// UDP checksum over the IPv6 pseudo-header (mandatory for UDP over IPv6).
fn udp6_checksum(src: &[u8; 16], dst: &[u8; 16], udp: &[u8]) -> u16 {
    let mut buf = Vec::with_capacity(40 + udp.len());
    buf.extend_from_slice(src);
    buf.extend_from_slice(dst);
    buf.extend_from_slice(&(udp.len() as u32).to_be_bytes());
    buf.extend_from_slice(&[0, 0, 0, ipv4::protocol::UDP]);
    buf.extend_from_slice(udp);
    buf[40 + 6] = 0;
    buf[40 + 7] = 0;
    match ipv4::checksum(&buf) {
        0 => 0xFFFF,
        c => c,
    }
}

/// A plain IPv4/UDP frame (not RoCE unless `dport` is 4791).
pub fn udp_ipv4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    let mut u = vec![0u8; 8 + payload_len];
    udp::Repr { src_port: sport, dst_port: dport, payload_len: payload_len as u16, checksum: 0 }.emit(&mut u);
    let mut r = Roce::v4(src, dst, sport, 0, 0, 0);
    r.dscp = 0;
    r.ecn = 0;
    r.ip_packet(ipv4::protocol::UDP, &u)
}

/// An 802.1Qbb PFC frame from `src`.
pub fn pfc(src: [u8; 6], class_enable: u16, quanta: [u16; 8]) -> Vec<u8> {
    let mut p = [0u8; mac_control::PfcRepr::LEN];
    mac_control::PfcRepr { class_enable, quanta }.emit(&mut p);
    ethernet(src, mac_control::MAC_CONTROL_DST, &[], ethertype::MAC_CONTROL, &p)
}

/// An 802.3x PAUSE frame from `src`.
pub fn pause(src: [u8; 6], quanta: u16) -> Vec<u8> {
    let mut p = [0u8; mac_control::PauseRepr::LEN];
    mac_control::PauseRepr { quanta }.emit(&mut p);
    ethernet(src, mac_control::MAC_CONTROL_DST, &[], ethertype::MAC_CONTROL, &p)
}

/// Mirror encapsulations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encap {
    /// GRE, transparent Ethernet bridging.
    GreTeb,
    ErspanI,
    ErspanII,
    /// ERSPAN III; `true` adds the 8-byte platform-specific sub-header.
    ErspanIII(bool),
}

/// Wraps `inner` as a mirror session would: outer Ethernet / IPv4 (10.255.0.1 → 10.255.0.2) /
/// GRE / ERSPAN header / inner frame. `truncate` cuts the inner copy like a mirror session's
/// truncation setting.
pub fn mirror(kind: Encap, inner: &[u8], truncate: Option<usize>) -> Vec<u8> {
    let session = if matches!(kind, Encap::ErspanIII(_)) { 9 } else { 7 };
    mirror_from([10, 255, 0, 1], session, kind, inner, truncate)
}

/// A mirrored copy sent by `origin` (the outer source address), with ERSPAN session `session`
/// for ERSPAN II and III.
pub fn mirror_from(origin: [u8; 4], session: u16, kind: Encap, inner: &[u8], truncate: Option<usize>) -> Vec<u8> {
    let inner = &inner[..truncate.map_or(inner.len(), |n| n.min(inner.len()))];
    let (protocol, seq, hdr): (u16, Option<u32>, Vec<u8>) = match kind {
        Encap::GreTeb => (ethertype::TEB, None, vec![]),
        Encap::ErspanI => (ethertype::ERSPAN_II, None, vec![]),
        Encap::ErspanII => {
            let mut h = vec![0u8; gre::ERSPAN_II_LEN];
            gre::ErspanII { vlan: 0, cos: 0, truncated: truncate.is_some(), session, index: 1 }.emit(&mut h);
            (ethertype::ERSPAN_II, Some(1), h)
        }
        Encap::ErspanIII(o) => {
            let e = gre::ErspanIII {
                session,
                truncated: truncate.is_some(),
                timestamp: 0x1234_5678,
                platform_subheader: o,
                ..Default::default()
            };
            let mut h = vec![0u8; e.header_len()];
            e.emit(&mut h);
            (ethertype::ERSPAN_III, Some(1), h)
        }
    };
    let g = gre::Repr { protocol, key: None, seq };
    let mut l4 = vec![0u8; g.header_len() + hdr.len() + inner.len()];
    g.emit(&mut l4);
    let at = g.header_len();
    l4[at..at + hdr.len()].copy_from_slice(&hdr);
    l4[at + hdr.len()..].copy_from_slice(inner);
    let mut outer = Roce::v4(origin, [10, 255, 0, 2], 0, 0, 0, 0);
    outer.dscp = 0;
    outer.ecn = 0;
    outer.ip_packet(ipv4::protocol::GRE, &l4)
}

#[cfg(test)]
mod roundtrip {
    //! emit → parse: frames built from generated headers classify back to the same fields.

    use super::*;
    use analyzer_common::{FrameClass, PacketSummary, classify, summary::encap};
    use proptest::prelude::*;

    fn defined() -> Vec<u8> {
        (0..=255u8).filter(|o| opcode::is_defined(*o)).collect()
    }

    #[derive(Debug, Clone)]
    struct Case {
        opcode: u8,
        qp: u32,
        psn: u32,
        ack_req: bool,
        se: bool,
        ecn: u8,
        dscp: u8,
        v6: bool,
        v1: bool,
        vlans: Vec<(u8, u16)>,
        payload: usize,
        dma_len: u32,
        syndrome: u8,
        sport: u16,
        mirror: Option<Encap>,
    }

    fn case() -> impl Strategy<Value = Case> {
        let ops = defined();
        (
            (0..ops.len(), 0u32..1 << 24, 0u32..1 << 24, any::<bool>(), any::<bool>(), 0u8..4, 0u8..64),
            (any::<bool>(), prop::bool::weighted(0.15), prop::collection::vec((0u8..8, 0u16..4096), 0..=2)),
            (0usize..300, any::<u32>(), any::<u8>(), any::<u16>(), 0usize..6),
        )
            .prop_map(
                move |(
                    (oi, qp, psn, ack_req, se, ecn, dscp),
                    (v6, v1, vlans),
                    (payload, dma_len, syndrome, sport, m),
                )| Case {
                    opcode: ops[oi],
                    qp,
                    psn,
                    ack_req,
                    se,
                    ecn,
                    dscp,
                    v6,
                    v1,
                    vlans,
                    payload,
                    dma_len,
                    syndrome,
                    sport,
                    mirror: [
                        None,
                        Some(Encap::GreTeb),
                        Some(Encap::ErspanI),
                        Some(Encap::ErspanII),
                        Some(Encap::ErspanIII(false)),
                        Some(Encap::ErspanIII(true)),
                    ][m],
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn built_frames_parse_back(c in case()) {
            let mut r = if c.v6 {
                let mut a = [0u8; 16]; a[0] = 0xfd; a[15] = 1;
                let mut b = a; b[15] = 2;
                Roce::v6(a, b, c.sport, c.opcode, c.qp, c.psn)
            } else {
                Roce::v4([10, 1, 2, 3], [10, 4, 5, 6], c.sport, c.opcode, c.qp, c.psn)
            };
            r.bth.ack_req = c.ack_req;
            r.bth.se = c.se;
            r.ecn = c.ecn;
            r.dscp = c.dscp;
            r.vlans = c.vlans.iter().enumerate().map(|(i, (p, v))| if i == 0 && c.vlans.len() == 2 { Vlan::qinq(*p, *v) } else { Vlan::dot1q(*p, *v) }).collect();
            r.payload_len = c.payload;
            r.ext.reth.dma_len = c.dma_len;
            r.ext.aeth.syndrome = c.syndrome;
            let inner = if c.v1 { r.build_v1() } else { r.build() };
            let l2 = 14 + 4 * c.vlans.len();
            let l3 = if c.v1 || c.v6 { 40 } else { 20 };
            let unpadded = l2 + l3 + if c.v1 { 0 } else { 8 } + r.transport().len();
            let frame = match c.mirror { Some(k) => mirror(k, &inner, None), None => inner.clone() };
            let mut s = PacketSummary::zeroed();
            let class = classify(&frame[..], frame.len() as u32, &mut s);
            prop_assert_eq!(class, if c.opcode == opcode::CNP { FrameClass::Cnp } else { FrameClass::Roce });
            prop_assert_eq!((s.opcode, s.dst_qp, s.psn), (c.opcode, c.qp, c.psn));
            prop_assert_eq!((s.ack_req != 0, s.bth_flags & 0x80 != 0), (c.ack_req, c.se));
            prop_assert_eq!((s.ecn, s.dscp), (c.ecn, c.dscp));
            prop_assert_eq!(s.vlan_tags as usize, c.vlans.len());
            if let Some((p, v)) = c.vlans.first() {
                prop_assert_eq!((s.pcp, s.vlan_id), (*p, *v));
            }
            prop_assert_eq!(s.roce_version, if c.v1 { 1 } else { 2 });
            if !c.v1 {
                prop_assert_eq!(s.udp_sport, c.sport);
            }
            prop_assert_eq!(s.payload_len as usize, c.payload);
            let mask = opcode::headers(c.opcode);
            prop_assert_eq!((s.ext, s.ext_missing), (mask, 0));
            if mask & opcode::ext::RETH != 0 {
                prop_assert_eq!(s.reth_dma_len, c.dma_len);
            }
            if mask & opcode::ext::AETH != 0 {
                prop_assert_eq!(s.aeth_syndrome, c.syndrome);
            }
            match c.mirror {
                None => prop_assert_eq!((s.frame_len as usize, s.encap), (frame.len(), encap::NONE)),
                Some(_) => prop_assert_eq!(s.frame_len as usize, unpadded),
            }
        }
    }
}
