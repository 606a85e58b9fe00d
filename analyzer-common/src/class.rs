//! The class every frame ends in: exactly one, so that nothing is lost without a counter.

/// Where a frame ended up. The discriminants index the per-class counter arrays of the kernel
/// program and the host, so they are stable and dense.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum FrameClass {
    /// RoCE v2 (UDP 4791) or v1 (EtherType 0x8915) with a BTH, any opcode but CNP.
    Roce = 0,
    /// RoCE congestion notification packet (BTH opcode 0x81).
    Cnp = 1,
    /// 802.1Qbb priority flow control frame.
    Pfc = 2,
    /// 802.3x PAUSE frame.
    Pause = 3,
    /// Anything else that parsed cleanly.
    NonRoce = 4,
    /// The captured bytes end before a header needed to classify the frame.
    TruncatedHeader = 5,
    /// IPv4/IPv6 header with a wrong version, IHL < 5, or a length shorter than its header or
    /// longer than the frame.
    BadIpHeader = 6,
    /// UDP length below 8 or beyond the IP payload.
    BadUdpLength = 7,
    /// UDP 4791 datagram too short to hold a BTH.
    ShortBth = 8,
    /// RoCE datagram too short for the extended headers its opcode requires.
    ShortExtHeader = 9,
    /// IPv4 non-first fragment (not parsed: it has no UDP header).
    Fragment = 10,
    /// IPv6 with an extension header before the transport header.
    UnsupportedIpv6Ext = 11,
    /// More than two VLAN tags.
    TooManyVlanTags = 12,
    /// GRE with routing or a version ≠ 0, ERSPAN of an unknown version or frame type, or a
    /// mirror encapsulation nested inside another.
    UnsupportedEncap = 13,
}

impl FrameClass {
    pub const COUNT: usize = 14;

    pub const ALL: [FrameClass; Self::COUNT] = [
        FrameClass::Roce,
        FrameClass::Cnp,
        FrameClass::Pfc,
        FrameClass::Pause,
        FrameClass::NonRoce,
        FrameClass::TruncatedHeader,
        FrameClass::BadIpHeader,
        FrameClass::BadUdpLength,
        FrameClass::ShortBth,
        FrameClass::ShortExtHeader,
        FrameClass::Fragment,
        FrameClass::UnsupportedIpv6Ext,
        FrameClass::TooManyVlanTags,
        FrameClass::UnsupportedEncap,
    ];

    /// The stable name used in reports.
    pub const fn name(self) -> &'static str {
        match self {
            FrameClass::Roce => "roce",
            FrameClass::Cnp => "cnp",
            FrameClass::Pfc => "pfc",
            FrameClass::Pause => "pause",
            FrameClass::NonRoce => "non_roce",
            FrameClass::TruncatedHeader => "truncated_header",
            FrameClass::BadIpHeader => "bad_ip_header",
            FrameClass::BadUdpLength => "bad_udp_length",
            FrameClass::ShortBth => "short_bth",
            FrameClass::ShortExtHeader => "short_ext_header",
            FrameClass::Fragment => "fragment",
            FrameClass::UnsupportedIpv6Ext => "unsupported_ipv6_ext",
            FrameClass::TooManyVlanTags => "too_many_vlan_tags",
            FrameClass::UnsupportedEncap => "unsupported_encap",
        }
    }

    pub const fn from_u8(v: u8) -> Option<FrameClass> {
        if (v as usize) < Self::COUNT { Some(Self::ALL[v as usize]) } else { None }
    }

    /// True for the malformed kinds (everything after `NonRoce`).
    pub const fn is_malformed(self) -> bool {
        self as u8 > FrameClass::NonRoce as u8
    }

    /// True when the frame feeds a flow (RoCE data/ACK or CNP).
    pub const fn is_flow(self) -> bool {
        matches!(self, FrameClass::Roce | FrameClass::Cnp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_named() {
        for (i, c) in FrameClass::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert_eq!(FrameClass::from_u8(i as u8), Some(*c));
        }
        assert_eq!(FrameClass::from_u8(FrameClass::COUNT as u8), None);
        assert!(FrameClass::Fragment.is_malformed() && !FrameClass::NonRoce.is_malformed());
    }
}
