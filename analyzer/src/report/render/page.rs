//! What the page's sections need beside the report: the RTT samples, and the evidence
//! directory as the page links it.

use super::text::html as esc;

/// What the sections need beside the report.
pub struct Page<'a> {
    /// How many rows a per-flow table lists (`--top`); the rest are counted.
    pub top: usize,
    /// The RTT samples behind the report (empty for a merged report: the percentiles are
    /// drawn then).
    pub rtt_ns: &'a [u64],
    /// The evidence directory as the page links it: relative to the page's directory, so the
    /// page and its evidence move together (a CI artifact, a copy).
    pub evidence: Option<String>,
}

impl Page<'_> {
    /// A link to the evidence file `file`, or nothing without an evidence directory.
    pub fn link(&self, file: Option<&String>) -> String {
        match (file, &self.evidence) {
            (Some(f), Some(dir)) => {
                let href = std::path::Path::new(dir).join(f).display().to_string();
                format!("<a class=\"evidence\" href=\"{}\">{}</a>", esc(&href), esc(f))
            }
            _ => String::new(),
        }
    }
}

/// `to` relative to the directory `from` (both made absolute), for links between files that
/// move together; `to` itself when either cannot be resolved.
pub fn relative(from: &std::path::Path, to: &std::path::Path) -> String {
    let (Ok(from), Ok(to)) = (std::fs::canonicalize(from), std::fs::canonicalize(to)) else {
        return to.display().to_string();
    };
    let (a, b): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut rel: Vec<String> = vec!["..".into(); a.len() - common];
    rel.extend(b[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    if rel.is_empty() { ".".into() } else { rel.join("/") }
}

/// A duration in milliseconds, three decimals.
pub fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// A duration in ns below a microsecond, else in µs with one decimal.
pub fn us(ns: u64) -> String {
    if ns < 1000 { format!("{ns} ns") } else { format!("{:.1} µs", ns as f64 / 1e3) }
}

/// A duration in the unit that reads best: ns, µs, ms or s.
pub fn duration(ns: u64) -> String {
    match ns {
        0..1_000_000 => us(ns),
        1_000_000..10_000_000_000 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.1} s", ns as f64 / 1e9),
    }
}

/// "N more …" under a table cut to `top` rows of `len` (all are in the JSON).
pub fn more(len: usize, top: usize, what: &str) -> String {
    match len > top {
        true => format!("<p class=\"more\">… {} more {what} (--top {top}; all in the JSON)</p>\n", len - top),
        false => String::new(),
    }
}
