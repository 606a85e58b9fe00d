//! What the page's sections need beside the report: the RTT samples, and the evidence
//! directory as the page links it.

use super::text::html as esc;

/// What the sections need beside the report.
pub struct Page<'a> {
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
