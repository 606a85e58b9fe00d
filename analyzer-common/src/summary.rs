//! The per-frame result of [`crate::classify()`], filled identically by the XDP program and the
//! host. Plain `#[repr(C)]` with explicit padding so it can live in BPF maps and be compared
//! byte for byte between kernel and host.

/// Mirror encapsulation the analysed frame was found in.
pub mod encap {
    pub const NONE: u8 = 0;
    /// GRE with transparent Ethernet bridging (0x6558).
    pub const GRE_TEB: u8 = 1;
    /// ERSPAN type I (GRE 0x88BE without sequence number, no ERSPAN header).
    pub const ERSPAN_I: u8 = 2;
    pub const ERSPAN_II: u8 = 3;
    pub const ERSPAN_III: u8 = 4;
}

/// Everything the analyses need from one frame. For a mirrored frame every field describes
/// the inner (mirrored) frame; `encap` says how it was carried.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketSummary {
    pub reth_va: u64,
    pub atomic_va: u64,
    pub atomic_swap_add: u64,
    pub atomic_compare: u64,
    pub atomic_ack_orig: u64,
    /// Source IP (IPv4 in the first four bytes, the rest zero) or RoCE v1 source GID.
    pub src_ip: [u8; 16],
    pub dst_ip: [u8; 16],
    /// Original length of the analysed frame: the record's original length, or for an
    /// encapsulated copy its L2 header plus the inner IP total length.
    pub frame_len: u32,
    pub dst_qp: u32,
    pub psn: u32,
    pub reth_rkey: u32,
    pub reth_dma_len: u32,
    pub aeth_msn: u32,
    pub immdt: u32,
    pub ieth_rkey: u32,
    pub deth_qkey: u32,
    pub deth_src_qp: u32,
    pub rdeth_ee: u32,
    pub xrc_srq: u32,
    pub atomic_rkey: u32,
    pub feth: u32,
    /// RoCE payload bytes: transport length minus BTH, extended headers, pad and ICRC.
    pub payload_len: u32,
    /// Extended headers decoded ([`crate::opcode::ext`] flags).
    pub ext: u16,
    /// Extended headers the opcode has but the capture cut off (snap length).
    pub ext_missing: u16,
    pub udp_sport: u16,
    pub udp_dport: u16,
    pub pkey: u16,
    /// PFC class-enable vector.
    pub pfc_enable: u16,
    /// PFC quanta per priority; for 802.3x PAUSE, index 0 holds the one quanta value.
    pub pfc_quanta: [u16; 8],
    /// VID of the outer VLAN tag of the analysed frame.
    pub vlan_id: u16,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// [`crate::FrameClass`] as u8.
    pub class: u8,
    /// 4, 6, or 0 when the frame has no IP header (RoCE v1 GIDs count as 6).
    pub ip_version: u8,
    pub dscp: u8,
    pub ecn: u8,
    /// PCP of the outer VLAN tag (0 when untagged; see `vlan_tags`).
    pub pcp: u8,
    pub vlan_tags: u8,
    /// [`encap`] value.
    pub encap: u8,
    /// 1 or 2 for RoCE frames, else 0.
    pub roce_version: u8,
    pub opcode: u8,
    /// BTH byte 1 as on the wire: SE, M, PadCnt, TVer.
    pub bth_flags: u8,
    pub fecn: u8,
    pub becn: u8,
    pub ack_req: u8,
    pub aeth_syndrome: u8,
    /// Offset of the RoCE payload (after the BTH and extended headers) in the frame; for a
    /// frame whose BTH was cut off (`bth_cut`), the bytes a capture must keep to hold it.
    pub payload_off: u16,
    /// 1: a copy cut short (a truncating mirror session): fewer bytes than its IP header
    /// says the frame had; `frame_len` is the length the IP header states.
    pub cut: u8,
    /// 1: a RoCE frame (UDP 4791, or RoCE v1) cut before the end of its BTH (class
    /// `truncated_header`).
    pub bth_cut: u8,
    /// For a mirrored copy (`encap` set): the outer source address, the switch or host that
    /// sent the copy, part of the copy's vantage point.
    pub origin_ip: [u8; 16],
    /// For ERSPAN II/III copies: the session id + 1 (0: no session, as for GRE and ERSPAN I).
    pub origin_session: u16,
    /// The IPv4 identification of the analysed frame (0 for IPv6): part of a frame's identity
    /// across vantage points.
    pub ip_id: u16,
    pub _pad: [u8; 4],
}

const _: () = assert!(core::mem::size_of::<PacketSummary>() == 216);

impl PacketSummary {
    pub const fn zeroed() -> Self {
        // SAFETY: all fields are integers or integer arrays, for which zero is valid.
        unsafe { core::mem::zeroed() }
    }

    /// Zeroes every field with 27 word stores. (A plain `*self = Self::zeroed()` becomes a
    /// 216-byte `memset`, which the BPF backend emits as a byte-at-a-time call: about a
    /// thousand instructions per frame in the XDP program.)
    #[inline(always)]
    pub fn clear(&mut self) {
        const WORDS: usize = core::mem::size_of::<PacketSummary>() / 8;
        let p = self as *mut PacketSummary as *mut u64;
        let mut i = 0;
        while i < WORDS {
            // SAFETY: PacketSummary is 216 bytes, 8-aligned (it has u64 fields), all integers.
            unsafe { core::ptr::write_volatile(p.add(i), 0) };
            i += 1;
        }
    }

    pub fn class(&self) -> crate::FrameClass {
        crate::FrameClass::from_u8(self.class).unwrap_or(crate::FrameClass::NonRoce)
    }

    /// Source address bytes: 4 for IPv4, 16 otherwise.
    pub fn src_addr(&self) -> &[u8] {
        if self.ip_version == 4 { &self.src_ip[..4] } else { &self.src_ip[..] }
    }

    pub fn dst_addr(&self) -> &[u8] {
        if self.ip_version == 4 { &self.dst_ip[..4] } else { &self.dst_ip[..] }
    }
}

#[cfg(feature = "user")]
// SAFETY: repr(C), integer fields only, no implicit padding (size asserted above).
unsafe impl aya::Pod for PacketSummary {}

/// Outer-PCP value meaning "no VLAN tag" in [`crate::maps::FlowCounters::pcp`] and [`crate::maps::ExtraKey`].
pub const UNTAGGED: u8 = 8;

/// Outer-tag PCP of a summary as kept in the maps: 0..7, or [`UNTAGGED`].
#[inline(always)]
pub fn pcp_of(s: &PacketSummary) -> u8 {
    if s.vlan_tags > 0 { s.pcp } else { UNTAGGED }
}
