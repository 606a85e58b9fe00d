//! An error and its causes as one line, for the messages and reports every layer writes.

/// An error with its causes, as `anyhow` shows them with `{:#}`: "outer: cause: cause"
/// (library errors are `thiserror` types, which `{:#}` does not chain).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}
