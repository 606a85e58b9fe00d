//! Serves the latest metrics text on `GET /metrics` (tiny_http, one thread). The live loop
//! publishes a new text after each poll; a scrape never waits for a poll.

use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
#[error("--metrics {addr}: cannot listen: {detail}")]
pub struct MetricsError {
    pub addr: String,
    pub detail: String,
}

pub struct MetricsServer {
    text: Arc<Mutex<String>>,
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    pub fn start(addr: &str) -> Result<Self, MetricsError> {
        let server = Arc::new(
            tiny_http::Server::http(addr).map_err(|e| MetricsError { addr: addr.into(), detail: e.to_string() })?,
        );
        let text = Arc::new(Mutex::new(String::new()));
        let (s, t) = (server.clone(), text.clone());
        let thread = std::thread::spawn(move || {
            for req in s.incoming_requests() {
                let resp = match req.url() {
                    "/metrics" => {
                        let body = t.lock().map(|b| b.clone()).unwrap_or_default();
                        let ct = crate::report::render::metrics::CONTENT_TYPE;
                        tiny_http::Response::from_string(body)
                            .with_header(tiny_http::Header::from_bytes("Content-Type", ct).expect("valid header"))
                    }
                    // Liveness for orchestrators: the agent's loop is serving.
                    "/healthz" => tiny_http::Response::from_string("ok\n"),
                    _ => tiny_http::Response::from_string("see /metrics\n").with_status_code(404),
                };
                let _ = req.respond(resp);
            }
        });
        Ok(MetricsServer { text, server, thread: Some(thread) })
    }

    pub fn publish(&self, text: String) {
        if let Ok(mut t) = self.text.lock() {
            *t = text;
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
