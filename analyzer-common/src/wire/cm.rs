//! InfiniBand communication management (CM) MADs as RoCE carries them: a UD SEND ONLY to QP 1
//! whose payload is a 256-byte MAD of management class 0x07. The REQ names the requester's QP,
//! the REP the responder's and the REQ it answers (by communication ID): together they pair
//! the two directions of a connection (IBTA vol. 1, 12.6.5 and 12.6.8).

use super::{be16, be24, be32, put16, put24, put32};

/// Management class of CM MADs.
pub const MGMT_CLASS_CM: u8 = 0x07;
pub const ATTR_REQ: u16 = 0x0010;
pub const ATTR_REP: u16 = 0x0013;
/// CM MADs go to QP 1 (the general services interface).
pub const CM_QP: u32 = 1;
/// MAD bytes the analyzer reads: the 24-byte MAD header and the REQ up to its Starting PSN.
pub const BYTES: usize = 72;

/// Byte offsets in the MAD (header included).
mod field {
    pub const BASE_VERSION: usize = 0;
    pub const MGMT_CLASS: usize = 1;
    pub const CLASS_VERSION: usize = 2;
    pub const METHOD: usize = 3;
    pub const ATTR_ID: usize = 16;
    pub const LOCAL_COMM_ID: usize = 24;
    pub const REQ_LOCAL_QPN: usize = 24 + 32;
    pub const REQ_STARTING_PSN: usize = 24 + 44;
    pub const REP_REMOTE_COMM_ID: usize = 24 + 4;
    pub const REP_LOCAL_QPN: usize = 24 + 12;
    pub const REP_STARTING_PSN: usize = 24 + 20;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Req,
    Rep,
}

/// The fields of a REQ or REP that pair a connection's QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub kind: Kind,
    pub local_comm_id: u32,
    /// The REQ's communication ID (REP only; 0 in a REQ).
    pub remote_comm_id: u32,
    pub local_qpn: u32,
    pub starting_psn: u32,
}

/// True for the frames that may carry a CM MAD: UD SEND ONLY to QP 1.
#[inline(always)]
pub fn is_carrier(opcode: u8, dst_qp: u32) -> bool {
    opcode == 0x64 && dst_qp == CM_QP
}

impl Repr {
    /// Parses a MAD's first [`BYTES`] bytes: a CM REQ or REP, or `None` (another class or
    /// attribute, or too short).
    pub fn parse(mad: &[u8]) -> Option<Repr> {
        if mad.len() < BYTES || mad[field::BASE_VERSION] != 1 || mad[field::MGMT_CLASS] != MGMT_CLASS_CM {
            return None;
        }
        let local_comm_id = be32(mad, field::LOCAL_COMM_ID);
        match be16(mad, field::ATTR_ID) {
            ATTR_REQ => Some(Repr {
                kind: Kind::Req,
                local_comm_id,
                remote_comm_id: 0,
                local_qpn: be24(mad, field::REQ_LOCAL_QPN),
                starting_psn: be24(mad, field::REQ_STARTING_PSN),
            }),
            ATTR_REP => Some(Repr {
                kind: Kind::Rep,
                local_comm_id,
                remote_comm_id: be32(mad, field::REP_REMOTE_COMM_ID),
                local_qpn: be24(mad, field::REP_LOCAL_QPN),
                starting_psn: be24(mad, field::REP_STARTING_PSN),
            }),
            _ => None,
        }
    }

    /// Writes the MAD header and these fields into `mad` (at least [`BYTES`] long; the rest
    /// is left as it is).
    pub fn emit(&self, mad: &mut [u8]) {
        mad[field::BASE_VERSION] = 1;
        mad[field::MGMT_CLASS] = MGMT_CLASS_CM;
        mad[field::CLASS_VERSION] = 2;
        mad[field::METHOD] = 0x03; // Send
        let attr = match self.kind {
            Kind::Req => ATTR_REQ,
            Kind::Rep => ATTR_REP,
        };
        put16(mad, field::ATTR_ID, attr);
        put32(mad, field::LOCAL_COMM_ID, self.local_comm_id);
        match self.kind {
            Kind::Req => {
                put24(mad, field::REQ_LOCAL_QPN, self.local_qpn);
                put24(mad, field::REQ_STARTING_PSN, self.starting_psn);
            }
            Kind::Rep => {
                put32(mad, field::REP_REMOTE_COMM_ID, self.remote_comm_id);
                put24(mad, field::REP_LOCAL_QPN, self.local_qpn);
                put24(mad, field::REP_STARTING_PSN, self.starting_psn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn req_and_rep_fields_at_their_ibta_offsets() {
        // A REQ as bytes: comm ID 0x11223344, local QPN 0x000A40, starting PSN 0x123456.
        let mut mad = [0u8; 256];
        mad[0] = 1;
        mad[1] = 0x07;
        mad[16..18].copy_from_slice(&[0x00, 0x10]);
        mad[24..28].copy_from_slice(&[0x11, 0x22, 0x33, 0x44]);
        mad[56..60].copy_from_slice(&[0x00, 0x0A, 0x40, 0x07]); // QPN, responder resources
        mad[68..72].copy_from_slice(&[0x12, 0x34, 0x56, 0xFF]); // PSN, timeout/retry bits
        let r = Repr::parse(&mad).unwrap();
        assert_eq!(
            r,
            Repr {
                kind: Kind::Req,
                local_comm_id: 0x1122_3344,
                remote_comm_id: 0,
                local_qpn: 0xA40,
                starting_psn: 0x12_3456
            }
        );
        let mut again = [0u8; 256];
        r.emit(&mut again);
        assert_eq!(Repr::parse(&again), Some(r));
        let rep =
            Repr { kind: Kind::Rep, local_comm_id: 9, remote_comm_id: 0x1122_3344, local_qpn: 0xB41, starting_psn: 77 };
        rep.emit(&mut again);
        assert_eq!(&again[28..32], &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(&again[36..39], &[0x00, 0x0B, 0x41]);
        assert_eq!(Repr::parse(&again), Some(rep));
        again[1] = 0x81; // another management class
        assert_eq!(Repr::parse(&again), None);
        assert_eq!(Repr::parse(&mad[..40]), None);
        assert!(is_carrier(0x64, 1) && !is_carrier(0x64, 2) && !is_carrier(0x04, 1));
    }
}
