//! Flow identity: (source IP, destination IP, UDP source port, destination QP).

use crate::PacketSummary;

/// Key of a RoCE flow. IPv4 addresses sit in the first four bytes with the rest zero, so a key
/// is the same whether built in the kernel or on the host.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FlowKey {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub dst_qp: u32,
    pub udp_sport: u16,
    /// 4 or 6 (RoCE v1 GIDs count as 6; their `udp_sport` is 0).
    pub ip_version: u8,
    pub _pad: u8,
}

const _: () = assert!(core::mem::size_of::<FlowKey>() == 40);

impl FlowKey {
    #[inline(always)]
    pub fn from_summary(s: &PacketSummary) -> Self {
        FlowKey {
            src: s.src_ip,
            dst: s.dst_ip,
            dst_qp: s.dst_qp,
            udp_sport: if s.roce_version == 2 { s.udp_sport } else { 0 },
            ip_version: s.ip_version,
            _pad: 0,
        }
    }
}

#[cfg(feature = "user")]
// SAFETY: repr(C), integers only, no implicit padding (size asserted above).
unsafe impl aya::Pod for FlowKey {}
