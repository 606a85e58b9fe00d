//! Which files of a crate name which others: every `crate::…`, `super::…`, `self::…` path and
//! every path through a module the file declares, resolved to the file that defines it. The
//! layer rule and the file-cycle rule are read off this graph.

use std::collections::BTreeMap;

use super::source::SourceFile;

/// A file's reference to another: the line (0-based) and the module path named.
#[derive(Debug, Clone)]
pub struct Edge {
    pub to: usize,
    pub line: usize,
}

/// The files of one crate and the references between them.
pub struct Graph {
    pub files: Vec<SourceFile>,
    /// Per file, its references to other files (outside its tests).
    pub edges: Vec<Vec<Edge>>,
    /// Per file, the module paths it names (outside its tests), resolved or not.
    pub named: Vec<Vec<(usize, Vec<String>)>>,
}

impl Graph {
    pub fn new(files: Vec<SourceFile>) -> Graph {
        let by_module: BTreeMap<Vec<String>, usize> =
            files.iter().enumerate().map(|(i, f)| (f.module.clone(), i)).collect();
        let mut edges = Vec::new();
        let mut named_all = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let children = f.children();
            let mut out: Vec<Edge> = Vec::new();
            let mut named = Vec::new();
            for (n, line) in statements(&f.code) {
                if f.test[n] || declaration_or_reexport(&line, !children.is_empty()) {
                    continue;
                }
                for path in paths_named(&line, &f.module, &children) {
                    if let Some(to) = resolve(&by_module, &path).filter(|&to| to != i)
                        && !out.iter().any(|e| e.to == to)
                    {
                        out.push(Edge { to, line: n });
                    }
                    named.push((n, path));
                }
            }
            edges.push(out);
            named_all.push(named);
        }
        Graph { files, edges, named: named_all }
    }

    /// The groups of files that name each other in a circle (strongly connected parts of more
    /// than one file), each as "a.rs → b.rs (line) → … → a.rs".
    pub fn cycles(&self) -> Vec<String> {
        let mut out = Vec::new();
        let adj: Vec<Vec<usize>> = self.edges.iter().map(|es| es.iter().map(|e| e.to).collect()).collect();
        for part in analyzer::analyses::deadlock::strongly_connected(&adj) {
            out.push(self.describe_cycle(&part));
        }
        out
    }

    /// One circle through the part, with the line of each reference.
    fn describe_cycle(&self, part: &[usize]) -> String {
        let start = part[0];
        // Breadth-first from start's successors back to start, inside the part.
        let mut prev: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        'search: while let Some(v) = queue.pop_front() {
            for e in &self.edges[v] {
                if !part.contains(&e.to) || prev.contains_key(&e.to) {
                    continue;
                }
                prev.insert(e.to, (v, e.line));
                if e.to == start {
                    break 'search;
                }
                queue.push_back(e.to);
            }
        }
        let mut steps = Vec::new();
        let mut at = start;
        while let Some(&(from, line)) = prev.get(&at) {
            steps.push(format!("{}:{}", self.files[from].rel.display(), line + 1));
            at = from;
            if at == start {
                break;
            }
        }
        steps.reverse();
        let all: Vec<String> = part.iter().map(|&f| self.files[f].rel.display().to_string()).collect();
        format!(
            "{} files ({}), e.g. {} → {}",
            part.len(),
            all.join(", "),
            steps.join(" → "),
            self.files[start].rel.display()
        )
    }
}

/// The lines of `code` with each `use` statement joined onto its first line (a group may
/// span several), each with its first line's index.
fn statements(code: &[String]) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (n, line) in code.iter().enumerate() {
        if open {
            let last = out.last_mut().expect("an open statement");
            last.1.push(' ');
            last.1.push_str(line.trim());
        } else {
            out.push((n, line.clone()));
            let l = line.trim_start();
            open = l.starts_with("use ") || (l.starts_with("pub") && l.contains(" use "));
        }
        if open && line.contains(';') {
            open = false;
        }
    }
    out
}

/// `mod x;` declarations and, in a file with submodules, its `pub use` re-exports: the
/// structure of the module tree, not a use of what they name.
fn declaration_or_reexport(line: &str, has_children: bool) -> bool {
    let l = line.trim_start();
    let l = l.strip_prefix("pub(crate) ").or(l.strip_prefix("pub(super) ")).or(l.strip_prefix("pub ")).map_or(l, |r| r);
    let public = line.trim_start().starts_with("pub");
    l.starts_with("mod ") || (has_children && public && l.starts_with("use "))
}

/// Module paths a line of code names: `crate::a::b` as [a, b], `super::x` and `self::x`
/// resolved against `module`, `child::x` for a module the file declares; a group
/// (`super::{a::X, b}`) names each of its members. Up to three lowercase segments after the
/// head (a type or value ends the path).
pub fn paths_named(code: &str, module: &[String], children: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let parent: Vec<String> = module[..module.len().saturating_sub(1)].to_vec();
    let mut heads: Vec<(String, Vec<String>)> =
        vec![("crate::".into(), Vec::new()), ("super::".into(), parent), ("self::".into(), module.to_vec())];
    for c in children {
        let mut m = module.to_vec();
        m.push(c.clone());
        heads.push((format!("{c}::"), m));
    }
    for (prefix, base) in &heads {
        let mut at = 0;
        while let Some(i) = code[at..].find(prefix.as_str()) {
            // Not part of a longer path or identifier (`my_crate::`, `a::super::`).
            let before = code[..at + i].chars().last();
            let rest = &code[at + i + prefix.len()..];
            at += i + prefix.len();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path = base.clone();
            let mut tail = rest;
            // `super::super::x`
            while let Some(r) = tail.strip_prefix("super::").filter(|_| prefix == "super::") {
                path.pop();
                tail = r;
            }
            for member in use_tree(tail) {
                let mut p = path.clone();
                for seg in member.into_iter().take(3) {
                    if seg.chars().next().is_some_and(|c| c.is_uppercase()) || seg == "self" {
                        break;
                    }
                    p.push(seg);
                }
                out.push(p);
            }
        }
    }
    out
}

/// The paths of a use tree at the start of `s` (`a::b`, `{a::X, b::{c, D}}`, `*`), each as
/// its segments.
fn use_tree(s: &str) -> Vec<Vec<String>> {
    let (paths, _) = tree_at(s.as_bytes(), 0);
    paths
}

fn tree_at(s: &[u8], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let skip = |s: &[u8], mut i: usize| {
        while i < s.len() && s[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    i = skip(s, i);
    if s.get(i) == Some(&b'{') {
        let mut all = Vec::new();
        i += 1;
        loop {
            i = skip(s, i);
            match s.get(i) {
                None => return (all, i),
                Some(b'}') => return (all, i + 1),
                Some(b',') => i += 1,
                _ => {
                    let (paths, j) = tree_at(s, i);
                    all.extend(paths);
                    if j == i {
                        return (all, i);
                    }
                    i = j;
                }
            }
        }
    }
    let start = i;
    while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_') {
        i += 1;
    }
    let seg = String::from_utf8_lossy(&s[start..i]).into_owned();
    if seg.is_empty() {
        return (vec![Vec::new()], i);
    }
    if s[i..].starts_with(b"::") {
        let (subs, j) = tree_at(s, i + 2);
        let paths = subs.into_iter().map(|mut p| {
            p.insert(0, seg.clone());
            p
        });
        return (paths.collect(), j);
    }
    (vec![vec![seg]], i)
}

/// The file that defines the longest known prefix of `path`.
fn resolve(by_module: &BTreeMap<Vec<String>, usize>, path: &[String]) -> Option<usize> {
    (0..=path.len()).rev().find_map(|n| by_module.get(&path[..n]).copied())
}
