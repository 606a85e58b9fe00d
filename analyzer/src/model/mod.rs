//! The report's data model: the v1 document (serde), its codes, counter sets, names and address
//! formatting. The ground floor of the host: it names nothing of the capture, the engine, the
//! analyses or the report's code, so every layer may use it. Field names are the v1 contract.
//!
//! One file a section of the document: [`report`] holds the document and its capture header,
//! [`flow`] the flows ([`edge`] their PSN state at a capture's ends), [`pfc`] the pause senders and congestion trees, [`ecn`] CE/CNP and
//! DCQCN, [`fabric`] incast and ECMP, [`load_balancing`] spraying and reordering, [`vantage`] the hops between points, [`findings`] the
//! audit and visibility notes, [`messages`] the messages and the tail, [`evidence`] and [`nic`]
//! the rest.

pub mod addr;
pub mod chunked;
pub mod codes;
pub mod count_map;
pub mod counters;
pub mod ecn;
pub mod edge;
pub mod errors;
pub mod evidence;
pub mod fabric;
pub mod findings;
pub mod flow;
pub mod load_balancing;
pub mod messages;
pub mod names;
pub mod nic;
pub mod percentiles;
pub mod pfc;
pub mod report;
mod skip;
pub mod vantage;

pub use addr::*;
pub use codes::*;
pub use count_map::CountMap;
pub use counters::*;
pub use ecn::*;
pub use edge::FlowEdge;
pub use errors::error_chain;
pub use evidence::*;
pub use fabric::*;
pub use findings::*;
pub use flow::*;
pub use load_balancing::*;
pub use messages::*;
pub use nic::*;
pub use percentiles::*;
pub use pfc::*;
pub use report::*;
pub use vantage::*;
