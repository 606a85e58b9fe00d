//! Text for terminals and Graphviz. Names in a report come from outside: capture file names
//! used as labels, topology names, strings of reports `merge` read. A control character in one
//! (an escape sequence, a bell, a newline) must reach no terminal raw: it could retitle or clear
//! it, or forge lines. Every human-facing rendering goes through these.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Escapes text for HTML and SVG (names come from topology files and captures); a
/// bidirectional control becomes U+FFFD.
pub fn html(s: &str) -> String {
    let s: String = s.chars().map(|c| if bidi(c) { '\u{fffd}' } else { c }).collect();
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The bidirectional controls: shown raw they reorder the text around them on a terminal or
/// page (a name that reads as another), so they are escaped like control characters.
fn bidi(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control character (C0, DEL, C1; newlines and tabs too) and bidirectional
/// control written as `\xHH` or `\u{HHHH}`, and backslashes doubled so that the escapes cannot
/// be forged.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || c == '\\' || bidi(c)) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            c if c.is_control() && (c as u32) < 0x100 => {
                let _ = write!(o, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || bidi(c) => {
                let _ = write!(o, "\\u{{{:04x}}}", c as u32);
            }
            c => o.push(c),
        }
    }
    Cow::Owned(o)
}

/// Whether any string in `x` has a character [`escape`] rewrites. Scans `x` as JSON without
/// keeping it: JSON writes control characters below 0x20 and backslashes with a backslash,
/// and DEL, C1 controls and bidirectional controls as themselves (in UTF-8: C2 80–9F, D8 9C,
/// E2 80 8E–8F, E2 80 AA–AE, E2 81 A6–A9).
fn needs_escape<T: serde::Serialize>(x: &T) -> bool {
    struct Scan {
        found: bool,
        /// The two bytes before.
        prev: [u8; 2],
    }
    impl std::io::Write for Scan {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            for &b in buf {
                let bidi = match self.prev {
                    [0xe2, 0x80] => matches!(b, 0x8e | 0x8f | 0xaa..=0xae),
                    [0xe2, 0x81] => matches!(b, 0xa6..=0xa9),
                    [_, 0xd8] => b == 0x9c,
                    _ => false,
                };
                self.found |= b == b'\\' || b == 0x7f || (self.prev[1] == 0xc2 && (0x80..0xa0).contains(&b)) || bidi;
                self.prev = [self.prev[1], b];
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut scan = Scan { found: false, prev: [0; 2] };
    serde_json::to_writer(&mut scan, x).is_err() || scan.found
}

/// `r` (the report or a part of it) with every string [`escape`]d, for renderings that print
/// them: `r` itself, not a copy, when no string needs it (the common case; a report of many
/// flows is not doubled).
pub fn escaped<T: serde::Serialize + serde::de::DeserializeOwned + Clone>(r: &T) -> Cow<'_, T> {
    if !needs_escape(r) {
        return Cow::Borrowed(r);
    }
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) => {
                if let Cow::Owned(e) = escape(s) {
                    *s = e;
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(walk),
            serde_json::Value::Object(m) => {
                let keys: Vec<String> = m.keys().filter(|k| matches!(escape(k), Cow::Owned(_))).cloned().collect();
                for k in keys {
                    if let Some(x) = m.remove(&k) {
                        m.insert(escape(&k).into_owned(), x);
                    }
                }
                m.values_mut().for_each(walk);
            }
            _ => {}
        }
    }
    let Ok(mut v) = serde_json::to_value(r) else { return Cow::Owned(r.clone()) };
    walk(&mut v);
    Cow::Owned(serde_json::from_value(v).unwrap_or_else(|_| r.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_out() {
        let hostile = "\u{1b}]0;owned\u{7}\u{1b}[2J.pcap";
        assert_eq!(escape(hostile), "\\x1b]0;owned\\x07\\x1b[2J.pcap");
        assert_eq!(escape("a\nb\\x1b"), "a\\x0ab\\\\x1b", "newlines escaped, a literal \\x1b cannot pass for one");
        assert_eq!(escape("\u{9b}31m"), "\\x9b31m", "C1 CSI too");
        assert!(matches!(escape("leaf1:p3 → h2"), Cow::Borrowed(_)));
        assert_eq!(escape("gpu\u{202e}1fael"), "gpu\\u{202e}1fael", "a bidirectional override shown escaped");
        assert_eq!(html("a\u{2067}b"), "a\u{fffd}b");
        for (s, needs) in [
            ("plain → text", false),
            ("a\u{1b}", true),
            ("a\\b", true),
            ("\u{7f}", true),
            ("\u{9b}", true),
            ("é", false),
            ("leaf\u{202e}1", true),
            ("a\u{2066}b", true),
            ("\u{61c}", true),
            ("\u{2028}", false),
        ] {
            assert_eq!(needs_escape(&s.to_string()), needs, "{s:?}");
            assert_eq!(matches!(escaped(&s.to_string()), Cow::Owned(_)), needs, "{s:?}");
        }
    }
}
