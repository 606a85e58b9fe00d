//! `cargo xtask layers`: the structure docs/ARCHITECTURE.md claims, checked.
//!
//! * The analyzer's imports go one way, down the data flow. Each module of `analyzer/src` has
//!   a layer; a file may name (`crate::…`, `super::…`) modules of its own layer or a lower one,
//!   never a higher one:
//!
//!   | layer | modules |
//!   |---|---|
//!   | 0 | `model` (the report's data model: the ground floor, it names no other module) |
//!   | 1 | `capture` (pcap files, the XDP program's maps, NIC counters) |
//!   | 2 | `frames` (link layers onto the shared classifier; a frame's time and input) |
//!   | 3 | `engine` (counters, PSN state, drops) |
//!   | 4 | `analyses` (packet-resolution and fabric analyses) |
//!   | 5 | `pipeline` (one run: engine and analyses fed the same frames) |
//!   | 6 | `report` (assembly, renderers, merge, gates, writing) |
//!   | 7 | the drivers: `cli`, `live`, `offline`, `replay`, `lib`, `main` … |
//!
//! * The analyses take narrow inputs, not the engine: `analyses` names no `engine` module.
//! * No circle between files, in the analyzer, `analyzer-common` or the XDP program: a file
//!   that names another is not named back, directly or round a longer circle.
//! * The XDP program uses only `analyzer-common` of the workspace (and the aya eBPF crates).
//! * No function over [`functions::MAX_LINES`] lines in the three crates (tests excepted).

pub mod functions;
pub mod graph;
pub mod source;

use std::path::Path;

use anyhow::bail;

use graph::Graph;
use source::SourceFile;

/// The layer of a module path (its components below `analyzer/src`).
pub fn layer(module: &[&str]) -> u8 {
    match module {
        ["model", ..] => 0,
        ["capture", ..] => 1,
        ["frames", ..] => 2,
        ["engine", ..] => 3,
        ["analyses", ..] => 4,
        ["pipeline", ..] => 5,
        ["report", ..] => 6,
        _ => 7,
    }
}

/// Reads every file of a crate's `src/` into its graph.
pub fn crate_graph(src: &Path) -> anyhow::Result<Graph> {
    let files = source::collect(src)?.iter().map(|f| SourceFile::read(src, f)).collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Graph::new(files))
}

/// Imports up the data flow, and the analyses' imports of the engine.
pub fn layer_violations(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    for (i, f) in g.files.iter().enumerate() {
        let own: Vec<&str> = f.module.iter().map(String::as_str).collect();
        let mine = layer(&own);
        for (line, target) in &g.named[i] {
            let t: Vec<&str> = target.iter().map(String::as_str).collect();
            let theirs = layer(&t);
            let at = format!("{}:{}: {}", f.rel.display(), line + 1, own.join("::"));
            if theirs > mine {
                out.push(format!("{at} (layer {mine}) names {} (layer {theirs})", t.join("::")));
            } else if own.first() == Some(&"analyses") && t.first() == Some(&"engine") {
                out.push(format!("{at} names {}: the analyses take narrow inputs, not the engine", t.join("::")));
            }
        }
    }
    out
}

/// Crates the XDP program may name: its own, `analyzer-common`, the aya eBPF crates, `core`.
const XDP_CRATES: [&str; 7] = ["crate", "self", "super", "core", "analyzer_common", "aya_ebpf", "aya_log_ebpf"];

/// `use` lines of the XDP program that name another crate than [`XDP_CRATES`], and workspace
/// dependencies of its manifest other than `analyzer-common`.
pub fn xdp_violations(root: &Path, g: &Graph) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let own: Vec<String> = g.files.iter().flat_map(|f| f.children()).collect();
    for f in &g.files {
        for (n, line) in f.code.iter().enumerate() {
            let l = line.trim_start();
            let Some(rest) = l.strip_prefix("pub use ").or(l.strip_prefix("use ")) else { continue };
            let head: String =
                rest.trim_start_matches("::").chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !XDP_CRATES.contains(&head.as_str()) && !own.contains(&head) {
                out.push(format!("analyzer-ebpf/src/{}:{}: the XDP program uses `{head}`", f.rel.display(), n + 1));
            }
        }
    }
    let manifest = std::fs::read_to_string(root.join("analyzer-ebpf/Cargo.toml"))?;
    for line in manifest.lines() {
        let name = line.split(['=', ' ']).next().unwrap_or("");
        if ["analyzer", "xtask", "tests"].contains(&name) {
            out.push(format!("analyzer-ebpf/Cargo.toml: depends on the workspace's `{name}`"));
        }
    }
    Ok(out)
}

/// Every violation of the structure rules in the workspace at `root`.
pub fn violations(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for dir in ["analyzer", "analyzer-common", "analyzer-ebpf"] {
        let g = crate_graph(&root.join(dir).join("src"))?;
        if dir == "analyzer" {
            out.extend(layer_violations(&g));
        }
        if dir == "analyzer-ebpf" {
            out.extend(xdp_violations(root, &g)?);
        }
        out.extend(g.cycles().into_iter().map(|c| format!("{dir}/src: files in a circle: {c}")));
        out.extend(functions::violations(&g.files, dir));
    }
    Ok(out)
}

pub fn run() -> anyhow::Result<()> {
    let v = violations(&crate::root())?;
    if !v.is_empty() {
        bail!("the structure docs/ARCHITECTURE.md describes is broken:\n{}", v.join("\n"));
    }
    eprintln!(
        "xtask layers: imports go down the data flow, no file circles, the XDP program uses analyzer-common only, \
         no function over {} lines",
        functions::MAX_LINES
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    #[test]
    fn finds_an_import_up_the_flow_and_an_analysis_on_the_engine() {
        let dir = tree(&[
            ("engine/mod.rs", "use crate::model::Nic;\nuse crate::capture::x;\n"),
            ("engine/live.rs", "use crate::analyses::Config;\n"),
            ("model/mod.rs", "use crate::report::render::human;\n"),
            ("model/addr.rs", "use super::Flow; // crate::engine\n"),
            ("engine/flows.rs", "use crate::frames::FrameMeta;\n#[cfg(test)]\nuse crate::analyses::x;\n"),
            ("analyses/vantage.rs", "fn f() { crate::engine::flows::hash(); }\n"),
        ]);
        let v = layer_violations(&crate_graph(dir.path()).unwrap());
        assert_eq!(v.len(), 3, "{v:#?}");
        assert!(
            v[0].starts_with("analyses/vantage.rs:1: analyses::vantage names engine::flows::hash: the analyses"),
            "{}",
            v[0]
        );
        assert!(v[1].starts_with("engine/live.rs:1: engine::live (layer 3) names analyses (layer 4)"), "{}", v[1]);
        assert!(v[2].contains("model (layer 0) names report::render::human (layer 6)"), "{}", v[2]);
    }

    #[test]
    fn finds_a_file_circle_but_not_the_module_tree() {
        let dir = tree(&[
            ("lib.rs", "pub mod a;\npub mod b;\npub use a::*;\n"),
            ("a/mod.rs", "pub mod x;\npub mod y;\npub use x::X;\nuse y::helper;\n"),
            ("a/x.rs", "use super::y::Y;\n"),
            ("a/y.rs", "fn f() { super::super::b::g(); }\n"),
            ("b.rs", "use crate::a::x::X;\n#[cfg(test)]\nmod tests { use crate::a::helper; }\n"),
        ]);
        let g = crate_graph(dir.path()).unwrap();
        let c = g.cycles();
        assert_eq!(c.len(), 1, "{c:?}");
        // a/x.rs → a/y.rs → b.rs → a/x.rs, whichever file the description starts from.
        for f in ["a/x.rs", "a/y.rs", "b.rs"] {
            assert!(c[0].contains(f), "{}", c[0]);
        }
        assert!(!c[0].contains("a/mod.rs") && !c[0].contains("lib.rs"), "{}", c[0]);
    }

    #[test]
    fn the_workspace_keeps_its_structure() {
        let v = violations(&crate::root()).unwrap();
        assert!(v.is_empty(), "{}", v.join("\n"));
    }
}
