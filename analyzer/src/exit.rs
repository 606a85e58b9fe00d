//! Exit codes of the `roce-analyzer` binary: one table, from which `--help` and docs/usage.md's
//! table are made (a test checks that table against [`markdown`]).

/// The analysis ran; the report is complete.
pub const OK: u8 = 0;
/// An error: unreadable or malformed input, I/O failure, missing privilege.
pub const ERROR: u8 = 1;
/// Usage error (bad flags or arguments).
pub const USAGE: u8 = 2;
/// The report was written but is partial: an input ended inside a record, or an output
/// failed while the others were written.
pub const PARTIAL: u8 = 3;
/// A `--fail-on` gate tripped (takes precedence over PARTIAL).
pub const GATE: u8 = 4;

/// Every exit code with its meaning, in order.
pub const TABLE: [(u8, &str); 5] = [
    (OK, "the analysis ran and the report is complete"),
    (
        ERROR,
        "error: unreadable or malformed input, I/O, privileges — the message names the file, the byte offset and the cause",
    ),
    (
        USAGE,
        "usage error, said before any work: a bad flag or value, an output that is one of the inputs (the same file), a `--clock-offset` label no input has",
    ),
    (
        PARTIAL,
        "the report was written but is partial: an input ended inside a record (everything before it is analysed), or an output failed while the others were written (`output_failures`)",
    ),
    (GATE, "a `--fail-on` gate tripped (takes precedence over 3); each tripped gate is printed with its value"),
];

/// The table as `--help` shows it.
pub fn help() -> String {
    let mut s = String::from("Exit codes:");
    for (code, meaning) in TABLE {
        s += &format!("\n  {code}  {meaning}");
    }
    s
}

/// The table as docs/usage.md shows it (Markdown).
pub fn markdown() -> String {
    let mut s = String::from("| code | meaning |\n|---|---|\n");
    for (code, meaning) in TABLE {
        s += &format!("| {code} | {meaning} |\n");
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn readme_and_help_come_from_the_table() {
        let readme = include_str!("../../docs/usage.md");
        assert!(
            readme.contains(&super::markdown()),
            "docs/usage.md's exit-code table differs from exit::TABLE:\n{}",
            super::markdown()
        );
        let help = super::help();
        assert!(super::TABLE.iter().all(|(c, m)| help.contains(&format!("  {c}  {m}"))));
    }
}
