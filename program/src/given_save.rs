//! Tensors to a safetensors file, the reverse of [`crate::given`]: a run's
//! values (row-major f32, as the runner holds every tensor) written at
//! their graph element types, so another runtime reads them as the model's
//! types (i64 token ids, bool masks) and [`crate::given::from_safetensors`]
//! reads them back.

use std::collections::HashMap;

use graph::DType;
use safetensors::{Dtype, View};

/// One named tensor to write: name, element type, shape, row-major values.
pub type Named = (String, DType, Vec<usize>, Vec<f32>);

/// Why tensors cannot be written.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SaveError {
    /// The values do not fill the shape.
    #[error("tensor `{name}` has {got} values but its shape {shape:?} holds {want}")]
    Count {
        /// The tensor.
        name: String,
        /// Values given.
        got: usize,
        /// Elements of the shape.
        want: usize,
        /// The shape.
        shape: Vec<usize>,
    },
    /// The safetensors writer failed (e.g. a name given twice).
    #[error("cannot write safetensors: {0}")]
    Format(String),
}

/// A tensor converted to its element type's little-endian bytes.
struct Bytes {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Bytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// The bytes of `values` at element type `dtype` (integers and booleans
/// rounded from the f32 the runner computes in).
fn encode(dtype: DType, values: &[f32]) -> (Dtype, Vec<u8>) {
    let mut out = Vec::new();
    let d = match dtype {
        DType::F32 => {
            values.iter().for_each(|v| out.extend(v.to_le_bytes()));
            Dtype::F32
        }
        DType::F64 => {
            values
                .iter()
                .for_each(|&v| out.extend((v as f64).to_le_bytes()));
            Dtype::F64
        }
        DType::F16 => {
            values
                .iter()
                .for_each(|&v| out.extend(half::f16::from_f32(v).to_le_bytes()));
            Dtype::F16
        }
        DType::Bf16 => {
            values
                .iter()
                .for_each(|&v| out.extend(half::bf16::from_f32(v).to_le_bytes()));
            Dtype::BF16
        }
        DType::I64 => {
            values
                .iter()
                .for_each(|&v| out.extend((v.round() as i64).to_le_bytes()));
            Dtype::I64
        }
        DType::I32 => {
            values
                .iter()
                .for_each(|&v| out.extend((v.round() as i32).to_le_bytes()));
            Dtype::I32
        }
        DType::U8 => {
            out.extend(values.iter().map(|&v| v.round().clamp(0.0, 255.0) as u8));
            Dtype::U8
        }
        DType::Bool => {
            out.extend(values.iter().map(|&v| u8::from(v != 0.0)));
            Dtype::BOOL
        }
    };
    (d, out)
}

/// The bytes of a safetensors file holding `tensors` (see the module doc),
/// with `metadata` as the header's `__metadata__` (string pairs).
///
/// Errors: [`SaveError::Count`] for values that do not fill their shape,
/// [`SaveError::Format`] from the writer.
pub fn to_safetensors(tensors: &[Named], metadata: &[(&str, &str)]) -> Result<Vec<u8>, SaveError> {
    let mut encoded = Vec::with_capacity(tensors.len());
    for (name, dtype, shape, values) in tensors {
        let want: usize = shape.iter().product();
        if values.len() != want {
            return Err(SaveError::Count {
                name: name.clone(),
                got: values.len(),
                want,
                shape: shape.clone(),
            });
        }
        let (d, data) = encode(*dtype, values);
        encoded.push((
            name.clone(),
            Bytes {
                dtype: d,
                shape: shape.clone(),
                data,
            },
        ));
    }
    let views = encoded.iter().map(|(n, b)| (n.clone(), b));
    let info: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    safetensors::serialize(views, (!info.is_empty()).then_some(info))
        .map_err(|e| SaveError::Format(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::SafeTensors;

    #[test]
    fn writes_what_the_reader_reads_at_each_type() {
        let tensors: Vec<Named> = vec![
            (
                "x".into(),
                DType::F32,
                vec![2, 2],
                vec![1.5, -2.0, 0.25, 3.0],
            ),
            ("ids".into(), DType::I64, vec![3], vec![0.0, 7.0, 511.0]),
            ("mask".into(), DType::Bool, vec![2], vec![1.0, 0.0]),
        ];
        let bytes = to_safetensors(&tensors, &[("k", "v")]).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        for (name, _, shape, values) in &tensors {
            let v = st.tensor(name).unwrap();
            assert_eq!(v.shape(), &shape[..], "{name}");
            assert_eq!(&crate::given::to_f32(v.dtype(), v.data()).unwrap(), values);
        }
        assert_eq!(st.tensor("ids").unwrap().dtype(), Dtype::I64);
        let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
        assert_eq!(meta.metadata().as_ref().unwrap()["k"], "v");
        assert!(matches!(
            to_safetensors(&[("y".into(), DType::F32, vec![3], vec![1.0])], &[]),
            Err(SaveError::Count { .. })
        ));
    }
}
