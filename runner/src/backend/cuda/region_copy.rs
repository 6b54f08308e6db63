//! The region-copy kernel ([`COPY_SRC`]) and its arguments
//! ([`RegionArgs`]): a box of one buffer copied (or combined) into another,
//! both holding regions of a tensor in global coordinates
//! (`Backend::copy_region` on the CUDA backend). Needs no CUDA: in every
//! build, so tests compile and emulate the kernel without a device.

use comm::ReduceOp;

use super::codegen::Launch;
use crate::backend::Bounds;
use crate::region::{contains, volume};

/// Highest rank a region copy handles.
pub const MAX_RANK: usize = 8;

/// CUDA C of the region-copy kernel `copy_region` (see
/// [`Backend::copy_region`]), compiled with NVRTC once per process; public so
/// tests can compile it without a device.
pub const COPY_SRC: &str = r#"
typedef long long i64;
struct RegionArgs { int rank; int op; i64 n; i64 d[8][6]; };
extern "C" __global__ void copy_region(const float* src, float* dst, RegionArgs a) {
  i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= a.n) return;
  i64 r = t, so = 0, doff = 0, ss = 1, ds = 1;
  for (int d = a.rank - 1; d >= 0; --d) {
    i64 i = a.d[d][0] + r % a.d[d][1]; r /= a.d[d][1];
    so += (i - a.d[d][2]) * ss; ss *= a.d[d][3];
    doff += (i - a.d[d][4]) * ds; ds *= a.d[d][5];
  }
  float x = src[so];
  switch (a.op) {
    case 0: dst[doff] = x; break;
    case 1: dst[doff] += x; break;
    case 2: dst[doff] *= x; break;
    case 3: dst[doff] = fmaxf(dst[doff], x); break;
    default: dst[doff] = fminf(dst[doff], x); break;
  }
}
"#;

/// Arguments of the region-copy kernel, passed by value: per dim the
/// region's (lo, extent), the source buffer's and the destination's.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RegionArgs {
    /// Dims of the region.
    pub rank: i32,
    /// 0 copies, 1–4 combine with sum, product, max, min.
    pub op: i32,
    /// Elements of the region.
    pub n: i64,
    /// Per dim: region lo and extent, source lo and extent, destination lo
    /// and extent.
    pub d: [[i64; 6]; MAX_RANK],
}

impl RegionArgs {
    /// The region-copy kernel's arguments and launch that copy (or, with
    /// `op`, combine) `region` of a buffer holding `src_r` into one holding
    /// `dst_r`; `None` where the region is not inside both boxes or has
    /// more than [`MAX_RANK`] dims.
    pub fn new(
        src_r: &Bounds,
        dst_r: &Bounds,
        region: &Bounds,
        op: Option<ReduceOp>,
    ) -> Option<(RegionArgs, Launch)> {
        if !contains(src_r, region) || !contains(dst_r, region) || region.len() > MAX_RANK {
            return None;
        }
        let n = volume(region);
        let mut a = RegionArgs {
            rank: region.len() as i32,
            op: match op {
                None => 0,
                Some(ReduceOp::Sum) => 1,
                Some(ReduceOp::Prod) => 2,
                Some(ReduceOp::Max) => 3,
                Some(ReduceOp::Min) => 4,
            },
            n: n as i64,
            d: [[0; 6]; MAX_RANK],
        };
        for d in 0..region.len() {
            a.d[d] = [
                region[d].0,
                region[d].1 - region[d].0,
                src_r[d].0,
                src_r[d].1 - src_r[d].0,
                dst_r[d].0,
                dst_r[d].1 - dst_r[d].0,
            ];
        }
        Some((a, Launch::per_element("copy_region", n as usize)))
    }

    /// The bytes the kernel receives (the C struct `RegionArgs`).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `repr(C)` plain old data without padding (two i32, then
        // i64s), so every byte is initialised; the slice borrows `self`.
        unsafe {
            std::slice::from_raw_parts(
                (self as *const RegionArgs).cast::<u8>(),
                std::mem::size_of::<RegionArgs>(),
            )
        }
    }
}
