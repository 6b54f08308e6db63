//! The checks every set of programs passes before anything runs.
//!
//! Takes the programs of every rank together with the graph, model, factors
//! and decisions they were built from; gives `Ok(())` or the first problem,
//! naming the rank. Checked:
//!
//! * **Headers**: format, version, one program per rank, rank numbers.
//! * **Buffers**: each declared region lies inside its tensor and has the
//!   declared size; each buffer is allocated once, used only while alive,
//!   freed once after its last use; exactly the kept buffers survive.
//! * **Shares**: every compute's index box is the rank's share of the op
//!   under the plan, its input buffers hold exactly the regions the share
//!   reads and its output buffers the boxes it writes.
//! * **Data flow** (element-exact for buffers up to 2²² elements): every
//!   element read has been written (filled, computed, copied, received or
//!   reduced into); no element of a buffer is assembled twice by plain copies
//!   (each tile is produced exactly once per replica).
//! * **Messages**: for every ordered pair of ranks the sequence of sends
//!   (operator, phase, size) equals the peer's sequence of receives, and each
//!   program's exchanges follow the one global (operator, phase) order, so
//!   the grouped send/recv cannot deadlock. All-to-alls and broadcasts count
//!   as their messages here, hold one message per other rank (all-to-all),
//!   and are also collectives every rank calls in the same order.
//! * **Bytes**: the bytes each rank sends equal the planner's transfers.
//!
//! [`check_recorded`] checks a loaded plan file before programs are even
//! built (the check itself is [`PlanFile::check_recorded`], with the plan
//! file): the bytes it records per operator and the memory it records per
//! worker must be what its decisions imply, so an edited tile (a split
//! changed to another valid dim, which the file's structural checks cannot
//! see) is caught.

use std::collections::HashMap;

use planner::graph::Graph;
use planner::plan::cost::CostModel;
use planner::plan::file::RecordedError;
use planner::plan::model::Model;
use planner::plan::tile::{digits, Region};
use planner::plan::{Decisions, Phase, PlanFile};
use tdl::multi_index::next_index;

use crate::error::CodegenError;
use crate::generate::Programs;
use crate::program::{Init, Instr, KernelMode, Program, FORMAT, VERSION};

/// (phase key, elements) of the messages between two ranks, in order.
type Seq = Vec<(u64, u64)>;

/// Buffers above this many elements get no element-exact data-flow check.
const EXACT_LIMIT: u64 = 1 << 22;

/// Validate programs against the plan they come from (see the module doc).
///
/// Errors: [`CodegenError::Invalid`] naming the rank and the problem.
pub fn validate(
    graph: &Graph,
    model: &Model,
    factors: &[usize],
    d: &Decisions,
    progs: &Programs,
) -> Result<(), CodegenError> {
    let world: usize = factors.iter().product();
    if progs.programs.len() != world {
        return Err(CodegenError::Invalid {
            rank: 0,
            message: format!("{} programs for {world} ranks", progs.programs.len()),
        });
    }
    let cm = CostModel::new(graph, model, factors);
    let mut seqs: HashMap<(usize, usize), (Seq, Seq)> = HashMap::new();
    // Every rank's collectives: (op, kind, counts), in program order.
    let mut collectives: Vec<Vec<(u32, &'static str, Vec<u64>)>> = Vec::new();
    for (r, p) in progs.programs.iter().enumerate() {
        let bad = |message: String| CodegenError::Invalid { rank: r, message };
        if p.format != FORMAT || p.version != VERSION || p.rank != r || p.world != world {
            return Err(bad(format!(
                "header {} v{} rank {} of {}",
                p.format, p.version, p.rank, p.world
            )));
        }
        check_program(graph, model, &cm, factors, d, p).map_err(bad)?;
        for ins in &p.instrs {
            if let Some((op, phase, sends, recvs)) = ins.messages(r, world) {
                let key = phase_key(op.0, phase);
                for m in sends {
                    seqs.entry((r, m.peer))
                        .or_default()
                        .0
                        .push((key, m.region.volume()));
                }
                for m in recvs {
                    seqs.entry((m.peer, r))
                        .or_default()
                        .1
                        .push((key, m.region.volume()));
                }
            }
        }
        collectives.push(
            p.instrs
                .iter()
                .filter_map(|i| match i {
                    Instr::AllReduce { op, region, .. } => {
                        Some((op.0, "all-reduce", vec![region.volume()]))
                    }
                    Instr::ReduceScatter { op, blocks, .. } => Some((
                        op.0,
                        "reduce-scatter",
                        blocks.iter().map(Region::volume).collect(),
                    )),
                    Instr::AllGather { op, blocks, .. } => Some((
                        op.0,
                        "all-gather",
                        blocks.iter().map(Region::volume).collect(),
                    )),
                    Instr::AllToAll { op, phase, .. } => {
                        Some((op.0, "all-to-all", vec![phase_key(op.0, *phase)]))
                    }
                    Instr::Broadcast {
                        op,
                        phase,
                        root,
                        region,
                        ..
                    } => Some((
                        op.0,
                        "broadcast",
                        vec![phase_key(op.0, *phase), *root as u64, region.volume()],
                    )),
                    _ => None,
                })
                .collect(),
        );
        if p.bytes_sent() != progs.predicted_bytes_per_rank[r] {
            return Err(bad(format!(
                "sends {} bytes per step, the plan's transfers say {}",
                p.bytes_sent(),
                progs.predicted_bytes_per_rank[r]
            )));
        }
    }
    if let Some(r) = (1..collectives.len()).find(|&r| collectives[r] != collectives[0]) {
        return Err(CodegenError::Invalid {
            rank: r,
            message: format!(
                "its collectives {:?} differ from rank 0's {:?} (every rank must call the same collectives in the same order)",
                collectives[r], collectives[0]
            ),
        });
    }
    let mut pairs: Vec<_> = seqs.into_iter().collect();
    pairs.sort_by_key(|p| p.0);
    for ((a, b), (sends, recvs)) in pairs {
        if sends != recvs {
            let i = sends
                .iter()
                .zip(&recvs)
                .position(|(x, y)| x != y)
                .unwrap_or(sends.len().min(recvs.len()));
            return Err(CodegenError::Invalid {
                rank: a,
                message: format!(
                    "message {i} from rank {a} to rank {b} does not match: {} sends vs {} receives (first difference: send {:?}, receive {:?} as (phase key, elements))",
                    sends.len(),
                    recvs.len(),
                    sends.get(i),
                    recvs.get(i)
                ),
            });
        }
    }
    Ok(())
}

/// Check that a plan file's recorded costs are the ones its decisions imply:
/// [`PlanFile::check_recorded`] (the check lives with the plan file), its
/// errors as codegen's.
///
/// Errors: [`CodegenError::Tampered`] naming the first operator or worker
/// whose record differs; [`CodegenError::Mismatch`] when the file's lists do
/// not have one entry per operator or worker.
pub fn check_recorded(
    file: &PlanFile,
    graph: &Graph,
    model: &Model,
    d: &Decisions,
) -> Result<(), CodegenError> {
    file.check_recorded(graph, model, d).map_err(|e| match e {
        RecordedError::Mismatch(m) => CodegenError::Mismatch(m),
        RecordedError::Tampered(m) => CodegenError::Tampered(m),
    })
}

/// The global order of (operator, phase): inputs by slot, then per output
/// slot its `Output` and `Gather` exchanges.
/// A collective of `op` must come after every exchange of earlier ops (the
/// one global order every rank follows).
fn collective_key(
    graph: &Graph,
    op: planner::graph::OpId,
    last: &mut Option<u64>,
) -> Result<(), String> {
    if op.index() >= graph.ops().len() {
        return Err(format!(
            "collective of op {} of {}",
            op.0,
            graph.ops().len()
        ));
    }
    let first = phase_key(op.0, Phase::Input { slot: 0 });
    let next_op = phase_key(op.0 + 1, Phase::Input { slot: 0 });
    if last.is_some_and(|l| l >= next_op) {
        return Err(format!(
            "collective of op `{}` is out of the global order",
            graph.op(op).name
        ));
    }
    *last = Some(last.map_or(first, |l| l.max(first)));
    Ok(())
}

fn phase_key(op: u32, phase: Phase) -> u64 {
    let p = match phase {
        Phase::Input { slot } => slot as u64,
        Phase::Output { slot } => (1 << 20) + 2 * slot as u64,
        Phase::Gather { slot } => (1 << 20) + 2 * slot as u64 + 1,
    };
    ((op as u64) << 32) | p
}

#[derive(Clone, Copy, PartialEq)]
enum Life {
    Unborn,
    Alive,
    Dead,
}

/// Per-element write state: 0 unwritten, 1 filled/computed, 2 assembled by copy, 3 reduced into.
struct Flow {
    bits: Vec<Option<Vec<u8>>>,
}

fn elements(buf: &Region, r: &Region, mut f: impl FnMut(usize)) {
    let ext: Vec<i64> = buf.0.iter().map(|&(l, h)| h - l).collect();
    let rank = ext.len();
    if r.volume() == 0 {
        return;
    }
    let mut idx: Vec<i64> = r.0.iter().map(|&(l, _)| l).collect();
    loop {
        let mut off = 0i64;
        for d in 0..rank {
            off = off * ext[d] + (idx[d] - buf.0[d].0);
        }
        f(off as usize);
        if !next_index(&mut idx, &r.0) {
            return;
        }
    }
}

fn inside(inner: &Region, outer: &Region) -> bool {
    inner.0.len() == outer.0.len()
        && (inner.volume() == 0
            || inner
                .0
                .iter()
                .zip(&outer.0)
                .all(|(&(a, b), &(c, d))| a >= c && b <= d))
}

fn check_program(
    graph: &Graph,
    model: &Model,
    cm: &CostModel,
    factors: &[usize],
    d: &Decisions,
    p: &Program,
) -> Result<(), String> {
    let dig = digits(p.rank, factors);
    for (i, b) in p.buffers.iter().enumerate() {
        if b.tensor.index() >= graph.tensors().len() {
            return Err(format!(
                "buffer {i} names tensor {} of {}",
                b.tensor.0,
                graph.tensors().len()
            ));
        }
        let t = graph.tensor(b.tensor);
        let whole = Region::whole(&t.shape);
        if b.region.0.len() != t.shape.len()
            || !inside(&b.region, &whole)
            || b.region.0.iter().any(|&(l, h)| h < l)
        {
            return Err(format!(
                "buffer {i} region {:?} is not inside `{}` {:?}",
                b.region.0, t.name, t.shape
            ));
        }
        if b.elems != b.region.volume() {
            return Err(format!(
                "buffer {i} of `{}` declares {} elements for a region of {}",
                t.name,
                b.elems,
                b.region.volume()
            ));
        }
        if b.tile {
            let tile = CostModel::tile(&t.shape, &d.tensors[b.tensor.index()], factors, &dig);
            if tile != b.region {
                return Err(format!(
                    "tile of `{}` is {:?} but the plan gives this rank {:?}",
                    t.name, b.region.0, tile.0
                ));
            }
        }
    }
    let n = p.buffers.len();
    let mut life = vec![Life::Unborn; n];
    let mut flow = Flow {
        bits: vec![None; n],
    };
    let name = |b: u32| graph.tensor(p.buffers[b as usize].tensor).name.clone();
    let mut last_key = None;
    for (k, ins) in p.instrs.iter().enumerate() {
        for b in ins.buffers() {
            if b as usize >= n {
                return Err(format!("instruction {k} uses buffer {b} of {n}"));
            }
            let ok = match ins {
                Instr::Alloc { .. } => life[b as usize] == Life::Unborn,
                _ => life[b as usize] == Life::Alive,
            };
            if !ok {
                return Err(format!("instruction {k} ({}) uses buffer {b} of `{}` while it is not alive (or allocates it twice)", kind(ins), name(b)));
            }
        }
        match ins {
            Instr::Alloc { buf, init } => {
                life[*buf as usize] = Life::Alive;
                if let Init::Fill(f) = init {
                    let t = graph.tensor(p.buffers[*buf as usize].tensor);
                    if Some(f.fill) != t.fill {
                        return Err(format!(
                            "instruction {k} fills `{}` with {:?}; the graph says {:?}",
                            t.name, f.fill, t.fill
                        ));
                    }
                }
                let e = p.buffers[*buf as usize].elems;
                if e <= EXACT_LIMIT {
                    let v = if matches!(init, Init::Fill(_)) { 1 } else { 0 };
                    flow.bits[*buf as usize] = Some(vec![v; e as usize]);
                }
            }
            Instr::Free { buf } => life[*buf as usize] = Life::Dead,
            Instr::Copy {
                src,
                dst,
                region,
                reduce,
            } => {
                let (s, t) = (&p.buffers[*src as usize], &p.buffers[*dst as usize]);
                if s.tensor != t.tensor || !inside(region, &s.region) || !inside(region, &t.region)
                {
                    return Err(format!(
                        "copy of {:?} from `{}` {:?} into `{}` {:?} is out of place",
                        region.0,
                        name(*src),
                        s.region.0,
                        name(*dst),
                        t.region.0
                    ));
                }
                flow.read(p, *src, region)
                    .map_err(|e| format!("instruction {k} (copy): {e}"))?;
                flow.write(p, *dst, region, reduce.is_some())
                    .map_err(|e| format!("instruction {k} (copy): {e}"))?;
            }
            Instr::Exchange { .. } | Instr::AllToAll { .. } | Instr::Broadcast { .. } => {
                let Some((op, phase, sends, recvs)) = ins.messages(p.rank, p.world) else {
                    continue;
                };
                let op = &op;
                if let Instr::Broadcast { root, .. } = ins {
                    if *root >= p.world {
                        return Err(format!(
                            "broadcast of op `{}` from rank {root} of {}",
                            graph.op(*op).name,
                            p.world
                        ));
                    }
                }
                let others: Vec<usize> = (0..p.world).filter(|&j| j != p.rank).collect();
                let peers =
                    |m: &[crate::program::Msg]| m.iter().map(|x| x.peer).collect::<Vec<_>>();
                if matches!(ins, Instr::AllToAll { .. })
                    && (peers(&sends) != others || peers(&recvs) != others)
                {
                    return Err(format!(
                        "all-to-all of op `{}` {phase:?} does not hold one message per other rank in rank order",
                        graph.op(*op).name
                    ));
                }
                let key = phase_key(op.0, phase);
                if last_key.is_some_and(|l| l >= key) {
                    return Err(format!(
                        "exchange of op `{}` {phase:?} is out of the global order",
                        graph.op(*op).name
                    ));
                }
                last_key = Some(key);
                for m in sends.iter().chain(&recvs) {
                    let b = &p.buffers[m.buf as usize];
                    if !inside(&m.region, &b.region) || m.peer >= p.world || m.peer == p.rank {
                        return Err(format!(
                            "message {:?} with rank {} does not fit buffer of `{}` {:?}",
                            m.region.0,
                            m.peer,
                            name(m.buf),
                            b.region.0
                        ));
                    }
                }
                for m in &sends {
                    flow.read(p, m.buf, &m.region).map_err(|e| {
                        format!("exchange of op `{}` {phase:?}: {e}", graph.op(*op).name)
                    })?;
                }
                for m in &recvs {
                    flow.write(p, m.buf, &m.region, m.reduce.is_some())
                        .map_err(|e| {
                            format!("exchange of op `{}` {phase:?}: {e}", graph.op(*op).name)
                        })?;
                }
            }
            Instr::AllReduce {
                op,
                src,
                dst,
                region,
                ..
            } => {
                collective_key(graph, *op, &mut last_key)?;
                let (s, t) = (&p.buffers[*src as usize], &p.buffers[*dst as usize]);
                if s.tensor != t.tensor || !inside(region, &s.region) || t.region != *region {
                    return Err(format!(
                        "all-reduce of {:?} from `{}` {:?} into {:?} is out of place",
                        region.0,
                        name(*src),
                        s.region.0,
                        t.region.0
                    ));
                }
                flow.read(p, *src, region)
                    .map_err(|e| format!("instruction {k} (all-reduce): {e}"))?;
                flow.write(p, *dst, region, false)
                    .map_err(|e| format!("instruction {k} (all-reduce): {e}"))?;
            }
            Instr::ReduceScatter {
                op,
                src,
                dst,
                blocks,
                ..
            } => {
                collective_key(graph, *op, &mut last_key)?;
                let (s, t) = (&p.buffers[*src as usize], &p.buffers[*dst as usize]);
                let mine = blocks
                    .get(p.rank)
                    .ok_or("reduce-scatter without this rank's block")?;
                if s.tensor != t.tensor
                    || blocks.len() != p.world
                    || blocks
                        .iter()
                        .any(|b| b.volume() > 0 && !inside(b, &s.region))
                    || (mine.volume() > 0 && !inside(mine, &t.region))
                {
                    return Err(format!(
                        "reduce-scatter of blocks {blocks:?} from `{}` {:?} into {:?} is out of place",
                        name(*src),
                        s.region.0,
                        t.region.0
                    ));
                }
                for b in blocks.iter().filter(|b| b.volume() > 0) {
                    flow.read(p, *src, b)
                        .map_err(|e| format!("instruction {k} (reduce-scatter): {e}"))?;
                }
                if mine.volume() > 0 {
                    flow.write(p, *dst, mine, false)
                        .map_err(|e| format!("instruction {k} (reduce-scatter): {e}"))?;
                }
            }
            Instr::AllGather { op, buf, blocks } => {
                collective_key(graph, *op, &mut last_key)?;
                let b = &p.buffers[*buf as usize];
                if blocks.len() != p.world
                    || blocks
                        .iter()
                        .any(|x| x.volume() > 0 && !inside(x, &b.region))
                {
                    return Err(format!(
                        "all-gather of blocks {blocks:?} into `{}` {:?} is out of place",
                        name(*buf),
                        b.region.0
                    ));
                }
                for (j, x) in blocks.iter().enumerate().filter(|(_, x)| x.volume() > 0) {
                    if j == p.rank {
                        flow.read(p, *buf, x)
                            .map_err(|e| format!("instruction {k} (all-gather): {e}"))?;
                    } else {
                        flow.write(p, *buf, x, false)
                            .map_err(|e| format!("instruction {k} (all-gather): {e}"))?;
                    }
                }
            }
            Instr::Compute {
                op,
                spec,
                attrs,
                shapes,
                var_box,
                inputs,
                outputs,
                mode,
                ..
            } => {
                if op.index() >= graph.ops().len() {
                    return Err(format!("compute of op {} of {}", op.0, graph.ops().len()));
                }
                let o = graph.op(*op);
                let spec_name = p.specs.get(*spec as usize).map(|s| s.name.as_str());
                if spec_name != Some(o.spec.as_str())
                    || *attrs != o.attrs
                    || *shapes != graph.input_shapes(o)
                {
                    return Err(format!(
                        "compute of `{}` carries spec {spec_name:?}, attributes {attrs:?} and input shapes {shapes:?}; the graph has `{}`, {:?}, {:?}",
                        o.name,
                        o.spec,
                        o.attrs,
                        graph.input_shapes(o)
                    ));
                }
                let want = cm.op_box(*op, &d.ops[op.index()], &dig);
                if *var_box != want {
                    return Err(format!(
                        "compute of `{}` over {var_box:?}, but this rank's share is {want:?}",
                        o.name
                    ));
                }
                let access = &model.op(*op).access;
                if inputs.len() != o.inputs.len() || outputs.len() != o.outputs.len() {
                    return Err(format!(
                        "compute of `{}` with the wrong number of buffers",
                        o.name
                    ));
                }
                for (slot, &b) in inputs.iter().enumerate() {
                    let buf = &p.buffers[b as usize];
                    let need = access.input_region(slot, var_box);
                    // A local kernel reads its whole buffer, which may be a
                    // tile holding more than the share needs.
                    let fits = match mode {
                        KernelMode::Window => buf.region == need,
                        KernelMode::Local => need.intersect(&buf.region) == need,
                    };
                    if buf.tensor != o.inputs[slot] || !fits {
                        return Err(format!("compute of `{}`: input {slot} buffer holds `{}` {:?}, the share reads {:?}", o.name, name(b), buf.region.0, need.0));
                    }
                    let read = match mode {
                        KernelMode::Window => &need,
                        KernelMode::Local => &buf.region,
                    };
                    flow.read(p, b, read)
                        .map_err(|e| format!("compute of `{}`: {e}", o.name))?;
                }
                for (slot, &b) in outputs.iter().enumerate() {
                    let buf = &p.buffers[b as usize];
                    let (region, _) = access.output_region(slot, var_box);
                    if buf.tensor != o.outputs[slot] || buf.region != region {
                        return Err(format!("compute of `{}`: output {slot} buffer holds {:?}, the share writes {:?}", o.name, buf.region.0, region.0));
                    }
                    if let Some(bits) = &mut flow.bits[b as usize] {
                        bits.iter_mut().for_each(|x| *x = 1);
                    }
                }
            }
        }
    }
    for (b, l) in life.iter().enumerate() {
        let kept = p.keep.contains(&(b as u32));
        match (l, kept) {
            (Life::Alive, false) => {
                return Err(format!("buffer {b} of `{}` is never freed", name(b as u32)))
            }
            (Life::Dead, true) => {
                return Err(format!("kept buffer {b} of `{}` is freed", name(b as u32)))
            }
            (Life::Unborn, _) => {
                return Err(format!(
                    "buffer {b} of `{}` is never allocated",
                    name(b as u32)
                ))
            }
            _ => {}
        }
        if kept {
            let r = p.buffers[b].region.clone();
            flow.read(p, b as u32, &r)
                .map_err(|e| format!("kept {e}"))?;
        }
    }
    // Frees come right after last use: no instruction after a free uses the buffer (checked above).
    Ok(())
}

fn kind(i: &Instr) -> &'static str {
    match i {
        Instr::Alloc { .. } => "alloc",
        Instr::Exchange { .. } => "exchange",
        Instr::Copy { .. } => "copy",
        Instr::Compute { .. } => "compute",
        Instr::Free { .. } => "free",
        Instr::AllReduce { .. } => "all-reduce",
        Instr::ReduceScatter { .. } => "reduce-scatter",
        Instr::AllGather { .. } => "all-gather",
        Instr::AllToAll { .. } => "all-to-all",
        Instr::Broadcast { .. } => "broadcast",
    }
}

impl Flow {
    fn read(&self, p: &Program, b: u32, r: &Region) -> Result<(), String> {
        let Some(bits) = &self.bits[b as usize] else {
            return Ok(());
        };
        let buf = &p.buffers[b as usize];
        let mut missing = 0u64;
        elements(&buf.region, r, |i| missing += (bits[i] == 0) as u64);
        if missing > 0 {
            return Err(format!("{missing} elements of {:?} of a buffer of tensor {} are read before anything writes them", r.0, buf.tensor.0));
        }
        Ok(())
    }

    fn write(&mut self, p: &Program, b: u32, r: &Region, reduce: bool) -> Result<(), String> {
        let buf = &p.buffers[b as usize];
        let Some(bits) = &mut self.bits[b as usize] else {
            return Ok(());
        };
        let mut twice = 0u64;
        elements(&buf.region, r, |i| {
            if reduce {
                if bits[i] == 2 {
                    twice += 1;
                }
                bits[i] = 3;
            } else {
                if bits[i] >= 2 {
                    twice += 1;
                }
                bits[i] = 2;
            }
        });
        if twice > 0 {
            return Err(format!(
                "{twice} elements of {:?} of a buffer of tensor {} are assembled twice",
                r.0, buf.tensor.0
            ));
        }
        Ok(())
    }
}
