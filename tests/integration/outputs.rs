//! Outputs under load and attack (issue 44 §2, §3): a link planted under any name the agent is
//! about to write redirects nothing; one output failing (a full disk, a removed directory)
//! leaves the others written, is said once with the OS error, is listed in the report and
//! gives exit code 3; export files hold whole lines only.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use tests::fixtures::{Fixture, data_dir};
use tests::netns::{Agent, Netns, privileged};
use tests::tools::{binary, read_report};

fn fixture(name: &str) -> Fixture {
    tests::fixtures::all().into_iter().find(|f| f.name == name).unwrap()
}

/// Every line of every export file in `dir`, each checked to be a whole JSON line.
fn export_lines(dir: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut lines = Vec::new();
    // Regular files only: a link planted there is not the agent's.
    let regular = |f: &PathBuf| std::fs::symlink_metadata(f).unwrap().file_type().is_file();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "ndjson") && regular(f)) {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(text.is_empty() || text.ends_with('\n'), "{}: ends inside a line", f.display());
        for l in text.lines() {
            lines.push(serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: a cut line ({e}): {l}", f.display())));
        }
    }
    lines
}

/// The run with `args`, inside a mount namespace of its own where `dir` is a tmpfs of `size`
/// (gone with the process: nothing to clean up).
fn on_small_disk(dir: &Path, size: &str, args: &[&str]) -> Output {
    let script = r#"mount -t tmpfs -o "size=$1" tmpfs "$2" && shift 2 && exec "$@""#;
    Command::new(tests::tools::require("unshare"))
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh", size])
        .arg(dir)
        .arg(binary())
        .args(args)
        .output()
        .unwrap()
}

/// A full disk under the export files and the evidence: the JSON report and the summary are
/// still written, each failure is said once with the OS error and listed in the report, the
/// exit code is 3, the export files hold whole lines only and count what they gave up.
#[test]
fn a_full_disk_loses_its_own_output_only() {
    if !privileged("a_full_disk_loses_its_own_output_only") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let (x, ev, json) = (small.join("x"), small.join("ev"), dir.path().join("r.json"));
    let capture = data_dir().join("gobackn.pcap");
    let flags = |x: &Path, ev: &Path, json: &Path| -> Vec<String> {
        let mut v: Vec<String> = ["-r", capture.to_str().unwrap(), "--export-max-bytes", "1K", "--export"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend([x.display().to_string(), "--evidence".into(), ev.display().to_string()]);
        v.extend(["--json".into(), json.display().to_string()]);
        v
    };
    // The same run with room: what a whole export holds.
    let roomy = tempfile::tempdir().unwrap();
    let (rx, rev, rjson) = (roomy.path().join("x"), roomy.path().join("ev"), roomy.path().join("r.json"));
    let args = flags(&rx, &rev, &rjson);
    let out = tests::tools::run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let whole = read_report(&rjson);
    let all_lines = whole["export"]["lines"].as_u64().unwrap();
    assert_eq!(export_lines(&rx).len() as u64, all_lines);
    assert!(whole.get("output_failures").is_none());

    // Two pages: the first export files fit, the rest and the evidence do not.
    let args = flags(&x, &ev, &json);
    let out = on_small_disk(&small, "8k", &args.iter().map(String::as_str).collect::<Vec<_>>());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "partial: {stderr}");
    let r = read_report(&json);
    assert_eq!(r["capture"]["frames"], whole["capture"]["frames"], "the report is whole");
    let findings = |v: &Value| -> Vec<Value> {
        let mut a = v["audit"].as_array().unwrap().clone();
        a.iter_mut().for_each(|f| drop(f.as_object_mut().unwrap().remove("evidence")));
        a
    };
    assert_eq!(findings(&r), findings(&whole), "the same findings (without their evidence files)");
    let failed: Vec<&str> =
        r["output_failures"].as_array().unwrap().iter().map(|f| f["output"].as_str().unwrap()).collect();
    assert_eq!(failed, ["--export", "--evidence"], "{stderr}");
    for f in r["output_failures"].as_array().unwrap() {
        assert!(f["error"].as_str().unwrap().contains("No space left on device"), "{f}");
    }
    assert_eq!(stderr.matches("No space left on device").count(), 2, "each failure said once: {stderr}");
    assert!(stdout.contains("OUTPUTS FAILED") && stdout.contains("DIAGNOSIS"), "the summary still: {stdout}");
    // The export is the lines it wrote, whole, plus the ones it counts as dropped.
    let (lines, dropped) = (r["export"]["lines"].as_u64().unwrap(), r["export"]["dropped"].as_u64().unwrap());
    assert!(lines > 0 && dropped > 0, "{}", r["export"]);
    assert_eq!(lines + dropped, all_lines);
    // The files are gone with the namespace's tmpfs; the same run keeping the tmpfs mounted
    // while it reads them back checks the bytes.
    let check = format!(
        r#"mount -t tmpfs -o size=8k tmpfs "$1" && shift && "$@" >/dev/null 2>&1; for f in {}/*.ndjson; do cat "$f"; done"#,
        x.display()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &check, "sh"])
        .arg(&small)
        .arg(binary())
        .args(&args)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with('\n'), "no line cut: {text}");
    let parsed: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("whole lines only")).collect();
    assert_eq!(parsed.len() as u64, lines);
}

/// A live agent whose export directory is removed while it runs notices it at the next write:
/// the directory is created again and the later lines go there; said once; exit code 3.
#[test]
fn a_removed_export_directory_is_noticed_at_the_next_write() {
    if !privileged("a_removed_export_directory_is_noticed_at_the_next_write") {
        return;
    }
    let ns = Netns::new("rmexport");
    let dir = tempfile::tempdir().unwrap();
    let f = fixture("gobackn.pcap");
    let sent = f.as_sent(dir.path());
    let (x, json) = (dir.path().join("x"), dir.path().join("r.json"));
    let agent = Agent::start(
        &ns,
        &["--interval", "100ms", "-q", "--json", json.to_str().unwrap(), "--export", x.to_str().unwrap()],
    );
    assert!(ns.replay(&sent).status.success());
    std::thread::sleep(Duration::from_millis(500));
    std::fs::remove_dir_all(&x).unwrap();
    assert!(ns.replay(&sent).status.success());
    std::thread::sleep(Duration::from_millis(500));
    let (code, _, stderr) = agent.stop();
    let said: Vec<&String> = stderr.iter().filter(|l| l.contains("removed while the program ran")).collect();
    assert_eq!(said.len(), 1, "said once, as it happened: {stderr:?}");
    assert_eq!(code, Some(3), "{stderr:?}");
    let r = read_report(&json);
    assert_eq!(r["output_failures"][0]["output"], "--export");
    assert_eq!(r["capture"]["frames"].as_u64().unwrap(), 2 * f.frames.len() as u64);
    let lines = export_lines(&x);
    assert!(!lines.is_empty(), "the directory is there again, with the later lines");
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "interval");
    assert_eq!(last["final"], true, "{last}");
}

/// Links planted as another local user could, after the agent started, under every name it
/// writes (the checkpoint's temporary file as earlier versions named it, the next export files,
/// the evidence file a finding will get) redirect nothing: the victim file is untouched, the
/// export goes on under names nothing had, and the evidence file that found its name taken
/// is said (exit code 3) instead of being written through the link.
#[test]
fn planted_links_redirect_no_output_of_a_running_agent() {
    if !privileged("planted_links_redirect_no_output_of_a_running_agent") {
        return;
    }
    let ns = Netns::new("planted");
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let f = fixture("gobackn.pcap");
    let sent = f.as_sent(dir.path());
    let (x, ev, json) = (dir.path().join("x"), dir.path().join("ev"), dir.path().join("r.json"));
    let agent = Agent::start(
        &ns,
        &[
            "--interval",
            "100ms",
            "--checkpoint",
            "100ms",
            "-q",
            "--json",
            json.to_str().unwrap(),
            "--export",
            x.to_str().unwrap(),
            "--export-max-bytes",
            "1K",
            "--export-keep",
            "1000",
            "--evidence",
            ev.to_str().unwrap(),
        ],
    );
    let pid = agent.child.id();
    let link = |at: PathBuf| std::os::unix::fs::symlink(&victim, at).unwrap();
    link(dir.path().join(format!(".r.json.{pid}.tmp")));
    for n in 1..=3 {
        link(x.join(format!("roce-analyzer-{n:06}.ndjson")));
    }
    link(ev.join("001-go_back_n.pcapng"));
    // Rounds of the go-back-N exchange past the first findings evaluation (every 10 polls):
    // the finding opens, its evidence file is due.
    let until = std::time::Instant::now() + Duration::from_millis(1600);
    while std::time::Instant::now() < until {
        assert!(ns.replay(&sent).status.success());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let (code, _, stderr) = agent.stop();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "{stderr:?}");
    let r = read_report(&json);
    assert_eq!(code, Some(3), "the evidence file could not be written: {stderr:?} {}", r["evidence"]);
    assert!(!std::fs::symlink_metadata(&json).unwrap().file_type().is_symlink());
    assert_eq!(r["export"]["skipped"], 3, "{}", r["export"]);
    assert!(export_lines(&x).iter().any(|l| l["final"] == true), "the export went on to its last line");
    let failure = &r["output_failures"][0];
    assert_eq!(failure["output"], "--evidence");
    assert!(failure["error"].as_str().unwrap().contains("001-go_back_n.pcapng: File exists"), "{failure}");
    for n in 1..=3 {
        let p = x.join(format!("roce-analyzer-{n:06}.ndjson"));
        assert_eq!(std::fs::read_link(&p).unwrap(), victim, "the planted link is left as it was");
    }
}
