//! Checkpoints: every rank's shards of the weights and optimizer state
//! after a step, so a killed run resumes where it stopped and every later
//! step's loss equals the uninterrupted run's bit for bit.
//!
//! Layout: `DIR/step-<S>/` (S = steps completed, 8 digits) holds one
//! `rank-<r>.safetensors` per rank — that rank's tiles of every carried
//! tensor (weights and optimizer state, named by graph name; the tiles'
//! regions in the file's metadata under `regions`) — and `manifest.json`
//! ([`Manifest`]: format, step, seed, world size, the graph's SHA-256 and
//! each shard's size and SHA-256). The step's batches are a function of
//! (seed, step) ([`crate::batches`]) and the runner draws no random numbers
//! after the initial fill, so (state, step, seed) is the whole run state.
//!
//! Atomicity: a checkpoint is written into a temporary directory (every
//! file synced; under a launcher each process writes its own shard there,
//! [`write_shard`], and rank 0 [`commit`]s after a barrier), then renamed to
//! `step-<S>`; [`latest`] reads only
//! renamed directories, so a torn write is never loaded. [`load`] refuses
//! a checkpoint with a shard missing, truncated or altered, naming the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use codegen::{Programs, Region, TensorId};
use planner::graph::format::write_atomic;
use planner::graph::Graph;
use planner::plan::file::graph_sha256;
use runner::Given;
use safetensors::SafeTensors;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::weights::to_safetensors;
use crate::TrainError;

/// The manifest's format name.
pub const FORMAT: &str = "tofu-checkpoint";
/// The manifest's format version.
pub const VERSION: u32 = 1;

/// One rank's shard file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// The rank.
    pub rank: usize,
    /// File name inside the checkpoint directory.
    pub file: String,
    /// Its size (bytes).
    pub bytes: u64,
    /// Its SHA-256 (hex).
    pub sha256: String,
}

/// `manifest.json` of a checkpoint (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// Steps completed when it was written.
    pub step: usize,
    /// The run's seed (initial fill and batch order).
    pub seed: u64,
    /// Ranks.
    pub world: usize,
    /// The training graph's name.
    pub graph: String,
    /// SHA-256 of the training graph's JSON (`planner::plan::file::graph_sha256`).
    pub graph_sha256: String,
    /// One shard per rank.
    pub shards: Vec<Shard>,
}

/// One rank's tile of a carried tensor after a step.
#[derive(Clone, Debug, PartialEq)]
pub struct Tile {
    /// The rank.
    pub rank: usize,
    /// The tensor it becomes at the next step (the weight or state).
    pub tensor: TensorId,
    /// Its region (global coordinates).
    pub region: Region,
    /// Row-major values.
    pub values: Vec<f32>,
}

/// The carried tensors of a run: `(updated, replaced)` pairs, e.g.
/// `(fc0.w', fc0.w)`, once each.
pub fn carried(programs: &Programs) -> Vec<(TensorId, TensorId)> {
    let mut v: Vec<(TensorId, TensorId)> = programs
        .programs
        .iter()
        .flat_map(|p| p.carries.iter().map(|c| (c.from, c.to)))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// What a run captures of its state: the tiles of the carried tensors
/// after every step a checkpoint is written or the held-out set is
/// evaluated, and the first checkpoint write error.
pub struct Capture {
    /// The checkpoint directory and the steps between checkpoints.
    pub checkpoint: Option<(PathBuf, usize)>,
    /// Steps between held-out evaluations (0: none).
    pub eval_every: usize,
    /// `(updated, replaced)` pairs ([`carried`]).
    pub carried: Vec<(TensorId, TensorId)>,
    tiles: Mutex<Vec<Tile>>,
    error: Mutex<Option<String>>,
}

impl Capture {
    /// A capture for checkpoints into `dir` every `every` steps and
    /// evaluations every `eval_every` steps (0: none).
    pub fn new(
        checkpoint: Option<(PathBuf, usize)>,
        eval_every: usize,
        programs: &Programs,
    ) -> Capture {
        Capture {
            checkpoint: checkpoint.map(|(d, e)| (d, e.max(1))),
            eval_every,
            carried: carried(programs),
            tiles: Mutex::new(Vec::new()),
            error: Mutex::new(None),
        }
    }

    /// Whether a checkpoint is written after global step `step` (0-based).
    pub fn checkpoint_due(&self, step: usize) -> bool {
        self.checkpoint
            .as_ref()
            .is_some_and(|(_, every)| (step + 1).is_multiple_of(*every))
    }

    /// Whether the held-out set is evaluated after global step `step`.
    pub fn eval_due(&self, step: usize) -> bool {
        self.eval_every > 0 && (step + 1).is_multiple_of(self.eval_every)
    }

    /// Whether the state is captured after global step `step`.
    pub fn due(&self, step: usize) -> bool {
        self.checkpoint_due(step) || self.eval_due(step)
    }

    /// Record `rank`'s tile of the updated tensor `updated`.
    pub fn record(&self, rank: usize, updated: TensorId, region: &Region, values: &[f32]) {
        if let Some(&(_, to)) = self.carried.iter().find(|(f, _)| *f == updated) {
            self.tiles.lock().expect("no poisoned capture").push(Tile {
                rank,
                tensor: to,
                region: region.clone(),
                values: values.to_vec(),
            });
        }
    }

    /// The tiles recorded since the last call.
    pub fn take(&self) -> Vec<Tile> {
        std::mem::take(&mut *self.tiles.lock().expect("no poisoned capture"))
    }

    /// Remember the first failure (the run stops at its next step).
    pub fn fail(&self, message: String) {
        self.error
            .lock()
            .expect("no poisoned capture")
            .get_or_insert(message);
    }

    /// The first failure, if any.
    pub fn failed(&self) -> Option<String> {
        self.error.lock().expect("no poisoned capture").clone()
    }
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The directory of the checkpoint after `step` completed steps.
pub fn step_dir(dir: &Path, step: usize) -> PathBuf {
    dir.join(format!("step-{step:08}"))
}

/// The temporary directory every rank writes its shard of the checkpoint
/// after `step` steps into (one name for all processes of a run).
fn tmp_dir(dir: &Path, step: usize) -> PathBuf {
    dir.join(format!(".step-{step:08}.tmp"))
}

/// Write `rank`'s shard of the checkpoint after `step` completed steps:
/// its `tiles` (of this rank) into the checkpoint's temporary directory.
/// Every rank of a run calls it, then one calls [`commit`].
///
/// Errors: [`TrainError::Data`] naming the file that could not be written.
pub fn write_shard(
    dir: &Path,
    graph: &Graph,
    step: usize,
    rank: usize,
    tiles: &[&Tile],
) -> Result<(), TrainError> {
    let tmp = tmp_dir(dir, step);
    std::fs::create_dir_all(&tmp)
        .map_err(|e| TrainError::Data(format!("{}: {e}", tmp.display())))?;
    let regions: HashMap<&str, &Vec<(i64, i64)>> = tiles
        .iter()
        .map(|t| (graph.tensor(t.tensor).name.as_str(), &t.region.0))
        .collect();
    let meta = HashMap::from([(
        "regions".to_string(),
        serde_json::to_string(&regions).expect("regions serialise"),
    )]);
    let named: Vec<(String, Vec<usize>, &[f32])> = tiles
        .iter()
        .map(|t| {
            let shape = t.region.0.iter().map(|&(l, h)| (h - l) as usize).collect();
            let name = graph.tensor(t.tensor).name.clone();
            (name, shape, t.values.as_slice())
        })
        .collect();
    let bytes = to_safetensors(&named, Some(meta))?;
    write_atomic(&tmp.join(format!("rank-{rank}.safetensors")), &bytes)
        .map_err(|e| TrainError::Data(e.to_string()))
}

/// Finish the checkpoint after `step` steps once every rank's shard is
/// written ([`write_shard`]): hash the shards, write the manifest, rename
/// the temporary directory to `step-<S>`; gives that directory.
///
/// Errors: [`TrainError::Data`] naming a missing shard or a file that could
/// not be written.
pub fn commit(
    dir: &Path,
    graph: &Graph,
    seed: u64,
    world: usize,
    step: usize,
) -> Result<PathBuf, TrainError> {
    let io = |e: std::io::Error, p: &Path| TrainError::Data(format!("{}: {e}", p.display()));
    let tmp = tmp_dir(dir, step);
    let mut shards = Vec::with_capacity(world);
    for rank in 0..world {
        let file = format!("rank-{rank}.safetensors");
        let p = tmp.join(&file);
        let bytes = std::fs::read(&p).map_err(|e| io(e, &p))?;
        shards.push(Shard {
            rank,
            file,
            bytes: bytes.len() as u64,
            sha256: hex(&bytes),
        });
    }
    let manifest = Manifest {
        format: FORMAT.into(),
        version: VERSION,
        step,
        seed,
        world,
        graph: graph.name().to_string(),
        graph_sha256: graph_sha256(graph),
        shards,
    };
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serialises");
    write_atomic(&tmp.join("manifest.json"), text.as_bytes())
        .map_err(|e| TrainError::Data(e.to_string()))?;
    let done = step_dir(dir, step);
    let _ = std::fs::remove_dir_all(&done);
    std::fs::rename(&tmp, &done).map_err(|e| io(e, &done))?;
    durable::sync_dir(dir).map_err(|e| io(e, dir))?;
    Ok(done)
}

/// Write the whole checkpoint of `tiles` (every rank's, one process) after
/// `step` completed steps into `dir` (see the module doc); gives its
/// directory.
///
/// Errors: [`TrainError::Data`] naming the file that could not be written.
pub fn write(
    dir: &Path,
    graph: &Graph,
    seed: u64,
    world: usize,
    step: usize,
    tiles: &[Tile],
) -> Result<PathBuf, TrainError> {
    let _ = std::fs::remove_dir_all(tmp_dir(dir, step));
    for rank in 0..world {
        let mine: Vec<&Tile> = tiles.iter().filter(|t| t.rank == rank).collect();
        write_shard(dir, graph, step, rank, &mine)?;
    }
    commit(dir, graph, seed, world, step)
}

/// The latest complete checkpoint in `dir` (the highest `step-<S>`), `None`
/// when there is none.
///
/// Errors: [`TrainError::Data`] when `dir` cannot be read.
pub fn latest(dir: &Path) -> Result<Option<PathBuf>, TrainError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TrainError::Data(format!("{}: {e}", dir.display()))),
    };
    let mut best: Option<(usize, PathBuf)> = None;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(step) = name
            .strip_prefix("step-")
            .and_then(|s| s.parse::<usize>().ok())
        else {
            continue;
        };
        if best.as_ref().is_none_or(|(s, _)| step > *s) {
            best = Some((step, e.path()));
        }
    }
    Ok(best.map(|(_, p)| p))
}

/// Whether a run with checkpoints in `dir` starts from the latest of them:
/// when asked (`--resume`), or when the launcher restarted the group
/// (`tofu launch --max-restarts`, torchrun's restarts:
/// [`rendezvous::launcher::restart_count`] > 0) and `dir` holds one — a
/// group that failed before its first checkpoint starts again from step 0.
pub fn resumes(dir: &Path, asked: bool) -> bool {
    asked || (rendezvous::launcher::restart_count() > 0 && matches!(latest(dir), Ok(Some(_))))
}

/// The latest checkpoint in `dir` ([`latest`]) read for a run of `graph` on
/// `programs` with `seed` ([`load`]): its directory, the steps it completed
/// and the carried tensors' values.
///
/// Errors: [`TrainError::Data`] when `dir` holds no checkpoint (naming it
/// and the flag that writes them), or as [`load`].
pub fn resume(
    dir: &Path,
    graph: &Graph,
    programs: &Programs,
    seed: u64,
) -> Result<(PathBuf, usize, Given), TrainError> {
    let latest = latest(dir)?.ok_or_else(|| {
        TrainError::Data(format!(
            "--resume: no checkpoint in {} (a run writes them with --checkpoint-dir)",
            dir.display()
        ))
    })?;
    let (step, state) = load(&latest, graph, programs, seed)?;
    Ok((latest, step, state))
}

/// Read the checkpoint in `path` for a run of `graph` on `world` ranks with
/// `seed`: the steps it completed and the whole value of every carried
/// tensor (by the id of the tensor it replaces, [`carried`]).
///
/// Errors: [`TrainError::Data`] naming the file: a missing or malformed
/// manifest, another graph, world size or seed, a shard missing, truncated
/// or altered (size or SHA-256), a carried tensor not covered by the shards.
pub fn load(
    path: &Path,
    graph: &Graph,
    programs: &Programs,
    seed: u64,
) -> Result<(usize, Given), TrainError> {
    let bad = |p: &Path, why: String| TrainError::Data(format!("{}: {why}", p.display()));
    let mpath = path.join("manifest.json");
    let text = std::fs::read_to_string(&mpath).map_err(|e| bad(&mpath, e.to_string()))?;
    let m: Manifest = serde_json::from_str(&text).map_err(|e| bad(&mpath, e.to_string()))?;
    let world = programs.programs.len();
    if m.format != FORMAT || m.version != VERSION {
        return Err(bad(&mpath, format!("not a {FORMAT} v{VERSION} manifest")));
    }
    if m.graph_sha256 != graph_sha256(graph) {
        return Err(bad(
            &mpath,
            format!("a checkpoint of graph `{}`, not of this run's `{}` (another model, batch or optimizer)", m.graph, graph.name()),
        ));
    }
    if m.world != world || m.seed != seed {
        return Err(bad(
            &mpath,
            format!(
                "written by a run of {} ranks with seed {}; this run has {world} ranks and seed {seed}: resume with the same --workers and --seed",
                m.world, m.seed
            ),
        ));
    }
    let mut tiles = Vec::new();
    for s in &m.shards {
        let p = path.join(&s.file);
        let bytes =
            std::fs::read(&p).map_err(|e| bad(&p, format!("{e} (a shard of the checkpoint)")))?;
        if bytes.len() as u64 != s.bytes || hex(&bytes) != s.sha256 {
            return Err(bad(
                &p,
                format!(
                    "{} bytes, the manifest says {} with another SHA-256: the shard is truncated or altered",
                    bytes.len(),
                    s.bytes
                ),
            ));
        }
        tiles.extend(read_shard(&p, &bytes, s.rank, graph, programs)?);
    }
    let given = assemble(graph, programs, &tiles).map_err(|why| bad(path, why))?;
    Ok((m.step, given))
}

/// The whole value of every carried tensor from the ranks' tiles (by the
/// id of the tensor it replaces).
///
/// Errors: a message naming a tensor the tiles do not cover or a tile that
/// does not fit its tensor.
pub fn assemble(graph: &Graph, programs: &Programs, tiles: &[Tile]) -> Result<Given, String> {
    let mut whole: HashMap<TensorId, (Vec<f32>, Vec<f32>)> = HashMap::new();
    for (_, to) in carried(programs) {
        let n = graph.tensor(to).shape.iter().product();
        whole.insert(to, (vec![0.0; n], vec![0.0; n]));
    }
    for t in tiles {
        let info = graph.tensor(t.tensor);
        let fits = t.region.0.len() == info.shape.len()
            && t.region
                .0
                .iter()
                .zip(&info.shape)
                .all(|(&(l, h), &d)| 0 <= l && l <= h && h <= d as i64)
            && t.region.volume() == t.values.len() as u64;
        let Some((dst, seen)) = whole.get_mut(&t.tensor).filter(|_| fits) else {
            return Err(format!(
                "tile {:?} of `{}` does not fit a carried tensor of shape {:?}",
                t.region.0, info.name, info.shape
            ));
        };
        let w = Region::whole(&info.shape);
        let ones = vec![1.0; t.values.len()];
        for (src, into) in [(&t.values, dst), (&ones, seen)] {
            runner::region::copy_region(src, &t.region.0, into, &w.0, &t.region.0, None)
                .map_err(|e| e.to_string())?;
        }
    }
    let mut given = Given::new();
    for (t, (v, seen)) in whole {
        if seen.contains(&0.0) {
            return Err(format!(
                "the tiles do not cover tensor `{}`",
                graph.tensor(t).name
            ));
        }
        given.insert(t, v);
    }
    Ok(given)
}

/// One shard's tiles.
fn read_shard(
    p: &Path,
    bytes: &[u8],
    rank: usize,
    graph: &Graph,
    programs: &Programs,
) -> Result<Vec<Tile>, TrainError> {
    let bad = |why: String| TrainError::Data(format!("{}: {why}", p.display()));
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(|e| bad(e.to_string()))?;
    let regions: HashMap<String, Vec<(i64, i64)>> = meta
        .metadata()
        .as_ref()
        .and_then(|m| m.get("regions"))
        .map(|r| serde_json::from_str(r))
        .transpose()
        .map_err(|e| bad(format!("bad `regions` metadata: {e}")))?
        .ok_or_else(|| bad("no `regions` metadata".into()))?;
    let by_name: HashMap<&str, TensorId> = carried(programs)
        .into_iter()
        .map(|(_, to)| (graph.tensor(to).name.as_str(), to))
        .collect();
    let st = SafeTensors::deserialize(bytes).map_err(|e| bad(e.to_string()))?;
    st.tensors()
        .into_iter()
        .map(|(name, view)| {
            let (&tensor, region) = by_name
                .get(name.as_str())
                .zip(regions.get(&name))
                .ok_or_else(|| bad(format!("tensor `{name}` is not carried by this run")))?;
            let values = view
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok(Tile {
                rank,
                tensor,
                region: Region(region.clone()),
                values,
            })
        })
        .collect()
}
