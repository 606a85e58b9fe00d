//! Every command the README shows is run, and the output it shows is what the command prints.
//!
//! The README's commands are the lines starting with `$ ` in its `sh` blocks; a `text` block
//! right after one is what that block's commands print (stdout then stderr of each, in order;
//! a line `…` stands for any number of lines, `…` inside a line for any text). A block that
//! names an interface (`--iface eth0`, `tcpdump -i mlx5_0`) runs in a network namespace of its
//! own where that interface is one end of a veth pair: each live command is started, the bundled
//! `example.pcap` is replayed onto the other end once it listens, then it is stopped as a person
//! stops it (Ctrl-C to its process group) unless it stops by itself (`--duration`); a command
//! ending in `&` runs in the background until the block ends. `roce-analyzer` is the binary the
//! tests build, `sudo` runs the command as it is (the tests run as root).
//!
//! Three commands cannot run here as they do on a user's machine, and each is checked by what
//! stands for it: `cargo xtask test` is the command running this test (`.ci/run` must call it);
//! `kubectl apply -f DIR` has no cluster, so every manifest of DIR is validated against the
//! Kubernetes API's schemas (`kubernetes-validate --strict`; a custom resource is named and
//! left to `deploy::the_kubernetes_manifests_validate`); `systemctl enable --now UNIT` has no
//! systemd, so the unit is verified (`systemd-analyze verify`) and its `ExecStart` is run with
//! the unit's environment and the README's `/etc/default` settings, in a namespace holding the
//! interface, until it attaches. A command none of these rules runs fails the test.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use tests::netns::Netns;
use tests::tools::{binary, require, root};

/// A README `sh` block: its commands, the output shown after it, and where it is.
#[derive(Debug)]
struct Block {
    line: usize,
    commands: Vec<String>,
    shown: Option<String>,
}

/// The README's `sh` blocks.
fn blocks(readme: &str) -> Vec<Block> {
    let lines: Vec<&str> = readme.lines().collect();
    let fenced = |from: usize| -> (Vec<&str>, usize) {
        let end = (from..lines.len()).find(|&k| lines[k] == "```").expect("a closed fence");
        (lines[from..end].to_vec(), end + 1)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i] != "```sh" {
            i += 1;
            continue;
        }
        let line = i + 1;
        let (body, next) = fenced(i + 1);
        let mut commands: Vec<String> = Vec::new();
        for l in body {
            match (l.strip_prefix("$ "), commands.last_mut()) {
                (Some(c), _) => commands.push(c.to_string()),
                (None, Some(last)) if last.ends_with('\\') => {
                    last.pop();
                    last.push_str(l.trim_start());
                }
                _ => panic!("README line {line}: a line of an sh block that is not a command: {l:?}"),
            }
        }
        i = next;
        while i < lines.len() && lines[i].is_empty() {
            i += 1;
        }
        let shown = (i < lines.len() && lines[i] == "```text").then(|| {
            let (text, next) = fenced(i + 1);
            i = next;
            text.join("\n")
        });
        out.push(Block { line, commands, shown });
    }
    out
}

/// Whether `actual` is what `pattern` shows (`…` lines and `…` inside lines are wildcards).
fn shows(pattern: &[&str], actual: &[&str]) -> bool {
    match pattern.split_first() {
        None => actual.is_empty(),
        Some((&"…", rest)) => (0..=actual.len()).any(|k| shows(rest, &actual[k..])),
        Some((p, rest)) => actual.first().is_some_and(|a| line_shows(p, a)) && shows(rest, &actual[1..]),
    }
}

/// One line: the text between `…`s found in order, the first part at the start and the last
/// at the end.
fn line_shows(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split('…').collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || !actual[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    true
}

#[test]
fn the_matcher_takes_what_it_should_and_nothing_else() {
    let a = ["roce-analyzer 0.1.0 · live · 258 frames", "x", "frames: roce 240 · non_roce 9", "end"];
    assert!(shows(&["roce-analyzer … · live · … frames", "…", "frames: roce 240 · non_roce …", "…"], &a));
    assert!(shows(&["…", "end"], &a));
    assert!(!shows(&["…", "frames: roce 241 · non_roce …", "…"], &a), "a number that differs");
    assert!(
        !shows(&["roce-analyzer … · live · … frames", "frames: roce 240 · non_roce 9", "end"], &a),
        "a line left out"
    );
    assert!(!shows(&["…", "x"], &a), "lines after the last shown one need a …");
    assert!(!line_shows("a…b…c", "acb"));
    assert!(line_shows("a…b…c", "a-b-c"));
}

/// The words after `--iface`, `-i` and `-i` in any command of the block: the interfaces its
/// namespace needs.
fn interfaces(b: &Block) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &b.commands {
        let words: Vec<&str> = c.split_whitespace().collect();
        for w in words.windows(2).filter(|w| w[0] == "--iface" || w[0] == "-i") {
            if !out.iter().any(|o| o == w[1]) {
                out.push(w[1].to_string());
            }
        }
    }
    out
}

/// Where a block runs: a directory of its own with the repository's `tests`, `deploy` and
/// `scripts` in it, `roce-analyzer` (the tested build) and `sudo` (running the command as it
/// is) first on the PATH, and, when it names interfaces, a namespace holding them.
struct Place {
    dir: tempfile::TempDir,
    path: String,
    ns: Option<Netns>,
}

impl Place {
    fn new(ifaces: &[String]) -> Place {
        let dir = tempfile::tempdir().unwrap();
        for d in ["tests", "deploy", "scripts"] {
            std::os::unix::fs::symlink(root().join(d), dir.path().join(d)).unwrap();
        }
        let bin = dir.path().join(".bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(binary(), bin.join("roce-analyzer")).unwrap();
        std::fs::write(bin.join("sudo"), "#!/bin/sh\nexec \"$@\"\n").unwrap();
        Command::new("chmod").arg("+x").arg(bin.join("sudo")).status().unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let ns = (!ifaces.is_empty()).then(|| {
            let ns = Netns::bare("readme");
            for (k, i) in ifaces.iter().enumerate() {
                let peer = format!("rdpeer{k}");
                assert!(ns.ip(&["link", "add", i, "type", "veth", "peer", "name", &peer]).status.success());
                for d in [i.as_str(), &peer] {
                    ns.sysctl(&format!("net.ipv6.conf.{d}.disable_ipv6=1"));
                    assert!(ns.ip(&["link", "set", d, "up"]).status.success());
                }
            }
            ns.loopback_up();
            ns
        });
        Place { dir, path, ns }
    }

    /// `sh -c command` here (in the namespace when there is one), in a process group of its own.
    fn shell(&self, command: &str) -> Command {
        let mut c = match &self.ns {
            Some(ns) => ns.cmd("sh"),
            None => Command::new("sh"),
        };
        c.args(["-c", command]).current_dir(self.dir.path()).env("PATH", &self.path).process_group(0);
        c
    }

    /// Replays the bundled example onto the other end of every interface of the namespace.
    fn replay(&self) {
        let ns = self.ns.as_ref().expect("a namespace");
        let mut k = 0;
        while ns.ip(&["link", "show", &format!("rdpeer{k}")]).status.success() {
            let out = ns
                .cmd(binary())
                .arg("replay")
                .arg(root().join("tests/data/example.pcap"))
                .args(["-i", &format!("rdpeer{k}")])
                .output()
                .unwrap();
            assert!(out.status.success(), "replay: {}", String::from_utf8_lossy(&out.stderr));
            k += 1;
        }
    }
}

/// A command started with its standard output and error on one pipe, as a terminal shows
/// them, read line by line on a thread.
struct Running {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    said: Vec<String>,
}

impl Running {
    fn start(place: &Place, command: &str) -> Running {
        Running::spawn(place.shell(command))
    }

    fn spawn(mut cmd: Command) -> Running {
        let (reader, writer) = std::io::pipe().unwrap();
        let child = cmd.stdout(writer.try_clone().unwrap()).stderr(writer).spawn().unwrap();
        // Our copies of the writing end are gone with `cmd`: the reader sees the end when the
        // command's processes have all ended.
        drop(cmd);
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(reader).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Running { child, lines, said: Vec::new() }
    }

    /// Waits until it listens: the agent attached, tcpdump listening.
    fn listening(&mut self, command: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100)) {
                let ready = l.contains("attached to") || l.contains("listening on");
                self.said.push(l);
                if ready {
                    return;
                }
            }
            if let Ok(Some(s)) = self.child.try_wait() {
                panic!("README command {command:?} exited ({s}) before listening: {}", self.said.join("\n"));
            }
        }
        panic!("README command {command:?} did not start listening: {}", self.said.join("\n"));
    }

    /// Ctrl-C to its process group (as a terminal sends it), then its output: stdout, then
    /// everything it said on stderr.
    fn interrupt(self) -> (Option<i32>, String) {
        // SAFETY: signalling the process group of our own child.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGINT) };
        self.finish()
    }

    /// Waits for it to end (a minute at most); its exit code and every line it printed.
    fn finish(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "a README command did not end: {}", self.said.join("\n"));
            std::thread::sleep(Duration::from_millis(50));
        };
        // The pipe ends when the last process holding it does.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.said.push(l);
        }
        let text: String = self.said.iter().map(|l| format!("{l}\n")).collect();
        (status.code(), text)
    }
}

/// Runs one command of a block; returns what it printed, or nothing for a background command.
fn run(place: &Place, command: &str, background: &mut Vec<Running>) -> Option<String> {
    let bare = command.strip_prefix("sudo ").unwrap_or(command);
    if let Some(stand_in) = stand_in(place, bare) {
        return Some(stand_in);
    }
    let live = bare.split_whitespace().any(|w| w == "--iface" || w == "-i");
    if let Some(cmd) = bare.strip_suffix(" &") {
        let mut r = Running::start(place, cmd);
        r.listening(command);
        place.replay();
        // Two intervals: what it serves has taken the frames in.
        std::thread::sleep(Duration::from_millis(2500));
        background.push(r);
        return None;
    }
    if live {
        let mut r = Running::start(place, bare);
        r.listening(command);
        place.replay();
        // A person presses Ctrl-C a moment after the traffic: tcpdump hands its kernel buffer
        // over once a second, and what it has not read by the interrupt is not written.
        let (_, text) = match bare.contains("--duration") {
            true => r.finish(),
            false => {
                std::thread::sleep(Duration::from_millis(1500));
                r.interrupt()
            }
        };
        return Some(text);
    }
    let cargo = bare.strip_prefix("cargo run --release -- ").map(|a| format!("roce-analyzer {a}"));
    Some(Running::start(place, cargo.as_deref().unwrap_or(bare)).finish().1)
}

/// The commands that cannot run here as on a user's machine, each run as what stands for it
/// (the module's doc); None for every other command.
fn stand_in(place: &Place, command: &str) -> Option<String> {
    if command == "cargo xtask test" {
        let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
        assert!(ci.lines().any(|l| l.trim() == "exec cargo xtask test"), ".ci/run runs the README's test command");
        return Some(String::new());
    }
    if let Some(rest) = command.strip_prefix("cargo build ") {
        // The build the tests themselves use (tools::binary), in their profile.
        let mut args: Vec<&str> = rest.split_whitespace().collect();
        if cfg!(debug_assertions) {
            args.retain(|a| *a != "--release");
        }
        let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(root())
            .arg("build")
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success(), "cargo build {rest}: {}", String::from_utf8_lossy(&out.stderr));
        return Some(String::new());
    }
    if let Some(rest) = command.strip_prefix("install -m 0755 target/release/roce-analyzer ") {
        // Installed into the place's own bin directory instead of the system's.
        let into = place.dir.path().join(rest.trim_start_matches('/'));
        std::fs::create_dir_all(&into).unwrap();
        let out = Command::new("install").args(["-m", "0755"]).arg(binary()).arg(&into).output().unwrap();
        assert!(out.status.success(), "install: {}", String::from_utf8_lossy(&out.stderr));
        assert!(into.join("roce-analyzer").is_file());
        return Some(String::new());
    }
    if let Some(dir) = command.strip_prefix("kubectl apply -f ") {
        return Some(kubectl_apply(&root().join(dir)));
    }
    if let Some(unit) = command.strip_prefix("systemctl enable --now ") {
        return Some(systemctl_enable(unit));
    }
    None
}

/// `kubectl apply -f DIR` without a cluster: every manifest of DIR validated strictly against
/// the Kubernetes API's schemas; a custom resource (ServiceMonitor) named.
fn kubectl_apply(dir: &Path) -> String {
    let validate = require("kubernetes-validate");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds manifests", dir.display());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        if text.contains("kind: ServiceMonitor") {
            continue;
        }
        let out = Command::new(&validate).args(["--strict", "--no-warn"]).arg(&f).output().unwrap();
        assert!(out.status.success(), "kubernetes-validate {}: {}", f.display(), String::from_utf8_lossy(&out.stdout));
    }
    String::new()
}

/// `systemctl enable --now UNIT` without systemd: the unit verified, then its `ExecStart` run
/// with its environment and the README's `/etc/default` setting, in a namespace holding the
/// interface, until it attaches; stopped as systemd stops it (SIGTERM), it exits 0 with the
/// report written where the unit says (moved under a directory of the test's).
fn systemctl_enable(unit: &str) -> String {
    let text = std::fs::read_to_string(root().join("deploy").join(format!("{unit}.service"))).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join(format!("{unit}.service"));
    std::fs::write(&local, text.replace("/usr/local/bin/roce-analyzer", binary().to_str().unwrap())).unwrap();
    let out = Command::new(require("systemd-analyze")).arg("verify").arg(&local).output().unwrap();
    assert!(out.status.success(), "systemd-analyze verify: {}", String::from_utf8_lossy(&out.stderr));
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let setting = readme.split('`').find(|w| w.starts_with("ROCE_ANALYZER_IFACE=")).expect("the README's setting");
    let iface = setting.trim_start_matches("ROCE_ANALYZER_IFACE=");
    let place = Place::new(&[iface.to_string()]);
    let state = place.dir.path().join("var-lib");
    std::fs::create_dir(&state).unwrap();
    let mut cmd = place.ns.as_ref().unwrap().cmd(binary());
    for line in text.lines().filter_map(|l| l.strip_prefix("Environment=")) {
        let (k, v) = line.split_once('=').unwrap();
        cmd.env(k, v.replace("/var/lib/roce-analyzer", state.to_str().unwrap()));
    }
    cmd.env("ROCE_ANALYZER_IFACE", iface);
    let mut r = Running::spawn(cmd);
    r.listening("systemctl enable --now");
    place.replay();
    // SAFETY: signalling our own child, as systemd stops a unit.
    unsafe { libc::kill(r.child.id() as i32, libc::SIGTERM) };
    let (code, said) = r.finish();
    assert_eq!(code, Some(0), "{said}");
    let report = tests::tools::read_report(&state.join("report.json"));
    assert_eq!(report["capture"]["classes"]["roce"], 240, "the unit's report holds the replayed frames");
    String::new()
}

#[test]
fn every_command_of_the_readme_runs_and_prints_what_it_shows() {
    if !tests::netns::privileged("every_command_of_the_readme_runs_and_prints_what_it_shows") {
        return;
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let all = blocks(&readme);
    assert!(all.len() >= 10, "the README's blocks: {all:#?}");
    for b in &all {
        let place = Place::new(&interfaces(b));
        let mut background = Vec::new();
        let mut printed = String::new();
        for c in &b.commands {
            if let Some(text) = run(&place, c, &mut background) {
                printed.push_str(&text);
            }
        }
        for r in background {
            let _ = r.interrupt();
        }
        if let Some(shown) = &b.shown {
            let (want, got): (Vec<&str>, Vec<&str>) = (shown.lines().collect(), printed.lines().collect());
            assert!(
                shows(&want, &got),
                "README line {}: {:?} printed\n{printed}\nwhich is not what the README shows:\n{shown}",
                b.line,
                b.commands
            );
        }
    }
}

/// The reference in docs/: each page's contents list names every section it has, the index
/// (docs/README.md) names every page and its sections, and every relative link of the README
/// and the pages leads to a file that exists.
#[test]
fn the_reference_lists_its_sections_and_its_links_lead_somewhere() {
    let docs = root().join("docs");
    let index = std::fs::read_to_string(docs.join("README.md")).unwrap();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&docs).unwrap().map(|e| e.unwrap().path()).collect();
    pages.sort();
    for page in pages.iter().filter(|p| p.extension().is_some_and(|e| e == "md")) {
        let name = page.file_name().unwrap().to_str().unwrap();
        let text = std::fs::read_to_string(page).unwrap();
        let mut fenced = false;
        let headings: Vec<&str> = text
            .lines()
            .filter(|l| {
                fenced ^= l.starts_with("```");
                !fenced && l.starts_with("## ")
            })
            .map(|l| &l[3..])
            .collect();
        if name != "README.md" {
            assert!(index.contains(&format!("]({name})")), "docs/README.md lists {name}");
            for h in &headings {
                assert!(index.contains(&format!("- [{h}]({name}#")), "docs/README.md lists {name}: {h}");
                if name != "ARCHITECTURE.md" {
                    assert!(text.contains(&format!("- [{h}](#")), "{name}'s contents list {h}");
                }
            }
        }
        links_lead_somewhere(page, &text);
    }
    let readme = root().join("README.md");
    links_lead_somewhere(&readme, &std::fs::read_to_string(&readme).unwrap());
}

/// Every `](path)` link of `text` that is not a URL or an anchor names a file beside `page`.
fn links_lead_somewhere(page: &Path, text: &str) {
    for link in text.split("](").skip(1).map(|s| &s[..s.find(')').unwrap_or(0)]) {
        let file = link.split('#').next().unwrap();
        if file.is_empty() || file.contains("://") {
            continue;
        }
        let to = page.parent().unwrap().join(file);
        assert!(to.exists(), "{}: the link {link} leads nowhere", page.display());
    }
}
