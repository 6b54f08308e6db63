//! Tensor values known at import time: ONNX `TensorProto` → [`Data`].
//!
//! Takes initializers, `Constant` attributes and test-case `.pb` files; gives
//! the element type, the shape and every element as f64 (integers also
//! exactly as i64). Supported element types: float, double, float16,
//! bfloat16, the 8-bit floats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0),
//! FLOAT4E2M1, int2/4/8/16/32/64, uint2/4/8/16/32/64, bool; data in the typed
//! fields or in `raw_data` (little-endian; 4- and 2-bit types packed low bits
//! first). Every value of these types is exact in f64. External data and
//! strings are reported, never guessed.
//!
//! [`round_to`] is the conversion of a real to one of these types (ONNX
//! Cast: round to nearest even, `saturate`), used when folding casts of known
//! values; the `cast_*` specs do the same for run-time tensors.

use graph::DType;
use onnx_protobuf::tensor_proto::DataType;
use onnx_protobuf::TensorProto;
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
    /// An 8-bit float format.
    F8(F8),
    /// FLOAT4E2M1 (sign, 2 exponent bits, 1 mantissa bit; no inf or NaN).
    F4E2M1,
}

/// The 8-bit float formats of ONNX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F8 {
    /// E4M3FN: bias 7, no infinities, NaN = S.1111.111, max 448.
    E4M3FN,
    /// E4M3FNUZ: bias 8, no infinities or negative zero, NaN = 0x80, max 240.
    E4M3FNUZ,
    /// E5M2: IEEE-like, bias 15, infinities, max 57344.
    E5M2,
    /// E5M2FNUZ: bias 16, no infinities or negative zero, NaN = 0x80, max 57344.
    E5M2FNUZ,
    /// E8M0: exponent only (2^(e - 127)), unsigned, NaN = 0xFF.
    E8M0,
}

/// A binary floating-point format as the rounding needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatFormat {
    /// Mantissa (fraction) bits.
    pub mant: i32,
    /// Exponent of the smallest normal number (1 - bias).
    pub emin: i32,
    /// Largest finite value.
    pub max: f64,
    /// Whether overflow without saturation gives ±inf (else NaN).
    pub has_inf: bool,
    /// Whether the format has a NaN (FLOAT4E2M1 has not: NaN becomes -0).
    pub has_nan: bool,
}

impl Elem {
    /// The float format of a sub-f16 float type (`None` for the others and E8M0).
    pub fn float_format(self) -> Option<FloatFormat> {
        let f = |mant, emin, max, has_inf| FloatFormat {
            mant,
            emin,
            max,
            has_inf,
            has_nan: self != Elem::F4E2M1,
        };
        Some(match self {
            Elem::F8(F8::E4M3FN) => f(3, -6, 448.0, false),
            Elem::F8(F8::E4M3FNUZ) => f(3, -7, 240.0, false),
            Elem::F8(F8::E5M2) => f(2, -14, 57344.0, true),
            Elem::F8(F8::E5M2FNUZ) => f(2, -15, 57344.0, false),
            Elem::F4E2M1 => f(1, 0, 6.0, false),
            _ => return None,
        })
    }

    /// Bits and signedness of a 2- or 4-bit integer type (`None` for the others).
    pub fn small_int(self) -> Option<(u8, bool)> {
        match self {
            Elem::Int(b @ (2 | 4)) => Some((b, true)),
            Elem::UInt(b @ (2 | 4)) => Some((b, false)),
            _ => None,
        }
    }
}

/// Convert a real to element type `to` as ONNX's Cast does: round to nearest
/// even onto the type's grid; on overflow (and for ±inf) ±max if `saturate`,
/// else ±inf (E5M2) or NaN (FLOAT4E2M1, which has no NaN: NaN → -0); 2- and
/// 4-bit integers truncate and wrap around; E8M0 rounds up to a power of two;
/// other integers truncate; bool is x ≠ 0; f32/f16 round through f32 and
/// bfloat16 to nearest even.
pub fn round_to(to: Elem, v: f64, saturate: bool) -> f64 {
    if let Some(f) = to.float_format() {
        return round_float(v, f, saturate);
    }
    if let Some((bits, signed)) = to.small_int() {
        if !v.is_finite() {
            return 0.0;
        }
        let m = 2f64.powi(bits.into());
        let u = v.trunc().rem_euclid(m);
        return if signed && u >= m / 2.0 { u - m } else { u };
    }
    match to {
        Elem::Bool => f64::from(u8::from(v != 0.0)),
        Elem::F8(F8::E8M0) => round_e8m0(v, saturate),
        Elem::BF16 => round_bf16(v),
        Elem::F32 | Elem::F16 => v as f32 as f64,
        Elem::F64 => v,
        _ => v.trunc(),
    }
}

/// Round half to even.
fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

/// Round to a binary float format (see [`round_to`]).
pub fn round_float(v: f64, f: FloatFormat, saturate: bool) -> f64 {
    if v.is_nan() {
        return if f.has_nan { f64::NAN } else { -0.0 };
    }
    let a = v.abs();
    let r = if a.is_infinite() {
        f64::INFINITY
    } else if a == 0.0 {
        0.0
    } else {
        let e = (a.log2().floor() as i32).max(f.emin);
        // Correct log2's rounding at exact powers of two.
        let e = if 2f64.powi(e) > a && e > f.emin {
            e - 1
        } else if 2f64.powi(e + 1) <= a {
            e + 1
        } else {
            e
        };
        let q = 2f64.powi(e - f.mant);
        round_half_even(a / q) * q
    };
    let r = if r > f.max {
        if saturate {
            f.max
        } else if f.has_inf {
            f64::INFINITY
        } else {
            return f64::NAN;
        }
    } else {
        r
    };
    if v < 0.0 {
        -r
    } else {
        r
    }
}

/// Round to E8M0 (a power of two 2^-127 … 2^127, rounding up; NaN for NaN,
/// negative or — without saturation — overflowing values).
fn round_e8m0(v: f64, saturate: bool) -> f64 {
    if v.is_nan() || v < 0.0 {
        return f64::NAN;
    }
    if v.is_infinite() {
        return if saturate { 2f64.powi(127) } else { f64::NAN };
    }
    let e = if v == 0.0 {
        -127
    } else {
        (v.log2().ceil() as i32).clamp(-127, 128)
    };
    let e = if e > -127 && 2f64.powi(e - 1) >= v {
        e - 1
    } else {
        e
    };
    if e > 127 {
        return if saturate { 2f64.powi(127) } else { f64::NAN };
    }
    2f64.powi(e)
}

/// Round to bfloat16 (round to nearest even on the f32 bits), as ONNX's Cast does.
pub fn round_bf16(v: f64) -> f64 {
    let f = v as f32;
    if f.is_nan() {
        return f64::NAN;
    }
    let bits = f.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) & 0xffff_0000;
    f32::from_bits(rounded) as f64
}

impl Elem {
    /// From an ONNX `DataType` code; `None` for strings and complex types.
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
            17 => Elem::F8(F8::E4M3FN),
            18 => Elem::F8(F8::E4M3FNUZ),
            19 => Elem::F8(F8::E5M2),
            20 => Elem::F8(F8::E5M2FNUZ),
            21 => Elem::UInt(4),
            22 => Elem::Int(4),
            23 => Elem::F4E2M1,
            24 => Elem::F8(F8::E8M0),
            25 => Elem::UInt(2),
            26 => Elem::Int(2),
            _ => return None,
        })
    }

    /// Whether values are integers (ints, uints, bool).
    pub fn is_integer(self) -> bool {
        matches!(self, Elem::Int(_) | Elem::UInt(_) | Elem::Bool)
    }

    /// The graph dtype used for a tensor of this type (sizes in bytes matter
    /// for memory accounting and traffic): bool, u8, i64/u64, f16, bf16, f32
    /// and f64 as themselves; the other integers (2- to 32-bit) widen to
    /// i32, 4- and 8-bit floats to f16.
    pub fn dtype(self) -> DType {
        match self {
            Elem::F32 => DType::F32,
            Elem::BF16 => DType::Bf16,
            Elem::F16 | Elem::F8(_) | Elem::F4E2M1 => DType::F16,
            Elem::F64 => DType::F64,
            Elem::Int(64) | Elem::UInt(64) => DType::I64,
            Elem::UInt(8) => DType::U8,
            Elem::Bool => DType::Bool,
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
    // Sub-byte types: packed, low bits first (raw_data, or one packed byte per int32_data entry).
    let bits = match elem {
        Elem::Int(4) | Elem::UInt(4) | Elem::F4E2M1 => 4,
        Elem::Int(2) | Elem::UInt(2) => 2,
        _ => 8,
    };
    if bits < 8 {
        let per = 8 / bits;
        let bytes: Vec<u8> = if !t.raw_data.is_empty() {
            t.raw_data.clone()
        } else {
            t.int32_data.iter().map(|&x| x as u8).collect()
        };
        if bytes.len() != n.div_ceil(per) {
            return Err(format!(
                "tensor `{name}` holds {} bytes but shape {:?} of {} needs {}",
                bytes.len(),
                shape,
                type_name(t.data_type),
                n.div_ceil(per)
            ));
        }
        let values = (0..n)
            .map(|i| {
                let code = (bytes[i / per] >> ((i % per) * bits)) & ((1u8 << bits) - 1);
                decode_small(elem, code)
            })
            .collect();
        return Ok(Data {
            elem,
            shape,
            values,
        });
    }
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
                Elem::F8(k) => decode_f8(k, c[0]),
                Elem::Int(_) => c[0] as i8 as f64,
                Elem::UInt(_) | Elem::Bool | Elem::F4E2M1 => c[0] as f64,
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
            Elem::F8(k) => t
                .int32_data
                .iter()
                .map(|&x| decode_f8(k, x as u8))
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

/// An 8-bit float code → f64.
pub fn decode_f8(k: F8, b: u8) -> f64 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let (ebits, bias, uz) = match k {
        F8::E8M0 => {
            return if b == 0xff {
                f64::NAN
            } else {
                2f64.powi(b as i32 - 127)
            }
        }
        F8::E4M3FN => (4, 7, false),
        F8::E4M3FNUZ => (4, 8, true),
        F8::E5M2 => (5, 15, false),
        F8::E5M2FNUZ => (5, 16, true),
    };
    if uz && b == 0x80 {
        return f64::NAN;
    }
    let mbits = 7 - ebits;
    let e = ((b & 0x7f) >> mbits) as i32;
    let m = (b & ((1 << mbits) - 1)) as f64;
    let emax = (1 << ebits) - 1;
    if !uz && e == emax {
        match k {
            F8::E5M2 if m == 0.0 => return sign * f64::INFINITY,
            F8::E5M2 => return f64::NAN,
            // E4M3FN: only S.1111.111 is NaN.
            _ if m == 7.0 => return f64::NAN,
            _ => {}
        }
    }
    let scale = (1 << mbits) as f64;
    sign * if e == 0 {
        m / scale * 2f64.powi(1 - bias)
    } else {
        (1.0 + m / scale) * 2f64.powi(e - bias)
    }
}

/// A 2- or 4-bit code → f64.
fn decode_small(elem: Elem, code: u8) -> f64 {
    match elem {
        Elem::Int(bits) => {
            let shift = 8 - bits;
            (((code << shift) as i8) >> shift) as f64
        }
        Elem::F4E2M1 => {
            let sign = if code & 0x8 != 0 { -1.0 } else { 1.0 };
            let e = ((code >> 1) & 0x3) as i32;
            let m = (code & 1) as f64;
            sign * if e == 0 {
                m * 0.5
            } else {
                (1.0 + m / 2.0) * 2f64.powi(e - 1)
            }
        }
        _ => code as f64,
    }
}
