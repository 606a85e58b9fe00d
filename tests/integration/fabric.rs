//! Fabric analyses on fixtures built for them (tests/src/fabric.rs): incast episodes, PFC
//! pause time and storms, the congestion tree with its victim, deadlocks, ECMP observed and
//! predicted — each answer stated by hand, the hashes checked against Python's zlib and an
//! independent CRC-32C.

use serde_json::{Value, json};
use tests::fabric::{BURSTS, DATA_FRAME, MS, STORM_FRAMES, US};
use tests::fixtures::{T0, data_dir};
use tests::tools::{require, run};

fn report(args: &[&str]) -> Value {
    let mut a: Vec<String> = vec!["-q".into(), "--json".into(), "-".into()];
    for x in args {
        // Bare fixture names become paths under tests/data.
        a.push(if x.ends_with(".pcap") || x.ends_with(".toml") { resolve(x) } else { x.to_string() });
    }
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = run(&a);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn resolve(x: &str) -> String {
    match x.split_once('=') {
        Some((label, file)) => format!("{label}={}", data_dir().join(file).display()),
        None => data_dir().join(x).display().to_string(),
    }
}

#[test]
fn incast_bursts_with_ce_cnp_and_pfc() {
    let r = report(&["-r", "incast.pcap"]);
    let eps = r["incast"]["episodes"].as_array().unwrap();
    assert_eq!(eps.len(), 3, "three bursts, no episode for the three background senders");
    // In address order.
    let senders: Vec<String> = (1..=16).map(|k| format!("10.0.2.{k}")).collect();
    for (i, e) in eps.iter().enumerate() {
        let t0 = T0 + BURSTS[i];
        // The fourth sender's first packet (t0 + 3 µs) starts it; it ends when the thirteenth
        // sender's last packet (t0 + 12 + 15 µs) leaves the 100 µs window.
        assert_eq!(e["dst"], "10.0.2.100");
        assert_eq!((e["start_ns"].as_u64(), e["end_ns"].as_u64()), (Some(t0 + 3 * US), Some(t0 + 127 * US)));
        assert_eq!(e["peak_senders"], 16);
        assert_eq!(e["senders"], json!(senders));
        // 64 packets in the burst, 3 of them before the start.
        assert_eq!(e["bytes"].as_u64(), Some(61 * DATA_FRAME));
        let gbps = (64 * DATA_FRAME * 8) as f64 / 100_000.0;
        assert!((e["peak_gbps"].as_f64().unwrap() - gbps).abs() < 1e-9, "{}", e["peak_gbps"]);
        assert!((e["peak_link_ratio"].as_f64().unwrap() - gbps / 100.0).abs() < 1e-9);
        assert_eq!((e["ce_packets"].as_u64(), e["cnp_packets"].as_u64()), (Some(16), Some(16)));
        assert_eq!(e["pfc_frames"].as_u64(), Some(if i == 1 { 2 } else { 0 }));
    }
    assert_eq!((r["incast"]["window_ns"].as_u64(), r["incast"]["min_senders"].as_u64()), (Some(100_000), Some(4)));
    // A window longer than the gap between bursts merges them; 17 senders are never reached.
    let r = report(&["-r", "incast.pcap", "--incast-window", "2ms"]);
    assert_eq!(r["incast"]["episodes"].as_array().unwrap().len(), 1);
    let r = report(&["-r", "incast.pcap", "--incast-min-senders", "17"]);
    assert_eq!(r["incast"]["episodes"], json!([]));
    let out = run(&["-q", "-r", &resolve("incast.pcap"), "--fail-on", "incast.episodes>2"]);
    assert_eq!(out.status.code(), Some(4));
}

fn sender<'a>(r: &'a Value, mac: &str, prio: u64) -> &'a Value {
    r["pfc"]["senders"].as_array().unwrap().iter().find(|s| s["mac"] == mac && s["priority"] == prio).unwrap()
}

fn flow_ref(src: u8, dst: u8) -> Value {
    json!({"src": format!("10.0.3.{src}"), "dst": format!("10.0.3.{dst}"), "udp_sport": 0xC400 + match (src, dst) {
        (1, 4) => 0, (2, 4) => 1, (3, 6) => 2, _ => 3 }, "dst_qp": 0x800 + dst as u32})
}

#[test]
fn three_level_cascade_with_a_victim() {
    let dir = tempfile::tempdir().unwrap();
    let dot = dir.path().join("tree.dot");
    let r = report(&["-r", "pfc_cascade.pcap", "--topology", "cascade.toml", "--dot", dot.to_str().unwrap()]);
    // XOFF refreshed every 200 µs (one pause is 335.5 µs at 100G) until the XON at 3 ms.
    for (mac, device, port, paused) in [
        ("02:00:00:12:00:09", "leaf2", "p9", 2 * MS),
        ("02:00:00:21:00:01", "spine1", "p1", 1_800 * US),
        ("02:00:00:11:00:01", "leaf1", "p1", 1_600 * US),
        ("02:00:00:11:00:03", "leaf1", "p3", 1_600 * US),
    ] {
        let s = sender(&r, mac, 3);
        assert_eq!(
            (s["device"].as_str(), s["port"].as_str(), s["paused_ns"].as_u64()),
            (Some(device), Some(port), Some(paused))
        );
    }
    let c = &r["congestion_tree"];
    assert_eq!(c["unresolved"], json!([]));
    assert_eq!(c["deadlocks"], json!([]));
    let trees = c["trees"].as_array().unwrap();
    assert_eq!(trees.len(), 1);
    let t = &trees[0];
    assert_eq!(t["priority"], 3);
    assert_eq!(t["roots"], json!([{"device": "leaf2", "congested_port": "p1", "congested_host": "h4"}]));
    let edge = |from: &str, to: &str, first: u64, paused: u64| json!({"from": from, "to": to, "priority": 3, "first_ns": T0 + first, "paused_ns": paused});
    assert_eq!(
        t["edges"],
        json!([
            edge("leaf1", "h1", 1_400 * US, 1_600 * US),
            edge("leaf1", "h2", 1_400 * US, 1_600 * US),
            edge("leaf1", "h3", 1_400 * US, 1_600 * US),
            edge("leaf2", "spine1", MS, 2 * MS),
            edge("spine1", "leaf1", 1_200 * US, 1_800 * US),
        ])
    );
    assert_eq!(t["contributors"], json!([flow_ref(1, 4), flow_ref(2, 4)]));
    assert_eq!(t["victims"], json!([flow_ref(3, 6)]), "h3 → h6 is blocked behind the congestion toward h4");
    let dot = std::fs::read_to_string(&dot).unwrap();
    assert!(dot.starts_with("digraph congestion {") && dot.trim_end().ends_with('}'), "{dot}");
    for want in [
        "\"leaf2\" -> \"spine1\" [label=\"pauses (prio 3) 2.000 ms\"]",
        "congested egress p1 → h4",
        "\"spine1\" -> \"leaf1\"",
    ] {
        assert!(dot.contains(want), "{want} missing in\n{dot}");
    }
    // Without a topology the senders stay MACs and the report says what it could not resolve.
    let r = report(&["-r", "pfc_cascade.pcap"]);
    assert_eq!(r["congestion_tree"]["unresolved"].as_array().unwrap().len(), 5);
    assert_eq!(r["congestion_tree"]["trees"][0]["edges"], json!([]));
    assert!(r["visibility"].as_array().unwrap().iter().any(|n| n["code"] == "pfc_unplaced"));
    assert_eq!(sender(&r, "02:00:00:12:00:09", 3)["device"], Value::Null);
}

#[test]
fn host_nic_pause_storm_among_short_pauses() {
    let r = report(&["-r", "pfc_storm.pcap"]);
    // 500 XOFFs 300 µs apart: one interval from the first to the last plus one full pause.
    let storm_ns = (STORM_FRAMES - 1) * 300 * US + 335_539;
    assert_eq!(
        r["pfc"]["storms"],
        json!([{"mac": "02:00:00:00:04:07", "device": null, "priority": 3, "start_ns": T0, "duration_ns": storm_ns}])
    );
    assert_eq!(sender(&r, "02:00:00:00:04:07", 3)["paused_ns"].as_u64(), Some(storm_ns));
    // 20 isolated pauses of 1000 quanta: 5120 ns each at 100G, 20480 ns at 25G.
    assert_eq!(sender(&r, "02:00:00:30:00:01", 3)["paused_ns"].as_u64(), Some(20 * 5_120));
    let p = &r["pfc"]["pause_senders"][0];
    assert_eq!((p["mac"].as_str(), p["paused_ns"].as_u64()), (Some("02:00:00:31:00:01"), Some(4 * 512)));
    let r = report(&["-r", "pfc_storm.pcap", "--link-speed", "25G", "--pfc-storm", "200ms"]);
    assert_eq!(sender(&r, "02:00:00:30:00:01", 3)["paused_ns"].as_u64(), Some(20 * 20_480));
    assert_eq!(r["pfc"]["storms"], json!([]), "150 ms is below a 200 ms threshold");
    assert_eq!(r["pfc"]["link_speed_bps"].as_u64(), Some(25_000_000_000));
}

#[test]
fn pause_cycle_is_a_deadlock_and_a_chain_is_not() {
    let r = report(&["-r", "pfc_deadlock.pcap", "--topology", "ring.toml"]);
    let c = &r["congestion_tree"];
    assert_eq!(
        c["deadlocks"],
        json!([{
            "priority": 3,
            "cycle": ["sw1", "sw2", "sw3"],
            "start_ns": T0 + 1_200 * US,
            "duration_ns": 28_800 * US,
            "devices": ["sw1", "sw2", "sw3"],
            "links": [["sw1", "sw2"], ["sw2", "sw3"], ["sw3", "sw1"]]
        }])
    );
    let tree = |p: u64| c["trees"].as_array().unwrap().iter().find(|t| t["priority"] == p).unwrap().clone();
    assert_eq!(tree(3)["roots"], json!([]), "in a cycle everybody is paused");
    assert_eq!(tree(4)["roots"], json!([{"device": "sw4", "congested_port": null, "congested_host": null}]));
    let e4: Vec<(String, String)> = tree(4)["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["from"].as_str().unwrap().into(), e["to"].as_str().unwrap().into()))
        .collect();
    assert_eq!(e4, vec![("sw4".into(), "sw5".into()), ("sw5".into(), "sw6".into())]);
    // The priority-5 ring is all active together for 5 ms only: a deadlock only below 5 ms.
    let r = report(&["-r", "pfc_deadlock.pcap", "--topology", "ring.toml", "--deadlock-min", "4ms"]);
    let d: Vec<(u64, u64)> = r["congestion_tree"]["deadlocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["priority"].as_u64().unwrap(), d["duration_ns"].as_u64().unwrap()))
        .collect();
    assert_eq!(d, vec![(3, 28_800 * US), (5, 5 * MS)]);
}

#[test]
fn uplinks_with_a_skewed_share_and_an_idle_link() {
    let r = report(&["-r", "up1=uplink1.pcap", "-r", "up2=uplink2.pcap", "-r", "up3=uplink3.pcap"]);
    let o = &r["ecmp"]["observed"];
    let b = DATA_FRAME;
    assert_eq!(
        o["by_label"],
        json!({"up1": {"bytes": 70 * b, "flows": 7}, "up2": {"bytes": 35 * b, "flows": 4}, "up3": {"bytes": 0, "flows": 0}})
    );
    // max / mean = 70 / (105 / 3).
    assert_eq!(o["imbalance"].as_f64(), Some(2.0));
    assert_eq!(o["idle"], json!(["up3"]));
    assert_eq!(o["multi_label_flows"], 1);
    assert!(r["ecmp"]["findings"].as_array().unwrap().iter().any(|f| f["code"] == "uplink_imbalance"));
    let out = run(&[
        "-q",
        "-r",
        &resolve("up1=uplink1.pcap"),
        "-r",
        &resolve("up2=uplink2.pcap"),
        "-r",
        &resolve("up3=uplink3.pcap"),
        "--fail-on",
        "ecmp.observed.imbalance>1.5",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Paths of the 64 flows of ecmp_flows.pcap per tier, computed by Python (zlib's crc32 and a
/// bitwise CRC-32C written here).
fn python_paths(tiers: &[(&str, u32, u32, u32)]) -> Vec<Vec<u32>> {
    let py = require("python3");
    let script = r#"
import sys, zlib, json
def crc32c(data, crc):
    crc ^= 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xffffffff
tiers = json.loads(sys.argv[1])
out = []
for i in range(64):
    key = bytes([10, 0, 7, 1, 10, 0, 8, 1, 17]) + (0xC000 + i).to_bytes(2, 'big') + (4791).to_bytes(2, 'big')
    row = []
    for h, fanout, seed, shift in tiers:
        v = zlib.crc32(key, seed) if h == 'crc32' else crc32c(key, seed)
        row.append((v >> shift) % fanout)
    out.append(row)
print(json.dumps(out))
"#;
    let arg = serde_json::to_string(&tiers.iter().map(|t| json!([t.0, t.1, t.2, t.3])).collect::<Vec<_>>()).unwrap();
    let out = std::process::Command::new(py).args(["-c", script, &arg]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn check_prediction(tiers: &[(&str, u32, u32, u32)]) -> Value {
    let mut args = vec!["-r".to_string(), "ecmp_flows.pcap".to_string()];
    for t in tiers {
        args.push("--ecmp-tier".into());
        args.push(format!("{}:{}:{}:{}", t.0, t.1, t.2, t.3));
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = report(&a);
    let p = &r["ecmp"]["predicted"];
    let rows = python_paths(tiers);
    for (i, t) in tiers.iter().enumerate() {
        let mut per = vec![0u64; t.1 as usize];
        for row in &rows {
            per[row[i] as usize] += 1;
        }
        let got: Vec<u64> =
            p["tiers"][i]["per_path"].as_array().unwrap().iter().map(|x| x["flows"].as_u64().unwrap()).collect();
        assert_eq!(got, per, "tier {t:?}: flows per path");
    }
    let combos: std::collections::BTreeSet<&Vec<u32>> = rows.iter().collect();
    assert_eq!(p["combinations_used"].as_u64(), Some(combos.len() as u64));
    p.clone()
}

#[test]
fn tier_configurations_that_polarize_and_that_do_not() {
    // Same CRC, other seed: the second tier's choice follows the first's.
    let p = check_prediction(&[("crc32", 4, 1, 0), ("crc32", 4, 2, 0)]);
    assert_eq!((p["polarized"].as_bool(), p["combinations_total"].as_u64()), (Some(true), Some(16)));
    assert_eq!(p["pairs"][0]["members_mean"].as_f64(), Some(1.0), "one member per branch");
    // Another polynomial on other bits: all 16 combinations.
    let p = check_prediction(&[("crc32", 4, 0, 0), ("crc32c", 4, 0, 8)]);
    assert_eq!((p["polarized"].as_bool(), p["combinations_used"].as_u64()), (Some(false), Some(16)));
    assert_eq!((p["pairs"][0]["members_min"].as_u64(), p["pairs"][0]["idle_ratio"].as_f64()), (Some(4), Some(0.0)));
    // Partial polarization: the same CRC's bits at two tiers of 2 and 4 members. Each
    // second-tier switch uses 2 of its 4 uplinks, 4 of the 8 combinations; 64 flows hashed
    // independently would use 8 (7.99 on average, 8 (1 - (7/8)^64)).
    let p = check_prediction(&[("crc32", 2, 0, 0), ("crc32", 4, 0, 0)]);
    assert_eq!((p["combinations_used"].as_u64(), p["combinations_total"].as_u64()), (Some(4), Some(8)));
    assert!((p["combinations_expected"].as_f64().unwrap() - 8.0 * (1.0 - (7.0f64 / 8.0).powi(64))).abs() < 1e-9);
    assert_eq!(p["polarized"].as_bool(), Some(true), "half the second tier's uplinks idle is polarization");
    let pair = &p["pairs"][0];
    assert_eq!(
        (pair["members_min"].as_u64(), pair["members_mean"].as_f64(), pair["idle_ratio"].as_f64()),
        (Some(2), Some(2.0), Some(0.5))
    );
    // The same fan-outs, decorrelated: every combination, nothing idle.
    let p = check_prediction(&[("crc32", 2, 0, 0), ("crc32c", 4, 0, 8)]);
    assert_eq!(
        (p["polarized"].as_bool(), p["combinations_used"].as_u64(), p["pairs"][0]["idle_ratio"].as_f64()),
        (Some(false), Some(8), Some(0.0))
    );
    let r = report(&["-r", "ecmp_flows.pcap"]);
    assert_eq!(
        (r["ecmp"]["distinct_sports"].as_u64(), r["ecmp"]["sport_entropy_bits"].as_f64()),
        (Some(64), Some(6.0))
    );
    let codes = |r: &Value| -> Vec<String> {
        r["ecmp"]["findings"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap().to_string()).collect()
    };
    assert!(!codes(&r).contains(&"few_source_ports".to_string()), "64 flows, 64 ports");
    // Two QPs of one host pair on one UDP source port: one path for both.
    let r = report(&["-r", "rtt_cm.pcap"]);
    assert!(codes(&r).contains(&"few_source_ports".to_string()), "{:?}", codes(&r));
    let r = report(&["-r", "example.pcap"]);
    assert!(!codes(&r).contains(&"few_source_ports".to_string()), "one flow per host pair");
    assert_eq!(r["ecmp"]["predicted"], Value::Null);
}

#[test]
fn topology_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(data_dir().join("cascade.toml")).unwrap().replace("b = \"h6\"", "b = \"h9\"");
    std::fs::write(&bad, &text).unwrap();
    let line = text.lines().position(|l| l == "b = \"h9\"").unwrap() + 1;
    let out = run(&["-q", "-r", &resolve("pfc_cascade.pcap"), "--topology", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}: line {line}: unknown host \"h9\"", bad.display())), "{err}");
}

#[test]
fn html_page_renders_the_reports_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let json = dir.path().join("report.json");
    let out = run(&[
        "-q",
        "-r",
        &resolve("pfc_cascade.pcap"),
        "-r",
        &resolve("incast.pcap"),
        "-r",
        &resolve("rtt.pcap"),
        "--topology",
        &resolve("cascade.toml"),
        "--ecmp-tier",
        "crc32:4",
        "--html",
        page.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r = tests::tools::read_report(&json);
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing to fetch.
    for banned in ["<script", "<link", "src=", "@import", "url(http"] {
        assert!(!html.contains(banned), "{banned} in the page");
    }
    let url = format!("file://{}", page.display());
    let dom = tests::tools::chromium(&url, &["--dump-dom"]);
    let episodes = r["incast"]["episodes"].as_array().unwrap().len();
    for want in [
        format!("<th>incast episodes</th><td class=\"n\">{episodes}</td>"),
        format!("<th>RTT samples</th><td class=\"n\">{}</td>", r["rtt_ns"]["samples"]),
        "congested egress p1 → h4".to_string(),
        ">spine1</text>".to_string(),
        format!(
            "{} flows, {} B",
            r["ecmp"]["predicted"]["tiers"][0]["per_path"][0]["flows"],
            r["ecmp"]["predicted"]["tiers"][0]["per_path"][0]["bytes"]
        ),
        format!("<td class=\"n\">{}</td>", r["incast"]["episodes"][0]["bytes"]),
        "<svg id=\"incast\"".to_string(),
        "<svg id=\"rtt-histogram\"".to_string(),
    ] {
        assert!(dom.contains(&want), "the rendered page lacks {want:?}");
    }
    the_page_names_what_the_report_holds(&r, &dom);
    the_first_screen_holds_the_diagnosis(&url, dir.path());
    // It renders: the screenshot has ink (coloured bars and boxes) in its upper part.
    let shot = dir.path().join("page.png");
    tests::tools::chromium(&url, &[&format!("--screenshot={}", shot.display())]);
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let coloured = pixels.chunks(px).filter(|p| p[0].abs_diff(p[1]) > 40 || p[1].abs_diff(p[2]) > 40).count();
    assert!(coloured > 2_000, "{coloured} coloured pixels: the page did not render its SVG");
}

/// The sections a person scans, in the order the summary has them, each naming what the
/// report holds: the sources, the flows by bytes (cut at `--top`, 10 by default, the rest
/// counted), transport health, the PFC senders by device:port, the tree's contributors and
/// victims by name, and a contents list linking every section.
fn the_page_names_what_the_report_holds(r: &Value, dom: &str) {
    let at = |s: &str| dom.find(s).unwrap_or_else(|| panic!("{s:?} in the page"));
    let order = [
        "id=\"diagnosis\"",
        "id=\"contents\"",
        "id=\"findings-list\"",
        "id=\"sources\"",
        "id=\"flows\"",
        "id=\"health\"",
        "id=\"pfc\"",
        "id=\"trees\"",
        "id=\"incast-timeline\"",
        "id=\"ecmp\"",
    ];
    for w in order.windows(2) {
        assert!(at(w[0]) < at(w[1]), "{} before {}", w[0], w[1]);
    }
    let nav = &dom[at("id=\"contents\"")..];
    let nav = &nav[..nav.find("</nav>").unwrap()];
    for id in
        ["findings-list", "sources", "flows", "health", "pfc", "trees", "incast-timeline", "ecmp", "dcqcn-reaction"]
    {
        assert!(nav.contains(&format!("href=\"#{id}\"")), "contents link #{id}: {nav}");
    }
    for s in r["capture"]["sources"].as_array().unwrap() {
        assert!(dom.contains(&format!("<td>{}</td>", s["name"].as_str().unwrap())), "source {s}");
    }
    // The flows table: the biggest flow first, ten rows, the rest counted.
    let mut flows: Vec<&Value> = r["flows"].as_array().unwrap().iter().collect();
    flows.sort_by_key(|f| std::cmp::Reverse((f["bytes"].as_u64(), f["packets"].as_u64())));
    let table = &dom[at("id=\"flow-table\"")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(table.matches("<tr>").count(), 1 + 10, "a header and --top rows");
    let first = &table[table.find("</tr>").unwrap()..];
    assert!(first.contains(&format!("<td class=\"n\">{}</td>", flows[0]["bytes"])), "{first}");
    assert!(dom.contains(&format!("… {} more flows (--top 10", flows.len() - 10)), "the rest counted");
    // PFC senders by device:port, with their paused time.
    for s in r["pfc"]["senders"].as_array().unwrap() {
        let place = match (s["device"].as_str(), s["port"].as_str()) {
            (Some(d), Some(p)) => format!("{d}:{p}"),
            _ => "-".into(),
        };
        let row = format!("<tr><td>{}</td><td>{place}</td>", s["mac"].as_str().unwrap());
        assert!(dom.contains(&row), "{row}");
    }
    // The tree's contributors and victims by name.
    let tree = &r["congestion_tree"]["trees"][0];
    for (list, class) in [("contributors", "contributors"), ("victims", "victims")] {
        let named = tree[list].as_array().unwrap();
        assert!(!named.is_empty(), "{list}");
        let ul = &dom[at(&format!("<ul class=\"{class}\">"))..];
        let ul = &ul[..ul.find("</ul>").unwrap()];
        for f in named {
            let label = format!(
                "{} → {} QP {:#x}",
                f["src"].as_str().unwrap(),
                f["dst"].as_str().unwrap(),
                f["dst_qp"].as_u64().unwrap()
            );
            assert!(ul.contains(&label), "{label} in {ul}");
        }
    }
    assert!(dom.contains("id=\"health-table\""), "transport health");
}

/// At 1400 px wide, the first screen (900 px high) holds the diagnosis: its warnings' colour
/// is on it. The pictures of the whole page at that width were looked at too (docs/analyses.md, Pictures).
fn the_first_screen_holds_the_diagnosis(url: &str, dir: &std::path::Path) {
    let shot = dir.join("first-screen.png");
    tests::tools::chromium(url, &["--window-size=1400,900", &format!("--screenshot={}", shot.display())]);
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1400, 900));
    let px = info.color_type.samples();
    // .warning is #a65e00: (166, 94, 0), anti-aliased text lands near it.
    let warning = buf[..info.buffer_size()]
        .chunks(px)
        .filter(|p| p[0].abs_diff(166) < 40 && p[1].abs_diff(94) < 40 && p[2] < 60)
        .count();
    assert!(warning > 500, "{warning} warning-coloured pixels on the first screen: the diagnosis is not on it");
}

#[test]
fn merge_recomputes_ecmp_observed_and_says_what_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for n in 1..=3 {
        let out = dir.path().join(format!("up{n}.json"));
        let input = resolve(&format!("up{n}=uplink{n}.pcap"));
        assert_eq!(run(&["-q", "-r", &input, "--json", out.to_str().unwrap()]).status.code(), Some(0));
        files.push(out.to_str().unwrap().to_string());
    }
    let mut args = vec!["merge"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--json", "-"]);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let together = report(&["-r", "up1=uplink1.pcap", "-r", "up2=uplink2.pcap", "-r", "up3=uplink3.pcap"]);
    assert_eq!(merged["ecmp"]["observed"], together["ecmp"]["observed"], "per-label shares over the union");
    assert_eq!(merged["flows"], together["flows"]);

    // PFC seen at several vantage points: the storm split in two captures (the sender's pause
    // intervals join on time across the split) beside the cascade; merged with the topology,
    // pause times, storms, trees and deadlocks equal one analysis of everything.
    let storm = tests::fabric::storm();
    let half = storm.frames.len() / 2;
    let parts = [
        tests::fixtures::Fixture { name: "storm_a.pcap", frames: storm.frames[..half].to_vec(), ..storm.clone() },
        tests::fixtures::Fixture { name: "storm_b.pcap", frames: storm.frames[half..].to_vec(), ..storm.clone() },
    ];
    let mut inputs = vec![resolve("pfc_cascade.pcap")];
    for p in &parts {
        let f = dir.path().join(p.name);
        std::fs::write(&f, p.bytes()).unwrap();
        inputs.push(f.to_str().unwrap().to_string());
    }
    let topo = resolve("cascade.toml");
    let mut reports = Vec::new();
    for (n, input) in inputs.iter().enumerate() {
        let out = dir.path().join(format!("vantage{n}.json"));
        let code = run(&["-q", "-r", input, "--topology", &topo, "--json", out.to_str().unwrap()]).status.code();
        assert_eq!(code, Some(0));
        reports.push(out.to_str().unwrap().to_string());
    }
    let mut args = vec!["merge", "--topology", &topo];
    args.extend(reports.iter().map(String::as_str));
    args.extend(["--json", "-"]);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut all = vec!["-q", "--topology", &topo, "--json", "-"];
    for i in &inputs {
        all.extend(["-r", i.as_str()]);
    }
    let together: Value = serde_json::from_slice(&run(&all).stdout).unwrap();
    // (A sender several captures saw has no ECN lead in the merge: its onsets need all frames.)
    let no_lead = |v: &Value| {
        let mut p = v["pfc"].clone();
        for s in p["senders"].as_array_mut().unwrap() {
            s.as_object_mut().unwrap().remove("ecn_lead");
        }
        p
    };
    assert_eq!(no_lead(&merged), no_lead(&together), "senders with their joined intervals and pause time, storms");
    assert_eq!(merged["pfc"]["storms"].as_array().unwrap().len(), 1, "one storm across the split");
    assert_eq!(merged["congestion_tree"], together["congestion_tree"]);
    assert!(!merged["visibility"].as_array().unwrap().iter().any(|n| n["code"] == "congestion_tree_not_merged"));
}

/// A `[[vantage]]` ties the capture labelled s2 to the link leaf1 — spine2: the flow it saw
/// took that link, where spine2 paused leaf1, so the flow contributes to the tree rooted at
/// spine2 (congested toward h2). By shortest path alone (spine1, first by name) it would not.
#[test]
fn a_vantage_point_places_a_flow_on_its_link() {
    let tree = |topology: &str| {
        let r = report(&["-r", &format!("s2={}", resolve("via_spine2.pcap")), "--topology", topology]);
        let t = r["congestion_tree"]["trees"][0].clone();
        let qps = |k: &str| t[k].as_array().unwrap().iter().map(|f| f["dst_qp"].as_u64().unwrap()).collect::<Vec<_>>();
        (t["roots"][0]["device"].clone(), qps("contributors"), qps("victims"))
    };
    assert_eq!(tree("two_spines.toml"), (json!("spine2"), vec![], vec![]));
    assert_eq!(tree("two_spines_vantage.toml"), (json!("spine2"), vec![0xB00], vec![]));
}

/// A topology of `n` switches with `links` (switch a's port p{b} to switch b's port p{a}) and a
/// capture in which each (a, b) of `senders` pauses b: a's port toward b sends XOFF on priority
/// 3 every millisecond for 30 ms (at 25 Gbit/s a pause of 65 535 quanta lasts 1.34 ms: the link
/// stays paused); in a directory of its own.
fn pause_graph(n: usize, links: &[(usize, usize)], senders: &[(usize, usize)]) -> (tempfile::TempDir, String, String) {
    let mac = |d: usize, p: usize| [2, 0, (d >> 8) as u8, d as u8, p as u8, 1];
    let mut topo = String::new();
    for d in 0..n {
        let ports: Vec<String> = links
            .iter()
            .flat_map(|&(a, b)| [(a, b), (b, a)])
            .filter(|&(a, _)| a == d)
            .map(|(_, p)| {
                let m = mac(d, p);
                format!("p{p} = \"{}\"", m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"))
            })
            .collect();
        topo.push_str(&format!("[[device]]\nname = \"sw{d}\"\nports = {{ {} }}\n", ports.join(", ")));
    }
    for &(a, b) in links {
        topo.push_str(&format!("[[link]]\na = \"sw{a}:p{b}\"\nb = \"sw{b}:p{a}\"\n"));
    }
    let mut quanta = [0u16; 8];
    quanta[3] = 0xffff;
    let mut records = Vec::new();
    for ms in 0..30u64 {
        for (i, &(a, b)) in senders.iter().enumerate().map(|(i, l)| (i as u64, l)) {
            let f = tests::synth::pfc(mac(a, b), 1 << 3, quanta);
            records.push(tests::synth::pcap::Record::new(T0 + ms * MS + i * 100, f));
        }
    }
    records.sort_by_key(|r| r.ts_ns);
    let dir = tempfile::tempdir().unwrap();
    let (pcap, toml) = (dir.path().join("g.pcap"), dir.path().join("g.toml"));
    std::fs::write(&toml, topo).unwrap();
    let f = std::fs::File::create(&pcap).unwrap();
    let opts = tests::synth::pcap::PcapOptions { nanosecond: true, ..Default::default() };
    tests::synth::pcap::write_pcap(f, opts, &records).unwrap();
    let s = |p: std::path::PathBuf| p.display().to_string();
    (dir, s(pcap), s(toml))
}

/// A full mesh of ten switches all pausing each other is one deadlock of ten devices and 90
/// pause links (the cycle enumeration of 68efab4 listed 1 112 073 and took seconds and a GB);
/// a ring of 65 switches is a deadlock too (the enumeration stopped at 64).
#[test]
fn a_paused_full_mesh_is_one_deadlock_and_a_ring_of_65_is_one() {
    let mesh: Vec<(usize, usize)> = (0..10).flat_map(|a| (a + 1..10).map(move |b| (a, b))).collect();
    let both_ways: Vec<(usize, usize)> = mesh.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).collect();
    let (_dir, pcap, toml) = pause_graph(10, &mesh, &both_ways);
    let r = report(&["-r", &pcap, "--topology", &toml, "--link-speed", "25G"]);
    let d = r["congestion_tree"]["deadlocks"].as_array().unwrap();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["devices"].as_array().unwrap().len(), 10);
    assert_eq!(d[0]["links"].as_array().unwrap().len(), 90);
    assert_eq!(d[0]["cycle"], json!(["sw0", "sw1"]), "the shortest cycle from the first device");
    assert!(r["congestion_tree"].get("deadlocks_omitted").is_none(), "nothing omitted");
    // 30 refreshes 1 ms apart, each pausing 1.34 ms: paused from the first frame pair to the
    // last refresh's end, 29 ms + 1.34 ms less the 100 ns steps between the links' frames.
    let duration = d[0]["duration_ns"].as_u64().unwrap();
    assert!((29 * MS..31 * MS).contains(&duration), "{duration}");

    // A ring pauses one way round: each switch pauses the next.
    let ring: Vec<(usize, usize)> = (0..65).map(|i| (i, (i + 1) % 65)).collect();
    let (_dir, pcap, toml) = pause_graph(65, &ring, &ring);
    let r = report(&["-r", &pcap, "--topology", &toml, "--link-speed", "25G"]);
    let d = r["congestion_tree"]["deadlocks"].as_array().unwrap();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["cycle"].as_array().unwrap().len(), 65);
    assert_eq!(d[0]["links"].as_array().unwrap().len(), 65);
}
