//! Building the per-worker programs from a plan (Tofu §4.3, §5).
//!
//! Takes a graph, the operator library, its [`Model`], the level factors
//! and the [`Decisions`]; gives one [`Program`] per rank, walking the
//! operators in graph order. Per operator and rank:
//!
//! 1. **Inputs.** The share (the op's index box on this rank, see
//!    [`CostModel::op_box`]) reads `input_region(slot, box)` of every input.
//!    If the rank's tile is exactly that region (or holds it and reading
//!    the whole tile lets the op run on local shapes), the tile is the input buffer;
//!    otherwise a work buffer is assembled from the local tile (a copy of the
//!    overlap) and the pieces other ranks send (fused fetch + concat, §5).
//!    One grouped exchange per input carries the `Input` transfers.
//! 2. **Compute.** The share runs on local shapes where
//!    [`crate::local::runs_locally`] allows it, else windowed.
//! 3. **Outputs.** The result is brought into the output tensor's tiles: a
//!    share that equals the tile is computed in place; otherwise its overlap
//!    with the assembly target is copied (or reduced) into the tile, and the
//!    `Output` transfers move (and reduce) the rest. A tensor replicated on
//!    every worker is assembled into its virtual split first, then completed
//!    by the `Gather` transfers.
//!
//! The three steps are `emit.rs`'s methods of `RankGen`; this file
//! recognises the collectives once for every rank and assembles the
//! programs.
//!
//! Leaf tiles (weights, data, optimizer state) are allocated with their
//! synthetic fill right before their first use; every buffer is freed after
//! its last use except the tiles of tensors nothing consumes (loss, updated
//! weights and state), which are kept and carried to the next step.

use std::collections::{BTreeSet, HashMap};

use planner::graph::execute::fill_offsets;
use planner::graph::{DType, Graph, GraphError, OpId, TensorId};
use planner::plan::cost::CostModel;
use planner::plan::model::Model;
use planner::plan::tile::{digits, Region};
use planner::plan::{transfers_in, Decisions, Phase, Transfer};
use tdl::{Library, OpSpec};

use crate::collectives::{recognise, recognise_input, Collective};
use crate::emit::Shared;
use crate::error::CodegenError;
use crate::program::{BufId, Buffer, Carry, Instr, Program, TensorInfo, FORMAT, VERSION};
use crate::wire;

/// The programs of every rank, with the transfers they realise.
#[derive(Clone, Debug)]
pub struct Programs {
    /// One per rank.
    pub programs: Vec<Program>,
    /// The planner's transfers of one step (program order).
    pub transfers: Vec<Transfer>,
    /// Bytes each rank sends per step according to the transfers
    /// (Σ region volume × dtype bytes over transfers with `src == rank`).
    pub predicted_bytes_per_rank: Vec<u64>,
}

/// Programs for the unpartitioned graph (one rank, no levels).
///
/// Errors: as [`generate`].
pub fn generate_unpartitioned(
    graph: &Graph,
    lib: &Library,
    model: &Model,
) -> Result<Programs, CodegenError> {
    let d = Decisions {
        tensors: vec![Vec::new(); graph.tensors().len()],
        ops: vec![Vec::new(); graph.ops().len()],
    };
    generate(graph, lib, model, &[], &d)
}

/// Build every rank's program (see the module doc).
///
/// Errors: [`CodegenError::Mismatch`] when the decisions do not fit the
/// graph; [`CodegenError::DType`] for an operator output that is not f32
/// (only leaves hold other element types, see [`crate::wire`]); [`CodegenError::Spec`] for an op whose spec is missing.
pub fn generate(
    graph: &Graph,
    lib: &Library,
    model: &Model,
    factors: &[usize],
    d: &Decisions,
) -> Result<Programs, CodegenError> {
    generate_in(&CostModel::new(graph, model, factors), lib, d)
}

/// [`generate`] with the plan's cost model `cm` (its graph, bound operators
/// and factors), shared with the checks before and after
/// ([`crate::compile`]).
///
/// Errors: as [`generate`].
pub fn generate_in(
    cm: &CostModel<'_>,
    lib: &Library,
    d: &Decisions,
) -> Result<Programs, CodegenError> {
    let (graph, model, factors) = (cm.graph(), cm.model(), cm.factors());
    check_fit(graph, model, factors, d)?;
    let world: usize = factors.iter().product();
    let all = transfers_in(cm, d);
    let mut predicted = vec![0u64; world];
    for t in &all {
        predicted[t.src] += wire::message_bytes(t.region.volume(), graph.tensor(t.tensor).dtype);
    }
    let mut by_phase: HashMap<(OpId, Phase), Vec<&Transfer>> = HashMap::new();
    for t in &all {
        by_phase.entry((t.op, t.phase)).or_default().push(t);
    }
    // Outputs whose transfers are a collective's pattern (same on every rank).
    let mut lowered: HashMap<(OpId, usize), Collective> = HashMap::new();

    for (i, op) in graph.ops().iter().enumerate() {
        let o = OpId(i as u32);
        for (slot, &t) in op.outputs.iter().enumerate() {
            let outs = by_phase
                .get(&(o, Phase::Output { slot }))
                .map(|v| &v[..])
                .unwrap_or(&[]);
            // Packed words of another type cannot be reduced inside a
            // collective ([`wire`]): such an output stays an exchange.
            if world < 2
                || d.tensors[t.index()].iter().any(Option::is_some)
                || graph.tensor(t).dtype != DType::F32
            {
                continue;
            }
            let gathers = by_phase
                .get(&(o, Phase::Gather { slot }))
                .map(|v| &v[..])
                .unwrap_or(&[]);
            let writes: Vec<Region> = (0..world)
                .map(|r| {
                    let b = cm.op_box(o, &d.ops[i], &digits(r, factors));
                    model.op(o).access.output_region(slot, &b).0
                })
                .collect();
            let whole = Region::whole(&graph.tensor(t).shape);
            if let Some(c) = recognise(&whole, &writes, outs, gathers, world) {
                lowered.insert((o, slot), c);
            }
        }
    }
    // Inputs every rank reads whole from equal tiles: all-gathers.
    let mut gathered_inputs: HashMap<(OpId, usize), Vec<Region>> = HashMap::new();
    if world > 1 {
        for (i, op) in graph.ops().iter().enumerate() {
            let o = OpId(i as u32);
            for (slot, &t) in op.inputs.iter().enumerate() {
                let Some(ts) = by_phase.get(&(o, Phase::Input { slot })) else {
                    continue;
                };
                let shape = &graph.tensor(t).shape;
                let needs: Vec<Region> = (0..world)
                    .map(|r| {
                        let b = cm.op_box(o, &d.ops[i], &digits(r, factors));
                        model.op(o).access.input_region(slot, &b)
                    })
                    .collect();
                let tiles: Vec<Region> = (0..world)
                    .map(|r| {
                        CostModel::tile(shape, &d.tensors[t.index()], factors, &digits(r, factors))
                    })
                    .collect();
                if let Some(b) = recognise_input(&Region::whole(shape), &needs, &tiles, ts) {
                    gathered_inputs.insert((o, slot), b);
                }
            }
        }
    }
    // Per op: binding, and whether each output is "computed whole on every worker".
    let mut bindings = Vec::with_capacity(graph.ops().len());
    for op in graph.ops() {
        let bound = graph.bind_op(lib, op).map_err(|e| CodegenError::Spec {
            op: op.name.clone(),
            message: match e {
                GraphError::UnknownSpec { spec, .. } => {
                    format!("no spec `{spec}` in the library")
                }
                GraphError::Shape { source, .. } => source.to_string(),
                other => other.to_string(),
            },
        })?;
        bindings.push(bound);
    }
    let offsets = fill_offsets(graph);
    let shared = Shared {
        graph,
        model,
        factors,
        d,
        cm,
        by_phase: &by_phase,
        lowered: &lowered,
        gathered_inputs: &gathered_inputs,
        bindings: &bindings,
        offsets: &offsets,
    };
    let mut programs = Vec::with_capacity(world);
    for rank in 0..world {
        let mut g = RankGen {
            graph,
            rank,
            world,
            buffers: Vec::new(),
            instrs: Vec::new(),
            tile_of: vec![None; graph.tensors().len()],
            specs: Vec::new(),
            spec_of: HashMap::new(),
        };
        for i in 0..graph.ops().len() {
            g.emit_op(&shared, i)?;
        }
        programs.push(g.finish());
    }
    Ok(Programs {
        programs,
        transfers: all,
        predicted_bytes_per_rank: predicted,
    })
}

/// No tensor held as partial sums and no operator linear in them at any
/// level: [`CodegenError::PartialSums`] names the first (tensors first).
pub(crate) fn partial_free(graph: &Graph, d: &Decisions) -> Result<(), CodegenError> {
    use planner::plan::decisions::is_partial;
    let tensors = graph.tensors().iter().zip(&d.tensors);
    for (t, s) in tensors {
        if let Some(level) = s.iter().position(|x| is_partial(*x)) {
            return Err(CodegenError::PartialSums {
                what: "tensor",
                name: t.name.clone(),
                level,
            });
        }
    }
    for (op, c) in graph.ops().iter().zip(&d.ops) {
        let linear = |c: &planner::plan::OpChoice| matches!(c, planner::plan::OpChoice::Linear(_));
        if let Some(level) = c.iter().position(linear) {
            return Err(CodegenError::PartialSums {
                what: "operator",
                name: op.name.clone(),
                level,
            });
        }
    }
    Ok(())
}

/// Decisions that fit the graph: one entry per tensor/op and level, split
/// dims within rank, strategy indices that exist, f32 operator outputs.
fn check_fit(
    graph: &Graph,
    model: &Model,
    factors: &[usize],
    d: &Decisions,
) -> Result<(), CodegenError> {
    let bad = |m: String| Err(CodegenError::Mismatch(m));
    if factors.contains(&0) {
        return bad(format!("factors {factors:?} contain 0"));
    }
    if d.tensors.len() != graph.tensors().len()
        || d.ops.len() != graph.ops().len()
        || model.ops.len() != graph.ops().len()
    {
        return bad(format!(
            "{} tensor and {} op decisions for a graph of {} tensors and {} ops",
            d.tensors.len(),
            d.ops.len(),
            graph.tensors().len(),
            graph.ops().len()
        ));
    }
    partial_free(graph, d)?;
    for (t, s) in graph.tensors().iter().zip(&d.tensors) {
        if s.len() != factors.len() {
            return bad(format!(
                "tensor `{}` has {} split entries for {} levels",
                t.name,
                s.len(),
                factors.len()
            ));
        }
        if let Some(x) = s.iter().flatten().find(|x| **x as usize >= t.shape.len()) {
            return bad(format!(
                "tensor `{}` is split along dim {x} but has rank {}",
                t.name,
                t.shape.len()
            ));
        }
        if t.dtype != DType::F32 && t.fill.is_none() {
            return Err(CodegenError::DType {
                tensor: t.name.clone(),
                dtype: t.dtype.to_string(),
            });
        }
    }
    for (i, (op, c)) in graph.ops().iter().zip(&d.ops).enumerate() {
        if c.len() != factors.len() {
            return bad(format!(
                "op `{}` has {} choices for {} levels",
                op.name,
                c.len(),
                factors.len()
            ));
        }
        let n = model.ops[i].strategies.strategies.len() as u32;
        if let Some(planner::plan::OpChoice::Strategy(s)) = c
            .iter()
            .find(|c| matches!(c, planner::plan::OpChoice::Strategy(s) if *s >= n))
        {
            return bad(format!(
                "op `{}` uses strategy {s}, but `{}` has {n}",
                op.name, op.spec
            ));
        }
    }
    Ok(())
}

pub(crate) struct RankGen<'g> {
    pub(crate) graph: &'g Graph,
    pub(crate) rank: usize,
    pub(crate) world: usize,
    buffers: Vec<Buffer>,
    pub(crate) instrs: Vec<Instr>,
    pub(crate) tile_of: Vec<Option<BufId>>,
    /// The specs computed so far, and their index by name.
    specs: Vec<OpSpec>,
    spec_of: HashMap<String, u32>,
}

impl RankGen<'_> {
    /// The index of `spec` in the program's spec table (added on first use,
    /// without its gradient declarations, which execution does not need).
    pub(crate) fn spec_index(&mut self, spec: &OpSpec) -> u32 {
        if let Some(&i) = self.spec_of.get(&spec.name) {
            return i;
        }
        let mut s = spec.clone();
        s.grads.clear();
        self.specs.push(s);
        let i = self.specs.len() as u32 - 1;
        self.spec_of.insert(spec.name.clone(), i);
        i
    }

    pub(crate) fn buffer(&mut self, tensor: TensorId, region: Region, tile: bool) -> BufId {
        let elems = region.volume();
        self.buffers.push(Buffer {
            tensor,
            region,
            elems,
            tile,
        });
        self.buffers.len() as BufId - 1
    }

    /// Keep tiles nothing consumes, free everything else after its last use.
    fn finish(self) -> Program {
        let g = self.graph;
        let mut keep: Vec<BufId> = Vec::new();
        for (t, tensor) in g.tensors().iter().enumerate() {
            let id = TensorId(t as u32);
            if g.producer(id).is_some() && g.consumers(id).is_empty() {
                if let Some(b) = self.tile_of[t] {
                    keep.push(b);
                }
            }
            let _ = tensor;
        }
        let mut last = vec![None; self.buffers.len()];
        for (i, ins) in self.instrs.iter().enumerate() {
            for b in ins.buffers() {
                last[b as usize] = Some(i);
            }
        }
        let mut frees_after: Vec<Vec<BufId>> = vec![Vec::new(); self.instrs.len()];
        for (b, l) in last.iter().enumerate() {
            if let Some(l) = l {
                if !keep.contains(&(b as BufId)) {
                    frees_after[*l].push(b as BufId);
                }
            }
        }
        let mut instrs = Vec::with_capacity(self.instrs.len() * 2);
        for (ins, frees) in self.instrs.into_iter().zip(frees_after) {
            instrs.push(ins);
            instrs.extend(frees.into_iter().map(|buf| Instr::Free { buf }));
        }
        // Carries: updated tensor → the tensor it replaces.
        let mut carries = Vec::new();
        for (t, tensor) in g.tensors().iter().enumerate() {
            if let Some(to) = tensor.updates {
                let to_buf = self
                    .buffers
                    .iter()
                    .position(|b| b.tensor == to && b.tile)
                    .map(|b| b as BufId);
                carries.push(Carry {
                    from: TensorId(t as u32),
                    from_buf: self.tile_of[t],
                    to,
                    to_buf,
                });
            }
        }
        let named: BTreeSet<TensorId> = self
            .buffers
            .iter()
            .map(|b| b.tensor)
            .chain(carries.iter().flat_map(|c: &Carry| [c.from, c.to]))
            .collect();
        let tensors = named
            .into_iter()
            .map(|id| TensorInfo {
                id,
                name: g.tensor(id).name.clone(),
                shape: g.tensor(id).shape.clone(),
                dtype: g.tensor(id).dtype,
                value: g.tensor(id).value.clone(),
            })
            .collect();
        Program {
            format: FORMAT.into(),
            version: VERSION,
            rank: self.rank,
            world: self.world,
            tensors,
            specs: self.specs,
            buffers: self.buffers,
            instrs,
            keep,
            carries,
        }
    }
}
