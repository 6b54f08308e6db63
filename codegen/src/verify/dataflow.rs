//! Data flow: element-exact for buffers up to [`EXACT_LIMIT`] elements,
//! every element read has been written (filled, computed, copied, received
//! or reduced into), and no element of a buffer is assembled twice by plain
//! copies (each tile is produced exactly once per replica).
//!
//! [`Flow`] holds each buffer's per-element write state; the walk
//! ([`super::Walk`]) reports every read and write of an instruction to it.

use planner::plan::tile::Region;
use tdl::multi_index::next_index;

use crate::program::{BufId, Init, Program};

/// Buffers above this many elements get no element-exact data-flow check.
pub(super) const EXACT_LIMIT: u64 = 1 << 22;

/// Per-element write state: 0 unwritten, 1 filled/computed, 2 assembled by
/// copy, 3 reduced into; `None` for a buffer not yet allocated or above
/// [`EXACT_LIMIT`].
pub(super) struct Flow {
    bits: Vec<Option<Vec<u8>>>,
}

impl Flow {
    /// No buffer tracked yet, of `n`.
    pub(super) fn new(n: usize) -> Self {
        Flow {
            bits: vec![None; n],
        }
    }

    /// Buffer `b` of `elems` elements is allocated with `init`: every
    /// element written if it is filled, none otherwise.
    pub(super) fn alloc(&mut self, b: BufId, elems: u64, init: &Init) {
        if elems <= EXACT_LIMIT {
            let v = if matches!(init, Init::Fill(_)) { 1 } else { 0 };
            self.bits[b as usize] = Some(vec![v; elems as usize]);
        }
    }

    /// Every element of buffer `b` is written by a compute.
    pub(super) fn computed(&mut self, b: BufId) {
        if let Some(bits) = &mut self.bits[b as usize] {
            bits.iter_mut().for_each(|x| *x = 1);
        }
    }

    /// Region `r` of buffer `b` is read. Errors: how many of its elements
    /// nothing has written.
    pub(super) fn read(&self, p: &Program, b: BufId, r: &Region) -> Result<(), String> {
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

    /// Region `r` of buffer `b` is written: reduced into with `reduce`,
    /// else assembled by copy. Errors: how many of its elements were
    /// assembled already (a reduction into an assembled element, or a copy
    /// over an assembled or reduced one).
    pub(super) fn write(
        &mut self,
        p: &Program,
        b: BufId,
        r: &Region,
        reduce: bool,
    ) -> Result<(), String> {
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

/// Calls `f` with the row-major offset in a buffer holding `buf` of every
/// element of `r` (inside `buf`).
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
