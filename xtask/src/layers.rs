//! `cargo xtask layers`: the analyzer's imports go one way, down the data flow
//! (docs/ARCHITECTURE.md). Each module of `analyzer/src` has a layer; a file may name
//! (`crate::…`, `super::…`) modules of its own layer or a lower one, never a higher one:
//!
//! | layer | modules |
//! |---|---|
//! | 0 | `report::model` (the report's data model: a leaf, it names no other module) |
//! | 1 | `capture` (pcap files, the XDP program's maps, NIC counters) |
//! | 2 | `frames` (link layers onto the shared classifier) |
//! | 3 | `engine` (counters, PSN state, drops) |
//! | 4 | `analyses` (packet-resolution and fabric analyses) |
//! | 5 | `pipeline` (one run: engine and analyses fed the same frames) |
//! | 6 | `report` (assembly, renderers, merge, gates, writing) |
//! | 7 | the drivers: `cli`, `live`, `offline`, `replay`, `metrics_server`, `lib`, `main` |

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The layer of a module path (its components below `analyzer/src`, without `.rs`/`mod`).
pub fn layer(module: &[&str]) -> u8 {
    match module {
        ["report", "model", ..] => 0,
        ["capture", ..] => 1,
        ["frames", ..] => 2,
        ["engine", ..] => 3,
        ["analyses", ..] => 4,
        ["pipeline", ..] => 5,
        ["report", ..] => 6,
        _ => 7,
    }
}

/// The module path of a source file relative to `analyzer/src`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// Module paths a line names: `crate::a::b` as [a, b], `super::x` resolved against `module`
/// (`in_tests`: the line is inside the file's `#[cfg(test)]` module, whose `super` is the
/// file's own module).
fn named(line: &str, module: &[String], in_tests: bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let code = line.split("//").next().unwrap_or("");
    let mut parent = module.to_vec();
    if !in_tests {
        parent.pop();
    }
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            // Not part of a longer identifier (e.g. `my_crate::`).
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let mut path = base.clone();
            for seg in rest.split("::").take(2) {
                let seg: String = seg.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if seg.is_empty() || seg.chars().next().is_some_and(|c| c.is_uppercase()) {
                    break;
                }
                path.push(seg);
            }
            out.push(path);
        }
    }
    out
}

/// Every violation in the tree below `src`: "file:line: layer A names module M of layer B".
pub fn violations(src: &Path) -> anyhow::Result<Vec<String>> {
    let mut files = Vec::new();
    collect(src, &mut files)?;
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("below src");
        let module = module_of(rel);
        let own: Vec<&str> = module.iter().map(String::as_str).collect();
        let mine = layer(&own);
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let mut in_tests = false;
        for (i, line) in text.lines().enumerate() {
            in_tests |= line.trim_start().starts_with("#[cfg(test)]");
            for target in named(line, &module, in_tests) {
                let t: Vec<&str> = target.iter().map(String::as_str).collect();
                let theirs = layer(&t);
                if theirs > mine {
                    out.push(format!(
                        "{}:{}: {} (layer {mine}) names {} (layer {theirs})",
                        rel.display(),
                        i + 1,
                        own.join("::"),
                        t.join("::")
                    ));
                }
            }
        }
    }
    Ok(out)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            collect(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    Ok(())
}

pub fn run() -> anyhow::Result<()> {
    let v = violations(&crate::root().join("analyzer/src"))?;
    if !v.is_empty() {
        bail!("imports against the data flow (see docs/ARCHITECTURE.md):\n{}", v.join("\n"));
    }
    eprintln!("xtask layers: every import goes down the data flow");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_an_import_up_the_flow_and_passes_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        std::fs::create_dir_all(src.join("engine")).unwrap();
        std::fs::create_dir_all(src.join("report/model")).unwrap();
        std::fs::write(src.join("engine/mod.rs"), "use crate::report::model::Nic;\nuse crate::capture::x;\n").unwrap();
        std::fs::write(src.join("engine/live.rs"), "use crate::analyses::Config;\n").unwrap();
        std::fs::write(src.join("report/model/mod.rs"), "use super::render::human;\n").unwrap();
        std::fs::write(src.join("report/model/addr.rs"), "use super::Flow; // crate::engine\n").unwrap();
        std::fs::write(src.join("engine/flows.rs"), "use super::FrameMeta;\n#[cfg(test)]\nuse super::*;\n").unwrap();
        let v = violations(src).unwrap();
        assert_eq!(v.len(), 2, "{v:#?}");
        assert!(v[0].starts_with("engine/live.rs:1: engine::live (layer 3) names analyses (layer 4)"), "{}", v[0]);
        assert!(v[1].contains("report::model (layer 0) names report::render::human (layer 6)"), "{}", v[1]);
        assert!(violations(&crate::root().join("analyzer/src")).unwrap().is_empty(), "the analyzer itself");
    }
}
