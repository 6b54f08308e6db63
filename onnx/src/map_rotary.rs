//! Lowering of ONNX RotaryEmbedding (opset 23) onto `rotary`
//! (`specs/attention.tdl`).
//!
//! The input is brought to [B, S, H, D]: a 4-D [B, H, S, D] input has its
//! head and sequence axes swapped, a 3-D [B, S, hidden] one is viewed as
//! [B, S, num_heads, hidden / num_heads]; the result goes back the same way.
//! With `position_ids` [B, S] the caches [max_position, R2] are read at the
//! positions (`embedding`, so the caches get scatter-add gradients), without
//! them they are [B, S, R2] already. `rotary_embedding_dim` = 0 rotates the
//! whole head.

use graph::int;

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::input;
use crate::mapping::Mapping;
use crate::node::Node;

/// Lower a RotaryEmbedding node (see the module doc).
pub fn rotary_embedding(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let sx = l.shape(x);
    let heads = n.attrs.int("num_heads", 0);
    let xb = match sx.len() {
        4 => l.permute(x, &[0, 2, 1, 3])?,
        3 if heads > 0 && sx[2].is_multiple_of(heads as usize) => {
            let h = heads as usize;
            l.reshape(x, &[sx[0], sx[1], h, sx[2] / h])?
        }
        r => {
            return unsupported(format!(
                "a rank-{r} input with num_heads = {heads} (4-D, or 3-D with num_heads dividing the hidden size)"
            ))
        }
    };
    let sb = l.shape(xb);
    let (mut cos, mut sin) = (input(l, n, 1)?, input(l, n, 2)?);
    if n.input(3).is_some() {
        let pos = input(l, n, 3)?;
        cos = l.emit1("embedding", &[cos, pos], &[])?;
        sin = l.emit1("embedding", &[sin, pos], &[])?;
    }
    let rot = match n.attrs.int("rotary_embedding_dim", 0) {
        0 => sb[3] as i64,
        r => r,
    };
    let (sc, ss) = (l.shape(cos), l.shape(sin));
    if rot % 2 != 0
        || rot as usize > sb[3]
        || sc != ss
        || sc.len() != 3
        || sc[..2] != sb[..2]
        || (sc[2] as i64) < rot / 2
    {
        return unsupported(format!(
            "rotary dim {rot} of a head of {} with caches of shape {sc:?} / {ss:?}",
            sb[3]
        ));
    }
    let attrs = [
        ("rot", int(rot)),
        ("interleaved", int(n.attrs.int("interleaved", 0))),
    ];
    let y = l.emit1("rotary", &[xb, cos, sin], &attrs)?;
    let y = if sx.len() == 4 {
        l.permute(y, &[0, 2, 1, 3])?
    } else {
        l.reshape(y, &sx)?
    };
    Ok(vec![Out::T(y)])
}
