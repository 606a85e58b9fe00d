//! The fleet's store (issue 43 §1): agents insert their export into a real ClickHouse server
//! (Debian's, on loopback, started by the test), the shipped queries answer what the agents'
//! own reports say, and a server that is away loses nothing the buffer holds and counts what
//! it could not.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use tests::clickhouse::{Server, USER, deploy_dir};
use tests::fixtures::data_dir;
use tests::tools::{binary, read_report};

/// An offline run inserting into `server`, with the credentials in the environment; returns
/// its report (and the run's output).
fn agent(server: &Server, dir: &Path, name: &str, inputs: &[&str], extra: &[&str]) -> (Value, Output) {
    let json = dir.join(format!("{name}.json"));
    let mut cmd = std::process::Command::new(binary());
    cmd.env("ROCE_ANALYZER_CLICKHOUSE_USER", USER).env("ROCE_ANALYZER_CLICKHOUSE_PASSWORD", &server.password);
    for i in inputs {
        let (label, file) = i.split_once('=').map_or((None, *i), |(l, f)| (Some(l), f));
        let path = data_dir().join(file);
        cmd.arg("-r").arg(match label {
            Some(l) => format!("{l}={}", path.display()),
            None => path.display().to_string(),
        });
    }
    let out = cmd
        .args(["-q", "--export-clickhouse", &server.url(), "--export"])
        .arg(dir.join(format!("{name}.export")))
        .arg("--json")
        .arg(&json)
        .args(extra)
        .output()
        .unwrap();
    let report = if json.exists() { read_report(&json) } else { Value::Null };
    (report, out)
}

fn query(server: &Server, file: &str) -> Vec<Value> {
    server.rows(&std::fs::read_to_string(deploy_dir().join("queries").join(file)).unwrap())
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn flow_id(f: &Value) -> String {
    format!("{}>{}:{}/{}", f["src"].as_str().unwrap(), f["dst"].as_str().unwrap(), f["udp_sport"], f["dst_qp"])
}

#[test]
fn agents_insert_and_the_fleet_queries_equal_their_reports() {
    let server = Server::start();
    server.apply(&deploy_dir().join("schema.sql"));
    let dir = tempfile::tempdir().unwrap();
    let runs: [(&str, &[&str]); 5] = [
        ("incast", &["incast.pcap"]),
        ("storm", &["pfc_storm.pcap"]),
        ("gobackn", &["gobackn.pcap"]),
        ("example", &["example.pcap"]),
        ("vantage", &["leaf=vantage_leaf.pcap", "spine=vantage_spine.pcap"]),
    ];
    let mut reports = Vec::new();
    for (name, inputs) in runs {
        let (r, out) = agent(&server, dir.path(), name, inputs, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        let x = &r["export"];
        assert_eq!(x["clickhouse"]["inserted"], x["lines"], "{name}: every export line inserted: {x}");
        assert_eq!((u(&x["dropped"]), u(&x["clickhouse"]["dropped"])), (0, 0));
        // The credentials appear nowhere the agent writes.
        let text = format!("{r}{stderr}{}", String::from_utf8_lossy(&out.stdout));
        assert!(!text.contains(&server.password), "{name}: the password leaked");
        reports.push(r);
    }
    let rows_total: u64 =
        ["flows", "pfc", "events", "findings", "hops", "messages", "message_pairs", "samples", "intervals"]
            .iter()
            .map(|t| u(&server.rows(&format!("SELECT count() AS n FROM roce.{t}"))[0]["n"]))
            .sum();
    assert_eq!(rows_total, reports.iter().map(|r| u(&r["export"]["lines"])).sum::<u64>(), "a row per line");

    // Top destinations by incast time: the reports' episodes, per destination.
    let mut want: BTreeMap<String, (u64, u64, u64, u64)> = BTreeMap::new();
    for e in reports.iter().flat_map(|r| r["incast"]["episodes"].as_array().unwrap()) {
        let w = want.entry(e["dst"].as_str().unwrap().into()).or_default();
        w.0 += u(&e["end_ns"]) - u(&e["start_ns"]);
        w.1 += 1;
        w.2 = w.2.max(u(&e["peak_senders"]));
        w.3 += u(&e["bytes"]);
    }
    assert!(!want.is_empty());
    let got: BTreeMap<String, (u64, u64, u64, u64)> = query(&server, "top_incast_destinations.sql")
        .iter()
        .map(|r| {
            let v = (u(&r["incast_ns"]), u(&r["episodes"]), u(&r["peak_senders"]), u(&r["bytes"]));
            (r["dst"].as_str().unwrap().to_string(), v)
        })
        .collect();
    assert_eq!(got, want, "incast time by destination");

    // PFC paused time by sender and priority (802.3x PAUSE senders as priority 8).
    let mut want: BTreeMap<(String, u64), (u64, u64)> = BTreeMap::new();
    for r in &reports {
        let pause = r["pfc"]["pause_senders"].as_array().unwrap().iter().map(|s| (s, 8));
        let pfc = r["pfc"]["senders"].as_array().unwrap().iter().map(|s| (s, u(&s["priority"])));
        for (s, p) in pfc.chain(pause) {
            let w = want.entry((s["mac"].as_str().unwrap().into(), p)).or_default();
            w.0 += u(&s["paused_ns"]);
            w.1 += u(&s["frames"]);
        }
    }
    let got: BTreeMap<(String, u64), (u64, u64)> = query(&server, "pfc_paused_by_port.sql")
        .iter()
        .map(|r| ((r["sender"].as_str().unwrap().into(), u(&r["priority"])), (u(&r["paused_ns"]), u(&r["frames"]))))
        .collect();
    assert!(want.len() >= 3);
    assert_eq!(got, want, "paused time by sender and priority");

    // Loss between vantage points.
    let want: Vec<(String, String, u64, u64)> = reports
        .iter()
        .filter_map(|r| r["vantage"]["hops"].as_array())
        .flatten()
        // The export has a line for a hop that lost frames.
        .filter(|h| u(&h["frames_missing"]) > 0)
        .map(|h| {
            (
                h["from"].as_str().unwrap().into(),
                h["to"].as_str().unwrap().into(),
                u(&h["frames_missing"]),
                u(&h["frames_matched"]),
            )
        })
        .collect();
    let got: Vec<(String, String, u64, u64)> = query(&server, "loss_between_vantage_points.sql")
        .iter()
        .map(|r| {
            let (f, t) = (r["from_label"].as_str().unwrap().into(), r["to_label"].as_str().unwrap().into());
            (f, t, u(&r["frames_missing"]), u(&r["frames_matched"]))
        })
        .collect();
    assert_eq!(got, want, "frames missing per hop");
    assert_eq!(want[0].2, 2);

    // The flows behind each finding, with their bytes from the flows table.
    let mut bytes: BTreeMap<String, u64> = BTreeMap::new();
    for f in reports.iter().flat_map(|r| r["flows"].as_array().unwrap()) {
        *bytes.entry(flow_id(f)).or_default() += u(&f["bytes"]);
    }
    let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
    for r in &reports {
        for f in r["audit"].as_array().unwrap() {
            for fl in f["flows"].as_array().unwrap() {
                let id = flow_id(fl);
                want.insert((f["code"].as_str().unwrap().into(), id.clone()), bytes.get(&id).copied().unwrap_or(0));
            }
        }
    }
    let got: BTreeMap<(String, String), u64> = query(&server, "flows_behind_a_finding.sql")
        .iter()
        .map(|r| ((r["code"].as_str().unwrap().into(), r["flow"].as_str().unwrap().into()), u(&r["bytes"])))
        .collect();
    assert!(want.keys().any(|(c, _)| c == "go_back_n"), "{want:?}");
    assert_eq!(got, want, "flows behind findings");

    // Message completion time per agent: the report's percentiles.
    let want: BTreeMap<String, (u64, u64, u64)> = reports
        .iter()
        .filter(|r| r["messages"].is_object())
        .map(|r| {
            let labels: Vec<&str> =
                r["capture"]["sources"].as_array().unwrap().iter().map(|s| s["label"].as_str().unwrap()).collect();
            let m = &r["messages"];
            (labels.join(","), (u(&m["completed"]), u(&m["mct_ns"]["p99"]), u(&m["mct_ns"]["p999"])))
        })
        .collect();
    let got: BTreeMap<String, (u64, u64, u64)> = query(&server, "message_completion_p999.sql")
        .iter()
        .map(|r| (r["label"].as_str().unwrap().into(), (u(&r["completed"]), u(&r["p99_ns"]), u(&r["p999_ns"]))))
        .collect();
    assert!(want.values().any(|w| w.0 > 0));
    assert_eq!(got, want, "completion percentiles per agent");

    // Message completion time per host pair across the agents: each pair's percentiles from
    // the report that completed most of its messages.
    let mut want: BTreeMap<(String, String), (u64, u64, u64)> = BTreeMap::new();
    for p in reports.iter().filter_map(|r| r["messages"]["pairs"].as_array()).flatten() {
        let key = (p["src"].as_str().unwrap().to_string(), p["dst"].as_str().unwrap().to_string());
        let v = (u(&p["messages"]), u(&p["mct_ns"]["p99"]), u(&p["mct_ns"]["p999"]));
        if want.get(&key).is_none_or(|w| w.0 < v.0) {
            want.insert(key, v);
        }
    }
    let got: BTreeMap<(String, String), (u64, u64, u64)> = query(&server, "message_completion_per_pair.sql")
        .iter()
        .map(|r| {
            let key = (r["src"].as_str().unwrap().into(), r["dst"].as_str().unwrap().into());
            (key, (u(&r["completed"]), u(&r["p99_ns"]), u(&r["p999_ns"])))
        })
        .collect();
    assert!(want.len() >= 2, "pairs with completed messages: {want:?}");
    assert_eq!(got, want, "completion percentiles per host pair");

    // The same schema (with its TTL) and queries on current ClickHouse (chdb), over the rows
    // `clickhouse-rows` makes of the agents' export files: the same answers.
    let exports: Vec<std::path::PathBuf> =
        runs.iter().map(|(name, _)| dir.path().join(format!("{name}.export"))).collect();
    same_answers_on_chdb(&server, &exports, dir.path());
}

/// ECMP imbalance per tier across collectors (issue 43 §1): one collector per uplink, each its
/// own agent labelled TIER:LINK, inserting into the store; the shipped query gives per tier the
/// bytes, imbalance and idle links that one run over the same three captures reports (uplink3
/// carries no RoCE: an idle link, known from its agent's interval rows).
#[test]
fn ecmp_imbalance_per_tier_across_collectors() {
    let server = Server::start();
    server.apply(&deploy_dir().join("schema.sql"));
    let dir = tempfile::tempdir().unwrap();
    let links = [("up1", "uplink1.pcap"), ("up2", "uplink2.pcap"), ("up3", "uplink3.pcap")];
    let mut exports = Vec::new();
    for (tier, wanted) in [("leaf1", &links[..]), ("spine1", &links[..2])] {
        for (link, file) in wanted {
            let name = format!("{tier}-{link}");
            let (r, out) = agent(&server, dir.path(), &name, &[&format!("{tier}:{link}={file}")], &[]);
            assert_eq!(out.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(r["export"]["clickhouse"]["inserted"], r["export"]["lines"], "{name}");
            exports.push(dir.path().join(format!("{name}.export")));
        }
    }
    // One run over the same captures (not into the store): what each tier's links carried, as
    // the report has it.
    let one = |files: &[(&str, &str)]| -> Value {
        let json = dir.path().join("whole.json");
        let mut cmd = std::process::Command::new(binary());
        for (l, f) in files {
            cmd.arg("-r").arg(format!("{l}={}", data_dir().join(f).display()));
        }
        let out = cmd.arg("-q").arg("--json").arg(&json).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        read_report(&json)["ecmp"]["observed"].clone()
    };
    let rows = query(&server, "ecmp_imbalance_per_tier.sql");
    let tiers: Vec<&str> = rows.iter().map(|r| r["tier"].as_str().unwrap()).collect();
    assert_eq!(tiers, ["leaf1", "spine1"], "the skewed tier first: {rows:?}");
    for (row, files) in rows.iter().zip([&links[..], &links[..2]]) {
        let o = one(files);
        let by_label = o["by_label"].as_object().unwrap();
        let bytes: Vec<u64> = by_label.values().map(|v| u(&v["bytes"])).collect();
        assert_eq!(u(&row["links"]), files.len() as u64);
        assert_eq!(u(&row["total_bytes"]), bytes.iter().sum::<u64>());
        assert_eq!(u(&row["max_bytes"]), *bytes.iter().max().unwrap());
        let imbalance = row["imbalance"].as_f64().unwrap();
        assert!((imbalance - o["imbalance"].as_f64().unwrap()).abs() < 1e-9, "{row} vs {o}");
        assert_eq!(row["idle"], o["idle"], "{row} vs {o}");
    }
    // Stated by hand: 70, 35 and 0 data frames on leaf1's links (max / mean = 70 / 35).
    assert_eq!(rows[0]["imbalance"].as_f64(), Some(2.0));
    assert_eq!(rows[0]["idle"], serde_json::json!(["up3"]));
    same_answers_on_chdb(&server, &exports, dir.path());
}

/// Every shipped query gives the same rows on chdb (current ClickHouse, the schema and its TTL
/// applied) over `clickhouse-rows` of `exports` as on `server`.
fn same_answers_on_chdb(server: &Server, exports: &[std::path::PathBuf], dir: &Path) {
    let rows = dir.join("rows");
    let mut args: Vec<String> = vec!["clickhouse-rows".into(), "--out".into(), rows.display().to_string()];
    args.extend(exports.iter().map(|x| x.display().to_string()));
    let out = tests::tools::run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = std::process::Command::new(tests::tools::require("python3"))
        .arg(tests::tools::root().join("tests/scripts/chdb_queries.py"))
        .arg(tests::tools::root().join("deploy"))
        .arg(&rows)
        .output()
        .unwrap();
    assert!(out.status.success(), "chdb: {}", String::from_utf8_lossy(&out.stderr));
    let chdb: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(chdb["tables_with_ttl"], 9, "ttl.sql applies on a current server");
    let sorted = |rows: Vec<Value>| -> Vec<Value> {
        let mut v: Vec<Value> = rows
            .into_iter()
            .map(|mut r| {
                if let Some(h) = r.get_mut("hosts").and_then(Value::as_array_mut) {
                    h.sort_by_key(|x| x.to_string());
                }
                r
            })
            .collect();
        v.sort_by_key(|r| r.to_string());
        v
    };
    for (file, rows) in chdb["queries"].as_object().unwrap() {
        let debian = sorted(query(server, file));
        assert_eq!(
            sorted(rows.as_array().unwrap().clone()),
            debian,
            "{file}: chdb {} vs Debian's 18.16",
            chdb["version"]
        );
    }
    assert_eq!(chdb["queries"].as_object().unwrap().len(), 8);
}

/// Trajectory samples of two collectors (issue 43 §2), inserted by two agents, joined by the
/// shipped query: the frames matched, missing and CE-marked between, the clocks' offset and the
/// latency equal what `merge` over the same agents' exports finds.
#[test]
fn trajectory_samples_join_in_clickhouse_as_merge_joins_them() {
    let server = Server::start();
    server.apply(&deploy_dir().join("schema.sql"));
    let dir = tempfile::tempdir().unwrap();
    let mut exports = Vec::new();
    for (input, x) in tests::vantage::trajectory_inputs(dir.path(), 20_000, 250_000) {
        let out = std::process::Command::new(binary())
            .env("ROCE_ANALYZER_CLICKHOUSE_USER", USER)
            .env("ROCE_ANALYZER_CLICKHOUSE_PASSWORD", &server.password)
            .args(["-q", "-r", &input, "--trajectory-sample", "1/8", "--export-clickhouse", &server.url(), "--export"])
            .arg(&x)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        exports.push(x);
    }
    let out = tests::tools::run(&["merge", "--json", "-", exports[0].to_str().unwrap(), exports[1].to_str().unwrap()]);
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hops = merged["trajectory"]["hops"].as_array().unwrap();
    let rows = query(&server, "trajectory_hops.sql");
    assert_eq!(rows.len(), 2, "one row per direction: {rows:?}");
    for row in &rows {
        let h = hops
            .iter()
            .find(|h| h["from"] == row["from_point"] && h["to"] == row["to_point"])
            .unwrap_or_else(|| panic!("{row} not in {hops:?}"));
        assert_eq!(row["matched"], h["matched"], "{row} {h}");
        assert_eq!(row["ce_between"], h["ce_between"], "{row} {h}");
        let offset = h["clock_offset_ns"].as_i64().unwrap();
        assert!((row["clock_offset_ns"].as_i64().unwrap() - offset).abs() <= 1, "{row} {h}");
        let p50 = h["latency_ns"][1].as_i64().unwrap();
        assert!((row["p50_ns"].as_i64().unwrap() - p50).abs() <= 200, "{row} {h}");
        // The query's missing counts every sample at `from`; merge's those within `to`'s span.
        assert!(u(&row["missing"]) >= u(&h["missing"]) && u(&row["missing"]) <= u(&h["missing"]) + 20, "{row} {h}");
    }
    same_answers_on_chdb(&server, &exports, dir.path());
}

/// The server stopped while an agent ends its run and started again within --export-wait:
/// every row arrives (tried again with backoff). Away beyond a small --export-buffer: the
/// rows are dropped, counted, said, and the run exits 3 with its report written.
#[test]
fn a_server_away_loses_nothing_within_the_buffer_and_counts_the_rest() {
    let mut server = Server::start();
    server.apply(&deploy_dir().join("schema.sql"));
    server.pause();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(binary());
    cmd.env("ROCE_ANALYZER_CLICKHOUSE_USER", USER).env("ROCE_ANALYZER_CLICKHOUSE_PASSWORD", &server.password);
    cmd.args(["-q", "-r"])
        .arg(data_dir().join("incast.pcap"))
        .args(["--export-clickhouse", &server.url(), "--export-wait", "60s", "--json"])
        .arg(dir.path().join("r.json"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // The server comes back once the agent said it is away (not after a fixed time: a busy
    // machine may start the agent late), and at least 1.5 s after it left.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut stderr = String::new();
    loop {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut err, &mut line).unwrap() == 0 {
            break;
        }
        stderr.push_str(&line);
        if line.contains("--export-clickhouse") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    server.resume();
    std::io::Read::read_to_string(&mut err, &mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.matches("--export-clickhouse").count(), 1, "the outage said once: {stderr}");
    let r = read_report(&dir.path().join("r.json"));
    let ch = &r["export"]["clickhouse"];
    assert!(u(&ch["retries"]) >= 1, "{ch}");
    assert_eq!(u(&ch["dropped"]), 0);
    let rows: u64 = ["flows", "pfc", "events", "findings", "hops", "messages", "message_pairs", "samples", "intervals"]
        .iter()
        .map(|t| u(&server.rows(&format!("SELECT count() AS n FROM roce.{t}"))[0]["n"]))
        .sum();
    assert_eq!(rows, u(&ch["inserted"]), "nothing lost");
    assert!(rows > 40, "{rows}");

    // Away for longer than a 1 KiB buffer can cover: everything dropped, counted and said.
    server.pause();
    let (r, out) =
        agent(&server, dir.path(), "small", &["incast.pcap"], &["--export-buffer", "1K", "--export-wait", "1s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "partial: {stderr}");
    let x = &r["export"];
    assert_eq!(x["clickhouse"]["inserted"], 0);
    assert_eq!(x["clickhouse"]["dropped"], x["lines"], "{x}");
    assert_eq!(x["dropped"], x["lines"]);
    assert_eq!(r["output_failures"][0]["output"], "--export-clickhouse");
    assert!(stderr.contains(&format!("{} row(s) dropped", x["lines"])), "{stderr}");
    assert!(!format!("{r}{stderr}").contains(&server.password));
}

/// A live agent inserts every interval (issue 43 §1): the agent and the server in one network
/// namespace (its own loopback), frames replayed twice with a pause between; the intervals
/// table holds one row per interval the agent closed, the flows rows add up to the agent's
/// report, and `/metrics` counts the lines inserted.
#[test]
fn a_live_agent_inserts_every_interval() {
    use tests::netns::{Agent, Netns, privileged};
    if !privileged("a_live_agent_inserts_every_interval") {
        return;
    }
    let ns = Netns::new("chlive");
    ns.loopback_up();
    let server = Server::start_in(Some(&ns.name));
    server.apply(&deploy_dir().join("schema.sql"));
    let dir = tempfile::tempdir().unwrap();
    let f = tests::fixtures::all().into_iter().find(|f| f.name == "gobackn.pcap").unwrap();
    let sent = f.as_sent(dir.path());
    let json = dir.path().join("live.json");
    let url = server.url();
    let port = 23000 + (std::process::id() % 1000) as u16;
    let metrics = format!("127.0.0.1:{port}");
    let args = [
        "--interval",
        "200ms",
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--export-clickhouse",
        &url,
        "--metrics",
        &metrics,
        "--label",
        "leaf1:up1",
    ];
    let env =
        [("ROCE_ANALYZER_CLICKHOUSE_USER", USER), ("ROCE_ANALYZER_CLICKHOUSE_PASSWORD", server.password.as_str())];
    let agent = Agent::start_env(&ns, &binary(), &args, &env);
    assert!(ns.replay(&sent).status.success());
    std::thread::sleep(Duration::from_millis(700));
    assert!(ns.replay(&sent).status.success());
    std::thread::sleep(Duration::from_millis(700));
    let text = ns.scrape(port).unwrap();
    let inserted = tests::tools::metric(&text, r#"roce_analyzer_export_lines_total{sink="clickhouse"}"#);
    assert!(inserted.is_some_and(|n| n > 0), "{text}");
    let (code, _, stderr) = agent.stop();
    assert_eq!(code, Some(0), "{stderr:?}");
    assert!(!stderr.join("\n").contains(&server.password));
    let r = read_report(&json);
    let x = &r["export"]["clickhouse"];
    assert_eq!(u(&x["dropped"]), 0, "{x}");
    let intervals = u(&server.rows("SELECT count() AS n FROM roce.intervals")[0]["n"]);
    assert!(intervals >= 5, "one row per interval of 200 ms over about 1.5 s: {intervals}");
    let last = &server.rows("SELECT is_final, total_frames FROM roce.intervals ORDER BY end_ns DESC LIMIT 1")[0];
    assert_eq!((u(&last["is_final"]), u(&last["total_frames"])), (1, 2 * f.frames.len() as u64));
    // The flows' per-interval deltas add up to the report's totals.
    let bytes = u(&server.rows("SELECT sum(bytes) AS b FROM roce.flows")[0]["b"]);
    let want: u64 = r["flows"].as_array().unwrap().iter().map(|f| u(&f["bytes"])).sum();
    assert_eq!(bytes, want);
    // --label names the live input in the report and in every row (the interface stays its
    // name).
    let source = &r["capture"]["sources"][0];
    assert_eq!((source["label"].as_str(), source["kind"].as_str()), (Some("leaf1:up1"), Some("live")));
    assert_ne!(source["name"], "leaf1:up1");
    let labels = server.rows("SELECT DISTINCT label FROM roce.intervals");
    assert_eq!(labels, [serde_json::json!({"label": "leaf1:up1"})]);
    assert!(!server.log().contains(&server.password));
}
