//! Serves the latest metrics on `GET /metrics` (and `ok` on `/healthz`) from a thread of its
//! own (with its own small runtime), over hyper's HTTP/1 server: a scrape never waits for the
//! live loop's drains, polls or checkpoints (on the loop's runtime, 200 concurrent scrapes of a
//! loaded agent waited 174 ms at the median). keep-alive, request parsing, `HEAD`, and a time
//! limit on each request's head as that library does them. What this module adds are the
//! bounds and the negotiation: at most [`MAX_CONNECTIONS`] connections at once (one beyond
//! them is closed at once), [`REQUEST_TIMEOUT`] for a request's head (an idle or slow client
//! is dropped, costing no thread and a few hundred bytes meanwhile), [`CONNECTION_MAX`] for a
//! connection's life; OpenMetrics to a client whose `Accept` asks for it (Prometheus does),
//! the Prometheus text format otherwise; gzip when `Accept-Encoding` allows it. The capture
//! loop only swaps the texts in after each poll. It listens where `--metrics` says and nowhere
//! else.

use std::convert::Infallible;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;

use crate::report::render::metrics::{CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE, classic};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Time a client has to send a request's head (the first, and each next one on a kept-alive
/// connection).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// A connection's life at most (a scraper reconnects).
pub const CONNECTION_MAX: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
#[error("--metrics {addr}: cannot listen: {detail}")]
pub struct MetricsError {
    pub addr: String,
    pub detail: String,
}

/// The texts served: OpenMetrics and the Prometheus text format, made once per publish.
#[derive(Default)]
struct Texts {
    open: Bytes,
    classic: Bytes,
}

pub struct MetricsServer {
    texts: Arc<Mutex<Arc<Texts>>>,
    addr: std::net::SocketAddr,
    /// Dropped (or sent) to stop the server's thread.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Connections the kernel queues for the accept loop. A burst of scrapes larger than the
/// listen queue (std's and tokio's 128) loses SYNs, and each one lost costs a client the
/// kernel's 1 s SYN retransmission: 200 scrapes at once on a loaded agent had a p99 of 1.15 s
/// (`cargo xtask bench-kernel --only soak`).
const BACKLOG: u32 = 1024;

/// A listener on `addr` (resolved as `bind` resolves it) with [`BACKLOG`].
async fn listen(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address");
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl MetricsServer {
    /// Binds `addr` and serves from a thread of its own until dropped. Callable from inside a
    /// runtime (the live loop's) or outside one: the listener is bound on the new thread.
    pub fn start(addr: &str) -> Result<Self, MetricsError> {
        let fail = |e: std::io::Error| MetricsError { addr: addr.into(), detail: e.to_string() };
        let texts: Arc<Mutex<Arc<Texts>>> = Arc::default();
        let served = texts.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let at = addr.to_string();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => return drop(bound_tx.send(Err(e))),
                };
                rt.block_on(async move {
                    let listener = match listen(&at).await.and_then(|l| Ok((l.local_addr()?, l))) {
                        Ok((bound, l)) => {
                            let _ = bound_tx.send(Ok(bound));
                            l
                        }
                        Err(e) => return drop(bound_tx.send(Err(e))),
                    };
                    tokio::select! {
                        _ = stopped => {}
                        _ = serve(listener, served) => {}
                    }
                })
            })
            .map_err(fail)?;
        let bound = bound_rx.recv().unwrap_or_else(|_| Err(std::io::Error::other("the server's thread ended")));
        let bound = match bound {
            Ok(b) => b,
            Err(e) => {
                let _ = thread.join();
                return Err(fail(e));
            }
        };
        Ok(MetricsServer { texts, addr: bound, stop: Some(stop), thread: Some(thread) })
    }

    /// The address it listens on (the port chosen, for `:0`).
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Serves `open_metrics` (OpenMetrics text) from now on, and the same in the Prometheus
    /// text format.
    pub fn publish(&self, open_metrics: String) {
        let t = Arc::new(Texts { classic: Bytes::from(classic(&open_metrics)), open: Bytes::from(open_metrics) });
        if let Ok(mut now) = self.texts.lock() {
            *now = t;
        }
    }
}

impl Drop for MetricsServer {
    /// Stops the thread; its runtime closes the listener and every connection.
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The accept loop: each connection served on its own task, at most [`MAX_CONNECTIONS`].
async fn serve(listener: tokio::net::TcpListener, texts: Arc<Mutex<Arc<Texts>>>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((socket, _)) = listener.accept().await else { continue };
        // Over the limit: closed at once.
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let texts = texts.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req| {
                let now = texts.lock().map(|t| t.clone()).unwrap_or_default();
                async move { Ok::<_, Infallible>(answer(&req, &now)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(REQUEST_TIMEOUT)
                .keep_alive(true)
                .serve_connection(TokioIo::new(socket), service);
            let _ = tokio::time::timeout(CONNECTION_MAX, conn).await;
        });
    }
}

/// Whether a header's list (`Accept`, `Accept-Encoding`) names `what` with a quality above 0.
fn accepts(req: &Request<Incoming>, name: header::HeaderName, what: &str) -> bool {
    req.headers().get_all(name).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|item| {
        let mut parts = item.split(';').map(str::trim);
        let first = parts.next().unwrap_or_default();
        let q = parts.find_map(|p| p.strip_prefix("q=")).and_then(|q| q.parse::<f32>().ok()).unwrap_or(1.0);
        first.eq_ignore_ascii_case(what) && q > 0.0
    })
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// One request's answer.
fn answer(req: &Request<Incoming>, texts: &Texts) -> Response<Full<Bytes>> {
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/metrics" => {
            let open = accepts(req, header::ACCEPT, "application/openmetrics-text");
            let (body, ctype) =
                if open { (&texts.open, OPENMETRICS_CONTENT_TYPE) } else { (&texts.classic, CONTENT_TYPE) };
            let gzip = accepts(req, header::ACCEPT_ENCODING, "gzip");
            let body = if gzip { gzipped(body) } else { body.clone() };
            let mut r = Response::new(Full::new(body));
            let h = r.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
            h.insert(header::VARY, HeaderValue::from_static("Accept, Accept-Encoding"));
            if gzip {
                h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            r
        }
        _ => text(StatusCode::NOT_FOUND, "see /metrics\n"),
    }
}

fn gzipped(body: &Bytes) -> Bytes {
    let mut z = flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 4), flate2::Compression::fast());
    // Writing to memory cannot fail.
    let _ = z.write_all(body);
    Bytes::from(z.finish().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read};
    use std::net::TcpStream;

    /// A response's status line, headers (lower-case names) and body, read off `s`.
    fn response(s: &mut BufReader<TcpStream>) -> (String, Vec<(String, String)>, Vec<u8>) {
        let mut status = String::new();
        s.read_line(&mut status).unwrap();
        let mut headers = Vec::new();
        loop {
            let mut l = String::new();
            s.read_line(&mut l).unwrap();
            let l = l.trim_end();
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':').unwrap();
            headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
        }
        let len: usize = headers.iter().find(|h| h.0 == "content-length").map_or(0, |h| h.1.parse().unwrap());
        let mut body = vec![0; len];
        s.read_exact(&mut body).unwrap();
        (status.trim_end().to_string(), headers, body)
    }

    fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
        h.iter().find(|x| x.0 == name).map(|x| x.1.as_str())
    }

    /// The caller's thread blocks (as the live loop does while it drains or writes a
    /// checkpoint) while the client is answered: the server runs on its own thread.
    #[test]
    fn negotiates_openmetrics_and_gzip_on_one_kept_alive_connection_while_the_caller_is_busy() {
        let server = MetricsServer::start("127.0.0.1:0").unwrap();
        let open = "# HELP roce_analyzer_frames Frames.\n# TYPE roce_analyzer_frames counter\nroce_analyzer_frames_total 7\n# EOF\n";
        server.publish(open.to_string());
        let addr = server.local_addr();
        let client = std::thread::spawn(move || {
            let s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut ask = |req: &str| {
                w.write_all(req.as_bytes()).unwrap();
                response(&mut r)
            };
            let prom = ask("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
            let om = ask(
                "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;q=0.1\r\n\r\n",
            );
            let gz = ask("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
            let post = ask("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
            let health = ask("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            (prom, om, gz, post, health)
        });
        // No runtime runs on this thread while it waits.
        let (prom, om, gz, post, health) = client.join().unwrap();
        assert_eq!(prom.0, "HTTP/1.1 200 OK");
        assert_eq!(header(&prom.1, "content-type"), Some(CONTENT_TYPE));
        assert_eq!(String::from_utf8(prom.2).unwrap(), classic(open));
        assert_eq!(header(&om.1, "content-type"), Some(OPENMETRICS_CONTENT_TYPE));
        assert_eq!(String::from_utf8(om.2).unwrap(), open);
        assert_eq!(header(&gz.1, "content-encoding"), Some("gzip"));
        let mut plain = String::new();
        flate2::read::GzDecoder::new(&gz.2[..]).read_to_string(&mut plain).unwrap();
        assert_eq!(plain, classic(open));
        assert_eq!(post.0, "HTTP/1.1 405 Method Not Allowed");
        assert_eq!(header(&post.1, "allow"), Some("GET, HEAD"));
        assert_eq!((health.0.as_str(), &health.2[..]), ("HTTP/1.1 200 OK", &b"ok\n"[..]));
    }

    #[test]
    fn a_client_that_sends_nothing_is_dropped_after_the_request_timeout() {
        let server = MetricsServer::start("127.0.0.1:0").unwrap();
        let addr = server.local_addr();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(REQUEST_TIMEOUT * 10)).unwrap();
        let started = std::time::Instant::now();
        let mut buf = [0u8; 64];
        // The server closes the idle connection: read returns (0, or an error).
        let _ = s.read(&mut buf);
        let waited = started.elapsed();
        assert!(waited >= REQUEST_TIMEOUT && waited < REQUEST_TIMEOUT * 3, "{waited:?}");
    }

    /// Dropping the server stops its thread and closes its port.
    #[test]
    fn dropped_it_listens_no_more() {
        let server = MetricsServer::start("127.0.0.1:0").unwrap();
        let addr = server.local_addr();
        assert!(TcpStream::connect(addr).is_ok());
        drop(server);
        assert!(TcpStream::connect(addr).is_err());
    }
}
