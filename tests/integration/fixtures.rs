//! The committed captures are what the generator writes, and every frame lands in the class
//! it was built to be.

use analyzer::engine::Engine;
use analyzer::frames::FrameMeta;
use analyzer_common::{FrameClass, PacketSummary};
use tests::fixtures::{self, data_dir, decode_file};

#[test]
fn committed_fixtures_match_the_generator() {
    let tmp = tempfile::tempdir().unwrap();
    let fresh = fixtures::write_all(tmp.path()).unwrap();
    for p in fresh {
        let rel = p.strip_prefix(tmp.path()).unwrap();
        let committed = std::fs::read(data_dir().join(rel))
            .unwrap_or_else(|e| panic!("tests/data/{}: {e}; run `cargo xtask fixtures`", rel.display()));
        assert!(
            committed == std::fs::read(&p).unwrap(),
            "tests/data/{} differs from the generator: run `cargo xtask fixtures`",
            rel.display()
        );
    }
}

#[test]
fn every_frame_lands_in_its_intended_class() {
    for f in fixtures::all() {
        let got = decode_file(&data_dir().join(f.name));
        assert_eq!(got.len(), f.frames.len(), "{}: record count", f.name);
        for (i, (frame, d)) in f.frames.iter().zip(&got).enumerate() {
            assert_eq!(d.summary.class(), frame.class, "{} frame {}: class", f.name, i + 1);
            assert_eq!(d.ts_ns, frame.record.ts_ns, "{} frame {}: timestamp", f.name, i + 1);
            assert_eq!(d.orig_len, frame.record.orig_len, "{} frame {}: original length", f.name, i + 1);
        }
    }
}

#[test]
fn engine_counts_every_frame_exactly_once() {
    for f in fixtures::all() {
        let mut engine = Engine::new();
        let src = engine.add_source("pcap", f.name, f.name);
        for d in decode_file(&data_dir().join(f.name)) {
            engine.observe(FrameMeta { ts_ns: d.ts_ns, source: src }, &d.summary);
        }
        assert_eq!(engine.classes, f.class_counts(), "{}: classes", f.name);
        assert_eq!(engine.frames, f.frames.len() as u64, "{}", f.name);
        let flow_packets: u64 = engine.flows.iter().map(|(_, s)| s.packets).sum();
        let expect = engine.class_count(FrameClass::Roce) + engine.class_count(FrameClass::Cnp);
        assert_eq!(flow_packets, expect, "{}: every RoCE/CNP frame is in exactly one flow", f.name);
    }
}

#[test]
fn snap_length_keeps_headers_that_are_present() {
    let f = fixtures::all().into_iter().find(|f| f.name == "snaplen.pcap").unwrap();
    let sums: Vec<PacketSummary> = decode_file(&data_dir().join(f.name)).iter().map(|d| d.summary).collect();
    // 128-byte cut: the RETH of the WRITE FIRST is decoded; bytes use the original length.
    assert_eq!(sums[0].ext_missing, 0);
    assert_eq!(sums[0].reth_dma_len, fixtures::full(0x06, 0).ext.reth.dma_len);
    assert_eq!(sums[0].frame_len, f.frames[0].record.orig_len);
    assert!(sums[0].frame_len > 4096);
    // 64-byte cut: BTH decoded, RETH cut off and recorded as missing.
    assert_eq!(sums[4].class(), FrameClass::Roce);
    assert_eq!(sums[4].psn, 9);
    assert_eq!(sums[4].ext_missing, analyzer_common::opcode::ext::RETH);
    assert_eq!(sums[4].reth_dma_len, 0);
}

#[test]
fn mirrored_frames_are_analysed_as_the_inner_frame() {
    let sums: Vec<(PacketSummary, u32)> =
        decode_file(&data_dir().join("erspan.pcap")).iter().map(|d| (d.summary, d.orig_len)).collect();
    use analyzer_common::summary::encap;
    let kinds: Vec<u8> = sums.iter().map(|(s, _)| s.encap).collect();
    assert_eq!(
        &kinds[..8],
        &[
            encap::ERSPAN_II,
            encap::ERSPAN_III,
            encap::ERSPAN_III,
            encap::ERSPAN_I,
            encap::GRE_TEB,
            encap::ERSPAN_II,
            encap::ERSPAN_II,
            encap::ERSPAN_III
        ]
    );
    for (s, outer_len) in &sums[..5] {
        assert_eq!(&s.src_ip[..4], &[10, 0, 0, 1], "inner source address");
        assert_eq!((s.pcp, s.vlan_tags), (3, 1), "inner VLAN tag");
        assert!(s.frame_len < *outer_len, "inner length excludes the mirror headers");
    }
    // Truncated mirror copies: the inner IP total length gives the real frame length.
    let full_len = fixtures::full(0x0A, 6).build().len() as u32 + 4;
    assert_eq!(sums[6].0.frame_len, full_len);
    assert_eq!(sums[7].0.frame_len, full_len);
    assert!(sums[6].1 < full_len);
}
