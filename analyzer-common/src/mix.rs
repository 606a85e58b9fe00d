//! The multipliers of the multiplicative hashes: the flow table's ([`crate::table`]), the PFC
//! counters' slots ([`crate::maps::PfcKey::slot`]) and the vantage matching's
//! ([`crate::vantage`]). M1 is the golden ratio's.

pub(crate) const M1: u64 = 0x9e37_79b9_7f4a_7c15;
pub(crate) const M2: u64 = 0xc2b2_ae3d_27d4_eb4f;
