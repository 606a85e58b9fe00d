//! MAC control frames (EtherType 0x8808): 802.1Qbb priority flow control and 802.3x PAUSE.

use super::{be16, fixed_header_view, put16};

pub mod opcode {
    /// 802.3x PAUSE: one quanta value for the whole link.
    pub const PAUSE: u16 = 0x0001;
    /// 802.1Qbb PFC: class-enable vector and eight per-priority quanta.
    pub const PFC: u16 = 0x0101;
}

/// The reserved multicast address MAC control frames are sent to.
pub const MAC_CONTROL_DST: [u8; 6] = [0x01, 0x80, 0xC2, 0x00, 0x00, 0x01];

mod field {
    pub const OPCODE: usize = 0;
    /// PFC: the class-enable vector; 802.3x PAUSE: the quanta.
    pub const PARAM: usize = 2;
    /// PFC: eight 2-byte quanta, priority 0 first.
    pub const PFC_QUANTA: usize = 4;
}

fixed_header_view!(
    /// The MAC control payload as far as PFC needs it: opcode (2), class-enable vector (2) and
    /// eight quanta (16) — 20 bytes. An 802.3x PAUSE uses only the first 4.
    ; 20
);

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn opcode(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OPCODE)
    }
    /// PFC: bit n set = priority n's quanta is valid. PAUSE: not present.
    pub fn class_enable(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PARAM)
    }
    /// PFC quanta of priority `prio` (0..8).
    pub fn pfc_quanta(&self, prio: usize) -> u16 {
        be16(self.buffer.as_ref(), field::PFC_QUANTA + 2 * prio)
    }
    /// 802.3x PAUSE quanta (the two bytes after the opcode).
    pub fn pause_quanta(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PARAM)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_opcode(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::OPCODE, v);
    }
    pub fn set_class_enable(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::PARAM, v);
    }
    pub fn set_pfc_quanta(&mut self, prio: usize, v: u16) {
        put16(self.buffer.as_mut(), field::PFC_QUANTA + 2 * prio, v);
    }
    pub fn set_pause_quanta(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::PARAM, v);
    }
}

/// A PFC frame's MAC control payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PfcRepr {
    pub class_enable: u16,
    pub quanta: [u16; 8],
}

impl PfcRepr {
    pub const LEN: usize = 20;
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        let mut quanta = [0; 8];
        for (i, q) in quanta.iter_mut().enumerate() {
            *q = p.pfc_quanta(i);
        }
        PfcRepr { class_enable: p.class_enable(), quanta }
    }
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Packet::new_unchecked(buf);
        p.set_opcode(opcode::PFC);
        p.set_class_enable(self.class_enable);
        for (i, q) in self.quanta.iter().enumerate() {
            p.set_pfc_quanta(i, *q);
        }
    }
}

/// An 802.3x PAUSE frame's MAC control payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PauseRepr {
    pub quanta: u16,
}

impl PauseRepr {
    pub const LEN: usize = 4;
    /// Writes the 4 bytes of a PAUSE payload.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Packet::new_unchecked(buf);
        p.set_opcode(opcode::PAUSE);
        p.set_pause_quanta(self.quanta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pfc() {
        let b = [0x01, 0x01, 0x00, 0x09, 0xFF, 0xFF, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 0];
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.opcode(), opcode::PFC);
        let r = PfcRepr::parse(&p);
        assert_eq!(r.class_enable, 0x0009);
        assert_eq!(r.quanta, [0xFFFF, 0, 0, 0x1234, 0, 0, 0, 0]);
        let mut out = [0u8; 20];
        r.emit(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn pause() {
        let mut b = [0u8; 20];
        PauseRepr { quanta: 0x0400 }.emit(&mut b);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.opcode(), p.pause_quanta()), (opcode::PAUSE, 0x400));
    }
}
