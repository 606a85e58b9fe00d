//! Serves the latest metrics text on `GET /metrics` (and `ok` on `/healthz`) from the live
//! loop's own runtime: one small task per connection, at most [`MAX_CONNECTIONS`] at once (a
//! connection beyond them is closed at once), each given [`REQUEST_TIMEOUT`] to send its
//! request. So slow or idle clients cost a few hundred bytes each and no thread, cannot grow
//! memory without bound and cannot hold up the capture loop, which only swaps the text in
//! after each poll. It listens where `--metrics` says and nowhere else.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Time a client has to send its request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest request head read.
const MAX_HEAD: usize = 8192;

#[derive(Debug, thiserror::Error)]
#[error("--metrics {addr}: cannot listen: {detail}")]
pub struct MetricsError {
    pub addr: String,
    pub detail: String,
}

pub struct MetricsServer {
    text: Arc<Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    /// Binds `addr` and serves from the current tokio runtime.
    pub async fn start(addr: &str) -> Result<Self, MetricsError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| MetricsError { addr: addr.into(), detail: e.to_string() })?;
        let text = Arc::new(Mutex::new(String::new()));
        let served = text.clone();
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { continue };
                // Over the limit: closed at once.
                let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
                let text = served.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    let _ = tokio::time::timeout(REQUEST_TIMEOUT * 2, serve(socket, &text)).await;
                });
            }
        });
        Ok(MetricsServer { text, task })
    }

    pub fn publish(&self, text: String) {
        if let Ok(mut t) = self.text.lock() {
            *t = text;
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request: its head within [`REQUEST_TIMEOUT`], one answer, then the connection closes.
async fn serve(mut socket: tokio::net::TcpStream, text: &Mutex<String>) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(REQUEST_TIMEOUT, async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            let n = socket.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
    if !matches!(read, Ok(Ok(()))) {
        return Ok(());
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut parts = std::str::from_utf8(line).unwrap_or("").split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) = match (method, path) {
        ("GET", "/metrics") => {
            ("200 OK", crate::report::render::metrics::CONTENT_TYPE, text.lock().map(|t| t.clone()).unwrap_or_default())
        }
        ("GET", "/healthz") => ("200 OK", "text/plain; charset=utf-8", "ok\n".to_string()),
        ("GET", _) => ("404 Not Found", "text/plain; charset=utf-8", "see /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "GET only\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(response.as_bytes()).await?;
    socket.shutdown().await
}
