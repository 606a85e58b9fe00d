//! Packet formats of RoCE v1/v2, InfiniBand transport headers, PFC / 802.3x MAC control and the
//! mirror encapsulations (GRE, ERSPAN) — the one source of truth shared by the XDP program and
//! the host analyzer.
//!
//! * [`wire`]: typed, zero-copy views over header bytes (`Packet<T: AsRef<[u8]>>` with field
//!   ranges and checked constructors) and `Repr` values that can `emit` headers for tests.
//! * [`opcode`]: the IBTA opcode table: names and which extended headers follow each opcode.
//! * [`mod@classify`]: the frame classifier, generic over [`classify::FrameBytes`] so that the kernel
//!   program (bounds-checked packet reads) and the host (byte slices) run the same code.
//! * [`summary`]: the `#[repr(C)]` per-frame result both sides fill.
//! * [`flow`]: flow keys and the per-flow counters of the kernel maps.
//! * [`table`]: the kernel's flow table: where a flow's entry lives, found by array lookups.
//! * [`filter`]: `--filter`, the frames analysed, decided by the same code in kernel and host.
//! * [`vantage`]: a frame's identity across vantage points, and when a mirrored copy is one
//!   already counted.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod class;
pub mod classify;
pub mod filter;
pub mod flow;
pub mod maps;
pub mod mix;
pub mod opcode;
pub mod psn;
pub mod record;
pub mod summary;
pub mod table;
pub mod vantage;
pub mod wire;

pub use class::FrameClass;
pub use classify::{FrameBytes, classify};
pub use summary::PacketSummary;
