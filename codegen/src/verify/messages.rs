//! Messages: each program's exchanges (grouped send/recv, all-to-all,
//! broadcast) follow the one global (operator, phase) order and lie inside
//! their buffers, an all-to-all holds one message per other rank, and for
//! every ordered pair of ranks the sequence of sends (operator, phase, size)
//! equals the peer's sequence of receives, so the grouped send/recv cannot
//! deadlock.

use std::collections::HashMap;

use planner::plan::Phase;

use super::buffers::inside;
use super::Walk;
use crate::error::CodegenError;
use crate::program::{Instr, Msg, Program};

/// (phase key, elements) of the messages between two ranks, in order.
type Seq = Vec<(u64, u64)>;

/// The global order of (operator, phase): inputs by slot, then per output
/// slot its `Output` and `Gather` exchanges.
pub(super) fn phase_key(op: u32, phase: Phase) -> u64 {
    let p = match phase {
        Phase::Input { slot } => slot as u64,
        Phase::Output { slot } => (1 << 20) + 2 * slot as u64,
        Phase::Gather { slot } => (1 << 20) + 2 * slot as u64 + 1,
    };
    ((op as u64) << 32) | p
}

/// Per ordered pair of ranks (from, to): the messages the sender sends and
/// the messages the receiver receives, each in program order.
#[derive(Default)]
pub(super) struct Sequences {
    pairs: HashMap<(usize, usize), (Seq, Seq)>,
}

impl Sequences {
    /// Record the sends and receives of program `p`, rank `r` of `world`.
    pub(super) fn record(&mut self, p: &Program, r: usize, world: usize) {
        for ins in &p.instrs {
            let Some((op, phase, sends, recvs)) = ins.messages(r, world) else {
                continue;
            };
            let key = phase_key(op.0, phase);
            for m in sends {
                let seq = &mut self.pairs.entry((r, m.peer)).or_default().0;
                seq.push((key, m.region.volume()));
            }
            for m in recvs {
                let seq = &mut self.pairs.entry((m.peer, r)).or_default().1;
                seq.push((key, m.region.volume()));
            }
        }
    }

    /// For every ordered pair, the sends equal the receives.
    ///
    /// Errors: [`CodegenError::Invalid`] at the sender of the first pair (in
    /// rank order) that differs, naming the first message that differs.
    pub(super) fn check_pairs(self) -> Result<(), CodegenError> {
        let mut pairs: Vec<_> = self.pairs.into_iter().collect();
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
}

impl Walk<'_, '_> {
    /// An exchange, all-to-all or broadcast: a broadcast's root is a rank,
    /// an all-to-all holds one message per other rank in rank order, the
    /// exchange comes after the last one in the global order, and every
    /// message lies in its buffer and goes to another rank; then its data
    /// flow (the sends read, the receives written).
    pub(super) fn exchange(&mut self, ins: &Instr) -> Result<(), String> {
        let p = self.p;
        let Some((op, phase, sends, recvs)) = ins.messages(p.rank, p.world) else {
            return Ok(());
        };
        let graph = self.graph();
        let op_name = || &graph.op(op).name;
        if let Instr::Broadcast { root, .. } = ins {
            if *root >= p.world {
                return Err(format!(
                    "broadcast of op `{}` from rank {root} of {}",
                    op_name(),
                    p.world
                ));
            }
        }
        let others: Vec<usize> = (0..p.world).filter(|&j| j != p.rank).collect();
        let peers = |m: &[Msg]| m.iter().map(|x| x.peer).collect::<Vec<_>>();
        if matches!(ins, Instr::AllToAll { .. })
            && (peers(&sends) != others || peers(&recvs) != others)
        {
            return Err(format!(
                "all-to-all of op `{}` {phase:?} does not hold one message per other rank in rank order",
                op_name()
            ));
        }
        let key = phase_key(op.0, phase);
        if self.last_key.is_some_and(|l| l >= key) {
            return Err(format!(
                "exchange of op `{}` {phase:?} is out of the global order",
                op_name()
            ));
        }
        self.last_key = Some(key);
        for m in sends.iter().chain(&recvs) {
            let b = &p.buffers[m.buf as usize];
            if !inside(&m.region, &b.region) || m.peer >= p.world || m.peer == p.rank {
                return Err(format!(
                    "message {:?} with rank {} does not fit buffer of `{}` {:?}",
                    m.region.0,
                    m.peer,
                    self.name(m.buf),
                    b.region.0
                ));
            }
        }
        let at = |e: String| format!("exchange of op `{}` {phase:?}: {e}", op_name());
        for m in &sends {
            self.flow.read(p, m.buf, &m.region).map_err(at)?;
        }
        for m in &recvs {
            self.flow
                .write(p, m.buf, &m.region, m.reduce.is_some())
                .map_err(at)?;
        }
        Ok(())
    }
}
