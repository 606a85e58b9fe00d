//! Addresses as the report writes them, and flows' keys and order.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use analyzer_common::flow::FlowKey;

use super::flow::{Flow, FlowRef};

/// A flow's place in the report's order (`flow_order`).
pub type FlowOrder = (u8, [u8; 16], [u8; 16], u16, u32);

/// Flows sort by (IP version, source, destination, UDP source port, destination QP).
pub fn flow_order(k: &FlowKey) -> FlowOrder {
    (k.ip_version, k.src, k.dst, k.udp_sport, k.dst_qp)
}

/// The hash of a flow key for the host's flow tables: the key's 40 bytes as five words, one
/// FxHash step each. Its derived `Hash` costs about twice that (a length prefix and FxHash's
/// byte-string path for each address), and the lookup is on every RoCE frame.
pub fn key_hash(k: &FlowKey) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    k.hash_words(&mut h);
    h.finish()
}

/// An address of a report parsed back into key bytes (IPv4 in the first four).
pub fn addr_bytes(s: &str) -> Option<[u8; 16]> {
    let mut b = [0u8; 16];
    match s.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => b[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => b = a.octets(),
    }
    Some(b)
}

/// An address of a report parsed back as the analyses key it (its bytes, then its IP version).
pub fn addr_of(s: &str) -> Option<([u8; 16], u8)> {
    let v = if s.parse::<Ipv4Addr>().is_ok() { 4 } else { 6 };
    Some((addr_bytes(s)?, v))
}

/// The key of a report's flow (addresses parsed back), or `None` for an unparsable address.
pub fn flow_key(f: &Flow) -> Option<FlowKey> {
    key_of(&f.src, &f.dst, f.dst_qp, f.udp_sport, f.ip_version)
}

/// The key of a report's flow reference (addresses parsed back; the version is the source's),
/// or `None` for an unparsable address.
pub fn flow_ref_key(r: &FlowRef) -> Option<FlowKey> {
    let version = if r.src.parse::<Ipv4Addr>().is_ok() { 4 } else { 6 };
    key_of(&r.src, &r.dst, r.dst_qp, r.udp_sport, version)
}

fn key_of(src: &str, dst: &str, dst_qp: u32, udp_sport: u16, ip_version: u8) -> Option<FlowKey> {
    Some(FlowKey { src: addr_bytes(src)?, dst: addr_bytes(dst)?, dst_qp, udp_sport, ip_version, _pad: 0 })
}

/// The same order as [`flow_order`] for a report's flow.
pub fn flow_sort_key(f: &Flow) -> (u8, [u8; 16], [u8; 16], u16, u32) {
    let bytes = |s: &str| addr_bytes(s).unwrap_or_default();
    (f.ip_version, bytes(&f.src), bytes(&f.dst), f.udp_sport, f.dst_qp)
}

pub fn addr_string(version: u8, bytes: &[u8; 16]) -> String {
    if version == 4 {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])).to_string()
    } else {
        IpAddr::V6(Ipv6Addr::from(*bytes)).to_string()
    }
}

pub fn mac_string(m: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

pub fn flow_ref(k: &FlowKey) -> FlowRef {
    FlowRef {
        src: addr_string(k.ip_version, &k.src),
        dst: addr_string(k.ip_version, &k.dst),
        udp_sport: k.udp_sport,
        dst_qp: k.dst_qp,
    }
}
