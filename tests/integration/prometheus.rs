//! A real Prometheus server (Debian's) scrapes two agents in two network namespaces, and the
//! fleet queries an operator would run return what the agents' reports say.

use std::time::{Duration, Instant};

use serde_json::Value;
use tests::fixtures;
use tests::netns::{Agent, Netns, privileged};
use tests::tools::require;

/// Percent-encoding of a query string value (RFC 3986 unreserved characters kept).
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The instant vector of `query`, as (labels, value).
fn query(prom: &Netns, q: &str) -> Vec<(Value, f64)> {
    let body = prom.get(9090, &format!("/api/v1/query?query={}", encode(q))).unwrap_or_else(|e| panic!("{q}: {e}"));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{q}: {body}");
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["metric"].clone(), r["value"][1].as_str().unwrap().parse().unwrap()))
        .collect()
}

/// The server, stopped however the test ends (a failed assertion included).
struct Server(std::process::Child);

impl Server {
    fn stop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.stop();
        }
    }
}

#[test]
fn prometheus_scrapes_two_agents_and_fleet_queries_match_their_reports() {
    if !privileged("prometheus_scrapes_two_agents_and_fleet_queries_match_their_reports") {
        return;
    }
    let prometheus = require("prometheus");
    let a = Netns::new("prom-a");
    let b = Netns::peer_with_veth("prom-b");
    let prom = Netns::peer("prom");
    prom.link(&a, ("pa", "10.99.1.1"), ("ma", "10.99.1.2"));
    prom.link(&b, ("pb", "10.99.2.1"), ("mb", "10.99.2.2"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        "global:\n  scrape_interval: 500ms\n  evaluation_interval: 500ms\nscrape_configs:\n  - job_name: roce\n    \
         static_configs:\n      - targets: ['10.99.1.2:9464', '10.99.2.2:9464']\n",
    )
    .unwrap();
    let server = prom
        .cmd(&prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
        .args(["--web.listen-address=127.0.0.1:9090", "--log.level=warn"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
        .spawn()
        .expect("prometheus starts");
    let mut server = Server(server);
    let log = || std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
    let stop_server = |server: &mut Server| server.stop();
    let deadline = Instant::now() + Duration::from_secs(30);
    while prom.get(9090, "/-/ready").is_err() {
        if Instant::now() > deadline {
            stop_server(&mut server);
            panic!("prometheus did not become ready");
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    // Agent A sees the example (RoCE, CNPs, RTT, a PFC sender) and ERSPAN copies from two
    // switches (vantage hops); agent B the incast (16 senders, CNPs, PFC from the switch).
    let plan = [
        (&a, "10.99.1.2:9464", vec![fixtures::example(), tests::vantage::erspan_collector()]),
        (&b, "10.99.2.2:9464", vec![tests::fabric::incast()]),
    ];
    let mut agents = Vec::new();
    for (ns, addr, _) in &plan {
        let json = dir.path().join(format!("{}.json", ns.name));
        let agent =
            Agent::start(ns, &["--interval", "200ms", "-q", "--json", json.to_str().unwrap(), "--metrics", addr]);
        agents.push((agent, json));
    }
    // Prometheus starts scraping after its first target discovery (about 5 s after start).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = query(&prom, "up");
        if up.iter().filter(|(_, v)| *v == 1.0).count() == 2 {
            break;
        }
        if Instant::now() > deadline {
            let targets = prom.get(9090, "/api/v1/targets").unwrap_or_default();
            stop_server(&mut server);
            panic!("both targets up: {up:?}\n{targets}\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    // The frames arrive while Prometheus scrapes, so rates over the scrapes are not zero.
    std::thread::sleep(Duration::from_secs(1));
    for (ns, _, fixtures) in &plan {
        for fixture in fixtures {
            assert!(ns.replay(&fixture.as_sent(dir.path())).status.success());
        }
    }
    // Two agent intervals and several scrapes after the last frame.
    std::thread::sleep(Duration::from_secs(2));
    // Every panel of the shipped Grafana dashboard returns data here ($__rate_interval as
    // Grafana would set it for this scrape interval, every agent selected).
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(tests::tools::root().join("deploy/grafana/roce-analyzer.json")).unwrap(),
    )
    .unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 10);
    for p in panels {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap().replace("$__rate_interval", "1m").replace("$instance", ".*");
            let got = query(&prom, &expr);
            assert!(got.iter().any(|(_, v)| v.is_finite()), "panel {:?}: {expr} returned no data: {got:?}", p["title"]);
            // A panel in percent means a fraction: never above 1 (a sum over senders was).
            if p["fieldConfig"]["defaults"]["unit"] == "percentunit" {
                assert!(got.iter().all(|(_, v)| *v <= 1.0), "panel {:?}: {expr} above 100 %: {got:?}", p["title"]);
            }
        }
    }
    let variable = &dashboard["templating"]["list"][1]["query"];
    assert_eq!(variable, "label_values(roce_analyzer_build_info, instance)");
    assert_eq!(query(&prom, "roce_analyzer_build_info").len(), 2, "the agent variable lists both");
    let paused = query(&prom, "sum by (priority) (roce_analyzer_pfc_paused_seconds_total)");
    let top = query(&prom, "topk(3, roce_analyzer_flow_bytes_total)");
    let cnp = query(&prom, "sum by (instance) (roce_analyzer_cnp_total)");
    let reports: Vec<Value> = agents
        .into_iter()
        .map(|(agent, json)| {
            let (code, _, err) = agent.stop();
            assert_eq!(code, Some(0), "{err:?}");
            tests::tools::read_report(&json)
        })
        .collect();
    stop_server(&mut server);

    // Pause time per priority across the fleet.
    let mut want = std::collections::BTreeMap::<String, f64>::new();
    for r in &reports {
        for s in r["pfc"]["senders"].as_array().unwrap() {
            *want.entry(s["priority"].to_string()).or_default() += s["paused_ns"].as_u64().unwrap() as f64 / 1e9;
        }
    }
    assert!(!want.is_empty(), "the fixtures have PFC senders");
    let got: std::collections::BTreeMap<String, f64> =
        paused.iter().map(|(m, v)| (m["priority"].as_str().unwrap().to_string(), *v)).collect();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{paused:?}");
    for (p, w) in &want {
        assert!((got[p] - w).abs() <= w * 1e-9, "priority {p}: Prometheus {} s, reports {w} s", got[p]);
    }
    // The top flows by bytes across the fleet.
    let mut flows: Vec<(u64, String)> = reports
        .iter()
        .flat_map(|r| r["flows"].as_array().unwrap().iter())
        .map(|f| {
            (
                f["bytes"].as_u64().unwrap(),
                format!("{}>{}/{}", f["src"].as_str().unwrap(), f["dst"].as_str().unwrap(), f["dst_qp"]),
            )
        })
        .collect();
    flows.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let mut got: Vec<(u64, String)> = top
        .iter()
        .map(|(m, v)| {
            (
                *v as u64,
                format!(
                    "{}>{}/{}",
                    m["src"].as_str().unwrap(),
                    m["dst"].as_str().unwrap(),
                    m["dst_qp"].as_str().unwrap()
                ),
            )
        })
        .collect();
    got.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), flows[..3].iter().map(|f| f.0).collect::<Vec<_>>());
    // CNPs per agent.
    let mut got: Vec<(String, u64)> =
        cnp.iter().map(|(m, v)| (m["instance"].as_str().unwrap().to_string(), *v as u64)).collect();
    got.sort();
    let want: Vec<(String, u64)> = ["10.99.1.2:9464", "10.99.2.2:9464"]
        .iter()
        .zip(&reports)
        .map(|(i, r)| (i.to_string(), r["capture"]["classes"]["cnp"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, want);
    assert!(want.iter().all(|(_, n)| *n > 0), "both fixtures have CNPs");
}
