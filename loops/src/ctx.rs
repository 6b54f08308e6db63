//! The loop body's view of the DistArrays (thesis §5.2.2): a [`Ctx`] per
//! task that checks every access against its declared subscripts.
//!
//! Takes the declaration, the current iteration and the array pieces this
//! worker holds (blocks, private copies, shared read-only copies); gives
//! element and row reads/writes, buffered writes and accumulation. Keeps
//! true: a body can only touch what it declared — anything else is recorded
//! as the task's [`LoopError::UndeclaredAccess`] (the read yields 0, the write
//! is dropped) instead of a panic or a silent race.

use std::sync::Arc;

use crate::array::flat_index;
use crate::error::LoopError;
use crate::spec::{AccessId, AccumId, BufferId, LoopSpec, Sub};

/// One array piece held by a worker during a task.
#[derive(Debug)]
pub(crate) enum View {
    /// Not held.
    Unused,
    /// Range `lo..hi` of position `pos`, row-major over the block's shape.
    Block {
        data: Vec<f32>,
        pos: usize,
        lo: usize,
        hi: usize,
    },
    /// The whole array (a served copy, or the serial run's own storage);
    /// written offsets are recorded when `track`.
    Full {
        data: Vec<f32>,
        dirty: Vec<usize>,
        track: bool,
    },
    /// A shared read-only copy.
    Shared(Arc<Vec<f32>>),
}

/// Largest array rank a row access supports (its index lives on the stack).
pub const MAX_ARRAY_RANK: usize = 8;

/// An element touched, for instrumented runs: (array, flat index, write).
pub type Touch = (usize, usize, bool);

/// What a body sees: the current iteration and the declared accesses.
pub struct Ctx<'a> {
    pub(crate) spec: &'a LoopSpec,
    pub(crate) views: Vec<View>,
    pub(crate) point: Vec<usize>,
    pub(crate) value: f32,
    pub(crate) accums: Vec<f64>,
    pub(crate) buffers: Vec<(usize, usize, f32)>,
    pub(crate) error: Option<LoopError>,
    pub(crate) log: Option<Vec<Touch>>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(spec: &'a LoopSpec, views: Vec<View>, log: bool) -> Self {
        Ctx {
            spec,
            views,
            point: vec![0; spec.ndim],
            value: 0.0,
            accums: spec.accums.iter().map(|a| a.init).collect(),
            buffers: vec![],
            error: None,
            log: log.then(Vec::new),
        }
    }

    /// The current iteration's index vector.
    pub fn point(&self) -> &[usize] {
        &self.point
    }

    /// The current iteration's value (the iteration-space element).
    pub fn value(&self) -> f32 {
        self.value
    }

    /// Read element `idx` through access `a`. Yields 0 and records an error
    /// when the access does not allow it.
    pub fn get(&mut self, a: AccessId, idx: &[usize]) -> f32 {
        match self.locate(a, idx, false, 1) {
            Some((arr, off)) => self.slice(arr)[off],
            None => 0.0,
        }
    }

    /// Write element `idx` through access `a` (dropped, with an error
    /// recorded, when not allowed).
    pub fn set(&mut self, a: AccessId, idx: &[usize], v: f32) {
        if let Some((arr, off)) = self.locate(a, idx, true, 1) {
            self.slice_mut(arr, off, 1)[0] = v;
        }
    }

    /// Read the row `prefix, 0..len` (the last position must be declared
    /// `Any`) into `out` (`out.len()` = the last extent).
    pub fn read_row(&mut self, a: AccessId, prefix: &[usize], out: &mut [f32]) {
        if let Some((arr, off)) = self.locate_row(a, prefix, false, out.len()) {
            out.copy_from_slice(&self.slice(arr)[off..off + out.len()]);
        }
    }

    /// Write the row `prefix, 0..len` from `row`.
    pub fn write_row(&mut self, a: AccessId, prefix: &[usize], row: &[f32]) {
        if let Some((arr, off)) = self.locate_row(a, prefix, true, row.len()) {
            self.slice_mut(arr, off, row.len()).copy_from_slice(row);
        }
    }

    /// Buffer a write of `v` to element `idx` (applied when the pass ends).
    pub fn buffer(&mut self, b: BufferId, idx: &[usize], v: f32) {
        let Some(buf) = self.spec.buffers.get(b.0) else {
            return self.fail(b.0, idx, "no such buffer");
        };
        let shape = &self.spec.shapes[buf.array];
        if let Err(why) = check_subs(&buf.subs, idx, &self.point) {
            return self.fail(b.0, idx, &why);
        }
        match flat_index(shape, idx) {
            Some(f) => self.buffers.push((b.0, f, v)),
            None => self.fail(b.0, idx, "outside the array"),
        }
    }

    /// Fold `v` into accumulator `c`.
    pub fn accumulate(&mut self, c: AccumId, v: f64) {
        if let Some(acc) = self.spec.accums.get(c.0) {
            self.accums[c.0] = (acc.op)(self.accums[c.0], v);
        }
    }

    fn fail(&mut self, access: usize, idx: &[usize], why: &str) {
        if self.error.is_none() {
            self.error = Some(LoopError::UndeclaredAccess {
                access,
                index: idx.to_vec(),
                point: self.point.clone(),
                why: why.to_string(),
            });
        }
    }

    fn locate_row(
        &mut self,
        a: AccessId,
        prefix: &[usize],
        write: bool,
        len: usize,
    ) -> Option<(usize, usize)> {
        let Some(acc) = self.spec.accesses.get(a.0) else {
            self.fail(a.0, prefix, "no such access");
            return None;
        };
        let shape = &self.spec.shapes[acc.array];
        if acc.subs.last() != Some(&Sub::Any)
            || prefix.len() + 1 != shape.len()
            || shape.len() > MAX_ARRAY_RANK
            || shape[shape.len() - 1] != len
        {
            self.fail(
                a.0,
                prefix,
                "a row access needs `Any` last, rank ≤ 8 and a buffer of the last extent",
            );
            return None;
        }
        let mut idx = [0usize; MAX_ARRAY_RANK];
        idx[..prefix.len()].copy_from_slice(prefix);
        self.locate(a, &idx[..=prefix.len()], write, len)
    }

    /// Check access `a` at `idx` and find (array, offset in its view).
    fn locate(
        &mut self,
        a: AccessId,
        idx: &[usize],
        write: bool,
        len: usize,
    ) -> Option<(usize, usize)> {
        let Some(acc) = self.spec.accesses.get(a.0) else {
            self.fail(a.0, idx, "no such access");
            return None;
        };
        if (write && !acc.mode.writes()) || (!write && !acc.mode.reads()) {
            self.fail(
                a.0,
                idx,
                if write {
                    "declared read-only"
                } else {
                    "declared write-only"
                },
            );
            return None;
        }
        let arr = acc.array;
        let shape = &self.spec.shapes[arr];
        if let Err(why) = check_subs(&acc.subs, idx, &self.point) {
            self.fail(a.0, idx, &why);
            return None;
        }
        let Some(full) = flat_index(shape, idx) else {
            self.fail(a.0, idx, "outside the array");
            return None;
        };
        if let Some(log) = &mut self.log {
            log.extend((full..full + len).map(|f| (arr, f, write)));
        }
        let off = match &self.views[arr] {
            View::Block { pos, lo, hi, .. } => {
                if idx[*pos] < *lo || idx[*pos] >= *hi {
                    self.fail(a.0, idx, "outside the block this worker holds");
                    return None;
                }
                let mut f = 0usize;
                for (k, (&i, &n)) in idx.iter().zip(shape).enumerate() {
                    f = if k == *pos {
                        f * (hi - lo) + (i - lo)
                    } else {
                        f * n + i
                    };
                }
                f
            }
            View::Full { .. } => full,
            View::Shared(_) if write => {
                self.fail(a.0, idx, "array is held read-only");
                return None;
            }
            View::Shared(_) => full,
            View::Unused => {
                self.fail(a.0, idx, "array not held");
                return None;
            }
        };
        Some((arr, off))
    }

    fn slice(&self, arr: usize) -> &[f32] {
        match &self.views[arr] {
            View::Block { data, .. } | View::Full { data, .. } => data,
            View::Shared(d) => d,
            View::Unused => &[],
        }
    }

    fn slice_mut(&mut self, arr: usize, off: usize, len: usize) -> &mut [f32] {
        match &mut self.views[arr] {
            View::Block { data, .. } => &mut data[off..off + len],
            View::Full { data, dirty, track } => {
                if *track {
                    dirty.extend(off..off + len);
                }
                &mut data[off..off + len]
            }
            View::Shared(_) | View::Unused => {
                unreachable!("locate refuses writes to shared or absent arrays")
            }
        }
    }
}

/// Check `idx` against declared subscripts at iteration `point`.
fn check_subs(subs: &[Sub], idx: &[usize], point: &[usize]) -> Result<(), String> {
    if subs.len() != idx.len() {
        return Err(format!(
            "{} indices for {} subscripts",
            idx.len(),
            subs.len()
        ));
    }
    for (k, (s, &i)) in subs.iter().zip(idx).enumerate() {
        match *s {
            Sub::Index { dim, offset } if point[dim] as i64 + offset != i as i64 => {
                return Err(format!("position {k} must be i{dim}{offset:+}"));
            }
            Sub::Const(c) if c != i => return Err(format!("position {k} must be {c}")),
            _ => {}
        }
    }
    Ok(())
}
