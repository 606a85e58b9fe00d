//! `clickhouse-rows`: export files turned into the rows `--export-clickhouse` inserts, one
//! JSONEachRow file per table, for loading what agents wrote while no server was reachable.

use std::path::{Path, PathBuf};

use super::rows::{Interval, Table};

#[derive(Debug, thiserror::Error)]
pub enum RowsError {
    #[error(transparent)]
    Read(#[from] crate::report::export::read::ExportReadError),
    #[error("{path}: cannot write the table files: {source}")]
    Out { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Write(#[from] crate::report::write::WriteError),
}

/// What `clickhouse-rows` wrote.
#[derive(Debug, Default)]
pub struct Written {
    /// Rows per table file, in [`Table::ALL`]'s order.
    pub rows: Vec<(Table, u64)>,
    /// Lines of intervals that never closed (the agent was killed inside one): no row.
    pub unfinished: u64,
}

/// The rows of the export lines in `exports` as `out/<table>.ndjson` (JSONEachRow), one file
/// per table, written atomically: what `--export-clickhouse` would have inserted.
pub fn write_rows(exports: &[PathBuf], out: &Path) -> Result<Written, RowsError> {
    let mut tables: Vec<(Table, Vec<u8>, u64)> = Table::ALL.iter().map(|t| (*t, Vec::new(), 0)).collect();
    let mut written = Written::default();
    for path in exports {
        let (lines, _) = crate::report::export::read::lines(path, crate::capture::bounded::INPUT_MAX)?;
        // Each agent (host) closes its own intervals.
        let mut open: std::collections::BTreeMap<String, (Interval, u64)> = Default::default();
        for line in &lines {
            let (interval, pending) = open.entry(line.host.clone()).or_default();
            *pending += 1;
            let Some(batch) = interval.line(line) else { continue };
            *pending = 0;
            for (table, bytes, n) in batch.tables {
                let t = &mut tables[Table::ALL.iter().position(|x| *x == table).unwrap_or(0)];
                t.1.extend_from_slice(&bytes);
                t.2 += n;
            }
        }
        written.unfinished += open.values().map(|(_, p)| p).sum::<u64>();
    }
    std::fs::create_dir_all(out).map_err(|source| RowsError::Out { path: out.into(), source })?;
    for (table, bytes, n) in tables {
        let (target, _) = crate::report::write::Target::prepare(&out.join(format!("{}.ndjson", table.name())))?;
        crate::report::write::write_atomic(&target, &bytes)?;
        written.rows.push((table, n));
    }
    Ok(written)
}
