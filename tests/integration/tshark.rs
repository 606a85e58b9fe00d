//! Differential test against Wireshark's dissectors (tshark, an independent implementation):
//! per frame, the decoded fields; per capture, the flow and PFC aggregates of the report.

use std::collections::BTreeMap;
use std::process::Command;

use analyzer::model::names::opcode_name;
use analyzer_common::opcode::ext;
use analyzer_common::{FrameClass, PacketSummary};
use serde_json::Value;
use tests::fixtures::{self, Fixture, data_dir};
use tests::tools::{TSHARK_FIELDS as FIELDS, require, run, tshark_fields};

/// Where Wireshark 4.0 (Debian 12) cannot serve as the oracle for extended headers, so only
/// the BTH is compared (those headers are covered by byte-array tests in analyzer-common):
/// * FLUSH and ATOMIC WRITE (IBTA 1.5, 0x1C/0x1D): unknown to it, no RETH decoded;
/// * RD (0x40..0x5F): it decodes RDETH/DETH/RETH 8 bytes after where the IBTA (and its own
///   header table: RDETH right after the BTH) puts them;
/// * XRC (0xA0..0xBF): it does not decode the XRCETH or anything after it.
fn tshark_decodes_ext_headers(opcode: u8) -> bool {
    !matches!(opcode, 0x1C | 0x1D | 0x40..=0x5F | 0xA0..=0xBF)
}

type Row = BTreeMap<&'static str, String>;

fn tshark_rows(f: &Fixture) -> Vec<Row> {
    tshark_fields(&data_dir().join(f.name), FIELDS, None)
        .into_iter()
        .map(|row| FIELDS.iter().copied().zip(row).collect())
        .collect()
}

/// The frame's length as the analyzer counts it, from tshark's fields: the length on the wire,
/// but for a copy cut short (its IPv4 total length reaches past the frame) the Ethernet header
/// (and VLAN tag) plus that total length, the frame's length before the cut.
fn counted_len(row: &Row, cooked: u64) -> u64 {
    let len = num(row, "frame.len").unwrap() - cooked;
    match num(row, "ip.len") {
        // Only a whole IPv4 header (tshark decoded its addresses) is taken at its word.
        Some(ip) if !text(row, "ip.dst").is_empty() => len.max(14 + 4 * (!text(row, "vlan.id").is_empty()) as u64 + ip),
        _ => len,
    }
}

fn num(row: &Row, field: &str) -> Option<u64> {
    let v = row.get(field)?.trim();
    if v.is_empty() {
        return None;
    }
    match v {
        "True" => Some(1),
        "False" => Some(0),
        _ => match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        },
    }
}

fn text<'a>(row: &'a Row, field: &str) -> &'a str {
    row.get(field).map_or("", |s| s.as_str())
}

/// tshark's frame.len of a cooked capture includes the SLL header; the analyzer counts the
/// Ethernet frame it stands for (cooked header replaced by 14 bytes of Ethernet).
fn cooked_extra(f: &Fixture) -> u64 {
    use tests::synth::pcap::DataLink;
    match &f.format {
        fixtures::Format::Pcap(o) if o.linktype == DataLink::LINUX_SLL => 16 - 14,
        fixtures::Format::Pcap(o) if o.linktype == DataLink::LINUX_SLL2 => 20 - 14,
        _ => 0,
    }
}

fn summaries(f: &Fixture) -> Vec<PacketSummary> {
    fixtures::decode_file(&data_dir().join(f.name)).iter().map(|d| d.summary).collect()
}

fn addr(s: &PacketSummary, src: bool) -> String {
    let a = if src { s.src_ip } else { s.dst_ip };
    analyzer::model::addr_string(s.ip_version, &a)
}

#[test]
fn every_decoded_field_equals_tshark() {
    let mut compared = 0;
    for f in fixtures::all() {
        let rows = tshark_rows(&f);
        let sums = summaries(&f);
        let cooked = cooked_extra(&f);
        assert_eq!(rows.len(), sums.len(), "{}: frame count", f.name);
        for (i, (row, s)) in rows.iter().zip(&sums).enumerate() {
            let at = format!("{} frame {}", f.name, i + 1);
            if s.encap == 0 {
                assert_eq!(counted_len(row, cooked), s.frame_len as u64, "{at}: frame length");
            }
            match s.class() {
                FrameClass::Roce | FrameClass::Cnp => {
                    compared += 1;
                    assert_eq!(num(row, "infiniband.bth.opcode"), Some(s.opcode as u64), "{at}: opcode");
                    assert_eq!(num(row, "infiniband.bth.destqp"), Some(s.dst_qp as u64), "{at}: dest QP");
                    assert_eq!(num(row, "infiniband.bth.psn"), Some(s.psn as u64), "{at}: PSN");
                    assert_eq!(num(row, "infiniband.bth.a"), Some(s.ack_req as u64), "{at}: AckReq");
                    if tshark_decodes_ext_headers(s.opcode) {
                        let reth = (s.ext & ext::RETH != 0).then_some(s.reth_dma_len as u64);
                        assert_eq!(num(row, "infiniband.reth.dmalen"), reth, "{at}: RETH DMA length");
                        let aeth = (s.ext & ext::AETH != 0).then_some(s.aeth_syndrome as u64);
                        assert_eq!(num(row, "infiniband.aeth.syndrome"), aeth, "{at}: AETH syndrome");
                    }
                    let (src, dst, ecn, dscp) = match (s.roce_version, s.ip_version) {
                        (1, _) => {
                            let tc = num(row, "infiniband.grh.tclass");
                            (
                                text(row, "infiniband.grh.sgid"),
                                text(row, "infiniband.grh.dgid"),
                                tc.map(|t| t & 3),
                                tc.map(|t| t >> 2),
                            )
                        }
                        (_, 4) => (
                            text(row, "ip.src"),
                            text(row, "ip.dst"),
                            num(row, "ip.dsfield.ecn"),
                            num(row, "ip.dsfield.dscp"),
                        ),
                        _ => (
                            text(row, "ipv6.src"),
                            text(row, "ipv6.dst"),
                            num(row, "ipv6.tclass.ecn"),
                            num(row, "ipv6.tclass.dscp"),
                        ),
                    };
                    assert_eq!(src, addr(s, true), "{at}: source");
                    assert_eq!(dst, addr(s, false), "{at}: destination");
                    assert_eq!(ecn, Some(s.ecn as u64), "{at}: ECN");
                    assert_eq!(dscp, Some(s.dscp as u64), "{at}: DSCP");
                    if s.roce_version == 2 {
                        assert_eq!(num(row, "udp.srcport"), Some(s.udp_sport as u64), "{at}: UDP source port");
                    }
                }
                FrameClass::Pfc => {
                    compared += 1;
                    assert_eq!(num(row, "macc.cbfc.enbv"), Some(s.pfc_enable as u64), "{at}: class-enable vector");
                    for p in 0..8 {
                        let field = format!("macc.cbfc.pause_time.c{p}");
                        assert_eq!(num(row, &field), Some(s.pfc_quanta[p] as u64), "{at}: quanta c{p}");
                    }
                    assert_eq!(text(row, "eth.src"), analyzer::model::mac_string(&s.src_mac), "{at}: sender");
                }
                FrameClass::Pause => {
                    compared += 1;
                    assert_eq!(num(row, "macc.pause_time"), Some(s.pfc_quanta[0] as u64), "{at}: quanta");
                    assert_eq!(text(row, "eth.src"), analyzer::model::mac_string(&s.src_mac), "{at}: sender");
                }
                _ => {}
            }
        }
    }
    assert!(compared > 300, "compared {compared} frames");
}

/// The report's flows and PFC senders equal what tshark's per-frame fields add up to.
#[test]
fn report_aggregates_equal_tshark() {
    for f in fixtures::all() {
        if matches!(f.name, "erspan.pcap" | "vantage_erspan.pcap") {
            // Inner frame lengths are not a tshark field (covered per frame above), and copies
            // from several mirror origins count once (stated by hand in the vantage tests).
            continue;
        }
        let rows = tshark_rows(&f);
        let cooked = cooked_extra(&f);
        #[derive(Default, Debug, PartialEq)]
        struct Agg {
            packets: u64,
            bytes: u64,
            opcodes: BTreeMap<String, u64>,
            ecn: [u64; 4],
            dscp: BTreeMap<String, u64>,
            ack_req: u64,
        }
        let mut want: BTreeMap<String, Agg> = BTreeMap::new();
        let mut pfc: BTreeMap<(String, u8), (u64, u64, u64, u64)> = BTreeMap::new();
        for (row, frame) in rows.iter().zip(&f.frames) {
            match frame.class {
                FrameClass::Roce | FrameClass::Cnp => {
                    let (src, dst, ecn, dscp, sport) = if !text(row, "infiniband.grh.sgid").is_empty() {
                        let tc = num(row, "infiniband.grh.tclass").unwrap();
                        (text(row, "infiniband.grh.sgid"), text(row, "infiniband.grh.dgid"), tc & 3, tc >> 2, 0)
                    } else if !text(row, "ip.src").is_empty() {
                        (
                            text(row, "ip.src"),
                            text(row, "ip.dst"),
                            num(row, "ip.dsfield.ecn").unwrap(),
                            num(row, "ip.dsfield.dscp").unwrap(),
                            num(row, "udp.srcport").unwrap(),
                        )
                    } else {
                        (
                            text(row, "ipv6.src"),
                            text(row, "ipv6.dst"),
                            num(row, "ipv6.tclass.ecn").unwrap(),
                            num(row, "ipv6.tclass.dscp").unwrap(),
                            num(row, "udp.srcport").unwrap(),
                        )
                    };
                    let key = format!("{src}>{dst}:{sport}/{}", num(row, "infiniband.bth.destqp").unwrap());
                    let a = want.entry(key).or_default();
                    a.packets += 1;
                    a.bytes += counted_len(row, cooked);
                    *a.opcodes.entry(opcode_name(num(row, "infiniband.bth.opcode").unwrap() as u8)).or_default() += 1;
                    a.ecn[ecn as usize] += 1;
                    *a.dscp.entry(dscp.to_string()).or_default() += 1;
                    a.ack_req += num(row, "infiniband.bth.a").unwrap();
                }
                FrameClass::Pfc => {
                    let enbv = num(row, "macc.cbfc.enbv").unwrap();
                    for p in 0..8u8 {
                        if enbv & (1 << p) != 0 {
                            let q = num(row, &format!("macc.cbfc.pause_time.c{p}")).unwrap();
                            let e = pfc.entry((text(row, "eth.src").to_string(), p)).or_default();
                            e.0 += 1;
                            e.1 += (q > 0) as u64;
                            e.2 += (q == 0) as u64;
                            e.3 += q;
                        }
                    }
                }
                _ => {}
            }
        }
        let out = run(&["-r", data_dir().join(f.name).to_str().unwrap(), "--json", "-"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut got: BTreeMap<String, Agg> = BTreeMap::new();
        for fl in v["flows"].as_array().unwrap() {
            let key = format!(
                "{}>{}:{}/{}",
                fl["src"].as_str().unwrap(),
                fl["dst"].as_str().unwrap(),
                fl["udp_sport"],
                fl["dst_qp"]
            );
            let map =
                |m: &Value| m.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
            let e = &fl["ecn"];
            got.insert(
                key,
                Agg {
                    packets: fl["packets"].as_u64().unwrap(),
                    bytes: fl["bytes"].as_u64().unwrap(),
                    opcodes: map(&fl["opcodes"]),
                    ecn: [
                        e["not_ect"].as_u64().unwrap(),
                        e["ect1"].as_u64().unwrap(),
                        e["ect0"].as_u64().unwrap(),
                        e["ce"].as_u64().unwrap(),
                    ],
                    dscp: map(&fl["dscp"]),
                    ack_req: fl["ack_req"].as_u64().unwrap(),
                },
            );
        }
        assert_eq!(got, want, "{}: flows", f.name);
        let got_pfc: BTreeMap<(String, u8), (u64, u64, u64, u64)> = v["pfc"]["senders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let n = |k: &str| s[k].as_u64().unwrap();
                (
                    (s["mac"].as_str().unwrap().to_string(), n("priority") as u8),
                    (n("frames"), n("xoff"), n("xon"), n("quanta")),
                )
            })
            .collect();
        assert_eq!(got_pfc, pfc, "{}: PFC senders", f.name);
    }
}

/// `--filter` against tshark's display filters on the same captures: the frames analysed are
/// the frames tshark's equivalent filter shows (with PFC and PAUSE frames, which always pass),
/// and with what is left out they make up every frame.
#[test]
fn filter_selects_what_tshark_selects() {
    let tshark = require("tshark");
    let pairs = [
        ("src=10.0.0.1", "ip.src==10.0.0.1"),
        ("dst=10.0.0.2,dscp=26", "ip.dst==10.0.0.2 && ip.dsfield.dscp==26"),
        ("host=10.0.0.0/30", "ip.addr==10.0.0.0/30"),
        ("host=fd00::/16", "ipv6.addr==fd00::/16"),
        ("qp=0x110|0x111", "infiniband.bth.destqp==0x110 || infiniband.bth.destqp==0x111"),
        (
            "dscp=46-48",
            "(ip.dsfield.dscp>=46 && ip.dsfield.dscp<=48) || (ipv6.tclass.dscp>=46 && ipv6.tclass.dscp<=48)",
        ),
        ("vlan=100", "vlan.id==100"),
        ("pcp=3", "vlan.priority==3"),
    ];
    // Single-tagged, unencapsulated captures: tshark's ip/vlan fields match any layer, ours
    // the analysed frame's outer tag and inner headers (vlan.pcap's Q-in-Q is stated below).
    let captures = [
        "example.pcap",
        "ecn_audit.pcap",
        "incast.pcap",
        "ipv6.pcap",
        "gobackn.pcap",
        "rtt.pcap",
        "opcodes.pcap",
        "pfc_storm.pcap",
        "rnr.pcap",
    ];
    let mut selective = 0;
    for (ours, theirs) in pairs {
        for name in captures {
            let path = data_dir().join(name);
            let out = run(&["-q", "-r", path.to_str().unwrap(), "--filter", ours, "--json", "-"]);
            assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
            let r: Value = serde_json::from_slice(&out.stdout).unwrap();
            let (frames, out_) =
                (r["capture"]["frames"].as_u64().unwrap(), r["capture"]["filter"]["frames_out"].as_u64().unwrap());
            let shown = Command::new(&tshark)
                .args(["-n", "-r"])
                .arg(&path)
                .args([
                    "-Y",
                    &format!("({theirs}) || eth.type==0x8808 || vlan.etype==0x8808"),
                    "-T",
                    "fields",
                    "-e",
                    "frame.number",
                ])
                .output()
                .unwrap();
            assert!(shown.status.success(), "{}", String::from_utf8_lossy(&shown.stderr));
            let tshark_frames = String::from_utf8_lossy(&shown.stdout).lines().count() as u64;
            assert_eq!(frames, tshark_frames, "{name}: --filter {ours:?} vs tshark -Y {theirs:?}");
            let all = fixtures::decode_file(&path).len() as u64;
            assert_eq!(frames + out_, all, "{name}: admitted and left out make up every frame");
            selective += (frames > 0 && out_ > 0) as u32;
        }
    }
    assert!(selective >= 12, "the filters select in most captures ({selective})");
    // vlan.pcap by hand: frame 1 tagged 100, frame 2 Q-in-Q with outer tag 200 (inner 100),
    // frame 3 tagged 101, frame 4 a PFC frame (always passes), frame 5 three tags.
    for (expr, want) in [("vlan=100", 2), ("vlan=200", 2), ("vlan=none", 1), ("pcp=6", 2)] {
        let path = data_dir().join("vlan.pcap");
        let out = run(&["-q", "-r", path.to_str().unwrap(), "--filter", expr, "--json", "-"]);
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["capture"]["frames"], want, "vlan.pcap --filter {expr}");
    }
}
