//! Network namespaces and veth pairs the privileged tests create, and agents they run in
//! them. Everything is removed on drop, also when a test panics.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::tools::{binary, is_root};

/// Privileged tests call this first. Not root: a loud failure, unless the developer asked to
/// skip them explicitly with `ROCE_ANALYZER_SKIP_PRIVILEGED=1` (then a loud notice). CI runs
/// as root, so there they always run.
pub fn privileged(test: &str) -> bool {
    if is_root() {
        return true;
    }
    if std::env::var("ROCE_ANALYZER_SKIP_PRIVILEGED").as_deref() == Ok("1") {
        eprintln!("\n*** PRIVILEGED TEST NOT RUN: {test} (not root; ROCE_ANALYZER_SKIP_PRIVILEGED=1) ***\n");
        return false;
    }
    panic!(
        "{test} needs root (CAP_BPF, CAP_NET_ADMIN, network namespaces): run the tests as root as CI \
         does, or set ROCE_ANALYZER_SKIP_PRIVILEGED=1 to skip the privileged tests explicitly"
    );
}

fn ip(args: &[&str]) -> std::process::Output {
    Command::new("ip").args(args).output().expect("ip (iproute2) runs")
}

fn must(args: &[&str]) {
    let o = ip(args);
    assert!(o.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr));
}

/// A namespace holding a veth pair `va` ↔ `vb`, both up, IPv6 off (so the kernel sends no
/// router or neighbour solicitations of its own), MTU 1500 (native XDP on veth needs the MTU
/// to fit a page).
pub struct Netns {
    pub name: String,
    /// Tests with a namespace run one at a time: a replay at full speed beside a paced one
    /// would put gaps on the paced one's wire (two cores), and timing is what some compare.
    _serial: Option<std::sync::MutexGuard<'static, ()>>,
    /// Frames [`Netns::replay`] sent into `va`, in all (for [`Netns::wait_received`]).
    sent: AtomicU64,
}

/// `vb`'s received frames and the frames replayed, before a send ([`Netns::mark`]).
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    rx: u64,
    sent: u64,
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let ns = Netns::bare(tag);
        ns.add_veth();
        ns
    }

    /// A second namespace of the test, with its own va/vb pair.
    pub fn peer_with_veth(tag: &str) -> Netns {
        let ns = Netns::peer(tag);
        ns.add_veth();
        ns
    }

    fn add_veth(&self) {
        must(&["-n", &self.name, "link", "add", "va", "type", "veth", "peer", "name", "vb"]);
        for i in ["va", "vb"] {
            self.sysctl(&format!("net.ipv6.conf.{i}.disable_ipv6=1"));
            must(&["-n", &self.name, "link", "set", i, "up"]);
        }
    }

    /// A link between this namespace and `other`: `mine` here with `my_ip`, `theirs` there with
    /// `their_ip` (both /24), up, loopbacks up too.
    pub fn link(&self, other: &Netns, (mine, my_ip): (&str, &str), (theirs, their_ip): (&str, &str)) {
        must(&[
            "link",
            "add",
            "name",
            mine,
            "netns",
            &self.name,
            "type",
            "veth",
            "peer",
            "name",
            theirs,
            "netns",
            &other.name,
        ]);
        for (ns, dev, addr) in [(self, mine, my_ip), (other, theirs, their_ip)] {
            must(&["-n", &ns.name, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            must(&["-n", &ns.name, "link", "set", "dev", dev, "up"]);
            ns.loopback_up();
        }
    }

    /// Brings the namespace's loopback up (for a server the test reaches on 127.0.0.1).
    pub fn loopback_up(&self) {
        must(&["-n", &self.name, "link", "set", "dev", "lo", "up"]);
    }

    /// An empty namespace (only its loopback).
    pub fn bare(tag: &str) -> Netns {
        // A test that failed while holding the lock has said so; the next may go on.
        Netns::named(tag, Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner())))
    }

    /// A second namespace of a test that already holds one (and with it the lock).
    pub fn peer(tag: &str) -> Netns {
        Netns::named(tag, None)
    }

    fn named(tag: &str, serial: Option<std::sync::MutexGuard<'static, ()>>) -> Netns {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!("ra-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let _ = ip(&["netns", "del", &name]);
        must(&["netns", "add", &name]);
        Netns { name, _serial: serial, sent: AtomicU64::new(0) }
    }

    /// Sets the MTU of both veth ends.
    pub fn mtu(&self, mtu: u32) {
        for i in ["va", "vb"] {
            must(&["-n", &self.name, "link", "set", i, "mtu", &mtu.to_string()]);
        }
    }

    pub fn sysctl(&self, kv: &str) {
        let o = Command::new("ip").args(["netns", "exec", &self.name, "sysctl", "-qw", kv]).output().unwrap();
        assert!(o.status.success(), "sysctl {kv}: {}", String::from_utf8_lossy(&o.stderr));
    }

    /// A command run inside the namespace.
    pub fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// `ip -n NS ...`.
    pub fn ip(&self, args: &[&str]) -> std::process::Output {
        let mut a = vec!["-n", &self.name];
        a.extend_from_slice(args);
        ip(&a)
    }

    /// Whether an XDP program is attached to `iface`.
    pub fn has_xdp(&self, iface: &str) -> bool {
        let o = self.ip(&["-d", "link", "show", "dev", iface]);
        let s = String::from_utf8_lossy(&o.stdout);
        s.contains("prog/xdp") || s.contains(" xdp ") || s.contains("xdpgeneric")
    }

    /// http://127.0.0.1:PORT/metrics fetched from inside the namespace (loopback only), or why
    /// it could not be.
    pub fn scrape(&self, port: u16) -> Result<String, String> {
        self.get(port, "/metrics")
    }

    /// GET `path` from 127.0.0.1:`port` inside the namespace (Python's urllib: an independent
    /// HTTP client); the body, or why not.
    pub fn get(&self, port: u16, path: &str) -> Result<String, String> {
        self.get_from("127.0.0.1", port, path)
    }

    /// GET `path` from `host`:`port` inside the namespace.
    pub fn get_from(&self, host: &str, port: u16, path: &str) -> Result<String, String> {
        let code = format!(
            "import urllib.request;print(urllib.request.urlopen('http://{host}:{port}{path}', timeout=5).read().decode(),end='')"
        );
        let out = self.cmd(crate::tools::require("python3")).args(["-c", &code]).output().map_err(|e| e.to_string())?;
        match out.status.success() {
            true => String::from_utf8(out.stdout).map_err(|e| e.to_string()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    /// Runs `roce-analyzer replay FILE -i va` inside the namespace.
    pub fn replay(&self, file: &Path) -> std::process::Output {
        let out = self.cmd(binary()).args(["replay"]).arg(file).args(["-i", "va"]).output().unwrap();
        // "replay: sent N frames (…)" on standard error.
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        let n = said.split("sent ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse::<u64>().ok());
        self.sent.fetch_add(n.unwrap_or(0), Ordering::Relaxed);
        out
    }

    /// Frames sent by [`Netns::replay`] so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Frames `iface` received (its `rx_packets`: a veth with an XDP program counts a frame
    /// when NAPI hands it to the program).
    pub fn rx_packets(&self, iface: &str) -> u64 {
        let path = format!("/sys/class/net/{iface}/statistics/rx_packets");
        let out = self.cmd("cat").arg(&path).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or_else(|_| panic!("{path} in {}", self.name))
    }

    /// Where `vb` stands before a send: its frames received and the frames replayed so far.
    pub fn mark(&self) -> Mark {
        Mark { rx: self.rx_packets("vb"), sent: self.sent() }
    }

    /// Waits until `vb` has received what [`Netns::replay`] sent since `m` (or, when nothing
    /// was counted, until its count settles for 300 ms); at most 20 s, then a loud failure.
    pub fn wait_delivered(&self, m: Mark) {
        let replayed = self.sent() - m.sent;
        self.wait_received("vb", (replayed > 0).then_some(m.rx + replayed));
    }

    /// Waits until `iface` has received `at_least` frames, or, when the count is not known,
    /// until its count stays the same for 300 ms; at most 20 s. A sent frame reaches XDP in
    /// NAPI context a moment later, and much later when the machine is busy (CI runs other
    /// tests beside these): a fixed pause left frames unseen when the agent stopped.
    fn wait_received(&self, iface: &str, at_least: Option<u64>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let (mut last, mut since) = (self.rx_packets(iface), Instant::now());
        while Instant::now() < deadline {
            match at_least {
                Some(n) if last >= n => return,
                None if since.elapsed() >= Duration::from_millis(300) => return,
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(20));
            let now = self.rx_packets(iface);
            if now != last {
                (last, since) = (now, Instant::now());
            }
        }
        if let Some(n) = at_least {
            panic!("{iface} in {}: {last} frames received of {n} within 20 s", self.name);
        }
    }

    /// Starts the same replay pinned to CPU `cpu` (`taskset`): a veth runs XDP on the CPU that
    /// sends, so this chooses the CPU the program handles the frames on.
    pub fn replay_on_cpu(&self, file: &Path, cpu: u32) -> std::process::Child {
        let mut c = self.cmd(crate::tools::require("taskset"));
        c.args(["-c", &cpu.to_string()]).arg(binary()).args(["replay"]).arg(file).args(["-i", "va"]);
        c.spawn().unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// A running `roce-analyzer --iface` agent; killed on drop.
pub struct Agent {
    pub child: Child,
    stderr_lines: std::sync::mpsc::Receiver<String>,
    pub stderr: Vec<String>,
}

impl Agent {
    /// Starts the agent on `vb` with `args` and waits until it says it is attached.
    pub fn start(ns: &Netns, args: &[&str]) -> Agent {
        Agent::start_bin(ns, &binary(), args)
    }

    /// The same with another build of the agent (a benchmark's baseline).
    pub fn start_bin(ns: &Netns, bin: &std::path::Path, args: &[&str]) -> Agent {
        Agent::start_env(ns, bin, args, &[])
    }

    /// The same with variables added to its environment (credentials).
    pub fn start_env(ns: &Netns, bin: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Agent {
        let mut child = ns
            .cmd(bin)
            .envs(env.iter().copied())
            .args(["-i", "vb"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("agent starts");
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut agent = Agent { child, stderr_lines: rx, stderr: Vec::new() };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(line) = agent.stderr_lines.recv_timeout(Duration::from_millis(100)) {
                let attached = line.contains("attached to vb");
                agent.stderr.push(line);
                if attached {
                    return agent;
                }
            }
            if let Ok(Some(status)) = agent.child.try_wait() {
                agent.collect_stderr();
                panic!("agent exited ({status}) before attaching: {}", agent.stderr.join("\n"));
            }
        }
        panic!("agent did not attach within 20 s: {}", agent.stderr.join("\n"));
    }

    fn collect_stderr(&mut self) {
        while let Ok(l) = self.stderr_lines.recv_timeout(Duration::from_millis(200)) {
            self.stderr.push(l);
        }
    }

    /// Sends SIGTERM and waits for the agent; returns its exit code and stdout.
    pub fn stop(mut self) -> (Option<i32>, Vec<u8>, Vec<String>) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut out = Vec::new();
        if let Some(mut s) = self.child.stdout.take() {
            use std::io::Read;
            let _ = s.read_to_end(&mut out);
        }
        let status = self.child.wait().expect("agent waits");
        self.collect_stderr();
        (status.code(), out, std::mem::take(&mut self.stderr))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
