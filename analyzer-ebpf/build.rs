//! Link (code generation) flags for the XDP program, applied by bpf-linker. They live here
//! because aya-build owns the RUSTFLAGS of this build.
//!
//! * `allows-misaligned-mem-access` (LLVM 22): header fields sit at odd offsets (14-byte
//!   Ethernet header); without it LLVM splits every wide load into byte loads. The verifier
//!   accepts misaligned packet reads on architectures with efficient unaligned access
//!   (x86-64, arm64).
fn main() {
    println!("cargo::rustc-link-arg-bins=--cpu-features=+allows-misaligned-mem-access");
}
