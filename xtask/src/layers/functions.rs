//! Function length: no function of the host, common or XDP crates over [`MAX_LINES`] lines
//! (tests excepted). A long function is a sequence that wants to be a table or several named
//! steps; the limit keeps each readable on one screen.

use super::source::{ItemEnd, SourceFile, item_end};

/// The most lines a function may take, from its `fn` line to its closing brace.
pub const MAX_LINES: usize = 80;

/// A function's name and the lines it spans (0-based, inclusive).
#[derive(Debug, PartialEq, Eq)]
pub struct Span {
    pub name: String,
    pub first: usize,
    pub last: usize,
}

impl Span {
    pub fn lines(&self) -> usize {
        self.last - self.first + 1
    }
}

/// The functions with a body in the file's code before its tests.
pub fn spans(file: &SourceFile) -> Vec<Span> {
    let code = &file.code;
    let mut out = Vec::new();
    for (n, line) in code.iter().enumerate().filter(|(n, _)| !file.test[*n]) {
        let mut from = 0;
        while let Some(at) = line[from..].find("fn ") {
            let i = from + at;
            from = i + 3;
            let before = line[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let name: String =
                line[i + 3..].trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if name.is_empty() {
                continue;
            }
            // A declaration without a body (`;` first) is no function to measure.
            if let Some(ItemEnd::Brace(last)) = item_end(code, n, i) {
                out.push(Span { name, first: n, last });
            }
        }
    }
    out
}

/// "file:line: fn NAME is N lines (at most 80)" for every function over the limit.
pub fn violations(files: &[SourceFile], crate_dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    for f in files {
        for s in spans(f) {
            if s.lines() > MAX_LINES {
                out.push(format!(
                    "{crate_dir}/src/{}:{}: fn {} is {} lines (at most {MAX_LINES})",
                    f.rel.display(),
                    s.first + 1,
                    s.name,
                    s.lines()
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> SourceFile {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rs");
        std::fs::write(&p, text).unwrap();
        SourceFile::read(dir.path(), &p).unwrap()
    }

    #[test]
    fn measures_bodies_and_skips_declarations_strings_and_tests() {
        let f = file(
            "trait T {\n    fn decl(&self);\n}\nfn a() -> u8 {\n    let s = \"}\";\n    1\n}\npub(crate) fn b<F: Fn() -> u8>(f: F) { f(); }\n#[cfg(test)]\nmod tests {\n    fn t() {\n    }\n}\n",
        );
        let s = spans(&f);
        assert_eq!(s, vec![Span { name: "a".into(), first: 3, last: 6 }, Span { name: "b".into(), first: 7, last: 7 }]);
        assert_eq!(s[0].lines(), 4);
        let long = format!("fn long() {{\n{}}}\n", "    x();\n".repeat(MAX_LINES - 1));
        let v = violations(&[file(&long)], "c");
        assert_eq!(v, vec![format!("c/src/a.rs:1: fn long is {} lines (at most {MAX_LINES})", MAX_LINES + 1)]);
        let ok = format!("fn fits() {{\n{}}}\n", "    x();\n".repeat(MAX_LINES - 2));
        assert!(violations(&[file(&ok)], "c").is_empty());
    }
}
