//! `cargo xtask fixtures`: writes the fixture captures (tests/src/fixtures.rs) to tests/data/.

pub fn run() -> anyhow::Result<()> {
    let dir = tests::fixtures::data_dir();
    for p in tests::fixtures::write_all(&dir)? {
        println!("wrote {}", p.strip_prefix(crate::root()).unwrap_or(&p).display());
    }
    Ok(())
}
