//! The diagnosis the summary, the page and the JSON open with (issue 45): what matters most,
//! ranked, each with where and what to do. The rankings and places below follow from the
//! fixtures' construction (tests/src/fabric.rs, tests/src/transport.rs).

use serde_json::Value;
use tests::fixtures::data_dir;
use tests::tools::{report, run};

fn codes(r: &Value) -> Vec<&str> {
    r["diagnosis"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect()
}

/// `pfc_storm.pcap`: a host NIC (02:00:00:00:04:07) refreshes XOFF on priority 3 every 300 µs
/// for 150 ms, and the capture holds PFC frames only. The storm comes first, then that no RoCE
/// was seen; no `pfc_before_ecn`, since without data of the priority there are no marks to
/// judge the onsets by.
#[test]
fn the_summary_and_the_page_open_with_the_diagnosis() {
    let r = report("pfc_storm.pcap", &[]);
    assert_eq!(codes(&r), ["pfc_storm", "no_roce"]);
    let storm = &r["diagnosis"][0];
    assert_eq!(storm["severity"], "error");
    assert_eq!(storm["where"], "02:00:00:00:04:07");
    assert!(
        storm["what"]
            .as_str()
            .unwrap()
            .starts_with("1 PFC storm on priority 3: paused without a break for up to 150.0 ms"),
        "{storm}"
    );
    let nic = r["pfc"]["senders"].as_array().unwrap().iter().find(|s| s["mac"] == "02:00:00:00:04:07").unwrap();
    assert_eq!(nic["ecn_lead"]["onsets"], 1, "the onset is still counted");
    assert!(!r["audit"].as_array().unwrap().iter().any(|f| f["code"] == "pfc_before_ecn"), "{}", r["audit"]);

    let p = data_dir().join("pfc_storm.pcap");
    let out = run(&["-r", p.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("roce-analyzer "), "{lines:#?}");
    assert_eq!(lines[1], "DIAGNOSIS (most important first):");
    assert!(lines[2].starts_with("  1. error   [pfc_storm] 1 PFC storm on priority 3"), "{lines:#?}");
    assert_eq!(lines[3], "     where: 02:00:00:00:04:07");
    assert!(lines[4].starts_with("     do:    find the receiver that cannot drain"), "{lines:#?}");
    assert!(lines[5].starts_with("  2. warning [no_roce]"), "{lines:#?}");

    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = run(&["-q", "-r", p.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let page = std::fs::read_to_string(&html).unwrap();
    let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("{s} in the page"));
    assert!(at("id=\"diagnosis\"") < at("id=\"summary\""), "the page opens with the diagnosis");
    assert!(at("[pfc_storm]") < at("[no_roce]"));
    let first_other = page.match_indices("<h2").map(|(i, _)| i).find(|i| *i > at("id=\"diagnosis\"") + 40).unwrap();
    assert!(at("[no_roce]") < first_other, "every entry before the other sections");
}

/// `cnp_paced.pcap`: four senders (.30 to .33) write to .40 at once (an incast of four);
/// the marks of .32 after its NP stopped and all of .33's go unanswered (`ce_without_cnp`,
/// an error, one entry for both flows); the senders keep their rate (`cnp_ignored`). Errors,
/// then incast, then the other warnings.
#[test]
fn errors_come_first_then_the_fabric_then_the_rest() {
    let r = report("cnp_paced.pcap", &[]);
    assert_eq!(codes(&r), ["ce_without_cnp", "incast", "cnp_ignored"]);
    let d = &r["diagnosis"];
    let unanswered = d[0]["where"].as_str().unwrap();
    assert!(unanswered.contains(".32 → ") && unanswered.contains(".33 → "), "{unanswered}");
    assert!(d[1]["where"].as_str().unwrap().ends_with(".40"), "{}", d[1]);
    assert!(d[1]["what"].as_str().unwrap().contains("up to 4 senders at once"), "{}", d[1]);
}

/// `pfc_cascade.pcap`: the pause senders of the cascade each pause without CE marks before:
/// as many `pfc_before_ecn` findings as senders, one diagnosis entry saying how many more.
#[test]
fn findings_of_one_kind_are_one_entry() {
    let r = report("pfc_cascade.pcap", &[]);
    let n = r["audit"].as_array().unwrap().iter().filter(|f| f["code"] == "pfc_before_ecn").count();
    assert!(n > 1, "{}", r["audit"]);
    let entries: Vec<&Value> =
        r["diagnosis"].as_array().unwrap().iter().filter(|d| d["code"] == "pfc_before_ecn").collect();
    assert_eq!(entries.len(), 1);
    let what = entries[0]["what"].as_str().unwrap();
    assert!(what.ends_with(&format!("(and {} more pfc_before_ecn findings)", n - 1)), "{what}");
}
