//! The checks every set of programs passes before anything runs: a
//! verifier with one part per check family.
//!
//! Takes the programs of every rank together with the cost model (graph,
//! model, factors) and decisions they were built from; gives `Ok(())` or the
//! first problem, naming the rank. Checked:
//!
//! * **Headers** (`headers.rs`): format, version, one program per rank, rank
//!   numbers.
//! * **Buffers** (`buffers.rs`): each declared region lies inside its tensor
//!   and has the declared size; each buffer is allocated once, used only
//!   while alive, freed once after its last use; exactly the kept buffers
//!   survive.
//! * **Shares** (`shares.rs`): every compute's index box is the rank's share
//!   of the op under the plan, its input buffers hold exactly the regions the
//!   share reads and its output buffers the boxes it writes.
//! * **Data flow** (`dataflow.rs`, element-exact for buffers up to 2²²
//!   elements): every element read has been written (filled, computed,
//!   copied, received or reduced into); no element of a buffer is assembled
//!   twice by plain copies (each tile is produced exactly once per replica).
//! * **Messages** (`messages.rs`): for every ordered pair of ranks the
//!   sequence of sends (operator, phase, size) equals the peer's sequence of
//!   receives, and each program's exchanges follow the one global
//!   (operator, phase) order, so the grouped send/recv cannot deadlock.
//!   All-to-alls and broadcasts count as their messages here, hold one
//!   message per other rank (all-to-all), and are also collectives every
//!   rank calls in the same order.
//! * **Collectives** (`collectives.rs`): each lies in its buffers and in the
//!   global order, and every rank calls the same ones in the same order.
//! * **Bytes** (`bytes.rs`): the bytes each rank sends equal the planner's
//!   transfers.
//!
//! One program is checked in one walk over its instructions (`Walk`):
//! per instruction the buffer-use check first, then the checks of its kind's
//! family, then its data flow, so the first problem reported is the one of
//! the earliest instruction.
//!
//! [`check_recorded`] checks a loaded plan file before programs are even
//! built (the check itself is [`PlanFile::check_recorded`], with the plan
//! file): the bytes it records per operator and the memory it records per
//! worker must be what its decisions imply, so an edited tile (a split
//! changed to another valid dim, which the file's structural checks cannot
//! see) is caught.

mod buffers;
mod bytes;
mod collectives;
mod dataflow;
mod headers;
mod messages;
mod shares;

use planner::graph::Graph;
use planner::plan::cost::CostModel;
use planner::plan::file::RecordedError;
use planner::plan::model::Model;
use planner::plan::tile::digits;
use planner::plan::{Decisions, PlanFile};

use crate::error::CodegenError;
use crate::generate::Programs;
use crate::program::{Instr, Program};

use buffers::Life;
use dataflow::Flow;

/// Validate programs against the plan they come from (see the module doc):
/// [`validate_in`] with a cost model built here.
///
/// Errors: [`CodegenError::Invalid`] naming the rank and the problem.
pub fn validate(
    graph: &Graph,
    model: &Model,
    factors: &[usize],
    d: &Decisions,
    progs: &Programs,
) -> Result<(), CodegenError> {
    validate_in(&CostModel::new(graph, model, factors), d, progs)
}

/// Validate programs against the plan they come from (see the module doc),
/// with a cost model the caller already built over the plan's graph, model
/// and factors (one rank per worker of `cm.factors()`).
///
/// Errors: [`CodegenError::Invalid`] naming the rank and the problem.
pub fn validate_in(
    cm: &CostModel<'_>,
    d: &Decisions,
    progs: &Programs,
) -> Result<(), CodegenError> {
    let world: usize = cm.factors().iter().product();
    headers::check_count(progs, world)?;
    let mut seqs = messages::Sequences::default();
    let mut calls = Vec::with_capacity(world);
    for (r, p) in progs.programs.iter().enumerate() {
        let bad = |message: String| CodegenError::Invalid { rank: r, message };
        headers::check_header(p, r, world).map_err(bad)?;
        check_program(cm, d, p).map_err(bad)?;
        seqs.record(p, r, world);
        calls.push(collectives::calls(p));
        bytes::check_bytes(p, progs.predicted_bytes_per_rank[r]).map_err(bad)?;
    }
    collectives::check_same_calls(&calls)?;
    seqs.check_pairs()
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

/// One program's own checks (all but the cross-rank ones): its buffer
/// declarations, one walk over its instructions, and the buffers' states at
/// its end. Errors: the problem, without the rank.
fn check_program(cm: &CostModel<'_>, d: &Decisions, p: &Program) -> Result<(), String> {
    let dig = digits(p.rank, cm.factors());
    buffers::check_declarations(cm, d, p, &dig)?;
    buffers::check_carries(p)?;
    let mut w = Walk::new(cm, d, p, dig);
    for (k, ins) in p.instrs.iter().enumerate() {
        w.instr(k, ins)?;
    }
    w.check_end()
}

/// The state of one walk over one program's instructions: what each family
/// tracks from one instruction to the next.
struct Walk<'w, 'a> {
    /// The plan's cost model (graph, model, factors).
    cm: &'w CostModel<'a>,
    /// The plan's decisions.
    d: &'w Decisions,
    /// The program walked.
    p: &'w Program,
    /// This rank's digit per level.
    dig: Vec<usize>,
    /// Each buffer's life so far (buffers).
    life: Vec<Life>,
    /// Each buffer's elements written so far (data flow).
    flow: Flow,
    /// The last (operator, phase) key of an exchange or collective
    /// (messages and collectives: the global order).
    last_key: Option<u64>,
}

impl<'w, 'a> Walk<'w, 'a> {
    fn new(cm: &'w CostModel<'a>, d: &'w Decisions, p: &'w Program, dig: Vec<usize>) -> Self {
        let n = p.buffers.len();
        Walk {
            cm,
            d,
            p,
            dig,
            life: vec![Life::Unborn; n],
            flow: Flow::new(n),
            last_key: None,
        }
    }

    /// The graph the program runs.
    fn graph(&self) -> &'a Graph {
        self.cm.graph()
    }

    /// The name of buffer `b`'s tensor.
    fn name(&self, b: u32) -> String {
        self.graph()
            .tensor(self.p.buffers[b as usize].tensor)
            .name
            .clone()
    }

    /// Instruction `k`: its buffer uses, then its kind's checks.
    fn instr(&mut self, k: usize, ins: &Instr) -> Result<(), String> {
        self.check_uses(k, ins)?;
        match ins {
            Instr::Alloc { buf, init } => self.alloc(k, *buf, init),
            Instr::Free { buf } => {
                self.life[*buf as usize] = Life::Dead;
                Ok(())
            }
            Instr::Copy {
                src,
                dst,
                region,
                reduce,
            } => self.copy(k, *src, *dst, region, reduce.is_some()),
            Instr::Exchange { .. } | Instr::AllToAll { .. } | Instr::Broadcast { .. } => {
                self.exchange(ins)
            }
            Instr::AllReduce {
                op,
                src,
                dst,
                region,
                ..
            } => self.all_reduce(k, *op, *src, *dst, region),
            Instr::ReduceScatter {
                op,
                src,
                dst,
                blocks,
                ..
            } => self.reduce_scatter(k, *op, *src, *dst, blocks),
            Instr::AllGather { op, buf, blocks } => self.all_gather(k, *op, *buf, blocks),
            Instr::Compute { .. } => self.compute(ins),
        }
    }
}
