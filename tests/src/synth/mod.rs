//! Building frames and captures for tests, fixtures and benchmarks, on top of the `emit`
//! functions of [`analyzer_common::wire`] — the same formats the parser reads.

mod frame;
pub mod pcap;
pub mod records;
pub mod scenario;

pub use frame::{Encap, Ext, IpAddrs, Roce, Vlan, cm_mad, ethernet, mirror, mirror_from, pause, pfc, udp_ipv4};
