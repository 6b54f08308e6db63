//! cuBLAS (`cublas*`, the C signatures of `cublas_api.h`): single-precision
//! GEMM, plain and strided-batched, on the handle's stream, computed by the
//! `gemm` crate (column-major, as cuBLAS; β = 0 never reads C). Math and
//! pointer modes are accepted; TF32 is not modelled (always FP32).

use std::ffi::{c_int, c_void};

use crate::device::stream_of;
use crate::driver::put;
use crate::memory::check;
use crate::status::CUDA_SUCCESS;
use crate::stream::Delay;

/// `cublasStatus_t`.
type Status = u32;
const CUBLAS_STATUS_SUCCESS: Status = 0;
const CUBLAS_STATUS_NOT_INITIALIZED: Status = 1;
const CUBLAS_STATUS_INVALID_VALUE: Status = 7;

/// A handle: the stream its work goes to (a driver stream handle).
struct Handle {
    stream: usize,
}

fn handle<'a>(h: *mut c_void) -> Option<&'a mut Handle> {
    // SAFETY: a handle from `cublasCreate_v2`, alive until destroyed.
    (!h.is_null()).then(|| unsafe { &mut *(h as *mut Handle) })
}

#[no_mangle]
pub extern "C" fn cublasCreate_v2(h: *mut *mut c_void) -> Status {
    put(
        h,
        Box::into_raw(Box::new(Handle { stream: 0 })) as *mut c_void,
    );
    CUBLAS_STATUS_SUCCESS
}

#[no_mangle]
pub extern "C" fn cublasDestroy_v2(h: *mut c_void) -> Status {
    if h.is_null() {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    // SAFETY: from `cublasCreate_v2`, destroyed once.
    drop(unsafe { Box::from_raw(h as *mut Handle) });
    CUBLAS_STATUS_SUCCESS
}

#[no_mangle]
pub extern "C" fn cublasSetStream_v2(h: *mut c_void, stream: *mut c_void) -> Status {
    match handle(h) {
        Some(h) => {
            h.stream = stream as usize;
            CUBLAS_STATUS_SUCCESS
        }
        None => CUBLAS_STATUS_NOT_INITIALIZED,
    }
}

#[no_mangle]
pub extern "C" fn cublasGetStream_v2(h: *mut c_void, stream: *mut *mut c_void) -> Status {
    match handle(h) {
        Some(h) => {
            put(stream, h.stream as *mut c_void);
            CUBLAS_STATUS_SUCCESS
        }
        None => CUBLAS_STATUS_NOT_INITIALIZED,
    }
}

#[no_mangle]
pub extern "C" fn cublasSetMathMode(h: *mut c_void, _mode: c_int) -> Status {
    if h.is_null() {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    CUBLAS_STATUS_SUCCESS
}

#[no_mangle]
pub extern "C" fn cublasSetPointerMode_v2(h: *mut c_void, mode: c_int) -> Status {
    // Only host pointers for α and β (mode 0).
    if h.is_null() || mode != 0 {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    CUBLAS_STATUS_SUCCESS
}

#[no_mangle]
pub extern "C" fn cublasGetPointerMode_v2(h: *mut c_void, mode: *mut c_int) -> Status {
    if h.is_null() {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    put(mode, 0);
    CUBLAS_STATUS_SUCCESS
}

/// One column-major GEMM's description (cuBLAS's arguments).
#[derive(Clone, Copy)]
struct Gemm {
    ta: bool,
    tb: bool,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    beta: f32,
    lda: usize,
    ldb: usize,
    ldc: usize,
}

impl Gemm {
    /// Elements an operand spans: `rows × cols` stored with leading
    /// dimension `ld` (column-major).
    fn span(rows: usize, cols: usize, ld: usize) -> usize {
        if rows == 0 || cols == 0 {
            0
        } else {
            (cols - 1) * ld + rows
        }
    }

    fn spans(&self) -> (usize, usize, usize) {
        let (ar, ac) = if self.ta {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        };
        let (br, bc) = if self.tb {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        };
        (
            Self::span(ar, ac, self.lda),
            Self::span(br, bc, self.ldb),
            Self::span(self.m, self.n, self.ldc),
        )
    }

    /// C = α·op(A)·op(B) + β·C at these addresses.
    ///
    /// # Safety
    /// The operands lie inside device allocations (checked by the caller).
    unsafe fn run(&self, a: usize, b: usize, c: usize) {
        // op(A)(i, l): A(i, l) at i + l·lda, or A(l, i) at l + i·lda.
        let (a_cs, a_rs) = if self.ta {
            (1, self.lda)
        } else {
            (self.lda, 1)
        };
        let (b_cs, b_rs) = if self.tb {
            (1, self.ldb)
        } else {
            (self.ldb, 1)
        };
        gemm::gemm(
            self.m,
            self.n,
            self.k,
            c as *mut f32,
            self.ldc as isize,
            1,
            self.beta != 0.0,
            a as *const f32,
            a_cs as isize,
            a_rs as isize,
            b as *const f32,
            b_cs as isize,
            b_rs as isize,
            self.beta,
            self.alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Check and queue `batch` GEMMs (operands `stride` elements apart).
fn queue(h: *mut c_void, g: Gemm, ptrs: [u64; 3], strides: [i64; 3], batch: usize) -> Status {
    let Some(h) = handle(h) else {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    };
    let (sa, sb, sc) = g.spans();
    for (i, (&p, span)) in ptrs.iter().zip([sa, sb, sc]).enumerate() {
        if span == 0 || batch == 0 {
            continue;
        }
        let Ok(stride) = u64::try_from(strides[i]) else {
            return CUBLAS_STATUS_INVALID_VALUE;
        };
        let last = p + (batch as u64 - 1) * stride * 4;
        if check(p, 4) != CUDA_SUCCESS || check(last, span * 4) != CUDA_SUCCESS {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    let Some(stream) = stream_of(h.stream as *mut c_void) else {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    };
    stream.enqueue(
        Delay::Random,
        Box::new(move || {
            for i in 0..batch as u64 {
                let at = |j: usize| (ptrs[j] + i * strides[j] as u64 * 4) as usize;
                // SAFETY: every batch's operands were checked above.
                unsafe { g.run(at(0), at(1), at(2)) };
            }
            CUDA_SUCCESS
        }),
    );
    CUBLAS_STATUS_SUCCESS
}

#[allow(clippy::too_many_arguments)]
fn gemm_of(
    ta: c_int,
    tb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    beta: *const f32,
    ld: [c_int; 3],
) -> Option<Gemm> {
    if alpha.is_null() || beta.is_null() || m < 0 || n < 0 || k < 0 || ld.iter().any(|&l| l < 1) {
        return None;
    }
    let op = |t: c_int| match t {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    };
    // SAFETY: host pointers (pointer mode host), non-null.
    let (alpha, beta) = unsafe { (*alpha, *beta) };
    Some(Gemm {
        ta: op(ta)?,
        tb: op(tb)?,
        m: m as usize,
        n: n as usize,
        k: k as usize,
        alpha,
        beta,
        lda: ld[0] as usize,
        ldb: ld[1] as usize,
        ldc: ld[2] as usize,
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn cublasSgemm_v2(
    h: *mut c_void,
    ta: c_int,
    tb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    a: u64,
    lda: c_int,
    b: u64,
    ldb: c_int,
    beta: *const f32,
    c: u64,
    ldc: c_int,
) -> Status {
    match gemm_of(ta, tb, m, n, k, alpha, beta, [lda, ldb, ldc]) {
        Some(g) => queue(h, g, [a, b, c], [0; 3], 1),
        None => CUBLAS_STATUS_INVALID_VALUE,
    }
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn cublasSgemmStridedBatched(
    h: *mut c_void,
    ta: c_int,
    tb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    a: u64,
    lda: c_int,
    stride_a: i64,
    b: u64,
    ldb: c_int,
    stride_b: i64,
    beta: *const f32,
    c: u64,
    ldc: c_int,
    stride_c: i64,
    batch: c_int,
) -> Status {
    match (
        gemm_of(ta, tb, m, n, k, alpha, beta, [lda, ldb, ldc]),
        usize::try_from(batch),
    ) {
        (Some(g), Ok(batch)) => queue(h, g, [a, b, c], [stride_a, stride_b, stride_c], batch),
        _ => CUBLAS_STATUS_INVALID_VALUE,
    }
}
