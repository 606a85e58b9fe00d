//! The classifier never panics, whatever the bytes and the claimed wire length.

use analyzer_common::{FrameClass, PacketSummary, classify};
use proptest::prelude::*;

/// A valid RoCE v2 frame to mutate (Ethernet / IPv4 / UDP 4791 / RC SEND ONLY).
fn seed() -> Vec<u8> {
    let mut f = vec![
        2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0x68, 0, 52, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1,
        10, 0, 0, 2, 0xC0, 0, 0x12, 0xB7, 0, 32, 0, 0,
    ];
    f.extend_from_slice(&[0x04, 0, 0xFF, 0xFF, 0, 0, 1, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0xAB; 8]);
    f.extend_from_slice(&[0; 4]);
    f
}

#[test]
fn seed_is_roce() {
    let f = seed();
    let mut s = PacketSummary::zeroed();
    assert_eq!(classify(&f[..], f.len() as u32, &mut s), FrameClass::Roce);
    assert_eq!(s.payload_len, 8);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400), extra in 0u32..70000) {
        let mut s = PacketSummary::zeroed();
        let c = classify(&bytes[..], bytes.len() as u32 + extra, &mut s);
        prop_assert_eq!(s.class, c as u8);
    }

    #[test]
    fn mutated_valid_frames(flips in proptest::collection::vec((0usize..66, any::<u8>()), 1..6), cut in 0usize..67) {
        let mut f = seed();
        for (at, v) in flips {
            f[at] = v;
        }
        let mut s = PacketSummary::zeroed();
        let c = classify(&f[..cut.min(f.len())], f.len() as u32, &mut s);
        prop_assert!((c as usize) < FrameClass::COUNT);
        prop_assert_eq!(s.class, c as u8);
    }
}
