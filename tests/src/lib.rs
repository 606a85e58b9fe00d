//! Shared parts of the integration tests (a dev-only crate): [`synth`], which builds frames and
//! captures for tests, fixtures and benchmarks; the fixture catalogue (also written to
//! `tests/data/` by `cargo xtask fixtures`) and helpers to run the binary and tshark.

pub mod clickhouse;
pub mod fabric;
pub mod fixtures;
pub mod messages;
pub mod netns;
pub mod synth;
pub mod tools;
pub mod transport;
pub mod tuning;
pub mod vantage;
