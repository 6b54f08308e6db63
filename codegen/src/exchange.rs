//! Emitting one (operator, phase)'s point-to-point transfers on one rank:
//! as an all-to-all or a flat broadcast where the transfers over all ranks
//! form that pattern (`crate::collectives::recognise_exchange`), else as one
//! grouped send/recv ([`Instr::Exchange`]).

use planner::graph::OpId;
use planner::plan::{Phase, Transfer};

use crate::collectives::{recognise_exchange, ExchangeCollective};
use crate::error::CodegenError;
use crate::generate::RankGen;
use crate::program::{BufId, Instr, Msg};

impl RankGen<'_> {
    /// One grouped exchange of this rank's part of `ts` (nothing if none).
    pub(crate) fn exchange(
        &mut self,
        op: OpId,
        phase: Phase,
        ts: &[&Transfer],
        send_buf: impl Fn(&Transfer) -> Option<BufId>,
        recv_buf: impl Fn(&Transfer) -> Option<BufId>,
    ) -> Result<(), CodegenError> {
        let mut sends: Vec<Msg> = Vec::new();
        let mut recvs: Vec<Msg> = Vec::new();
        for t in ts {
            let missing = |what: &str| CodegenError::Invalid {
                rank: self.rank,
                message: format!(
                    "op `{}`: a transfer of `{}` has no {what} buffer on this rank",
                    self.graph.op(op).name,
                    self.graph.tensor(t.tensor).name
                ),
            };
            if t.src == self.rank {
                let buf = send_buf(t).ok_or_else(|| missing("source"))?;
                sends.push(Msg {
                    peer: t.dst,
                    buf,
                    region: t.region.clone(),
                    reduce: None,
                });
            }
            if t.dst == self.rank {
                let buf = recv_buf(t).ok_or_else(|| missing("destination"))?;
                recvs.push(Msg {
                    peer: t.src,
                    buf,
                    region: t.region.clone(),
                    reduce: t.reduce,
                });
            }
        }
        if sends.is_empty() && recvs.is_empty() {
            return Ok(());
        }
        let ins = match recognise_exchange(ts, self.world) {
            Some(ExchangeCollective::AllToAll) => {
                sends.sort_by_key(|m| m.peer);
                recvs.sort_by_key(|m| m.peer);
                Instr::AllToAll {
                    op,
                    phase,
                    sends,
                    recvs,
                }
            }
            Some(ExchangeCollective::Broadcast { root }) => {
                let m = if root == self.rank { &sends } else { &recvs };
                if m.iter().any(|x| x.buf != m[0].buf) {
                    return Err(CodegenError::Invalid {
                        rank: self.rank,
                        message: format!(
                            "op `{}`: the broadcast's messages use different buffers",
                            self.graph.op(op).name
                        ),
                    });
                }
                Instr::Broadcast {
                    op,
                    phase,
                    root,
                    buf: m[0].buf,
                    region: m[0].region.clone(),
                    reduce: m[0].reduce,
                }
            }
            None => Instr::Exchange {
                op,
                phase,
                sends,
                recvs,
            },
        };
        self.instrs.push(ins);
        Ok(())
    }
}
