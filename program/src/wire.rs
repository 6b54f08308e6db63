//! Element types on the device and on the wire.
//!
//! Takes the element type of a tensor ([`DType`]) and its values in compute
//! form; gives the values a tensor of that type can hold, and the form its
//! messages take between ranks. Arithmetic runs in f32 on every backend: a
//! buffer holds one f32 per element whatever the tensor's type (the compute
//! form), and a leaf of another type holds values of that type (rounded
//! once, where they are made: [`round_to`]). A message of such a tensor
//! moves its elements at their own size — 8 bytes per i64, 1 per bool —
//! packed little-endian into 4-byte words, the unit every communicator
//! moves ([`encode`], [`decode`]; a message of a 1- or 2-byte type is
//! padded to whole words, [`words`]), so the bytes a communicator counts
//! are the element type's. Only f32 tensors are reduced inside a
//! collective (packed words cannot be summed): codegen lowers no
//! all-reduce or reduce-scatter of another type.

use graph::DType;

/// 4-byte words a message of `elems` elements of `dtype` takes
/// (`⌈elems · size / 4⌉`).
pub fn words(elems: u64, dtype: DType) -> u64 {
    (elems * dtype.size_bytes()).div_ceil(4)
}

/// Bytes a message of `elems` elements of `dtype` moves (whole words).
pub fn message_bytes(elems: u64, dtype: DType) -> u64 {
    words(elems, dtype) * 4
}

/// Round compute-form values in place to values `dtype` holds: integers
/// rounded to the nearest and saturated to the type's range (bool: nonzero
/// is 1), f16/bf16 rounded to the nearest representable value; f32 and f64
/// unchanged.
pub fn round_to(dtype: DType, values: &mut [f32]) {
    let f = |v: f32| -> f32 {
        match dtype {
            DType::F32 | DType::F64 => v,
            DType::F16 => half::f16::from_f32(v).to_f32(),
            DType::Bf16 => half::bf16::from_f32(v).to_f32(),
            DType::I32 => v.round().clamp(i32::MIN as f32, i32::MAX as f32),
            // `as` saturates; the round trip through i64 drops NaN to 0.
            DType::I64 => v.round() as i64 as f32,
            DType::U8 => v.round().clamp(0.0, 255.0),
            DType::Bool => (v != 0.0) as u8 as f32,
        }
    };
    if dtype != DType::F32 && dtype != DType::F64 {
        values.iter_mut().for_each(|v| *v = f(*v));
    }
}

/// The wire form of compute-form `values` of `dtype`: each element's
/// little-endian bytes, concatenated and padded with zeros to whole 4-byte
/// words, each word as the f32 with those bits ([`words`] of them).
pub fn encode(values: &[f32], dtype: DType) -> Vec<f32> {
    if dtype == DType::F32 {
        return values.to_vec();
    }
    let size = dtype.size_bytes() as usize;
    let mut bytes = Vec::with_capacity(values.len() * size + 3);
    for &v in values {
        match dtype {
            DType::F32 => bytes.extend_from_slice(&v.to_le_bytes()),
            DType::F64 => bytes.extend_from_slice(&(v as f64).to_le_bytes()),
            DType::F16 => bytes.extend_from_slice(&half::f16::from_f32(v).to_le_bytes()),
            DType::Bf16 => bytes.extend_from_slice(&half::bf16::from_f32(v).to_le_bytes()),
            DType::I32 => bytes.extend_from_slice(&(v.round() as i32).to_le_bytes()),
            DType::I64 => bytes.extend_from_slice(&(v.round() as i64).to_le_bytes()),
            DType::U8 => bytes.push(v.round() as u8),
            DType::Bool => bytes.push((v != 0.0) as u8),
        }
    }
    bytes.resize(bytes.len().div_ceil(4) * 4, 0);
    bytes
        .chunks_exact(4)
        .map(|w| f32::from_bits(u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
        .collect()
}

/// The compute-form values of the first `elems` elements of wire-form
/// `wire` ([`encode`]'s inverse on values `dtype` holds).
///
/// Panics if `wire` holds fewer than [`words`]`(elems, dtype)` words (a
/// message of another length is a communicator error before this).
pub fn decode(wire: &[f32], elems: usize, dtype: DType) -> Vec<f32> {
    if dtype == DType::F32 {
        return wire[..elems].to_vec();
    }
    let bytes: Vec<u8> = wire
        .iter()
        .flat_map(|w| w.to_bits().to_le_bytes())
        .collect();
    let size = dtype.size_bytes() as usize;
    bytes[..elems * size]
        .chunks_exact(size)
        .map(|b| match dtype {
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            DType::F64 => f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32,
            DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f32(),
            DType::Bf16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f32(),
            DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32,
            DType::I64 => i64::from_le_bytes(b.try_into().expect("8 bytes")) as f32,
            DType::U8 | DType::Bool => b[0] as f32,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [DType; 8] = [
        DType::F32,
        DType::F16,
        DType::Bf16,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ];

    /// Every type's values survive the wire bit for bit, and the message is
    /// exactly the type's bytes rounded up to a word.
    #[test]
    fn values_of_each_type_cross_the_wire_unchanged() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for dtype in ALL {
            for n in [0usize, 1, 2, 3, 5, 8, 33] {
                let mut v: Vec<f32> = (0..n)
                    .map(|_| {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        ((rng % 2001) as f32 - 1000.0) * 0.37
                    })
                    .collect();
                round_to(dtype, &mut v);
                let w = encode(&v, dtype);
                assert_eq!(w.len() as u64, words(n as u64, dtype), "{dtype} n={n}");
                assert_eq!(
                    message_bytes(n as u64, dtype),
                    (n as u64 * dtype.size_bytes()).div_ceil(4) * 4
                );
                let back = decode(&w, n, dtype);
                let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&back), bits(&v), "{dtype} n={n}");
            }
        }
    }

    /// Integers keep their value through i64's 8 bytes; bools become 0/1;
    /// u8 saturates at 0 and 255.
    #[test]
    fn integer_types_hold_integers() {
        let mut v = vec![-3.6f32, -0.4, 0.5, 2.5, 300.0, 16_777_216.0];
        let mut u = v.clone();
        let mut b = v.clone();
        round_to(DType::I64, &mut v);
        assert_eq!(v, [-4.0, -0.0, 1.0, 3.0, 300.0, 16_777_216.0]);
        let w = encode(&v, DType::I64);
        assert_eq!(
            i64::from_le_bytes({
                let mut x = [0u8; 8];
                x[..4].copy_from_slice(&w[0].to_bits().to_le_bytes());
                x[4..].copy_from_slice(&w[1].to_bits().to_le_bytes());
                x
            }),
            -4
        );
        round_to(DType::U8, &mut u);
        assert_eq!(u, [0.0, 0.0, 1.0, 3.0, 255.0, 255.0]);
        round_to(DType::Bool, &mut b);
        assert_eq!(b, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
    }
}
