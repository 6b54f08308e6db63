//! One operator's instructions on one rank: the three steps of
//! [`crate::generate`]'s module doc (inputs assembled, the share computed,
//! outputs brought into tiles), as methods of the rank's [`RankGen`].
//!
//! Takes the plan-wide [`Shared`] context (graph, model, decisions, the
//! transfers by phase and the collectives recognised on them) and an op;
//! appends the op's instructions to the rank's program.

use std::collections::HashMap;

use planner::graph::{Graph, OpId, TensorId};
use planner::plan::cost::CostModel;
use planner::plan::model::Model;
use planner::plan::tile::{digits, Region};
use planner::plan::{Decisions, Phase, Transfer};
use tdl::{Binding, OpSpec, Reducer};

use crate::collectives::Collective;
use crate::error::CodegenError;
use crate::generate::RankGen;
use crate::local::runs_locally;
use crate::program::{BufId, Init, Instr, KernelMode, Synthetic};

/// What every rank's generation reads: the plan and the communication
/// recognised on it (computed once in [`crate::generate::generate`]).
pub(crate) struct Shared<'a> {
    pub graph: &'a Graph,
    pub model: &'a Model,
    pub factors: &'a [usize],
    pub d: &'a Decisions,
    pub cm: &'a CostModel<'a>,
    /// Transfers by (op, phase).
    pub by_phase: &'a HashMap<(OpId, Phase), Vec<&'a Transfer>>,
    /// Outputs whose transfers are a collective's pattern.
    pub lowered: &'a HashMap<(OpId, usize), Collective>,
    /// Inputs every rank reads whole from equal tiles: all-gathers.
    pub gathered_inputs: &'a HashMap<(OpId, usize), Vec<Region>>,
    /// Every op bound to its input shapes.
    pub bindings: &'a [(&'a OpSpec, Binding)],
    /// Where each filled tensor starts in the fill stream.
    pub offsets: &'a [Option<u64>],
}

impl Shared<'_> {
    /// The transfers of op `o`'s `phase` (none: empty).
    fn transfers(&self, o: OpId, phase: Phase) -> &[&Transfer] {
        self.by_phase.get(&(o, phase)).map_or(&[], |v| &v[..])
    }

    /// Rank `r`'s tile of tensor `t`.
    fn tile(&self, t: TensorId, r: usize) -> Region {
        CostModel::tile(
            &self.graph.tensor(t).shape,
            &self.d.tensors[t.index()],
            self.factors,
            &digits(r, self.factors),
        )
    }
}

/// The buffers of one op's share on a rank, per input or output slot
/// (every rank computes its share, even an empty one: a reduction over an
/// empty range still yields its identity, which the plan's transfers may
/// carry).
struct Buffers {
    bufs: Vec<BufId>,
    regions: Vec<Region>,
}

impl RankGen<'_> {
    /// A copy (or reduction) of `region` from `src` into `dst`, if it is not empty.
    fn copy_part(&mut self, src: BufId, dst: BufId, region: Region, reduce: Option<Reducer>) {
        if region.volume() > 0 {
            self.instrs.push(Instr::Copy {
                src,
                dst,
                region,
                reduce,
            });
        }
    }

    /// Append op `i`'s instructions (see the module doc).
    ///
    /// Errors: [`CodegenError::Mismatch`] for a tensor read before it is
    /// produced or a leaf without a fill; those of the exchanges.
    pub(crate) fn emit_op(&mut self, s: &Shared<'_>, i: usize) -> Result<(), CodegenError> {
        let o = OpId(i as u32);
        let var_box = s.cm.op_box(o, &s.d.ops[i], &digits(self.rank, s.factors));
        let use_tile = self.use_tiles(s, i, &var_box);
        let inputs = self.emit_inputs(s, i, &var_box, &use_tile)?;
        let (outputs, direct) = self.emit_compute(s, i, &var_box, &inputs);
        self.emit_outputs(s, i, &outputs, &direct)
    }

    /// Per input slot: read the rank's whole tile (see [`tiles_run_locally`]).
    fn use_tiles(&self, s: &Shared<'_>, i: usize, var_box: &[(i64, i64)]) -> Vec<bool> {
        let o = OpId(i as u32);
        let op = s.graph.op(o);
        let access = &s.model.op(o).access;
        let (spec, b) = &s.bindings[i];
        let receives = |slot: usize| {
            s.gathered_inputs.contains_key(&(o, slot))
                || s.by_phase
                    .get(&(o, Phase::Input { slot }))
                    .is_some_and(|ts| ts.iter().any(|x| x.dst == self.rank))
        };
        let tiles: Vec<Region> = op.inputs.iter().map(|&t| s.tile(t, self.rank)).collect();
        let needs: Vec<Region> = (0..op.inputs.len())
            .map(|slot| access.input_region(slot, var_box))
            .collect();
        let outs: Vec<Vec<(i64, i64)>> = (0..op.outputs.len())
            .map(|slot| access.output_region(slot, var_box).0 .0)
            .collect();
        tiles_run_locally(spec, &op.attrs, b, var_box, &needs, &tiles, &outs, receives)
    }

    /// Step 1: every input's buffer on this rank — the tile itself, or a
    /// work buffer assembled from the tile's overlap and what other ranks
    /// send (one grouped exchange or all-gather per input); a leaf's tile
    /// is allocated with its fill at its first use.
    fn emit_inputs(
        &mut self,
        s: &Shared<'_>,
        i: usize,
        var_box: &[(i64, i64)],
        use_tile: &[bool],
    ) -> Result<Buffers, CodegenError> {
        let o = OpId(i as u32);
        let op = s.graph.op(o);
        let access = &s.model.op(o).access;
        let mut in_bufs = Vec::with_capacity(op.inputs.len());
        let mut in_regions = Vec::with_capacity(op.inputs.len());
        for (slot, &t) in op.inputs.iter().enumerate() {
            let tr = s.tile(t, self.rank);
            let tb = match self.tile_of[t.index()] {
                Some(b) => b,
                None if s.graph.producer(t).is_none() => {
                    let fill = s
                        .graph
                        .tensor(t)
                        .fill
                        .zip(s.offsets[t.index()])
                        .ok_or_else(|| {
                            CodegenError::Mismatch(format!(
                                "`{}` is produced by no operator and has no fill",
                                s.graph.tensor(t).name
                            ))
                        })?;
                    let b = self.buffer(t, tr.clone(), true);
                    self.instrs.push(Instr::Alloc {
                        buf: b,
                        init: Init::Fill(Synthetic {
                            fill: fill.0,
                            offset: fill.1,
                        }),
                    });
                    self.tile_of[t.index()] = Some(b);
                    b
                }
                None => {
                    return Err(CodegenError::Mismatch(format!(
                        "`{}` is read by `{}` before it is produced",
                        s.graph.tensor(t).name,
                        op.name
                    )))
                }
            };
            let need = if use_tile[slot] {
                tr.clone()
            } else {
                access.input_region(slot, var_box)
            };
            let ib = if need == tr {
                tb
            } else {
                let w = self.buffer(t, need.clone(), false);
                self.instrs.push(Instr::Alloc {
                    buf: w,
                    init: Init::Zero,
                });
                self.copy_part(tb, w, need.intersect(&tr), None);
                w
            };
            let ts = s.transfers(o, Phase::Input { slot });
            match s.gathered_inputs.get(&(o, slot)) {
                Some(blocks) => self.instrs.push(Instr::AllGather {
                    op: o,
                    buf: ib,
                    blocks: blocks.clone(),
                }),
                None => self.exchange(o, Phase::Input { slot }, ts, |_| Some(tb), |_| Some(ib))?,
            }
            in_bufs.push(ib);
            in_regions.push(need);
        }
        Ok(Buffers {
            bufs: in_bufs,
            regions: in_regions,
        })
    }

    /// Step 2: allocate the share's outputs (in place in the tile when the
    /// share is the tile) and compute it, on local shapes where
    /// [`runs_locally`] allows, else windowed. Gives the output buffers and
    /// whether each is the tile itself.
    fn emit_compute(
        &mut self,
        s: &Shared<'_>,
        i: usize,
        var_box: &[(i64, i64)],
        inputs: &Buffers,
    ) -> (Buffers, Vec<bool>) {
        let o = OpId(i as u32);
        let op = s.graph.op(o);
        let access = &s.model.op(o).access;
        let mut out_bufs = Vec::with_capacity(op.outputs.len());
        let mut out_regions = Vec::with_capacity(op.outputs.len());
        let mut direct = Vec::with_capacity(op.outputs.len());
        for (slot, &t) in op.outputs.iter().enumerate() {
            let tr = s.tile(t, self.rank);
            let (region, _) = access.output_region(slot, var_box);
            let b = if region == tr {
                let b = self.buffer(t, tr, true);
                self.tile_of[t.index()] = Some(b);
                direct.push(true);
                b
            } else {
                direct.push(false);
                self.buffer(t, region.clone(), false)
            };
            self.instrs.push(Instr::Alloc {
                buf: b,
                init: Init::Zero,
            });
            out_bufs.push(b);
            out_regions.push(region);
        }
        {
            let (spec, b) = &s.bindings[i];
            let ins: Vec<Vec<(i64, i64)>> = inputs.regions.iter().map(|r| r.0.clone()).collect();
            let outs: Vec<Vec<(i64, i64)>> = out_regions.iter().map(|r| r.0.clone()).collect();
            let mode = if runs_locally(spec, &op.attrs, b, var_box, &ins, &outs) {
                KernelMode::Local
            } else {
                KernelMode::Window
            };
            let spec_index = self.spec_index(spec);
            self.instrs.push(Instr::Compute {
                op: o,
                spec: spec_index,
                attrs: op.attrs.clone(),
                shapes: s.graph.input_shapes(op),
                var_box: var_box.to_vec(),
                inputs: inputs.bufs.clone(),
                outputs: out_bufs.clone(),
                mode,
            });
        }
        (
            Buffers {
                bufs: out_bufs,
                regions: out_regions,
            },
            direct,
        )
    }

    /// Step 3: bring each output into its tiles — a copy or reduction of
    /// the own part, the `Output` transfers or the collective recognised on
    /// them, then the `Gather` transfers of a staged tensor.
    fn emit_outputs(
        &mut self,
        s: &Shared<'_>,
        i: usize,
        outputs: &Buffers,
        direct: &[bool],
    ) -> Result<(), CodegenError> {
        let o = OpId(i as u32);
        let op = s.graph.op(o);
        for (slot, &t) in op.outputs.iter().enumerate() {
            let tr = s.tile(t, self.rank);
            let outs = s.transfers(o, Phase::Output { slot });
            let gathers = s.transfers(o, Phase::Gather { slot });
            let reducer = outs
                .iter()
                .find(|x| x.dst == self.rank)
                .and_then(|x| x.reduce);
            let collective = s.lowered.get(&(o, slot));
            let tb = if direct[slot] {
                self.tile_of[t.index()].expect("direct tile")
            } else {
                let tb = self.buffer(t, tr.clone(), true);
                let init = reducer.map_or(Init::Zero, Init::Identity);
                self.instrs.push(Instr::Alloc { buf: tb, init });
                self.tile_of[t.index()] = Some(tb);
                // The assembly target: the tile, or for a staged tensor
                // (replicated everywhere, or replicated at some levels
                // with its chunks gathered within replica groups) this
                // rank's chunk, none when its chunk is empty.
                let replicated = s.d.tensors[t.index()].iter().all(Option::is_none);
                let target = if (replicated && self.world > 1) || !gathers.is_empty() {
                    gathers
                        .iter()
                        .find(|x| x.src == self.rank)
                        .map(|x| x.region.clone())
                } else {
                    Some(tr.clone())
                };
                // A reduction collective combines this rank's own partial itself.
                let reduces = matches!(
                    collective,
                    Some(Collective::AllReduce { .. } | Collective::ReduceScatter { .. })
                );
                let target = target.filter(|_| !reduces);
                if let Some(target) = target {
                    let own = outputs.regions[slot].intersect(&target);
                    self.copy_part(outputs.bufs[slot], tb, own, reducer);
                }
                tb
            };
            let src_buf = outputs.bufs[slot];
            let gather_p2p = match collective {
                Some(Collective::AllReduce { reduce }) => {
                    self.instrs.push(Instr::AllReduce {
                        op: o,
                        src: src_buf,
                        dst: tb,
                        region: Region::whole(&s.graph.tensor(t).shape),
                        reduce: *reduce,
                    });
                    false
                }
                Some(Collective::ReduceScatter {
                    blocks,
                    reduce,
                    all_gather,
                }) => {
                    self.instrs.push(Instr::ReduceScatter {
                        op: o,
                        src: src_buf,
                        dst: tb,
                        blocks: blocks.clone(),
                        reduce: *reduce,
                    });
                    if *all_gather {
                        self.instrs.push(Instr::AllGather {
                            op: o,
                            buf: tb,
                            blocks: blocks.clone(),
                        });
                    }
                    !*all_gather
                }
                Some(Collective::AllGather { blocks }) => {
                    self.exchange(
                        o,
                        Phase::Output { slot },
                        outs,
                        |_| Some(src_buf),
                        |_| Some(tb),
                    )?;
                    self.instrs.push(Instr::AllGather {
                        op: o,
                        buf: tb,
                        blocks: blocks.clone(),
                    });
                    false
                }
                None => {
                    self.exchange(
                        o,
                        Phase::Output { slot },
                        outs,
                        |_| Some(src_buf),
                        |_| Some(tb),
                    )?;
                    true
                }
            };
            if gather_p2p {
                self.exchange(
                    o,
                    Phase::Gather { slot },
                    gathers,
                    |_| Some(tb),
                    |_| Some(tb),
                )?;
            }
        }
        Ok(())
    }
}

/// Per input slot, whether the op should read the rank's whole tile of
/// that input instead of a work buffer holding just the region it needs:
/// all false unless the needed regions alone do not run on local shapes
/// ([`runs_locally`]) and reading the tiles (held whole, nothing received
/// into them) does.
#[allow(clippy::too_many_arguments)]
fn tiles_run_locally(
    spec: &OpSpec,
    attrs: &tdl::Attrs,
    b: &tdl::Binding,
    var_box: &[(i64, i64)],
    needs: &[Region],
    tiles: &[Region],
    outs: &[Vec<(i64, i64)>],
    receives: impl Fn(usize) -> bool,
) -> Vec<bool> {
    let none = vec![false; needs.len()];
    let regions =
        |r: &[&Region]| -> Vec<Vec<(i64, i64)>> { r.iter().map(|x| x.0.clone()).collect() };
    let need_refs: Vec<&Region> = needs.iter().collect();
    if runs_locally(spec, attrs, b, var_box, &regions(&need_refs), outs) {
        return none;
    }
    let alt: Vec<bool> = needs
        .iter()
        .zip(tiles)
        .enumerate()
        .map(|(slot, (n, t))| n != t && n.volume() > 0 && n.intersect(t) == *n && !receives(slot))
        .collect();
    if !alt.contains(&true) {
        return none;
    }
    let chosen: Vec<&Region> = alt
        .iter()
        .zip(needs.iter().zip(tiles))
        .map(|(&a, (n, t))| if a { t } else { n })
        .collect();
    if runs_locally(spec, attrs, b, var_box, &regions(&chosen), outs) {
        alt
    } else {
        none
    }
}
