//! `--pcap [LABEL=]FILE` arguments.

use std::path::{Path, PathBuf};

/// One capture file and the label its records carry (a mirror port, uplink or host name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputSpec {
    pub label: String,
    pub path: PathBuf,
    /// Added to the input's timestamps (`--clock-offset LABEL=±DURATION`).
    pub clock_offset_ns: i64,
}

/// Whether `label` is one an input may carry: letters, digits and `- _ . :` (a fleet's
/// queries split `TIER:LINK` at its colon), not empty.
pub fn valid_label(label: &str) -> bool {
    !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
}

/// `--label`: a live input's label, checked as [`InputSpec::parse`] checks a file's.
pub fn parse_label(label: &str) -> Result<String, String> {
    match valid_label(label) {
        true => Ok(label.to_string()),
        false => Err(format!("bad label {label:?}: use letters, digits and - _ . :")),
    }
}

impl InputSpec {
    /// Parses `LABEL=FILE` or `FILE` (`-`: standard input, labelled `stdin`). The label defaults to the file name. A string that
    /// names an existing file is taken as a file even if it contains `=`.
    pub fn parse(arg: &str) -> Result<Self, String> {
        if arg.is_empty() {
            return Err("empty capture path".into());
        }
        if let Some((label, path)) = arg.split_once('=')
            && !Path::new(arg).exists()
        {
            if !valid_label(label) {
                return Err(format!("bad label {label:?} in {arg:?}: use letters, digits and - _ . : (LABEL=FILE)"));
            }
            if path.is_empty() {
                return Err(format!("no file after the label in {arg:?}"));
            }
            return Ok(InputSpec { label: label.into(), path: path.into(), clock_offset_ns: 0 });
        }
        if arg == "-" {
            return Ok(InputSpec { label: "stdin".into(), path: "-".into(), clock_offset_ns: 0 });
        }
        let path = PathBuf::from(arg);
        let label = path.file_name().map_or_else(|| arg.to_string(), |n| n.to_string_lossy().into_owned());
        Ok(InputSpec { label, path, clock_offset_ns: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(
            InputSpec::parse("up1=/x/a.pcap").unwrap(),
            InputSpec { label: "up1".into(), path: "/x/a.pcap".into(), clock_offset_ns: 0 }
        );
        assert_eq!(InputSpec::parse("/x/b.pcapng").unwrap().label, "b.pcapng");
        assert!(InputSpec::parse("bad label=/x").is_err());
        assert!(InputSpec::parse("up=").is_err());
        assert!(InputSpec::parse("").is_err());
    }
}
