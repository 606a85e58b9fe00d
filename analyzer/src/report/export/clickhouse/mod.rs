//! `--export-clickhouse URL`: the export's lines, as rows of the fleet's tables, inserted into a
//! ClickHouse server over its HTTP interface, one batch per interval. The agent never waits on
//! the store: batches wait in a bounded buffer (`--export-buffer`) for a sender thread that
//! retries with backoff while the server is away; what the buffer cannot hold is dropped
//! whole, counted, and said.

pub mod files;
pub mod rows;
pub mod sender;

pub use files::{RowsError, Written, write_rows};
pub use rows::{Batch, Interval, Table};
pub use sender::{Sender, SenderOptions, SenderStats};
