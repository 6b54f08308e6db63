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
//! `[samples, positions]`, over `max id + 1` classes; PyTorch's ignore_index
//! -100 marks a target that is not scored) they feed a graph that takes ids
//! as they are and are one-hot encoded for one that takes dense labels; float
//! labels are used as they are (probabilities). The held-out evaluation
//! scores the logits against them. Held-out samples: a seeded split, as for
//! digits.

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

/// The class id of a target that is not scored: PyTorch's default
/// `ignore_index` of `F.cross_entropy`.
pub const IGNORE_INDEX: f32 = -100.0;

/// One fed input's values.
#[derive(Clone, Debug, PartialEq)]
struct Column {
    /// The graph input it feeds.
    input: String,
    /// Values per sample in the file.
    per: usize,
    /// Row-major values, `samples × per`.
    values: Vec<f32>,
    /// The values are class ids over this many classes.
    classes: Option<usize>,
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
                        classes: None,
                    }),
                }
            }
            samples += rows.unwrap_or(0);
        }
        let labels = inputs.iter().position(|i| LABEL_INPUTS.contains(i));
        if let (Some(l), true) = (labels, int_labels) {
            let c = &mut columns[l];
            let max = c.values.iter().copied().fold(0.0f32, f32::max);
            if let Some(bad) = c.values.iter().find(|&&v| v < 0.0 && v != IGNORE_INDEX) {
                return Err(TrainError::Data(format!(
                    "{}: labels are integer class ids but one is {bad}: ids are 0 or more, or {IGNORE_INDEX} (PyTorch's ignore_index) for a target that is not scored",
                    path.display()
                )));
            }
            c.classes = Some(max as usize + 1);
        }
        Ok(TensorSet {
            columns,
            samples,
            labels,
        })
    }

    /// Number of classes of the labels (`max id + 1` for class ids, the
    /// values per sample for probabilities), if there are labels.
    pub fn label_classes(&self) -> Option<usize> {
        let c = &self.columns[self.labels?];
        Some(c.classes.unwrap_or(c.per))
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
            .map(|c| (c.input.as_str(), c.per))
            .collect()
    }

    fn sample(&self, i: usize, k: usize) -> Cow<'_, [f32]> {
        let c = &self.columns[k];
        c.values[i * c.per..(i + 1) * c.per].into()
    }

    fn classes(&self) -> Option<usize> {
        self.columns[self.labels?].classes
    }

    /// Per target of the labels: cross-entropy at the class id (ids that
    /// are no class, as -100, are not scored), or against the labels' row
    /// taken as probabilities; and whether the largest logit is the class
    /// (the largest label).
    fn score(&self, i: usize, logits: &[f32]) -> (f64, usize, usize) {
        let Some(l) = self.labels else {
            return (0.0, 0, 0);
        };
        let labels = self.sample(i, l);
        let classes = self.label_classes().unwrap_or(1).max(1);
        let (mut loss, mut right, mut rows) = (0.0, 0, 0);
        if self.columns[l].classes.is_some() {
            for (z, &id) in logits.chunks_exact(classes).zip(labels.iter()) {
                if id >= 0.0 && (id as usize) < classes {
                    let (l, ok) = cross_entropy(z, id as usize);
                    loss += l;
                    right += usize::from(ok);
                    rows += 1;
                }
            }
            return (loss, right, rows);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::TensorView;

    /// A file of `x` [3, 2] f32 and int64 `labels` [3].
    fn file(name: &str, labels: &[i64]) -> PathBuf {
        let x: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let y: Vec<u8> = labels.iter().flat_map(|v| v.to_le_bytes()).collect();
        let views = [
            ("x", TensorView::new(Dtype::F32, vec![3, 2], &x).unwrap()),
            ("labels", TensorView::new(Dtype::I64, vec![3], &y).unwrap()),
        ];
        let bytes = safetensors::serialize(views, None).unwrap();
        let dir = std::env::temp_dir().join(format!("tofu-tensors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Integer labels stay class ids (one per sample); -100 is a target
    /// that is not scored; other negative ids are refused.
    #[test]
    fn class_ids_are_kept_and_ignored_targets_are_not_scored() {
        let path = file("ids.safetensors", &[2, -100, 0]);
        let t = TensorSet::load(&path, &["x", "labels"], &BTreeMap::new()).unwrap();
        assert_eq!(t.inputs(), [("x", 2), ("labels", 1)]);
        assert_eq!(Samples::classes(&t), Some(3));
        assert_eq!(t.sample(1, 1).as_ref(), &[IGNORE_INDEX]);
        let logits = [0.0, 0.0, 1.0];
        let (loss, right, scored) = t.score(0, &logits);
        assert_eq!((right, scored), (1, 1));
        let want = (2.0 + 1f64.exp()).ln() - 1.0;
        assert!((loss - want).abs() < 1e-6, "{loss} vs {want}");
        assert_eq!(t.score(1, &logits), (0.0, 0, 0), "an ignored target");
        let bad = file("bad.safetensors", &[2, -5, 0]);
        let e = TensorSet::load(&bad, &["x", "labels"], &BTreeMap::new()).unwrap_err();
        assert!(
            e.to_string().contains("-5") && e.to_string().contains("-100"),
            "{e}"
        );
    }
}
