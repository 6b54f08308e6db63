//! Tensor values known at import time: ONNX `TensorProto` → [`Data`].
//!
//! Takes initializers, `Constant` attributes and test-case `.pb` files; gives
//! the element type, the shape and every element as f64 (integers also
//! exactly as i64). Supported element types: float, double, float16,
//! bfloat16, int8/16/32/64, uint8/16/32/64, bool; data in the typed fields or
//! in `raw_data` (little-endian). External data and strings are reported, never
//! guessed.

use onnx_protobuf::tensor_proto::DataType;
use onnx_protobuf::TensorProto;
use planner::graph::DType;
use protobuf::Enum;

/// An ONNX element type tofu can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 16-bit float (IEEE half).
    F16,
    /// bfloat16.
    BF16,
    /// Signed integers of 8..64 bits.
    Int(u8),
    /// Unsigned integers of 8..64 bits.
    UInt(u8),
    /// Boolean (0 or 1).
    Bool,
}

impl Elem {
    /// From an ONNX `DataType` code; `None` for strings, complex and float8 types.
    pub fn from_code(code: i32) -> Option<Elem> {
        Some(match code {
            1 => Elem::F32,
            2 => Elem::UInt(8),
            3 => Elem::Int(8),
            4 => Elem::UInt(16),
            5 => Elem::Int(16),
            6 => Elem::Int(32),
            7 => Elem::Int(64),
            9 => Elem::Bool,
            10 => Elem::F16,
            11 => Elem::F64,
            12 => Elem::UInt(32),
            13 => Elem::UInt(64),
            16 => Elem::BF16,
            _ => return None,
        })
    }

    /// Whether values are integers (ints, uints, bool).
    pub fn is_integer(self) -> bool {
        matches!(self, Elem::Int(_) | Elem::UInt(_) | Elem::Bool)
    }

    /// The graph dtype used for a tensor of this type (sizes in bytes matter
    /// for memory accounting; 8/16-bit integers and bools count as i32).
    pub fn dtype(self) -> DType {
        match self {
            Elem::F32 | Elem::BF16 => DType::F32,
            Elem::F16 => DType::F16,
            Elem::F64 => DType::F64,
            Elem::Int(64) | Elem::UInt(64) => DType::I64,
            _ => DType::I32,
        }
    }
}

/// Name of an ONNX data type code, for messages.
pub fn type_name(code: i32) -> String {
    match DataType::from_i32(code) {
        Some(t) => format!("{t:?}"),
        None => format!("data type {code}"),
    }
}

/// A tensor value known at import time.
#[derive(Clone, Debug, PartialEq)]
pub struct Data {
    /// Element type.
    pub elem: Elem,
    /// Elements per dim (row-major).
    pub shape: Vec<usize>,
    /// Every element as f64.
    pub values: Vec<f64>,
}

impl Data {
    /// A tensor of f32 values.
    pub fn floats(shape: Vec<usize>, values: Vec<f64>) -> Data {
        Data {
            elem: Elem::F32,
            shape,
            values,
        }
    }

    /// A tensor of i64 values.
    pub fn ints(shape: Vec<usize>, values: &[i64]) -> Data {
        Data {
            elem: Elem::Int(64),
            shape,
            values: values.iter().map(|&v| v as f64).collect(),
        }
    }

    /// Elements as i64 (rounded; saturating at the i64 range).
    pub fn as_i64(&self) -> Vec<i64> {
        self.values.iter().map(|&v| f_to_i64(v)).collect()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.values.len()
    }
}

/// f64 → i64, saturating (INT64_MAX in Slice ends arrives as 9.22e18).
pub fn f_to_i64(v: f64) -> i64 {
    if v >= 9.2e18 {
        i64::MAX
    } else if v <= -9.2e18 {
        i64::MIN
    } else {
        v.round() as i64
    }
}

/// Decode a `TensorProto`. Errors are messages naming the tensor and the problem.
pub fn decode(t: &TensorProto) -> Result<Data, String> {
    let name = if t.name.is_empty() {
        "<unnamed>"
    } else {
        &t.name
    };
    let elem = Elem::from_code(t.data_type).ok_or_else(|| {
        format!(
            "tensor `{name}` has element type {}, which tofu does not read",
            type_name(t.data_type)
        )
    })?;
    if t.data_location.value() == 1 || !t.external_data.is_empty() {
        return Err(format!(
            "tensor `{name}` keeps its data in an external file; save the model with the data inside \
             (onnx.save_model(..., save_as_external_data=False))"
        ));
    }
    if t.segment.is_some() {
        return Err(format!(
            "tensor `{name}` is segmented, which tofu does not read"
        ));
    }
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        if d < 0 {
            return Err(format!("tensor `{name}` has a negative dim {d}"));
        }
        shape.push(d as usize);
    }
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= (1 << 31))
        .ok_or_else(|| format!("tensor `{name}` has too many elements ({:?})", shape))?;
    let values: Vec<f64> = if !t.raw_data.is_empty() {
        let raw = &t.raw_data;
        let width = match elem {
            Elem::F32 | Elem::Int(32) | Elem::UInt(32) => 4,
            Elem::F64 | Elem::Int(64) | Elem::UInt(64) => 8,
            Elem::F16 | Elem::BF16 | Elem::Int(16) | Elem::UInt(16) => 2,
            _ => 1,
        };
        if raw.len() != n * width {
            return Err(format!(
                "tensor `{name}`: raw_data holds {} bytes but shape {:?} of {} needs {}",
                raw.len(),
                shape,
                type_name(t.data_type),
                n * width
            ));
        }
        raw.chunks_exact(width)
            .map(|c| match elem {
                Elem::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Elem::F64 => f64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
                Elem::Int(32) => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Elem::UInt(32) => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Elem::Int(64) => i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64,
                Elem::UInt(64) => u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64,
                Elem::Int(16) => i16::from_le_bytes([c[0], c[1]]) as f64,
                Elem::UInt(16) => u16::from_le_bytes([c[0], c[1]]) as f64,
                Elem::F16 => f16_to_f64(u16::from_le_bytes([c[0], c[1]])),
                Elem::BF16 => {
                    f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16) as f64
                }
                Elem::Int(_) => c[0] as i8 as f64,
                Elem::UInt(_) | Elem::Bool => c[0] as f64,
            })
            .collect()
    } else {
        let v: Vec<f64> = match elem {
            Elem::F32 => t.float_data.iter().map(|&x| x as f64).collect(),
            Elem::F64 => t.double_data.clone(),
            Elem::Int(64) => t.int64_data.iter().map(|&x| x as f64).collect(),
            Elem::UInt(32) | Elem::UInt(64) => t.uint64_data.iter().map(|&x| x as f64).collect(),
            Elem::F16 => t.int32_data.iter().map(|&x| f16_to_f64(x as u16)).collect(),
            Elem::BF16 => t
                .int32_data
                .iter()
                .map(|&x| f32::from_bits((x as u32) << 16) as f64)
                .collect(),
            _ => t.int32_data.iter().map(|&x| x as f64).collect(),
        };
        if v.len() != n {
            return Err(format!(
                "tensor `{name}` holds {} elements but its shape {:?} needs {n}",
                v.len(),
                shape
            ));
        }
        v
    };
    Ok(Data {
        elem,
        shape,
        values,
    })
}

/// IEEE half → f64.
fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f64;
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}
