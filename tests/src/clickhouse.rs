//! A real ClickHouse server for the tests: Debian's `clickhouse-server`, started on loopback
//! with its own data directory and free ports, a user with a password, stopped (and its
//! directory removed) when the value is dropped, even when the test fails.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The user and password the tests' server knows.
pub const USER: &str = "agent";

pub struct Server {
    dir: tempfile::TempDir,
    pub http_port: u16,
    pub password: String,
    child: Option<Child>,
    /// The network namespace it runs in (its own loopback), if any.
    netns: Option<String>,
}

/// Two ports nothing listens on (held together while chosen, so they differ).
fn free_ports() -> (u16, u16) {
    let a = TcpListener::bind("127.0.0.1:0").unwrap();
    let b = TcpListener::bind("127.0.0.1:0").unwrap();
    (a.local_addr().unwrap().port(), b.local_addr().unwrap().port())
}

impl Server {
    /// Starts a server and waits until it answers.
    pub fn start() -> Server {
        Server::start_in(None)
    }

    /// Starts a server inside the network namespace `netns` (on its loopback, which a live
    /// agent in the namespace reaches), or on the host's.
    pub fn start_in(netns: Option<&str>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let (http_port, tcp_port) = free_ports();
        let password = format!("pw-{}-{}", std::process::id(), http_port);
        let d = dir.path().display();
        std::fs::write(
            dir.path().join("config.xml"),
            format!(
                r#"<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><console>1</console></logger>
    <http_port>{http_port}</http_port>
    <tcp_port>{tcp_port}</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <path>{d}/data/</path>
    <tmp_path>{d}/tmp/</tmp_path>
    <user_files_path>{d}/user_files/</user_files_path>
    <format_schema_path>{d}/format_schemas/</format_schema_path>
    <users_config>users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>5368709</mark_cache_size>
    <max_concurrent_queries>20</max_concurrent_queries>
</yandex>
"#
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("users.xml"),
            format!(
                r#"<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users><{USER}><password>{password}</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></{USER}></users>
  <quotas><default></default></quotas>
</yandex>
"#
            ),
        )
        .unwrap();
        let mut s = Server { dir, http_port, password, child: None, netns: netns.map(String::from) };
        s.resume();
        s
    }

    /// `program` to run beside the server (in its namespace).
    fn command(&self, program: &Path) -> Command {
        match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.http_port)
    }

    /// The server's directory (its data, and its log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts the server (again, on the same data) and waits until it answers.
    pub fn resume(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("server.log")).unwrap();
        let child = self
            .command(&crate::tools::require("clickhouse-server"))
            .arg(format!("--config-file={}", self.dir.path().join("config.xml").display()))
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("clickhouse-server starts");
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if self.try_query("SELECT 1").is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("clickhouse-server did not answer in 30 s: {}", self.log());
    }

    /// Stops the server (its data stays).
    pub fn pause(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn try_query(&self, sql: &str) -> Result<String, String> {
        let out = self
            .command(&crate::tools::require("curl"))
            .args(["-sS", "--max-time", "20", "-u", &format!("{USER}:{}", self.password), "--data-binary", "@-"])
            .arg(format!("{}?output_format_json_quote_64bit_integers=0", self.url()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(sql.as_bytes())?;
                c.wait_with_output()
            })
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() || text.contains("DB::Exception") {
            return Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(text)
    }

    /// Runs one statement; panics with the server's answer when it fails.
    pub fn query(&self, sql: &str) -> String {
        self.try_query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Runs a query and returns its rows (JSONEachRow), 64-bit integers as numbers.
    pub fn rows(&self, sql: &str) -> Vec<Value> {
        let sql = format!("{}\nFORMAT JSONEachRow", sql.trim());
        self.query(&sql).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// Runs every statement of a `.sql` file (comments left out).
    pub fn apply(&self, file: &Path) {
        for s in statements(&std::fs::read_to_string(file).unwrap()) {
            self.query(&s);
        }
    }
}

/// The statements of SQL text: `--` comments removed, split at `;`.
pub fn statements(sql: &str) -> Vec<String> {
    let text: String = sql.lines().map(|l| l.split("--").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
    text.split(';').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// The shipped schema, TTL and queries.
pub fn deploy_dir() -> PathBuf {
    crate::tools::root().join("deploy/clickhouse")
}

impl Drop for Server {
    fn drop(&mut self) {
        self.pause();
    }
}
