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
    /// Feeds the key to `state` as its five 8-byte words (the host's flow table and the vantage
    /// matching's per-flow map hash it so: one write a word, not the derived hash's byte arrays
    /// with their lengths).
    pub fn hash_words<H: core::hash::Hasher>(&self, state: &mut H) {
        let word = |b: &[u8; 16], half: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[half * 8..half * 8 + 8]);
            u64::from_ne_bytes(w)
        };
        state.write_u64(word(&self.src, 0));
        state.write_u64(word(&self.src, 1));
        state.write_u64(word(&self.dst, 0));
        state.write_u64(word(&self.dst, 1));
        state.write_u64(self.dst_qp as u64 | (self.udp_sport as u64) << 32 | (self.ip_version as u64) << 48);
    }

    #[inline(always)]
    pub fn from_summary(s: &PacketSummary) -> Self {
        FlowKey::new(s.src_ip, s.dst_ip, s.dst_qp, s.udp_sport, s.ip_version, s.roce_version)
    }

    /// The flow of these addresses and destination QP, and of the UDP source port
    /// ([`FlowKey::port`]).
    #[inline(always)]
    pub const fn new(
        src: [u8; 16],
        dst: [u8; 16],
        dst_qp: u32,
        udp_sport: u16,
        ip_version: u8,
        roce_version: u8,
    ) -> Self {
        FlowKey { src, dst, dst_qp, udp_sport: FlowKey::port(udp_sport, roce_version), ip_version, _pad: 0 }
    }

    /// A flow's UDP source port: part of the flow for RoCE v2 only (`roce_version` 2; a v1
    /// frame has no UDP header, its flow's port is 0). Records carry it so too.
    #[inline(always)]
    pub const fn port(udp_sport: u16, roce_version: u8) -> u16 {
        if roce_version == 2 { udp_sport } else { 0 }
    }
}

#[cfg(feature = "user")]
// SAFETY: repr(C), integers only, no implicit padding (size asserted above).
unsafe impl aya::Pod for FlowKey {}
