//! `replay`: writes a capture's frames onto an interface with pnet's datalink channel, at the
//! capture's pacing scaled by a factor or as fast as possible.

use std::path::Path;
use std::time::{Duration, Instant};

use pnet::datalink::{self, Channel};

use crate::capture::{CaptureError, LinkType, pcap};
use crate::cli::Speed;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("unknown interface {0:?}")]
    UnknownInterface(String),
    #[error("opening a packet socket on {iface} (needs CAP_NET_RAW)")]
    Socket { iface: String, source: std::io::Error },
    #[error("{path}: link type {link:?} cannot be replayed (only Ethernet captures)")]
    LinkType { path: String, link: LinkType },
    #[error(transparent)]
    Capture(#[from] CaptureError),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayStats {
    pub sent: u64,
    pub failed: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    /// The first send error, if any.
    pub first_error: Option<String>,
}

pub fn replay(file: &Path, iface: &str, speed: Speed, loops: u32) -> Result<ReplayStats, ReplayError> {
    let nic = datalink::interfaces()
        .into_iter()
        .find(|i| i.name == iface)
        .ok_or_else(|| ReplayError::UnknownInterface(iface.into()))?;
    let config = datalink::Config { write_buffer_size: 1 << 20, ..Default::default() };
    let mut tx = match datalink::channel(&nic, config) {
        Ok(Channel::Ethernet(tx, _rx)) => tx,
        Ok(_) => {
            let source = std::io::Error::other("not an Ethernet channel");
            return Err(ReplayError::Socket { iface: iface.into(), source });
        }
        Err(source) => return Err(ReplayError::Socket { iface: iface.into(), source }),
    };
    let mut stats = ReplayStats::default();
    let started = Instant::now();
    let mut bad_link = None;
    for _ in 0..loops {
        let mut first: Option<(u64, Instant)> = None;
        pcap::read_file(
            file,
            |rec| {
                if rec.link != LinkType::Ethernet {
                    bad_link.get_or_insert(rec.link);
                    return;
                }
                if let Speed::Factor(f) = speed {
                    let (t0, w0) = *first.get_or_insert((rec.ts_ns, Instant::now()));
                    let due = w0 + Duration::from_nanos((rec.ts_ns.saturating_sub(t0) as f64 / f) as u64);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                }
                match tx.send_to(rec.data, None) {
                    Some(Ok(())) => {
                        stats.sent += 1;
                        stats.bytes += rec.data.len() as u64;
                    }
                    Some(Err(e)) => {
                        stats.failed += 1;
                        stats.first_error.get_or_insert_with(|| format!("frame at byte offset {}: {e}", rec.offset));
                    }
                    None => {
                        stats.failed += 1;
                        stats.first_error.get_or_insert_with(|| "send buffer unavailable".into());
                    }
                }
            },
            |_| {},
        )?;
        if let Some(link) = bad_link {
            return Err(ReplayError::LinkType { path: file.display().to_string(), link });
        }
    }
    stats.elapsed = started.elapsed();
    Ok(stats)
}
