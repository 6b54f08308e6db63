//! The loop declaration (thesis §5.2.2–5.2.4, Orion §3): which DistArray
//! elements a loop body touches, as one subscript per array position, plus
//! accumulators, buffers and the `ordered` flag.
//!
//! Takes the iteration space's rank and the arrays' shapes; gives a checked
//! [`LoopSpec`] that the dependence analysis and the schedules read. Keeps
//! true: every subscript names an existing loop dimension and every access an
//! existing array of matching rank.

use crate::error::LoopError;

/// One position of an array subscript (Orion §3.2, thesis §5.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    /// `i_dim + offset`: one loop index plus a constant.
    Index {
        /// The loop dimension.
        dim: usize,
        /// The constant added.
        offset: i64,
    },
    /// A constant index.
    Const(usize),
    /// Any index (a slice `:` or a data-dependent index); analysed
    /// conservatively.
    Any,
}

impl Sub {
    /// `i_dim` (offset 0).
    pub fn idx(dim: usize) -> Sub {
        Sub::Index { dim, offset: 0 }
    }
}

/// Whether an access reads, writes or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Only reads.
    Read,
    /// Only writes.
    Write,
    /// Reads and writes (two references for the analysis).
    ReadWrite,
}

impl Mode {
    /// True for `Read` and `ReadWrite`.
    pub fn reads(self) -> bool {
        matches!(self, Mode::Read | Mode::ReadWrite)
    }
    /// True for `Write` and `ReadWrite`.
    pub fn writes(self) -> bool {
        matches!(self, Mode::Write | Mode::ReadWrite)
    }
}

/// Handle of a declared access (order of declaration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessId(pub usize);
/// Handle of a declared buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferId(pub usize);
/// Handle of a declared accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccumId(pub usize);

/// One declared array access of the loop body.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    /// Index of the array in the slice given to `run`.
    pub array: usize,
    /// One subscript per array position.
    pub subs: Vec<Sub>,
    /// Read, write or both.
    pub mode: Mode,
}

/// A DistArray buffer (thesis §5.2.4): writes are collected per worker,
/// exempt from the dependence analysis, and applied to `array` by `apply`
/// (`new = apply(old, buffered)`, once per buffered write, in worker order)
/// when the pass ends — the bound on their delay is one pass.
#[derive(Debug, Clone)]
pub struct Buffer {
    /// The array the writes go to.
    pub array: usize,
    /// One subscript per array position (checked like an access).
    pub subs: Vec<Sub>,
    /// The user's apply function.
    pub apply: fn(f32, f32) -> f32,
}

/// An accumulator (thesis §5.2.3): per-worker values combined with a
/// commutative, associative `op` when the pass ends.
#[derive(Debug, Clone)]
pub struct Accum {
    /// Identity of `op`, each worker's start value.
    pub init: f64,
    /// The combining operator (on `f64`, so long sums keep their digits).
    pub op: fn(f64, f64) -> f64,
}

/// A checked loop declaration.
#[derive(Debug, Clone)]
pub struct LoopSpec {
    /// Rank of the iteration space.
    pub ndim: usize,
    /// Shapes of the arrays the accesses name (index = array id).
    pub shapes: Vec<Vec<usize>>,
    /// Declared accesses.
    pub accesses: Vec<Access>,
    /// Declared buffers.
    pub buffers: Vec<Buffer>,
    /// Declared accumulators.
    pub accums: Vec<Accum>,
    /// True: the result must equal the serial, lexicographic loop
    /// (Orion `ordered=true`); false: any serializable order.
    pub ordered: bool,
}

/// Builds a [`LoopSpec`]; `build` checks it.
#[derive(Debug, Clone)]
pub struct LoopBuilder {
    spec: LoopSpec,
}

impl LoopBuilder {
    /// A loop over an iteration space of rank `ndim`, touching arrays of
    /// the given shapes (array id = position in `shapes`). Unordered.
    pub fn new(ndim: usize, shapes: Vec<Vec<usize>>) -> Self {
        LoopBuilder {
            spec: LoopSpec {
                ndim,
                shapes,
                accesses: vec![],
                buffers: vec![],
                accums: vec![],
                ordered: false,
            },
        }
    }

    /// Declare an access of `array` with one subscript per position.
    pub fn access(&mut self, array: usize, subs: Vec<Sub>, mode: Mode) -> AccessId {
        self.spec.accesses.push(Access { array, subs, mode });
        AccessId(self.spec.accesses.len() - 1)
    }

    /// Declare a buffer writing to `array`.
    pub fn buffer(&mut self, array: usize, subs: Vec<Sub>, apply: fn(f32, f32) -> f32) -> BufferId {
        self.spec.buffers.push(Buffer { array, subs, apply });
        BufferId(self.spec.buffers.len() - 1)
    }

    /// Declare an accumulator with identity `init` and operator `op`.
    pub fn accumulator(&mut self, init: f64, op: fn(f64, f64) -> f64) -> AccumId {
        self.spec.accums.push(Accum { init, op });
        AccumId(self.spec.accums.len() - 1)
    }

    /// Set the `ordered` flag.
    pub fn ordered(&mut self, ordered: bool) -> &mut Self {
        self.spec.ordered = ordered;
        self
    }

    /// Check and return the declaration. Errors name the access and the
    /// subscript that does not fit.
    pub fn build(self) -> Result<LoopSpec, LoopError> {
        let s = &self.spec;
        if s.ndim == 0 {
            return Err(LoopError::Declaration(
                "the iteration space needs rank ≥ 1".into(),
            ));
        }
        let subs = s
            .accesses
            .iter()
            .map(|a| (a.array, &a.subs, "access"))
            .chain(s.buffers.iter().map(|b| (b.array, &b.subs, "buffer")));
        for (n, (array, subs, what)) in subs.enumerate() {
            let shape = s.shapes.get(array).ok_or_else(|| {
                LoopError::Declaration(format!(
                    "{what} #{n} names array {array}, which was not given"
                ))
            })?;
            if shape.len() != subs.len() {
                return Err(LoopError::Declaration(format!(
                    "{what} #{n} has {} subscripts for array {array} of rank {}",
                    subs.len(),
                    shape.len()
                )));
            }
            for (k, sub) in subs.iter().enumerate() {
                match *sub {
                    Sub::Index { dim, .. } if dim >= s.ndim => {
                        return Err(LoopError::Declaration(format!(
                            "{what} #{n} position {k} uses loop dimension {dim}; the space has rank {}",
                            s.ndim
                        )))
                    }
                    Sub::Const(c) if c >= shape[k] => {
                        return Err(LoopError::Declaration(format!(
                            "{what} #{n} position {k} is the constant {c}, outside extent {}",
                            shape[k]
                        )))
                    }
                    _ => {}
                }
            }
        }
        Ok(self.spec)
    }
}
