//! The frame classifier on arbitrary bytes: it must never panic, and must always put the
//! frame in exactly one class. The same bytes go through the CM MAD and topology parsers. The first two bytes choose the claimed wire length.
#![no_main]

use analyzer_common::{FrameClass, PacketSummary, classify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (extra, frame) = match data {
        [a, b, rest @ ..] => (u16::from_be_bytes([*a, *b]) as u32, rest),
        _ => (0, data),
    };
    let mut s = PacketSummary::zeroed();
    let c = classify(frame, frame.len() as u32 + extra, &mut s);
    assert!((c as usize) < FrameClass::COUNT);
    assert_eq!(s.class, c as u8);
    // The CM parser reads a MAD out of such frames: any bytes, never a panic.
    let _ = analyzer_common::wire::cm::Repr::parse(frame);
    // So does the topology parser with any text.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = analyzer::analyses::topology::Topology::parse(text);
    }
});
