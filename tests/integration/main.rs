//! Integration tests of roce-analyzer (one test binary, modules by capability).

mod cli;
mod clickhouse;
mod deploy;
mod diagnosis;
mod evidence;
mod export;
mod fabric;
mod fixtures;
mod hostile;
mod kernel;
mod live;
mod messages;
mod outputs;
mod prometheus;
mod readme;
mod split;
mod transport;
mod tshark;
mod tuning;
mod units;
mod vantage;
