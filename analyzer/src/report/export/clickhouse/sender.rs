//! The sender thread: inserts each interval's batch, table by table, with
//! `INSERT INTO db.table FORMAT JSONEachRow` over ClickHouse's HTTP interface. The agent only
//! hands batches over ([`Sender::push`] never waits on the network); the buffer they wait in is
//! bounded in bytes, and when it is full the oldest batches are dropped whole and counted.
//! While the server is away the thread retries the same insert with a backoff doubling from
//! 100 ms to 5 s. Credentials go in the Authorization header only: never in a URL, a message or
//! the report.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::rows::{Batch, Table};

#[derive(Debug, thiserror::Error)]
pub enum SenderError {
    #[error("--export-clickhouse {url}: {why}")]
    Url { url: String, why: String },
    #[error("--export-clickhouse: the HTTP client cannot start: {0}")]
    Client(String),
}

/// Where and how to insert.
#[derive(Clone)]
pub struct SenderOptions {
    /// The server's HTTP interface, `http://host:8123/`.
    pub url: String,
    pub database: String,
    /// Put before every table name (`roce_` gives `roce_flows`).
    pub prefix: String,
    pub user: Option<String>,
    pub password: Option<String>,
    /// Bytes of rows waiting to be sent, at most.
    pub buffer_bytes: usize,
    /// One insert's time limit.
    pub timeout: Duration,
}

impl std::fmt::Debug for SenderOptions {
    // The password is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SenderOptions")
            .field("url", &self.url)
            .field("database", &self.database)
            .field("prefix", &self.prefix)
            .field("user", &self.user)
            .field("buffer_bytes", &self.buffer_bytes)
            .finish_non_exhaustive()
    }
}

/// What the sender did: the counts the report shows, and the first error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SenderStats {
    pub counts: crate::model::ClickhouseStats,
    /// The first error, without credentials.
    pub first_error: Option<String>,
}

/// Backoff bounds between retries.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

#[derive(Default)]
struct State {
    queue: VecDeque<Batch>,
    /// Bytes queued and in flight.
    bytes: usize,
    stats: SenderStats,
    /// When the run ended and how long the sender may still try.
    closing: Option<Instant>,
    /// The front batch has a table being inserted: it is not dropped under it.
    in_flight: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    max: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct Sender {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Sender {
    /// Checks the options and starts the sender thread (nothing is sent until a batch comes).
    pub fn start(opts: SenderOptions) -> Result<Sender, SenderError> {
        let bad = |why: &str| SenderError::Url { url: opts.url.clone(), why: why.into() };
        let url = reqwest::Url::parse(&opts.url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("not an http:// URL (ClickHouse's HTTP interface, port 8123)"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(SenderError::Url {
                url: format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default()),
                why: "credentials in the URL would show in process lists and messages: give them in \
                      ROCE_ANALYZER_CLICKHOUSE_USER and ROCE_ANALYZER_CLICKHOUSE_PASSWORD"
                    .into(),
            });
        }
        if !valid_name(&opts.database) || !(opts.prefix.is_empty() || valid_name(&opts.prefix)) {
            return Err(bad("the database and the table prefix are letters, digits and _"));
        }
        let client = reqwest::blocking::Client::builder()
            .timeout(opts.timeout)
            .connect_timeout(opts.timeout.min(Duration::from_secs(2)))
            .build()
            .map_err(|e| SenderError::Client(e.to_string()))?;
        let shared = Arc::new(Shared { state: Mutex::default(), wake: Condvar::new(), max: opts.buffer_bytes });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("clickhouse".into())
            .spawn(move || run(&s, &client, &opts, url))
            .map_err(|e| SenderError::Client(e.to_string()))?;
        Ok(Sender { shared, thread: Some(thread) })
    }

    /// Hands an interval's batch over. When the buffer cannot hold it, the oldest batches
    /// waiting are dropped (then this one, if it alone is too big), counted.
    pub fn push(&self, batch: Batch) {
        let mut st = self.shared.lock();
        let need = batch.bytes();
        while st.bytes + need > self.shared.max {
            let at = usize::from(st.in_flight);
            let Some(old) = st.queue.remove(at) else { break };
            st.bytes -= old.bytes();
            st.stats.counts.dropped += old.lines();
            note_error(&mut st.stats, "the --export-buffer was full: the oldest rows were dropped");
        }
        if st.bytes + need > self.shared.max {
            st.stats.counts.dropped += batch.lines();
            note_error(&mut st.stats, "the --export-buffer was full: the oldest rows were dropped");
            return;
        }
        st.bytes += need;
        st.stats.counts.buffered_max_bytes = st.stats.counts.buffered_max_bytes.max(st.bytes as u64);
        st.queue.push_back(batch);
        drop(st);
        self.shared.wake.notify_all();
    }

    pub fn stats(&self) -> SenderStats {
        self.shared.lock().stats.clone()
    }

    /// Ends the run: the sender goes on trying for at most `wait`, then what is left is
    /// counted as dropped. Returns what it did.
    pub fn finish(mut self, wait: Duration) -> SenderStats {
        self.shared.lock().closing = Some(Instant::now() + wait);
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.stats()
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.shared.lock().closing = Some(Instant::now());
            self.shared.wake.notify_all();
        }
    }
}

fn note_error(stats: &mut SenderStats, e: &str) {
    stats.first_error.get_or_insert_with(|| e.to_string());
}

/// ClickHouse identifiers the tool writes into its statements: no quoting needed.
fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The sender thread: the front batch's tables one by one, each until it is inserted or the
/// run's end leaves no more time.
fn run(shared: &Shared, client: &reqwest::blocking::Client, opts: &SenderOptions, url: reqwest::Url) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let (table, body, lines) = {
            let mut st = shared.lock();
            loop {
                if let Some(b) = st.queue.front_mut() {
                    if let Some(t) = b.tables.first() {
                        let t = t.clone();
                        st.in_flight = true;
                        break t;
                    }
                    st.queue.pop_front();
                    continue;
                }
                if st.closing.is_some() {
                    return;
                }
                st = shared.wake.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        match insert(client, opts, &url, table, body.clone()) {
            Ok(()) => {
                backoff = BACKOFF_MIN;
                let mut st = shared.lock();
                st.in_flight = false;
                st.bytes -= body.len();
                st.stats.counts.inserted += lines;
                if let Some(b) = st.queue.front_mut() {
                    b.tables.remove(0);
                }
            }
            Err(e) => {
                let mut st = shared.lock();
                st.in_flight = false;
                if st.stats.first_error.is_none() {
                    eprintln!(
                        "roce-analyzer: warning: --export-clickhouse: {e} (retrying; rows wait in --export-buffer)"
                    );
                }
                note_error(&mut st.stats, &e);
                st.stats.counts.retries += 1;
                if st.closing.is_some_and(|end| Instant::now() + backoff > end) {
                    let left: u64 = st.queue.iter().map(Batch::lines).sum();
                    st.stats.counts.dropped += left;
                    st.queue.clear();
                    st.bytes = 0;
                    return;
                }
                let (st, _) = shared.wake.wait_timeout(st, backoff).unwrap_or_else(|p| p.into_inner());
                drop(st);
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// One insert; the error says what the server answered (cut short), never the credentials.
fn insert(
    client: &reqwest::blocking::Client,
    opts: &SenderOptions,
    url: &reqwest::Url,
    table: Table,
    body: Vec<u8>,
) -> Result<(), String> {
    let query = format!("INSERT INTO {}.{}{} FORMAT JSONEachRow", opts.database, opts.prefix, table.name());
    let mut req = client.post(url.clone()).query(&[("query", query.as_str())]).body(body);
    if let Some(user) = &opts.user {
        req = req.basic_auth(user, opts.password.as_deref());
    }
    let resp = req.send().map_err(|e| crate::model::error_chain(&e.without_url()))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let text = resp.text().unwrap_or_default();
    Err(format!(
        "{table} insert: HTTP {status}: {}",
        crate::capture::bounded::excerpt(text.trim().to_string(), 300),
        table = table.name()
    ))
}
