//! Embeds the XDP program. With the eBPF toolchain (nightly + rust-src + bpf-linker) it is
//! built from analyzer-ebpf through aya-build; without it, the committed object is used after
//! checking that it was built from the current sources. `ROCE_ANALYZER_EBPF=source|prebuilt`
//! forces either way.

#[path = "build/ebpf_object.rs"]
mod ebpf_object;

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest.parent().expect("analyzer/ is inside the workspace").to_path_buf();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-env-changed=ROCE_ANALYZER_EBPF");
    println!("cargo:rerun-if-changed=build/ebpf_object.rs");
    for s in ebpf_object::SOURCES.iter().chain([&ebpf_object::OBJECT, &ebpf_object::RECORD]) {
        println!("cargo:rerun-if-changed={}", root.join(s).display());
    }
    let mode = std::env::var("ROCE_ANALYZER_EBPF").unwrap_or_default();
    let from_source = match mode.as_str() {
        "source" => true,
        "prebuilt" => false,
        "" => match ebpf_object::toolchain_missing() {
            None => true,
            Some(why) => {
                println!("cargo:warning=eBPF toolchain unavailable ({why}): using the committed XDP object");
                false
            }
        },
        other => panic!("ROCE_ANALYZER_EBPF={other}: expected `source` or `prebuilt`"),
    };
    if from_source {
        let dir = root.join("analyzer-ebpf");
        let pkg = aya_build::Package {
            name: "analyzer-ebpf",
            root_dir: dir.to_str().expect("UTF-8 path"),
            ..Default::default()
        };
        if let Err(e) = aya_build::build_ebpf([pkg], aya_build::Toolchain::Nightly) {
            panic!("building the XDP program from analyzer-ebpf failed: {e:#}");
        }
    } else {
        use_prebuilt(&root, &out);
    }
}

fn use_prebuilt(root: &Path, out: &Path) {
    let (sources, object) = ebpf_object::read_record(root).unwrap_or_else(|e| panic!("{e}"));
    let now = ebpf_object::sources_hash(root).unwrap_or_else(|e| panic!("hashing the eBPF sources: {e}"));
    let obj = root.join(ebpf_object::OBJECT);
    let have = ebpf_object::file_hash(&obj).unwrap_or_else(|e| panic!("{}: {e}", obj.display()));
    if have != object {
        panic!("{} does not match its recorded hash ({}); run `cargo xtask ebpf`", obj.display(), ebpf_object::RECORD);
    }
    if now != sources {
        panic!(
            "the committed XDP object {} is stale: it was built from sources with hash {sources}, the \
             sources now hash to {now}. Install the eBPF toolchain (scripts/setup) to build it from \
             source, or refresh the committed object with `cargo xtask ebpf`.",
            obj.display()
        );
    }
    std::fs::copy(&obj, out.join("roce-analyzer")).unwrap_or_else(|e| panic!("copying {}: {e}", obj.display()));
}
