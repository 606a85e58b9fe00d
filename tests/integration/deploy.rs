//! What `deploy/` ships, checked with the validators that exist for it: `systemd-analyze
//! verify` for the unit, `kubernetes-validate --strict` (the Kubernetes API's own schemas) for
//! the DaemonSet and its Service, `promtool` for the Prometheus rules. The ServiceMonitor is a
//! custom resource those schemas do not cover: the test checks that it selects the Service and
//! names its port.

use std::path::PathBuf;
use std::process::Command;

use tests::tools::{binary, require, root};

fn deploy(p: &str) -> PathBuf {
    root().join("deploy").join(p)
}

#[test]
fn the_systemd_unit_verifies_and_grants_only_what_the_agent_needs() {
    let analyze = require("systemd-analyze");
    let unit = std::fs::read_to_string(deploy("roce-analyzer.service")).unwrap();
    // The unit names the installed path; verify it against the binary just built.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("roce-analyzer.service");
    std::fs::write(&local, unit.replace("/usr/local/bin/roce-analyzer", binary().to_str().unwrap())).unwrap();
    let out = Command::new(&analyze).arg("verify").arg(&local).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "systemd-analyze verify: {said}");
    // The capabilities: loading and attaching need these three, the agent keeps two of them.
    let caps = "CAP_BPF CAP_NET_ADMIN CAP_PERFMON";
    assert!(unit.contains(&format!("AmbientCapabilities={caps}\n")));
    assert!(unit.contains(&format!("CapabilityBoundingSet={caps}\n")));
    for kept in analyzer::privilege::KEPT {
        assert!(caps.contains(&kept.to_string()), "{kept} granted");
    }
    assert!(unit.contains("DynamicUser=yes") && unit.contains("NoNewPrivileges=yes"));
    // A usage error stops it: restarting every 5 s would never fix a bad flag.
    assert!(unit.contains(&format!("RestartPreventExitStatus={}\n", analyzer::exit::USAGE)));
    // Every ROCE_ANALYZER_ variable the unit sets is a flag of the command line.
    let cmd = analyzer::cli::command();
    for line in unit.lines().filter_map(|l| l.strip_prefix("Environment=")) {
        let var = line.split('=').next().unwrap();
        assert!(
            cmd.get_arguments().any(|a| a.get_long().map(analyzer::cli::env_name).as_deref() == Some(var)),
            "{var} is not a flag's variable"
        );
    }
}

#[test]
fn the_kubernetes_manifests_validate() {
    let validate = require("kubernetes-validate");
    let manifest = deploy("kubernetes/daemonset.yaml");
    let out = Command::new(&validate).args(["--strict", "--no-warn"]).arg(&manifest).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "kubernetes-validate: {said}");
    assert!(said.contains("passed for resource daemonset/roce-analyzer"), "{said}");
    assert!(said.contains("passed for resource service/roce-analyzer"), "{said}");
    // The validator rejects what it should: a misspelt field.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&bad, text.replace("hostNetwork: true", "hostNetwrok: true")).unwrap();
    assert!(!Command::new(&validate).arg("--strict").arg(&bad).output().unwrap().status.success());
    // The pod runs with the three capabilities, nothing else, no escalation, and probes /healthz.
    assert!(text.contains(r#"drop: ["ALL"]"#) && text.contains(r#"add: ["BPF", "NET_ADMIN", "PERFMON"]"#));
    assert!(text.contains("allowPrivilegeEscalation: false") && text.contains("path: /healthz"));
    assert!(text.contains("hostNetwork: true"));
    // Configured by a ConfigMap of flag variables (validated too), the image the Containerfile
    // builds for this version, the outputs on a node volume.
    assert!(said.contains("passed for resource configmap/roce-analyzer"), "{said}");
    let cmd = analyzer::cli::command();
    let data = &text[text.find("data:").unwrap()..text.find("---").unwrap()];
    let vars: Vec<&str> =
        data.lines().filter_map(|l| l.trim().split(':').next()).filter(|k| k.starts_with("ROCE_ANALYZER_")).collect();
    assert!(vars.len() >= 4, "{vars:?}");
    for var in vars {
        assert!(
            cmd.get_arguments().any(|a| a.get_long().map(analyzer::cli::env_name).as_deref() == Some(var)),
            "{var} is not a flag's variable"
        );
    }
    assert!(text.contains(&format!("image: roce-analyzer:{}\n", env!("CARGO_PKG_VERSION"))));
    assert!(
        text.contains("mountPath: /var/lib/roce-analyzer")
            && text.contains("ROCE_ANALYZER_EXPORT: /var/lib/roce-analyzer/")
    );
    // The ServiceMonitor selects the Service by its label and scrapes its port by name.
    let sm = std::fs::read_to_string(deploy("kubernetes/servicemonitor.yaml")).unwrap();
    assert!(sm.contains("kind: ServiceMonitor") && sm.contains("app.kubernetes.io/name: roce-analyzer"));
    assert!(sm.contains("- port: metrics") && text.contains("- name: metrics\n      port: 9464"));
}

/// The container's build context is what the Containerfile copies and nothing else (the
/// target directory is gigabytes): `.containerignore` (and `.dockerignore`, for docker) leave
/// out everything, then let in each COPY source.
#[test]
fn the_container_build_context_is_only_what_it_copies() {
    let file = std::fs::read_to_string(deploy("Containerfile")).unwrap();
    let sources: Vec<&str> = file.lines().filter_map(|l| l.strip_prefix("COPY ")?.split_whitespace().next()).collect();
    assert!(!sources.is_empty());
    for ignore in [".containerignore", ".dockerignore"] {
        let text = std::fs::read_to_string(root().join(ignore)).unwrap();
        let patterns: Vec<&str> = text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).collect();
        assert_eq!(patterns.first(), Some(&"*"), "{ignore}: everything left out first");
        let let_in: Vec<&str> = patterns.iter().filter_map(|p| p.strip_prefix('!')).collect();
        assert_eq!(let_in, sources, "{ignore}: exactly the COPY sources let in");
    }
}

/// The recording and alerting rules: `promtool check rules` and `promtool test rules` (each
/// alert fires on the series that should fire it, with its text, and stays quiet before), and
/// every metric they name is one the agent serves.
#[test]
fn the_prometheus_rules_pass_promtool_and_name_real_metrics() {
    let promtool = require("promtool");
    let dir = deploy("prometheus");
    for args in [&["check", "rules", "rules.yml"][..], &["test", "rules", "rules_test.yml"]] {
        let out = Command::new(&promtool).args(args).current_dir(&dir).output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && said.contains("SUCCESS"), "promtool {args:?}: {said}");
    }
    // The families the agent serves (those with samples), over reports that fill every section:
    // vantage points, and PFC with a storm.
    let data = tests::fixtures::data_dir();
    let mut served: Vec<String> = Vec::new();
    for files in [&["leaf=vantage_leaf.pcap", "spine=vantage_spine.pcap"][..], &["pfc_storm.pcap"]] {
        let mut run = analyzer::pipeline::Pipeline::default();
        let inputs: Vec<_> = files
            .iter()
            .map(|a| {
                let (l, f) = a.split_once('=').unwrap_or(("storm", a));
                analyzer::capture::input::InputSpec::parse(&format!("{l}={}", data.join(f).display())).unwrap()
            })
            .collect();
        analyzer::offline::analyze_files(&mut run, &inputs, |_, _| {}).unwrap();
        let r = analyzer::model::Report::assemble(&run, analyzer::report::assemble::RunKind::Live);
        let text = analyzer::report::render::metrics::render(&r, 10, &[]);
        served.extend(text.lines().filter_map(|l| Some(l.strip_prefix("# TYPE ")?.split(' ').next()?.to_string())));
    }
    let rules = std::fs::read_to_string(dir.join("rules.yml")).unwrap();
    let mut named = 0;
    for word in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
        if word.starts_with("roce_analyzer_") {
            assert!(served.iter().any(|s| s == word), "{word} is not a metric the agent serves: {served:?}");
            named += 1;
        }
    }
    assert!(named >= 6, "{named} metric names in the rules");
}
