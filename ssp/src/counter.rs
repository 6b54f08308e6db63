//! The tagged-counter application: the oracle workload of the invariant,
//! multi-process and restart tests.
//!
//! Takes a [`Worker`] and its global index; gives a run in which worker `w`
//! adds 1 to column `w · clocks + c` of every row at clock `c`, and checks
//! every read: a row read at clock `c` must hold 1 in each column
//! `(u, c')` with `c' <= c - s - 1` (the SSP guarantee) and nothing but 0
//! or 1 anywhere (exactly once). After the run every column of every row is
//! exactly 1, which [`check_final`] checks.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::client::Worker;
use crate::error::SspError;
use crate::types::{Clock, RowKey, RowValues, TableConfig};

/// The shape of a counter run.
#[derive(Clone, Copy, Debug)]
pub struct CounterSpec {
    /// Workers over all clients.
    pub workers: u32,
    /// Clocks each worker runs.
    pub clocks: u32,
    /// Rows of the table.
    pub rows: u64,
    /// Staleness s.
    pub staleness: u32,
}

impl CounterSpec {
    /// The one table of the run (dense, `workers · clocks` columns).
    pub fn table(&self) -> TableConfig {
        TableConfig::dense(0, self.workers * self.clocks, self.staleness)
    }
}

/// Runs worker `w` from its current clock to `spec.clocks`, sleeping
/// `delay` after each clock.
///
/// # Errors
/// [`SspError::Config`] naming the read that broke the SSP guarantee or
/// saw an update twice; any server error.
pub fn run_worker(
    worker: &mut Worker,
    w: u32,
    spec: CounterSpec,
    delay: Duration,
) -> Result<(), SspError> {
    let cols = (spec.workers * spec.clocks) as usize;
    while worker.clock_value() < spec.clocks {
        let c = worker.clock_value();
        for r in 0..spec.rows {
            let key = RowKey::new(0, r);
            let row = worker.get_row(key)?.to_dense(cols);
            check_read(&row, spec, c)?;
            worker.inc(key, w * spec.clocks + c, 1.0)?;
        }
        std::thread::sleep(delay);
        worker.clock()?;
    }
    Ok(())
}

fn check_read(row: &[f32], spec: CounterSpec, c: Clock) -> Result<(), SspError> {
    for u in 0..spec.workers {
        for cu in 0..spec.clocks {
            let v = row[(u * spec.clocks + cu) as usize];
            if v != 0.0 && v != 1.0 {
                return Err(SspError::Config(format!(
                    "update of worker {u} clock {cu} applied {v} times"
                )));
            }
            if cu + spec.staleness < c && v != 1.0 {
                return Err(SspError::Config(format!(
                    "read at clock {c} misses worker {u}'s update of clock {cu} (s = {})",
                    spec.staleness
                )));
            }
        }
    }
    Ok(())
}

/// Checks a finished run's rows: every column of every row is exactly 1.
/// Returns the number of increments found.
///
/// # Errors
/// [`SspError::Config`] naming the first row and column that is not 1.
pub fn check_final(rows: &BTreeMap<RowKey, RowValues>, spec: CounterSpec) -> Result<u64, SspError> {
    let cols = (spec.workers * spec.clocks) as usize;
    let mut n = 0;
    for r in 0..spec.rows {
        let key = RowKey::new(0, r);
        let v = rows
            .get(&key)
            .map(|v| v.to_dense(cols))
            .unwrap_or(vec![0.0; cols]);
        for (col, &x) in v.iter().enumerate() {
            if x != 1.0 {
                return Err(SspError::Config(format!(
                    "row {r}: worker {} clock {} applied {x} times",
                    col as u32 / spec.clocks,
                    col as u32 % spec.clocks
                )));
            }
            n += 1;
        }
    }
    Ok(n)
}
