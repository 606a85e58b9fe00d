//! `--evidence DIR`: the pcapng files behind findings, incast episodes, PFC storms and
//! deadlocks, opened with tshark (an independent reader) and compared with the frames tshark
//! itself selects from the original capture by the rule the report states: the named flows
//! and the replies (AETH, CNP) back to their senders, or the PFC frames, within the file's span.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tests::fixtures::data_dir;
use tests::tools::{check_report, require, run};

/// The report of `args` with `--evidence DIR` (a temporary directory, returned with it).
fn with_evidence(args: &[&str]) -> (Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("evidence");
    let mut a: Vec<String> =
        vec!["-q".into(), "--json".into(), "-".into(), "--evidence".into(), ev.display().to_string()];
    for x in args {
        if x.ends_with(".pcap") {
            a.push("-r".into());
        }
        a.push(if x.ends_with(".pcap") || x.ends_with(".toml") { resolve(x) } else { x.to_string() });
    }
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = run(&a);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_report(&v);
    (v, dir)
}

fn resolve(x: &str) -> String {
    match x.split_once('=') {
        Some((label, file)) => format!("{label}={}", data_dir().join(file).display()),
        None => data_dir().join(x).display().to_string(),
    }
}

/// One frame as tshark decodes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Frame {
    ts_ns: u64,
    src: String,
    dst: String,
    dst_qp: Option<u64>,
    opcode: Option<u64>,
    psn: Option<u64>,
    aeth: Option<u64>,
    eth_src: String,
    /// PFC class-enable vector (0 when not PFC); 802.3x PAUSE: 0x100.
    pfc: u64,
    interface: String,
}

const FIELDS: [&str; 12] = [
    "frame.time_epoch",
    "ip.src",
    "ip.dst",
    "infiniband.bth.destqp",
    "infiniband.bth.opcode",
    "infiniband.bth.psn",
    "infiniband.aeth.syndrome",
    "eth.src",
    "macc.opcode",
    "macc.cbfc.enbv",
    "frame.interface_name",
    "frame.len",
];

fn num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// "1795910400.000001000" as nanoseconds, exactly.
fn epoch_ns(s: &str) -> u64 {
    let (sec, frac) = s.split_once('.').unwrap_or((s, "0"));
    let frac = format!("{frac:0<9}");
    sec.parse::<u64>().unwrap() * 1_000_000_000 + frac[..9].parse::<u64>().unwrap()
}

fn tshark(file: &Path) -> Vec<Frame> {
    let mut cmd = Command::new(require("tshark"));
    cmd.args(["-n", "-r"]).arg(file).args(["-T", "fields", "-E", "separator=/t", "-E", "occurrence=l"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark runs");
    assert!(out.status.success(), "tshark on {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            let pfc = match num(c[8]) {
                Some(0x0101) => num(c[9]).unwrap_or(0),
                Some(0x0001) => 0x100,
                _ => 0,
            };
            Frame {
                ts_ns: epoch_ns(c[0]),
                src: c[1].into(),
                dst: c[2].into(),
                dst_qp: num(c[3]),
                opcode: num(c[4]),
                psn: num(c[5]),
                aeth: num(c[6]),
                eth_src: c[7].into(),
                pfc,
                interface: c[10].into(),
            }
        })
        .collect()
}

fn without_interface(mut v: Vec<Frame>) -> Vec<Frame> {
    for f in &mut v {
        f.interface.clear();
    }
    v
}

/// The section comment of a pcapng (capinfos prints it).
fn comment(file: &Path) -> String {
    let out = Command::new(require("capinfos")).arg("-k").arg(file).output().expect("capinfos runs");
    assert!(out.status.success(), "capinfos: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The evidence section's entry for `file`.
fn entry<'a>(r: &'a Value, file: &str) -> &'a Value {
    r["evidence"]["files"].as_array().unwrap().iter().find(|f| f["file"] == file).expect("listed")
}

/// The frames of the original capture a finding's file must hold: its flows, and AETH / CNP
/// frames back from their receivers to their senders, in the file's span, the first
/// `max_frames`.
fn expected_for_flows(original: &[Frame], flows: &[Value], span: (u64, u64), max: usize) -> Vec<Frame> {
    let of = |f: &Frame, x: &Value| {
        (f.src.as_str(), f.dst.as_str(), f.dst_qp)
            == (x["src"].as_str().unwrap(), x["dst"].as_str().unwrap(), x["dst_qp"].as_u64())
    };
    // A named flow that carries AETHs is a reply flow: the requests it answers belong too.
    let replies: Vec<bool> = flows.iter().map(|x| original.iter().any(|f| of(f, x) && f.aeth.is_some())).collect();
    let named = |f: &Frame| {
        flows.iter().zip(&replies).any(|(x, reply)| {
            let (s, d) = (x["src"].as_str().unwrap(), x["dst"].as_str().unwrap());
            of(f, x) || (f.src == d && f.dst == s && (*reply || f.aeth.is_some() || f.opcode == Some(0x81)))
        })
    };
    original.iter().filter(|f| f.ts_ns >= span.0 && f.ts_ns <= span.1 && named(f)).take(max).cloned().collect()
}

fn span(e: &Value) -> (u64, u64) {
    (e["start_ns"].as_u64().unwrap(), e["end_ns"].as_u64().unwrap())
}

/// The first number in `message` after `before`.
fn number_after(message: &str, before: &str) -> u64 {
    let rest = &message[message.find(before).unwrap_or_else(|| panic!("{before:?} in {message:?}")) + before.len()..];
    rest.trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[test]
fn each_finding_file_holds_exactly_the_frames_of_its_flows_and_their_replies() {
    for fixture in ["gobackn.pcap", "ecn_audit.pcap", "rnr.pcap", "reorder.pcap", "cnp_paced.pcap", "dcqcn.pcap"] {
        let (r, dir) = with_evidence(&[fixture]);
        let original = tshark(&data_dir().join(fixture));
        let audit = r["audit"].as_array().unwrap();
        assert!(!audit.is_empty(), "{fixture}: findings to check");
        let max = r["evidence"]["max_frames"].as_u64().unwrap() as usize;
        for f in audit {
            let file = f["evidence"].as_str().unwrap_or_else(|| panic!("{fixture}: {} has a file", f["code"]));
            let path = dir.path().join("evidence").join(file);
            let got = without_interface(tshark(&path));
            let e = entry(&r, file);
            let want = expected_for_flows(&original, f["flows"].as_array().unwrap(), span(e), max);
            assert_eq!(got, want, "{fixture}: {file} holds the frames of {} and their replies", f["code"]);
            assert_eq!(e["frames"].as_u64().unwrap() as usize, got.len(), "{fixture}: {file} counted");
            let c = comment(&path);
            assert!(c.contains(f["code"].as_str().unwrap()) && c.contains(f["message"].as_str().unwrap()), "{c}");
        }
    }
}

#[test]
fn go_back_n_evidence_shows_the_nak_and_the_repeated_psns_the_finding_counts() {
    let (r, dir) = with_evidence(&["gobackn.pcap"]);
    let f = r["audit"].as_array().unwrap().iter().find(|f| f["code"] == "go_back_n").expect("go_back_n");
    let msg = f["message"].as_str().unwrap();
    let frames = tshark(&dir.path().join("evidence").join(f["evidence"].as_str().unwrap()));
    let flow = &f["flows"][0];
    let data: Vec<&Frame> = frames.iter().filter(|x| x.src == flow["src"].as_str().unwrap()).collect();
    // As the receiver sees them: a PSN at or behind the highest one so far is a repeat, one
    // past the next expected skips.
    let (mut high, mut repeats, mut skips) = (None::<u64>, 0, 0);
    for psn in data.iter().map(|x| x.psn.unwrap()) {
        match high {
            Some(h) if psn <= h => repeats += 1,
            Some(h) if psn > h + 1 => skips += 1,
            _ => {}
        }
        high = Some(high.map_or(psn, |h| h.max(psn)));
    }
    assert_eq!(skips, number_after(msg, "NAKs from the receiver: go-back-N retransmission after loss ("), "{msg}");
    // PSN-sequence-error NAKs: AETH syndrome 011x xxxx with NAK code 0.
    let naks = frames.iter().filter(|x| x.aeth == Some(0x60)).count() as u64;
    assert_eq!(repeats, number_after(msg, ""), "{msg}");
    assert_eq!(naks, number_after(msg, "after"), "{msg}");
}

#[test]
fn incast_storm_and_deadlock_files_hold_their_frames() {
    // Incast: RoCE into the destination, its CNPs and the PFC frames, within the episode.
    let (r, dir) = with_evidence(&["incast.pcap"]);
    let original = tshark(&data_dir().join("incast.pcap"));
    let episodes = r["incast"]["episodes"].as_array().unwrap();
    assert!(!episodes.is_empty());
    for e in episodes {
        let file = e["evidence"].as_str().expect("an episode links its file");
        let (a, b) = span(entry(&r, file));
        let d = e["dst"].as_str().unwrap();
        let want: Vec<Frame> = original
            .iter()
            .filter(|f| f.ts_ns >= a && f.ts_ns <= b)
            .filter(|f| {
                (f.dst == d && f.opcode.is_some_and(|o| o != 0x81))
                    || (f.src == d && f.opcode == Some(0x81))
                    || f.pfc != 0
            })
            .cloned()
            .collect();
        assert_eq!(without_interface(tshark(&dir.path().join("evidence").join(file))), want, "{file}");
        // The margin before: 1 ms, or halfway back to the previous episode of the destination.
        let previous = episodes
            .iter()
            .filter_map(|x| x["end_ns"].as_u64())
            .filter(|t| *t <= e["start_ns"].as_u64().unwrap())
            .max();
        let start = e["start_ns"].as_u64().unwrap();
        let want = previous.map_or(1_000_000, |p| ((start - p) / 2).min(1_000_000));
        assert_eq!(start - a, want, "the margin before");
    }
    // A storm: that sender's PFC frames for that priority.
    let (r, dir) = with_evidence(&["pfc_storm.pcap"]);
    let original = tshark(&data_dir().join("pfc_storm.pcap"));
    let s = &r["pfc"]["storms"][0];
    let file = s["evidence"].as_str().expect("the storm links its file");
    let (a, b) = span(entry(&r, file));
    let prio = s["priority"].as_u64().unwrap();
    let want: Vec<Frame> = original
        .iter()
        .filter(|f| f.ts_ns >= a && f.ts_ns <= b && f.eth_src == s["mac"].as_str().unwrap() && f.pfc & (1 << prio) != 0)
        .cloned()
        .collect();
    assert!(!want.is_empty());
    assert_eq!(without_interface(tshark(&dir.path().join("evidence").join(file))), want);
    // A deadlock: the PFC frames of the cycle's switches (by the topology), not the others'.
    let (r, dir) = with_evidence(&["pfc_deadlock.pcap", "--topology", "ring.toml"]);
    let d = &r["congestion_tree"]["deadlocks"][0];
    let file = d["evidence"].as_str().expect("the deadlock links its file");
    let got = tshark(&dir.path().join("evidence").join(file));
    let senders: std::collections::BTreeSet<&str> = got.iter().map(|f| f.eth_src.as_str()).collect();
    assert_eq!(senders.len(), d["cycle"].as_array().unwrap().len(), "{senders:?}");
    let (a, b) = span(entry(&r, file));
    let original = tshark(&data_dir().join("pfc_deadlock.pcap"));
    let want: Vec<Frame> = original
        .iter()
        .filter(|f| f.ts_ns >= a && f.ts_ns <= b && senders.contains(f.eth_src.as_str()))
        .cloned()
        .collect();
    assert_eq!(without_interface(got), want);
}

#[test]
fn a_file_keeps_at_most_evidence_max_frames_and_counts_the_rest() {
    let (full, _d) = with_evidence(&["gobackn.pcap"]);
    let (r, dir) = with_evidence(&["gobackn.pcap", "--evidence-max", "5", "--evidence-snaplen", "64"]);
    let (all, e) = (&full["evidence"]["files"][0], &r["evidence"]["files"][0]);
    assert_eq!(e["frames"], 5);
    assert_eq!(e["left_out"].as_u64().unwrap(), all["frames"].as_u64().unwrap() - 5);
    let path = dir.path().join("evidence").join(e["file"].as_str().unwrap());
    let frames = tshark(&path);
    let first: Vec<Frame> =
        tshark(&_d.path().join("evidence").join(all["file"].as_str().unwrap())).into_iter().take(5).collect();
    assert_eq!(frames, first, "the first five");
    let info = String::from_utf8(Command::new(require("capinfos")).arg(&path).output().unwrap().stdout).unwrap();
    assert!(info.contains("Packet size limit:   inferred: 64 bytes") || info.contains("64 bytes"), "{info}");
}

#[test]
fn vantage_points_are_interfaces_of_the_file() {
    let (r, dir) = with_evidence(&["leaf=vantage_leaf.pcap", "spine=vantage_spine.pcap"]);
    let lost = r["audit"].as_array().unwrap().iter().find(|f| f["code"] == "loss_between").expect("loss_between");
    let frames = tshark(&dir.path().join("evidence").join(lost["evidence"].as_str().unwrap()));
    let names: std::collections::BTreeSet<&str> = frames.iter().map(|f| f.interface.as_str()).collect();
    assert_eq!(names, ["leaf", "spine"].into(), "each copy on its vantage point's interface");
    // The frames the leaf saw and the spine did not are in it: more leaf copies than spine ones.
    let at = |n: &str| frames.iter().filter(|f| f.interface == n).count();
    assert!(at("leaf") > at("spine"), "leaf {} spine {}", at("leaf"), at("spine"));
}

#[test]
fn evidence_from_standard_input_and_a_directory_that_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("ev");
    let out = Command::new(tests::tools::binary())
        .args(["-q", "--json", "-", "--pcap", "-", "--evidence"])
        .arg(&ev)
        .stdin(std::fs::File::open(data_dir().join("gobackn.pcap")).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["evidence"]["files"].as_array().unwrap().len(), 1);
    let left: Vec<_> = std::fs::read_dir(&ev).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "the file, and no spool left behind: {left:?}");
    // A regular file where the directory should be: a clear error before any work.
    let blocker = dir.path().join("plain");
    std::fs::write(&blocker, b"x").unwrap();
    let out = run(&["-q", "--pcap", &resolve("gobackn.pcap"), "--evidence", blocker.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--evidence") && err.contains(blocker.to_str().unwrap()), "{err}");
}

/// The packets of a pcapng as written: (timestamp ns, original length, bytes).
fn packets(path: &Path) -> Vec<(u64, u32, Vec<u8>)> {
    use pcap_file::pcapng::{Block, PcapNgReader};
    let mut r = PcapNgReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    while let Some(b) = r.next_block() {
        if let (Block::EnhancedPacket(p), _) = b.unwrap() {
            out.push((p.timestamp.as_nanos() as u64, p.original_len, p.data.to_vec()));
        }
    }
    out
}

/// Live: a finding opens while frames go on arriving; the agent asks the XDP program for its
/// flows' frames, and the file holds copies of exactly those frames (whole, by default: the
/// program copies up to 16 KiB a frame and puts only what it copied on the ring), taken after
/// the finding opened, within the span the report states; tshark dissects every frame without
/// calling one malformed.
#[test]
fn live_evidence_copies_the_frames_of_a_finding_after_it_opens() {
    use std::time::Duration;
    use tests::netns::{Agent, Netns, privileged};
    if !privileged("live_evidence_copies_the_frames_of_a_finding_after_it_opens") {
        return;
    }
    let ns = Netns::new("evidence");
    let dir = tempfile::tempdir().unwrap();
    let (json, ev) = (dir.path().join("live.json"), dir.path().join("ev"));
    let agent = Agent::start(
        &ns,
        &[
            "--interval",
            "100ms",
            "-q",
            "--json",
            json.to_str().unwrap(),
            "--evidence",
            ev.to_str().unwrap(),
            "--evidence-time",
            "30s",
        ],
    );
    let fixture = data_dir().join("gobackn.pcap");
    // Rounds of the go-back-N exchange for 3 s: the finding opens at the first findings
    // evaluation (every 10 polls), and the rounds after it are copied.
    let until = std::time::Instant::now() + Duration::from_secs(3);
    let mut rounds = 0;
    let mark = ns.mark();
    while std::time::Instant::now() < until {
        let out = ns.replay(&fixture);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        rounds += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    ns.wait_delivered(mark);
    std::thread::sleep(Duration::from_millis(400));
    let (code, _, stderr) = agent.stop();
    assert_eq!(code, Some(0), "agent: {}", stderr.join("\n"));
    let r = tests::tools::read_report(&json);
    check_report(&r);
    let f = r["audit"].as_array().unwrap().iter().find(|f| f["code"] == "go_back_n").expect("go_back_n live");
    let file = f["evidence"].as_str().expect("the finding links its file");
    let e = entry(&r, file);
    let path = ev.join(file);
    let got = packets(&path);
    assert_eq!(e["frames"].as_u64().unwrap() as usize, got.len());
    assert_eq!(e["left_out"], 0);
    assert!(r["evidence"].get("ring_full").is_none(), "no copy lost: {}", r["evidence"]);
    // The rounds after the finding opened are in the file (17 frames a round; one under way
    // when it opened may be there in part), each frame the flow's or a reply (gobackn has no
    // other traffic), whole.
    assert!(got.len() >= 17, "{} frames over {rounds} rounds", got.len());
    assert!(got.len() < 17 * rounds, "frames before the finding opened are not copied");
    let originals: Vec<Vec<u8>> = tests::fixtures::all()
        .into_iter()
        .find(|x| x.name == "gobackn.pcap")
        .unwrap()
        .frames
        .into_iter()
        .map(|x| x.record.data)
        .collect();
    for (ts, len, data) in &got {
        let o = originals.iter().find(|o| o[..] == data[..]).expect("a whole copy of a fixture frame");
        assert_eq!(*len as usize, o.len(), "the whole length recorded");
        let (a, b) = span(e);
        assert!(*ts >= a && *ts <= b, "{ts} within the span {a}..{b}");
    }
    // tshark opens it, and names the vantage point.
    let frames = tshark(&path);
    assert_eq!(frames.len(), got.len());
    assert!(frames.iter().all(|x| x.interface == "vb"), "{:?}", frames.first());
    assert!(comment(&path).contains("go_back_n"));
    assert_eq!(malformed(&path), 0, "whole frames dissect cleanly");
}

/// Frames tshark calls malformed in `file` (a RoCE frame cut short is one: its dissector checks
/// the length the headers state).
fn malformed(file: &Path) -> usize {
    let out = Command::new(require("tshark")).arg("-r").arg(file).output().unwrap();
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("Malformed")).count()
}

/// Offline, evidence holds whole frames by default and tshark dissects them all; a snap length
/// (any up to 65535 is taken) keeps the headers, and tshark then calls the cut RoCE frames
/// malformed, which is why whole frames are the default.
#[test]
fn evidence_holds_whole_frames_by_default_and_tshark_dissects_them() {
    let (r, dir) = with_evidence(&["gobackn.pcap"]);
    assert_eq!(r["evidence"]["snaplen"], 65535);
    let path = dir.path().join("evidence").join(r["evidence"]["files"][0]["file"].as_str().unwrap());
    let got = packets(&path);
    assert!(!got.is_empty());
    assert!(got.iter().all(|(_, len, data)| *len as usize == data.len()), "every frame whole");
    assert_eq!(malformed(&path), 0);
    let (r, dir) = with_evidence(&["gobackn.pcap", "--evidence-snaplen", "128"]);
    let cut = dir.path().join("evidence").join(r["evidence"]["files"][0]["file"].as_str().unwrap());
    let frames = packets(&cut);
    assert!(frames.iter().all(|(_, len, data)| data.len() == 128.min(*len as usize)), "cut at 128 bytes");
    let cut_short = frames.iter().filter(|(_, len, _)| *len > 128).count();
    assert!(cut_short > 0);
    assert_eq!(malformed(&cut), cut_short, "tshark calls the cut RoCE frames malformed");
    let out = run(&["-q", "-r", &resolve("gobackn.pcap"), "--evidence-snaplen", "65536"]);
    assert_eq!(out.status.code(), Some(2), "the range is 64..=65535");
    assert!(String::from_utf8_lossy(&out.stderr).contains("65535"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The HTML page links each finding to its evidence file, relative to the page; the summary
/// names the files.
#[test]
fn the_page_and_the_summary_point_to_the_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.html");
    let (r, ev) = with_evidence(&["ecn_audit.pcap", "--html", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    let linked = r["audit"].as_array().unwrap().iter().filter(|f| f["evidence"].is_string()).count();
    assert_eq!(linked, 5);
    assert_eq!(html.matches("class=\"evidence\"").count(), linked);
    let dir_abs = ev.path().join("evidence").canonicalize().unwrap();
    assert_eq!(r["evidence"]["dir"], dir_abs.to_str().unwrap(), "an absolute directory");
    // Links relative to the page, each to a file that is there (the page and its evidence
    // can move together: a CI artifact).
    let hrefs: Vec<&str> =
        html.split("class=\"evidence\" href=\"").skip(1).map(|x| &x[..x.find('"').unwrap()]).collect();
    assert_eq!(hrefs.len(), linked);
    for h in &hrefs {
        assert!(!h.starts_with('/') && !h.starts_with("file:"), "relative: {h}");
        assert!(dir.path().join(h).is_file(), "{h} from the page's directory");
    }
    assert!(hrefs.iter().any(|h| h.ends_with("evidence/001-ce_without_cnp.pcapng")), "{hrefs:?}");
    let out = run(&["-r", &resolve("ecn_audit.pcap"), "--evidence", dir_abs.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("→ 001-ce_without_cnp.pcapng") && text.contains("evidence: 5 pcapng files"), "{text}");
    // A later run into the same directory leaves no file of the earlier one beside its own:
    // they are moved aside whole (a killed agent's checkpoint still has its files), not deleted.
    let earlier: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir_abs)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_file())
        .map(|e| (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap()))
        .collect();
    assert_eq!(earlier.len(), 5);
    // The run above (the summary's) already moved the page's run's files to previous-1.
    assert!(dir_abs.join("previous-1").is_dir());
    let out = run(&["-q", "-r", &resolve("gobackn.pcap"), "--evidence", dir_abs.to_str().unwrap()]);
    let aside = dir_abs.join("previous-2");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("moved 5 evidence file(s) of an earlier run to {}", aside.display())), "{err}");
    let mut left: Vec<String> =
        std::fs::read_dir(&dir_abs).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, ["001-go_back_n.pcapng", "previous-1", "previous-2"]);
    for (name, bytes) in &earlier {
        assert_eq!(&std::fs::read(aside.join(name)).unwrap(), bytes, "{name} kept as it was");
    }
    let out = run(&["-q", "-r", &resolve("gobackn.pcap"), "--evidence", dir_abs.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("previous-3"), "the next run moves its own aside");
    assert!(dir_abs.join("previous-3/001-go_back_n.pcapng").is_file() && aside.join(&earlier[0].0).is_file());
}

/// The page links each incast episode's evidence too (the incast capture's 3 episodes), and a
/// page without findings says so instead of showing an empty table.
#[test]
fn the_page_links_incast_evidence_and_says_when_nothing_was_found() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.html");
    let ev = dir.path().join("ev");
    let out = run(&[
        "-q",
        "-r",
        &resolve("incast.pcap"),
        "--evidence",
        ev.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    let table = &html[html.find("id=\"episodes\"").expect("the incast episodes table")..];
    let table = &table[..table.find("</table>").unwrap()];
    let hrefs: Vec<&str> = table.split("href=\"").skip(1).map(|x| &x[..x.find('"').unwrap()]).collect();
    assert_eq!(hrefs.len(), 3, "{table}");
    assert!(hrefs.iter().all(|h| h.starts_with("ev/") && dir.path().join(h).is_file()), "{hrefs:?}");
    // The 1 ms margin stops halfway to the next episode (they are 876 µs apart): each file
    // holds its own episode's frames, not its neighbour's.
    let (r, _keep) = with_evidence(&["incast.pcap"]);
    let episodes = r["incast"]["episodes"].as_array().unwrap();
    let mut spans: Vec<(u64, u64, u64, u64)> = episodes
        .iter()
        .map(|e| {
            let f = r["evidence"]["files"].as_array().unwrap().iter().find(|f| f["file"] == e["evidence"]).unwrap();
            let n = |v: &Value| v.as_u64().unwrap();
            (n(&f["start_ns"]), n(&f["end_ns"]), n(&e["start_ns"]), n(&e["end_ns"]))
        })
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(w[0].1 < w[1].0, "files overlap: {w:?}");
    }
    for (fs, fe, es, ee) in &spans {
        assert!(fs <= es && fe >= ee, "the file covers its episode");
    }
    assert_eq!(spans[0].1 - spans[0].3, (spans[1].2 - spans[0].3) / 2 - 1, "halfway to the next");
    let out = run(&["-q", "-r", &resolve("pfc_storm.pcap"), "--html", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h2 id=\"findings-list\">Findings</h2>\n<p>None.</p>"), "{html}");
}
