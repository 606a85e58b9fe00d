//! A Rust source file read as text for the structure checks: its code with comments and the
//! contents of string and character literals blanked (so that a `{` or a `crate::` inside them
//! is not taken for code), line by line, and where its tests begin.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// One source file of a crate.
pub struct SourceFile {
    /// Relative to the crate's `src/`.
    pub rel: PathBuf,
    /// Its module path below the crate root (`a/b.rs` and `a/b/mod.rs` are [a, b]).
    pub module: Vec<String>,
    /// The code, comments and literal contents blanked; as many lines as the file.
    pub code: Vec<String>,
    /// Per line, whether it belongs to an item under `#[cfg(test)]` (a test module, a test
    /// helper).
    pub test: Vec<bool>,
}

impl SourceFile {
    pub fn read(src: &Path, file: &Path) -> anyhow::Result<SourceFile> {
        let raw = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let rel = file.strip_prefix(src).expect("below src").to_path_buf();
        let module = module_of(&rel);
        let code: Vec<String> = blank_comments_and_literals(&raw).lines().map(str::to_string).collect();
        let test = test_lines(&code);
        Ok(SourceFile { rel, module, code, test })
    }

    /// The modules this file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
    pub fn children(&self) -> Vec<String> {
        self.code
            .iter()
            .filter_map(|l| {
                let l = l.trim();
                let rest =
                    l.strip_prefix("pub(crate) mod ").or(l.strip_prefix("pub mod ")).or(l.strip_prefix("mod "))?;
                Some(rest.strip_suffix(';')?.trim().to_string())
            })
            .collect()
    }
}

/// Per line, whether it is part of an item marked `#[cfg(test)]`: from the attribute to the
/// end of the item (its closing brace, or its `;`).
fn test_lines(code: &[String]) -> Vec<bool> {
    let mut test = vec![false; code.len()];
    let mut n = 0;
    while n < code.len() {
        if !code[n].trim_start().starts_with("#[cfg(test)]") {
            n += 1;
            continue;
        }
        let end = match item_end(code, n + 1, 0) {
            Some(ItemEnd::Semicolon(m) | ItemEnd::Brace(m)) => m,
            None => code.len() - 1,
        };
        test[n..=end].iter_mut().for_each(|t| *t = true);
        n = end + 1;
    }
    test
}

/// Where an item that starts at (line, col) ends: the line of its `;` (no body), or of the
/// brace that closes its body.
pub enum ItemEnd {
    Semicolon(usize),
    Brace(usize),
}

/// The end of the item at (`line`, `col`) of `code` (blanked: no braces in strings or comments).
pub fn item_end(code: &[String], line: usize, col: usize) -> Option<ItemEnd> {
    let (mut depth, mut opened) = (0usize, false);
    for (n, l) in code.iter().enumerate().skip(line) {
        let start = if n == line { col } else { 0 };
        for c in l[start..].chars() {
            match c {
                ';' if !opened => return Some(ItemEnd::Semicolon(n)),
                '{' => {
                    opened = true;
                    depth += 1;
                }
                '}' if opened => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(ItemEnd::Brace(n));
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// The module path of a source file relative to its crate's `src/`.
pub fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" && stem != "main" {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// Every `.rs` file below `dir`, sorted.
pub fn collect(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// `text` with every comment and the inside of every string, byte-string, raw-string and
/// character literal replaced by spaces; newlines and the delimiters stay, so lines and columns
/// are those of the file.
pub fn blank_comments_and_literals(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && !ident_before(&b, i) && raw_string_at(&b, i).is_some() {
            let hashes = raw_string_at(&b, i).expect("checked");
            // r, the hashes, the quote
            for _ in 0..hashes + 2 {
                out.push(b[i]);
                i += 1;
            }
            while i < b.len() && !(b[i] == '"' && (0..hashes).all(|h| b.get(i + 1 + h) == Some(&'#'))) {
                out.push(blank(b[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            if i < b.len() {
                out.push('"');
                i += 1;
            }
        } else if c == '\'' && char_literal_len(&b, i).is_some() {
            let n = char_literal_len(&b, i).expect("checked");
            out.push('\'');
            out.extend(std::iter::repeat_n(' ', n - 2));
            out.push('\'');
            i += n;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether an identifier goes on before `i` (so an `r` there is not a raw string's; `br"…"`'s
/// `b` is a prefix, not an identifier).
fn ident_before(b: &[char], i: usize) -> bool {
    let ident = |j: usize| b[j].is_alphanumeric() || b[j] == '_';
    if i == 0 || !ident(i - 1) {
        return false;
    }
    !(b[i - 1] == 'b' && (i < 2 || !ident(i - 2)))
}

/// At `i` an `r"`, `r#"`, `r##"`…: the number of hashes.
fn raw_string_at(b: &[char], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while b.get(j) == Some(&'#') {
        j += 1;
    }
    (b.get(j) == Some(&'"')).then_some(j - i - 1)
}

/// At `i` a character literal (`'x'`, `'\n'`, `'\u{1F}'`; not a lifetime): its length.
fn char_literal_len(b: &[char], i: usize) -> Option<usize> {
    if b.get(i + 1) == Some(&'\\') {
        let end = (i + 2..b.len().min(i + 12)).find(|&j| b[j] == '\'')?;
        return Some(end - i + 1);
    }
    (b.get(i + 2) == Some(&'\'')).then_some(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blanks_comments_and_literals_but_keeps_lines_and_code() {
        let src =
            "let a = \"{ crate::x }\"; // crate::y {\nlet c = '{'; let l: &'a str = r#\"}\"#; /* {\n} */ f(b'}');";
        let out = blank_comments_and_literals(src);
        assert_eq!(out.lines().count(), 3);
        assert!(!out.contains("crate::"), "{out}");
        assert_eq!(out.matches('{').count() + out.matches('}').count(), 0, "{out}");
        assert!(out.contains("&'a str"), "a lifetime is code: {out}");
        assert!(out.starts_with("let a = \""), "{out}");
    }
}
