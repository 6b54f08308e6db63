//! The per-worker program: plain serde data (format `tofu-program`, version 5).
//!
//! A [`Program`] lists the buffers one rank holds during one training step
//! (each a region of one tensor in global coordinates, f32 elements) and the
//! [`Instr`]uctions it executes in order. It is self-contained: it carries
//! the tensors it names ([`Program::tensors`]: name and global shape), the
//! operator specs its computations run ([`Program::specs`], referenced by
//! [`Instr::Compute`] with the op's attributes and input shapes), and the
//! synthetic fill of every leaf tile it allocates ([`Init::Fill`]), so a
//! runner executes it with no graph and no operator library. Buffers come to life at their
//! [`Instr::Alloc`] and die at their [`Instr::Free`]; buffers named in
//! [`Program::keep`] outlive the step (the loss, updated weights and
//! optimizer state, which [`Program::carries`] feeds to the next step).
//!
//! Communication is grouped send/recv ([`Instr::Exchange`]) or, where the
//! pattern is one, a collective over every rank ([`Instr::AllReduce`],
//! [`Instr::ReduceScatter`], [`Instr::AllGather`], [`Instr::AllToAll`],
//! [`Instr::Broadcast`]; see `crate::collectives`). Version 2 added the
//! first three collectives; version 3 made programs self-contained; version
//! 4 added all-to-all and broadcast (a version 3 reader would fail on them
//! with an unknown-variant error, so the version says it first). Files of
//! versions 1 and 2 named the graph's operators and tensors without their
//! specs, shapes or fills: [`Program::from_json`] rejects them with the
//! command that writes a current file; version 3 files are read as they are
//! (every version 3 program is a version 4 program). Version 5 gave each
//! tensor its element type and a constant leaf its values
//! ([`TensorInfo::dtype`], [`TensorInfo::value`]); older files read as f32
//! tensors with synthetic fills.

pub use crate::phase::Phase;
pub use graph::{DType, OpId, Region, TensorId};
use serde::{Deserialize, Serialize};
pub use tdl::Fill;
use tdl::{OpSpec, Reducer};

use crate::error::ProgramError;
pub use crate::instr::{Instr, KernelMode, Msg};

/// Index into [`Program::buffers`].
pub type BufId = u32;

/// The program file format name.
pub const FORMAT: &str = "tofu-program";
/// The program file format version.
pub const VERSION: u32 = 5;

/// The oldest version [`Program::from_json`] reads (version 3 files use a
/// subset of version 4's instructions).
pub const OLDEST_READ: u32 = 3;

/// The command that writes program files of the current version.
pub const REGENERATE: &str = "tofu run PLAN.json --save-programs DIR";

/// One buffer: a region of a tensor in global coordinates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buffer {
    /// The tensor.
    pub tensor: TensorId,
    /// The region it holds (`[lo, hi)` per dim, global coordinates).
    pub region: Region,
    /// Elements (= `region.volume()`); the runner computes on one f32 per
    /// element, whatever the tensor's element type ([`crate::wire`]).
    pub elems: u64,
    /// Whether it is the tensor's tile on this worker (else a work buffer:
    /// an assembled input, a computed share, or a staging copy).
    pub tile: bool,
}

/// A tensor a program names: what the runner needs to fill, slice and
/// assemble it without the graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorInfo {
    /// The tensor.
    pub id: TensorId,
    /// Its name in the graph (error messages, given values).
    pub name: String,
    /// Its global shape (elements per dim).
    pub shape: Vec<usize>,
    /// Its element type (values it holds and its size on the wire, see
    /// [`crate::wire`]); f32 in files before version 5.
    #[serde(default = "f32_dtype")]
    pub dtype: DType,
    /// A constant leaf's known values (the graph's
    /// [`planner::graph::Tensor::value`], whole tensor, row-major), used
    /// instead of its synthetic fill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Vec<f64>>,
}

fn f32_dtype() -> DType {
    DType::F32
}

/// A leaf tile's synthetic values: the tensor's [`Fill`] and where the
/// tensor starts in the seed's random stream (`planner::graph::execute::fill_offsets`),
/// so a rank generates its tile alone, bit for bit what the unpartitioned
/// run generates ([`tdl::fill::fill_region`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Synthetic {
    /// How the tensor is filled.
    pub fill: Fill,
    /// Draws of the stream before the tensor's first element.
    pub offset: u64,
}

/// How a buffer's elements start out.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Init {
    /// Zeros (every element is overwritten before it is read).
    Zero,
    /// The identity of a reducer (the tile partial results reduce into).
    Identity(Reducer),
    /// The tensor's synthetic values on its region (or values set by the
    /// caller, or, after the first step, the carried value, see
    /// [`Program::carries`]).
    Fill(Synthetic),
}

/// A value that crosses from one step to the next: the kept buffer of an
/// updated tensor (`from`, e.g. `w'`) becomes the tile of the tensor it
/// replaces (`to`, e.g. `w`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carry {
    /// The updated tensor.
    pub from: TensorId,
    /// Its kept buffer on this rank (`None` if this rank holds none).
    pub from_buf: Option<BufId>,
    /// The tensor it replaces.
    pub to: TensorId,
    /// The buffer of `to` this rank allocates with [`Init::Fill`] (`None` if none).
    pub to_buf: Option<BufId>,
}

/// One rank's program for one training step (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub world: usize,
    /// Every tensor a buffer or a carry names, sorted by id.
    pub tensors: Vec<TensorInfo>,
    /// The operator specs [`Instr::Compute`] runs (as in the library, without
    /// their gradient declarations).
    pub specs: Vec<OpSpec>,
    /// Every buffer (index = [`BufId`]).
    pub buffers: Vec<Buffer>,
    /// The instructions, in order.
    pub instrs: Vec<Instr>,
    /// Buffers alive after the step: tiles of tensors nothing consumes
    /// (the loss, updated weights and state).
    pub keep: Vec<BufId>,
    /// Values carried to the next step.
    pub carries: Vec<Carry>,
}

impl Program {
    /// Bytes this program sends per step (each element at its type's size,
    /// messages in whole 4-byte words), counted as the communicator counts
    /// them ([`Instr::bytes_sent`]).
    pub fn bytes_sent(&self) -> u64 {
        self.instrs
            .iter()
            .map(|i| i.bytes_sent(self.rank, self.world, |b| self.buffer_dtype(b)))
            .sum()
    }

    /// Bytes this program sends per step through collectives.
    pub fn collective_bytes_sent(&self) -> u64 {
        self.instrs
            .iter()
            .filter(|i| i.is_collective())
            .map(|i| i.bytes_sent(self.rank, self.world, |b| self.buffer_dtype(b)))
            .sum()
    }

    /// The element type of buffer `b` (its tensor's; f32 for a buffer or
    /// tensor the program does not name, which validation rejects).
    pub fn buffer_dtype(&self, b: BufId) -> DType {
        self.buffers
            .get(b as usize)
            .and_then(|d| self.tensor(d.tensor))
            .map_or(DType::F32, |t| t.dtype)
    }

    /// The tensor `id`, if the program names it.
    pub fn tensor(&self, id: TensorId) -> Option<&TensorInfo> {
        self.tensors
            .binary_search_by_key(&id, |t| t.id)
            .ok()
            .map(|i| &self.tensors[i])
    }

    /// The box covering this rank's tiles of `tensor` (global coordinates),
    /// `None` if it holds none: the region a caller sets a leaf's values on
    /// ([`Program::buffers`] with `tile`).
    pub fn tile_region(&self, tensor: TensorId) -> Option<Region> {
        let mut tiles = self
            .buffers
            .iter()
            .filter(|b| b.tile && b.tensor == tensor)
            .map(|b| &b.region);
        let first = tiles.next()?.clone();
        Some(tiles.fold(first, |acc, r| {
            Region(
                acc.0
                    .iter()
                    .zip(&r.0)
                    .map(|(&(a, b), &(c, d))| (a.min(c), b.max(d)))
                    .collect(),
            )
        }))
    }

    /// Keep this rank's tiles of `tensors` after the step (readable by the
    /// runner's `RankRunner::get`, returned in a run's outputs) instead of
    /// freeing them after their last use: a gradient for a parameter
    /// server, the logits of an evaluation.
    pub fn keep_tiles(&mut self, tensors: &[TensorId]) {
        let bufs: Vec<BufId> = (0..self.buffers.len() as BufId)
            .filter(|&b| {
                let buf = &self.buffers[b as usize];
                buf.tile && tensors.contains(&buf.tensor)
            })
            .collect();
        self.instrs
            .retain(|i| !matches!(i, Instr::Free { buf } if bufs.contains(buf)));
        for b in bufs {
            if !self.keep.contains(&b) {
                self.keep.push(b);
            }
        }
    }

    /// JSON text of the program.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("programs serialize")
    }

    /// A program from the JSON text of `file` (a name for messages).
    ///
    /// Errors: [`ProgramError::ProgramFile`] for text that is not a program
    /// of this format (naming the file and serde's line and column);
    /// [`ProgramError::ProgramVersion`] for a version outside
    /// [`OLDEST_READ`]..=[`VERSION`] (versions 1 and 2 carried no specs,
    /// shapes or fills), naming the command that writes the current one.
    pub fn from_json(text: &str, file: &str) -> Result<Program, ProgramError> {
        #[derive(Deserialize)]
        struct Header {
            format: String,
            version: u32,
        }
        let bad = |e: serde_json::Error| ProgramError::ProgramFile {
            file: file.to_string(),
            message: e.to_string(),
        };
        let h: Header = serde_json::from_str(text).map_err(bad)?;
        if h.format != FORMAT {
            return Err(ProgramError::ProgramFile {
                file: file.to_string(),
                message: format!("format `{}`, expected `{FORMAT}`", h.format),
            });
        }
        if !(OLDEST_READ..=VERSION).contains(&h.version) {
            return Err(ProgramError::ProgramVersion {
                file: file.to_string(),
                version: h.version,
            });
        }
        serde_json::from_str(text).map_err(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdl::{AttrValue, Attrs};

    fn empty(version: u32) -> String {
        Program {
            format: FORMAT.into(),
            version,
            rank: 0,
            world: 1,
            tensors: Vec::new(),
            specs: Vec::new(),
            buffers: Vec::new(),
            instrs: Vec::new(),
            keep: Vec::new(),
            carries: Vec::new(),
        }
        .to_json()
    }

    /// A `Compute`'s attributes keep ±inf (a one-sided clamp's bound), which
    /// JSON has no number for: written as strings, read back exactly;
    /// finite values stay numbers, as in existing program files.
    #[test]
    fn infinite_attributes_round_trip() {
        let attrs: Attrs = [
            ("max", AttrValue::Float(f64::INFINITY)),
            ("min", AttrValue::Float(f64::NEG_INFINITY)),
            ("alpha", AttrValue::Float(0.5)),
            ("axis", AttrValue::Int(2)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let text = serde_json::to_string(&attrs).unwrap();
        assert!(text.contains(r#""max":{"Float":"inf"}"#), "{text}");
        assert!(text.contains(r#""min":{"Float":"-inf"}"#), "{text}");
        assert!(text.contains(r#""alpha":{"Float":0.5}"#), "{text}");
        assert_eq!(serde_json::from_str::<Attrs>(&text).unwrap(), attrs);
    }

    #[test]
    fn versions_3_to_5_are_read_others_rejected_with_the_command() {
        for v in [3, 4, 5] {
            assert_eq!(Program::from_json(&empty(v), "p.json").unwrap().version, v);
        }
        for v in [2, 6] {
            let e = Program::from_json(&empty(v), "p.json")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("p.json") && e.contains(&format!("version {v}")),
                "{e}"
            );
            assert!(e.contains(REGENERATE), "{e}");
        }
    }

    /// A tensor of a version 3 or 4 file (no element type, no value) reads
    /// as f32 with its synthetic fill; version 5 writes the type by name.
    #[test]
    fn tensors_before_version_5_are_f32() {
        let old: TensorInfo = serde_json::from_str(r#"{"id":3,"name":"x","shape":[2,4]}"#).unwrap();
        assert_eq!((old.dtype, old.value.as_ref()), (DType::F32, None));
        let ids = TensorInfo {
            id: TensorId(1),
            name: "ids".into(),
            shape: vec![3],
            dtype: DType::I64,
            value: Some(vec![0.0, 1.0, 2.0]),
        };
        let text = serde_json::to_string(&ids).unwrap();
        assert!(text.contains(r#""dtype":"i64""#), "{text}");
        assert_eq!(serde_json::from_str::<TensorInfo>(&text).unwrap(), ids);
    }
}
