//! Names used in reports.

use analyzer_common::opcode::{self, Transport};

/// [`opcode_name`] from a table made once: shared by every flow of a report.
pub fn opcode_name_static(op: u8) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    &NAMES.get_or_init(|| (0..=255u8).map(opcode_name).collect())[op as usize]
}

/// "RC_RDMA_WRITE_FIRST", "UD_SEND_ONLY", "CNP", or "OPCODE_0xNN" for one the IBTA does not
/// define.
pub fn opcode_name(op: u8) -> String {
    if op == opcode::CNP {
        return "CNP".into();
    }
    match (opcode::is_defined(op), Transport::of(op), opcode::op_name(op & 0x1F)) {
        (true, Some(t), Some(name)) => format!("{}_{}", t.prefix(), name),
        _ => format!("OPCODE_0x{op:02X}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(opcode_name(0x06), "RC_RDMA_WRITE_FIRST");
        assert_eq!(opcode_name(0x64), "UD_SEND_ONLY");
        assert_eq!(opcode_name(0xAC), "XRC_RDMA_READ_REQUEST");
        assert_eq!(opcode_name(0x81), "CNP");
        assert_eq!(opcode_name(0x15), "OPCODE_0x15");
        assert_eq!(opcode_name(0xE0), "OPCODE_0xE0");
    }
}
