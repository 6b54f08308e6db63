//! Identifiers, table configuration and row values of the parameter server.
//!
//! Takes nothing; gives the plain-data vocabulary every other module speaks:
//! typed ids ([`TableId`], [`RowId`], [`ClientId`], [`ShardId`]), a
//! [`TableConfig`] (row length, dense or sparse rows, staleness s) and
//! [`RowValues`], the f32 contents of a row or of an increment to it.
//! Keeps true: a row never holds a column `>= row_len` (checked on every
//! increment, an error otherwise, never a panic).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::SspError;

/// A clock: the number of `clock()` calls a worker has made. Updates made
/// while a worker is at clock `c` are tagged `c` (Bösen, thesis §3.1).
pub type Clock = u32;

/// A row version: the number of updates a shard has applied to the row
/// (AdaRevision tables, thesis §3.2.3; always 0 for other tables).
pub type Version = u64;

/// A table of the parameter server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TableId(pub u32);

/// A row of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RowId(pub u64);

/// A client process (it holds the row cache shared by its worker threads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClientId(pub u32);

/// A server shard: owns the rows that hash to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ShardId(pub u32);

/// One row of one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RowKey {
    /// The table.
    pub table: TableId,
    /// The row within the table.
    pub row: RowId,
}

impl RowKey {
    /// The row `row` of table `table`.
    pub fn new(table: u32, row: u64) -> RowKey {
        RowKey {
            table: TableId(table),
            row: RowId(row),
        }
    }

    /// The shard that owns this row among `shards` shards (a fixed hash of
    /// table and row, the same in every process).
    pub fn shard(&self, shards: usize) -> ShardId {
        // SplitMix64 finaliser: stable across processes and Rust versions.
        let mut z = self.row.0 ^ (u64::from(self.table.0) << 48) ^ 0x9E37_79B9_7F4A_7C15;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ShardId((z % shards.max(1) as u64) as u32)
    }
}

/// How a table stores its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RowKind {
    /// `row_len` f32s per row.
    Dense,
    /// Only the non-zero columns (a sorted map column → value).
    Sparse,
}

/// How a shard applies the increments of a table.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum UpdateRule {
    /// `row += delta` (the increment is the change itself).
    Add,
    /// AdaRevision (thesis §3.2.3, [`crate::adarevision`]): the increment
    /// is a gradient computed from the row version the worker read, and the
    /// shard takes an adaptive step of base rate `alpha`, revised for the
    /// updates applied since that version. Dense tables only.
    AdaRevision {
        /// Base learning rate α.
        alpha: f32,
        /// Most live ḡ snapshots per row.
        cap: u32,
    },
}

/// A table's configuration; every client and server of a run holds the same.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableConfig {
    /// The table's id.
    pub id: TableId,
    /// Columns per row.
    pub row_len: u32,
    /// Dense or sparse rows.
    pub kind: RowKind,
    /// The staleness bound s in clocks: a worker at clock c reads a row only
    /// once it holds every update from clocks `<= c - s - 1`. 0 is BSP.
    pub staleness: u32,
    /// How increments are applied.
    pub rule: UpdateRule,
}

impl TableConfig {
    /// A dense table of `row_len` columns with staleness `staleness`.
    pub fn dense(id: u32, row_len: u32, staleness: u32) -> TableConfig {
        TableConfig {
            id: TableId(id),
            row_len,
            kind: RowKind::Dense,
            staleness,
            rule: UpdateRule::Add,
        }
    }

    /// A sparse table of `row_len` columns with staleness `staleness`.
    pub fn sparse(id: u32, row_len: u32, staleness: u32) -> TableConfig {
        TableConfig {
            id: TableId(id),
            row_len,
            kind: RowKind::Sparse,
            staleness,
            rule: UpdateRule::Add,
        }
    }

    /// This table with AdaRevision updates of base rate `alpha` and at most
    /// `cap` live snapshots per row (see [`UpdateRule::AdaRevision`]).
    pub fn with_adarevision(mut self, alpha: f32, cap: u32) -> TableConfig {
        self.rule = UpdateRule::AdaRevision { alpha, cap };
        self
    }

    /// True for an AdaRevision table.
    pub fn is_adarevision(&self) -> bool {
        matches!(self.rule, UpdateRule::AdaRevision { .. })
    }

    /// The oldest row stamp a worker at `clock` may read: rows stamped `t`
    /// hold every update tagged `< t`, and clock c needs those `<= c - s - 1`.
    pub fn min_stamp(&self, clock: Clock) -> Clock {
        clock.saturating_sub(self.staleness)
    }
}

/// The f32 values of a row, or of an increment to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RowValues {
    /// One value per column.
    Dense(Vec<f32>),
    /// Column → value, absent columns are 0.
    Sparse(BTreeMap<u32, f32>),
}

impl RowValues {
    /// A zero row of a table.
    pub fn zeros(table: &TableConfig) -> RowValues {
        match table.kind {
            RowKind::Dense => RowValues::Dense(vec![0.0; table.row_len as usize]),
            RowKind::Sparse => RowValues::Sparse(BTreeMap::new()),
        }
    }

    /// Adds `delta` to column `col`.
    ///
    /// # Errors
    /// [`SspError::Column`] when `col >= row_len`.
    pub fn add_at(&mut self, table: &TableConfig, col: u32, delta: f32) -> Result<(), SspError> {
        if col >= table.row_len {
            return Err(SspError::Column {
                table: table.id,
                col,
                row_len: table.row_len,
            });
        }
        match self {
            RowValues::Dense(v) => match v.get_mut(col as usize) {
                Some(x) => *x += delta,
                None => {
                    return Err(SspError::Column {
                        table: table.id,
                        col,
                        row_len: v.len() as u32,
                    })
                }
            },
            RowValues::Sparse(m) => *m.entry(col).or_insert(0.0) += delta,
        }
        Ok(())
    }

    /// Adds every column of `delta` (dense or sparse) to this row.
    ///
    /// # Errors
    /// [`SspError::Column`] when `delta` has a column `>= row_len`.
    pub fn add(&mut self, table: &TableConfig, delta: &RowValues) -> Result<(), SspError> {
        match delta {
            RowValues::Dense(d) => {
                if d.len() > table.row_len as usize {
                    return Err(SspError::Column {
                        table: table.id,
                        col: d.len() as u32 - 1,
                        row_len: table.row_len,
                    });
                }
                if let RowValues::Dense(v) = self {
                    if v.len() == d.len() {
                        v.iter_mut().zip(d).for_each(|(x, y)| *x += y);
                        return Ok(());
                    }
                }
                for (c, &x) in d.iter().enumerate() {
                    self.add_at(table, c as u32, x)?;
                }
            }
            RowValues::Sparse(d) => {
                for (&c, &x) in d {
                    self.add_at(table, c, x)?;
                }
            }
        }
        Ok(())
    }

    /// The value of column `col` (0 for an absent sparse column or one past
    /// the end).
    pub fn get(&self, col: u32) -> f32 {
        match self {
            RowValues::Dense(v) => v.get(col as usize).copied().unwrap_or(0.0),
            RowValues::Sparse(m) => m.get(&col).copied().unwrap_or(0.0),
        }
    }

    /// The row as `len` dense values.
    pub fn to_dense(&self, len: usize) -> Vec<f32> {
        match self {
            RowValues::Dense(v) => {
                let mut out = v.clone();
                out.resize(len, 0.0);
                out
            }
            RowValues::Sparse(m) => {
                let mut out = vec![0.0; len];
                for (&c, &x) in m {
                    if let Some(o) = out.get_mut(c as usize) {
                        *o = x;
                    }
                }
                out
            }
        }
    }

    /// Non-zero-able entries `(column, value)` in column order.
    pub fn entries(&self) -> Vec<(u32, f32)> {
        match self {
            RowValues::Dense(v) => v.iter().enumerate().map(|(c, &x)| (c as u32, x)).collect(),
            RowValues::Sparse(m) => m.iter().map(|(&c, &x)| (c, x)).collect(),
        }
    }

    /// Bytes this payload takes on the wire (4 per dense value, 8 per
    /// sparse entry); the unit managed communication budgets.
    pub fn wire_bytes(&self) -> u64 {
        match self {
            RowValues::Dense(v) => 4 * v.len() as u64,
            RowValues::Sparse(m) => 8 * m.len() as u64,
        }
    }
}
