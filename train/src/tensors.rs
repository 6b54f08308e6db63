//! A data set from safetensors files: the user's own data, named by graph
//! input.
//!
//! Takes a `.safetensors` file, or a directory of them (read in name
//! order, concatenated along the first dim), and a mapping from graph input
//! names to tensor names (`--input NAME=TENSOR`; unmapped inputs are looked
//! up by their own name); gives a [`TensorSet`]: every tensor
//! `[samples, …]`, sample `i` its row `i`. Element types F32, F64, F16,
//! BF16, I64, I32 and U8 are read as f32. The labels are the tensor that
//! feeds one of [`LABEL_INPUTS`] (the zoo's `labels`, an imported ONNX
//! model's `loss.labels`); given as integer class ids (`[samples]` or
//! `[samples, positions]`) they are one-hot encoded over `max id + 1`
//! classes; float labels are used as they are (probabilities). The held-out
//! evaluation scores the logits against them. Held-out samples: a seeded
//! split, as for digits.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use safetensors::{Dtype, SafeTensors};

use crate::samples::{cross_entropy, Samples};
use crate::TrainError;

/// The graph inputs that take a loss's target: the zoo models' `labels` and
/// the loss the ONNX importer adds, `loss.labels` (`onnx/src/loss.rs`).
pub const LABEL_INPUTS: [&str; 2] = ["labels", "loss.labels"];

/// One fed input's values.
#[derive(Clone, Debug, PartialEq)]
struct Column {
    /// The graph input it feeds.
    input: String,
    /// Values per sample in the file (before one-hot encoding).
    per: usize,
    /// Row-major values, `samples × per`.
    values: Vec<f32>,
    /// Class ids to one-hot encode over this many classes.
    one_hot: Option<usize>,
}

/// Samples read from safetensors (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSet {
    columns: Vec<Column>,
    samples: usize,
    /// Index of the `labels` column, if any.
    labels: Option<usize>,
}

/// The files of `path`: itself, or a directory's `*.safetensors` in name order.
fn files(path: &Path) -> Result<Vec<PathBuf>, TrainError> {
    let io = |e: std::io::Error| TrainError::Data(format!("{}: {e}", path.display()));
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    v.sort();
    if v.is_empty() {
        return Err(TrainError::Data(format!(
            "{}: no .safetensors files in the directory",
            path.display()
        )));
    }
    Ok(v)
}

impl TensorSet {
    /// Read `path` (see the module doc) for the graph inputs `inputs`, each
    /// taken from the tensor `map` names for it, else from the tensor of
    /// its own name.
    ///
    /// Errors: [`TrainError::Data`] naming the file and tensor: not
    /// safetensors, a tensor missing (listing the file's names), an element
    /// type not read, tensors with different sample counts, files whose
    /// sample shapes differ.
    pub fn load(
        path: &Path,
        inputs: &[&str],
        map: &BTreeMap<String, String>,
    ) -> Result<TensorSet, TrainError> {
        let mut columns: Vec<Column> = Vec::new();
        let mut samples = 0;
        let mut int_labels = false;
        for file in files(path)? {
            let bad = |why: String| TrainError::Data(format!("{}: {why}", file.display()));
            let bytes = std::fs::read(&file).map_err(|e| bad(e.to_string()))?;
            let st = SafeTensors::deserialize(&bytes).map_err(|e| bad(e.to_string()))?;
            let mut rows = None;
            for (k, &input) in inputs.iter().enumerate() {
                let name = map.get(input).map_or(input, String::as_str);
                let view = st.tensor(name).map_err(|_| {
                    let mut names = st.names();
                    names.sort();
                    bad(format!(
                        "no tensor `{name}` for graph input `{input}` (the file has {names:?}; map one with --input {input}=NAME)"
                    ))
                })?;
                let shape = view.shape();
                let n = *shape
                    .first()
                    .ok_or_else(|| bad(format!("`{name}` is a scalar, not [samples, …]")))?;
                let per: usize = shape[1..].iter().product();
                if *rows.get_or_insert(n) != n {
                    return Err(bad(format!(
                        "`{name}` has {n} samples, another input {}",
                        rows.unwrap_or(0)
                    )));
                }
                let values =
                    codegen::given::to_f32(view.dtype(), view.data()).ok_or_else(|| {
                        bad(format!(
                            "`{name}`: element type {:?} is not read",
                            view.dtype()
                        ))
                    })?;
                if LABEL_INPUTS.contains(&input) {
                    int_labels = matches!(view.dtype(), Dtype::I64 | Dtype::I32 | Dtype::U8);
                }
                match columns.get_mut(k) {
                    Some(c) if c.per == per => c.values.extend(values),
                    Some(c) => {
                        return Err(bad(format!(
                            "`{name}` has {per} values per sample, an earlier file {}",
                            c.per
                        )))
                    }
                    None => columns.push(Column {
                        input: input.to_string(),
                        per,
                        values,
                        one_hot: None,
                    }),
                }
            }
            samples += rows.unwrap_or(0);
        }
        let labels = inputs.iter().position(|i| LABEL_INPUTS.contains(i));
        if let (Some(l), true) = (labels, int_labels) {
            let c = &mut columns[l];
            let max = c.values.iter().copied().fold(0.0f32, f32::max);
            if c.values.iter().any(|&v| v < 0.0 || v.fract() != 0.0) {
                return Err(TrainError::Data(format!(
                    "{}: labels are integer ids but some are negative",
                    path.display()
                )));
            }
            c.one_hot = Some(max as usize + 1);
        }
        Ok(TensorSet {
            columns,
            samples,
            labels,
        })
    }

    /// Number of classes of the labels (one-hot width), if there are labels.
    pub fn classes(&self) -> Option<usize> {
        let c = &self.columns[self.labels?];
        Some(c.one_hot.unwrap_or(c.per))
    }

    /// The samples `idx` in that order.
    pub fn subset(&self, idx: &[usize]) -> TensorSet {
        let columns = self
            .columns
            .iter()
            .map(|c| Column {
                values: idx
                    .iter()
                    .flat_map(|&i| &c.values[i * c.per..(i + 1) * c.per])
                    .copied()
                    .collect(),
                ..c.clone()
            })
            .collect();
        TensorSet {
            columns,
            samples: idx.len(),
            labels: self.labels,
        }
    }

    /// A training and a held-out part by a permutation seeded by `seed`
    /// (the first `⌊len · held_out⌋` held out).
    pub fn split(&self, held_out: f64, seed: u64) -> (TensorSet, TensorSet) {
        let mut order: Vec<usize> = (0..self.samples).collect();
        order.shuffle(&mut StdRng::seed_from_u64(seed));
        let n = ((self.samples as f64) * held_out.clamp(0.0, 1.0)) as usize;
        (self.subset(&order[n..]), self.subset(&order[..n]))
    }
}

impl Samples for TensorSet {
    fn len(&self) -> usize {
        self.samples
    }

    fn inputs(&self) -> Vec<(&str, usize)> {
        self.columns
            .iter()
            .map(|c| (c.input.as_str(), c.per * c.one_hot.unwrap_or(1)))
            .collect()
    }

    fn sample(&self, i: usize, k: usize) -> Cow<'_, [f32]> {
        let c = &self.columns[k];
        let row = &c.values[i * c.per..(i + 1) * c.per];
        match c.one_hot {
            None => row.into(),
            Some(classes) => {
                let mut v = vec![0.0; c.per * classes];
                for (p, &id) in row.iter().enumerate() {
                    v[p * classes + id as usize] = 1.0;
                }
                v.into()
            }
        }
    }

    /// Per row of the labels: cross-entropy against the labels' row taken
    /// as probabilities, and whether the largest logit is the largest label.
    fn score(&self, i: usize, logits: &[f32]) -> (f64, usize, usize) {
        let Some(l) = self.labels else {
            return (0.0, 0, 0);
        };
        let labels = self.sample(i, l);
        let classes = self.classes().unwrap_or(1).max(1);
        let (mut loss, mut right, mut rows) = (0.0, 0, 0);
        for (z, p) in logits
            .chunks_exact(classes)
            .zip(labels.chunks_exact(classes))
        {
            let best = (0..classes)
                .max_by(|&a, &b| p[a].total_cmp(&p[b]))
                .unwrap_or(0);
            let (_, ok) = cross_entropy(z, best);
            for (j, &pj) in p.iter().enumerate() {
                if pj > 0.0 {
                    loss += pj as f64 * cross_entropy(z, j).0;
                }
            }
            right += usize::from(ok);
            rows += 1;
        }
        (loss, right, rows)
    }
}
