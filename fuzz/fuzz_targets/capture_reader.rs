//! The pcap/pcapng reader and the frame path behind it on arbitrary files: errors, never
//! panics, and every record it yields is classified.
#![no_main]

use std::path::Path;

use analyzer::capture::pcap::read_stream;
use analyzer::frames;
use analyzer_common::PacketSummary;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut s = PacketSummary::zeroed();
    let mut n = 0u64;
    let r = read_stream(
        data,
        Path::new("fuzz.pcap"),
        |rec| {
            frames::decode(rec.link, rec.data, rec.orig_len, &mut s);
            n += 1;
        },
        |_| {},
    );
    if let Ok(out) = r {
        assert_eq!(out.records, n);
    }
});
