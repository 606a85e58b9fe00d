//! Running the binary and the external oracles from tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root.
pub fn root() -> PathBuf {
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    p.pop();
    p
}

/// The `roce-analyzer` binary of this build profile, built once per test process so that a
/// plain `cargo test` on a clean checkout never runs a stale or missing binary.
/// `ROCE_ANALYZER_BIN` names another one (the benchmarks use the release build).
pub fn binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("ROCE_ANALYZER_BIN") {
                return PathBuf::from(p);
            }
            let release = !cfg!(debug_assertions);
            let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            cmd.current_dir(root()).args(["build", "--quiet", "--package", "analyzer", "--bin", "roce-analyzer"]);
            if release {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("cargo runs");
            assert!(status.success(), "building roce-analyzer failed");
            let target =
                std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
            let bin = target.join(if release { "release" } else { "debug" }).join("roce-analyzer");
            assert!(bin.is_file(), "{} was not built", bin.display());
            bin
        })
        .clone()
}

/// Runs `roce-analyzer` with `args`. A report it writes to stdout (`--json -`) is checked
/// against the shipped JSON Schema.
pub fn run(args: &[&str]) -> Output {
    let out = Command::new(binary()).args(args).output().expect("roce-analyzer runs");
    let json_to_stdout = args.windows(2).any(|w| w == ["--json", "-"]);
    if json_to_stdout && matches!(out.status.code(), Some(0 | 3 | 4)) {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report is JSON");
        check_report(&v);
    }
    out
}

/// The JSON report of the bundled capture `name` (tests/data) with `extra` flags; the run must
/// exit 0.
pub fn report(name: &str, extra: &[&str]) -> serde_json::Value {
    let p = crate::fixtures::data_dir().join(name);
    let mut args = vec!["-q", "-r", p.to_str().unwrap(), "--json", "-"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// tshark's `fields` of every frame of `file` (that `display_filter` keeps, when given), a
/// vector of the fields' texts per frame (the last occurrence of each).
pub fn tshark_fields(file: &Path, fields: &[&str], display_filter: Option<&str>) -> Vec<Vec<String>> {
    let mut cmd = Command::new(require("tshark"));
    cmd.args(["-n", "-r"]).arg(file).args(["-T", "fields", "-E", "separator=/t", "-E", "occurrence=l"]);
    if let Some(f) = display_filter {
        cmd.args(["-Y", f]);
    }
    for field in fields {
        cmd.args(["-e", field]);
    }
    let out = cmd.output().expect("tshark runs");
    assert!(out.status.success(), "tshark on {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| l.split('\t').map(str::to_string).collect()).collect()
}

/// The value of one series (`name{labels}`) in Prometheus text.
pub fn metric(text: &str, series: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The report JSON Schema shipped in the repository (schema/report-v1.schema.json).
pub fn schema() -> serde_json::Value {
    let p = root().join("schema/report-v1.schema.json");
    serde_json::from_slice(&std::fs::read(&p).expect("schema file")).expect("schema is JSON")
}

/// Schema violations of a report, as messages (empty when it conforms).
pub fn schema_errors(report: &serde_json::Value) -> Vec<String> {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let v = VALIDATOR.get_or_init(|| jsonschema::validator_for(&schema()).expect("a valid JSON Schema"));
    v.iter_errors(report).map(|e| format!("{e} (at {})", e.instance_path())).collect()
}

/// Every report the tests produce goes through this.
pub fn check_report(report: &serde_json::Value) {
    let errors = schema_errors(report);
    assert!(errors.is_empty(), "the report does not match schema/report-v1.schema.json: {errors:#?}");
}

/// Reads a report file and checks it against the schema.
pub fn read_report(path: &Path) -> serde_json::Value {
    let v = serde_json::from_slice(&std::fs::read(path).expect("report file")).expect("the report is JSON");
    check_report(&v);
    v
}

/// Finds a tool on PATH; `None` when absent.
pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

/// The path of a tool the tests cannot do without. Absence is a loud failure, never a skip:
/// `scripts/setup` installs it.
pub fn require(tool: &str) -> PathBuf {
    which(tool).unwrap_or_else(|| panic!("{tool} is not installed: run scripts/setup (as root) first"))
}

/// The kernel's own account of a hash map's memory, in bytes (`memlock` in its fdinfo): what
/// the kernel charges for it, entries, per-CPU values and table included.
pub fn map_memlock(ebpf: &aya::Ebpf, map: &str) -> std::io::Result<u64> {
    use std::os::fd::{AsFd, AsRawFd};
    let missing = || std::io::Error::other(format!("{map}: no such hash map or array in the object"));
    let fd = match ebpf.map(map).ok_or_else(missing)? {
        aya::maps::Map::PerCpuHashMap(d) | aya::maps::Map::HashMap(d) | aya::maps::Map::Array(d) => {
            d.fd().as_fd().as_raw_fd()
        }
        _ => return Err(missing()),
    };
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))?;
    info.lines()
        .find_map(|l| l.strip_prefix("memlock:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("{map}: no memlock in its fdinfo")))
}

/// True when the process runs as root (the privileged tests need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The tshark fields the differential test compares (and the benchmark extracts): addresses,
/// UDP source port, BTH, RETH DMA length, AETH syndrome, ECN/DSCP, GRH, MAC control.
pub const TSHARK_FIELDS: &[&str] = &[
    "frame.len",
    "ip.len",
    "vlan.id",
    "eth.src",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "infiniband.grh.sgid",
    "infiniband.grh.dgid",
    "udp.srcport",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "ip.dsfield.ecn",
    "ip.dsfield.dscp",
    "ipv6.tclass.ecn",
    "ipv6.tclass.dscp",
    "infiniband.grh.tclass",
    "macc.opcode",
    "macc.cbfc.enbv",
    "macc.cbfc.pause_time.c0",
    "macc.cbfc.pause_time.c1",
    "macc.cbfc.pause_time.c2",
    "macc.cbfc.pause_time.c3",
    "macc.cbfc.pause_time.c4",
    "macc.cbfc.pause_time.c5",
    "macc.cbfc.pause_time.c6",
    "macc.cbfc.pause_time.c7",
    "macc.pause_time",
];

/// Runs headless Chromium on `url` with the flags this machine needs (no sandbox as root, no
/// background networking: the network is closed) and `extra` (e.g. `--dump-dom`,
/// `--screenshot=PATH`); returns stdout.
pub fn chromium(url: &str, extra: &[&str]) -> String {
    let bin = require("chromium");
    let profile = tempfile::tempdir().expect("temporary profile");
    let out = std::process::Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1400,2400",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "chromium: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Where two JSON values differ: each differing path (`a.b[3].c`) with both values, compact,
/// at most `max` of them. An assertion that prints these instead of two whole reports says
/// what differed even when the log is cut short.
pub fn json_diff(a: &serde_json::Value, b: &serde_json::Value, max: usize) -> Vec<String> {
    fn walk(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>, max: usize) {
        use serde_json::Value::{Array, Object};
        if out.len() >= max || a == b {
            return;
        }
        match (a, b) {
            (Object(x), Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let null = serde_json::Value::Null;
                    walk(&format!("{path}.{k}"), x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null), out, max);
                }
            }
            (Array(x), Array(y)) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    walk(&format!("{path}[{i}]"), p, q, out, max);
                }
            }
            _ => {
                let cut = |v: &serde_json::Value| v.to_string().chars().take(300).collect::<String>();
                out.push(format!("{path}: {} != {}", cut(a), cut(b)));
            }
        }
    }
    let mut out = Vec::new();
    walk("", a, b, &mut out, max);
    out
}

/// Asserts two JSON values equal, naming the paths where they differ (see [`json_diff`]).
#[track_caller]
pub fn assert_json_eq(left: &serde_json::Value, right: &serde_json::Value, what: &str) {
    let diff = json_diff(left, right, 20);
    assert!(diff.is_empty(), "{what}: differs at\n  {}", diff.join("\n  "));
}
