//! Lowering of ai.onnx.ml's tensor functions: ArrayFeatureExtractor
//! (`take_last`). Binarizer is a unary row of the table.

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::shape;
use crate::mapping::Mapping;
use crate::node::Node;

/// ArrayFeatureExtractor: y[..., k] = x[..., ids[k]] with the indices
/// flattened; a 1-D x is read as [1, N] (ONNX's reference).
pub fn array_feature_extractor(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let (Some(xn), Some(idn)) = (n.input(0), n.input(1)) else {
        return unsupported("both inputs are required");
    };
    let (sx, si) = (shape(l, xn)?, shape(l, idn)?);
    let k: usize = si.iter().product();
    if sx.is_empty() || sx.contains(&0) || k == 0 {
        return unsupported(format!("data of shape {sx:?} with indices of shape {si:?}"));
    }
    let x = l.tensor(xn)?;
    let x = if sx.len() == 1 {
        l.reshape(x, &[1, sx[0]])?
    } else {
        x
    };
    let ids = l.tensor(idn)?;
    let ids = l.reshape(ids, &[k])?;
    Ok(vec![Out::T(l.emit1("take_last", &[x, ids], &[])?)])
}
