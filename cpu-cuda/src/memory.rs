//! Device memory: host allocations, counted per device against a configured
//! size (`TOFU_CPU_CUDA_MEMORY`, e.g. `2G`, `512M`; default 16G), an
//! allocation beyond it being `CUDA_ERROR_OUT_OF_MEMORY`. New memory is
//! filled with 0xFF bytes (NaN as f32), so a kernel reading memory nobody
//! wrote gives NaN, not a lucky zero. Copies are checked to lie inside one
//! allocation.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use crate::device::devices;
use crate::status::{CuResult, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY, CUDA_SUCCESS};

/// Alignment of every allocation (as cudaMalloc's, at least 256 bytes).
const ALIGN: usize = 256;

struct Alloc {
    bytes: usize,
    device: usize,
}

#[derive(Default)]
struct Table {
    allocs: BTreeMap<u64, Alloc>,
    used: Vec<u64>,
}

fn table() -> &'static Mutex<Table> {
    static T: OnceLock<Mutex<Table>> = OnceLock::new();
    T.get_or_init(|| {
        Mutex::new(Table {
            allocs: BTreeMap::new(),
            used: vec![0; devices().len()],
        })
    })
}

/// Parse a size: bytes, or a number with K, M, G or T (powers of 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 1u64 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// Each device's memory in bytes.
pub fn capacity() -> u64 {
    static CAP: OnceLock<u64> = OnceLock::new();
    *CAP.get_or_init(|| {
        std::env::var("TOFU_CPU_CUDA_MEMORY")
            .ok()
            .and_then(|v| parse_size(&v))
            .unwrap_or(16 << 30)
    })
}

/// Bytes allocated on device `d`.
pub fn used(d: usize) -> u64 {
    table().lock().expect("memory").used[d]
}

/// Allocate `bytes` on device `d`: the pointer, or out of memory.
pub fn alloc(d: usize, bytes: usize) -> Result<u64, CuResult> {
    let mut t = table().lock().expect("memory");
    let size = bytes.max(1);
    if t.used[d] + size as u64 > capacity() {
        return Err(CUDA_ERROR_OUT_OF_MEMORY);
    }
    let layout = Layout::from_size_align(size, ALIGN).map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)?;
    // SAFETY: a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return Err(CUDA_ERROR_OUT_OF_MEMORY);
    }
    // SAFETY: `size` bytes just allocated.
    unsafe { std::ptr::write_bytes(p, 0xFF, size) };
    t.used[d] += size as u64;
    t.allocs.insert(
        p as u64,
        Alloc {
            bytes: size,
            device: d,
        },
    );
    Ok(p as u64)
}

/// Free an allocation made by [`alloc`].
pub fn free(p: u64) -> CuResult {
    let mut t = table().lock().expect("memory");
    let Some(a) = t.allocs.remove(&p) else {
        return CUDA_ERROR_INVALID_VALUE;
    };
    t.used[a.device] -= a.bytes as u64;
    let layout = Layout::from_size_align(a.bytes, ALIGN).expect("layout");
    // SAFETY: allocated by `alloc` with this layout, freed once (removed
    // from the table above).
    unsafe { std::alloc::dealloc(p as *mut u8, layout) };
    CUDA_SUCCESS
}

/// Whether `[p, p + bytes)` lies inside one allocation.
pub fn check(p: u64, bytes: usize) -> CuResult {
    let t = table().lock().expect("memory");
    match t.allocs.range(..=p).next_back() {
        Some((&base, a)) if p + bytes as u64 <= base + a.bytes as u64 => CUDA_SUCCESS,
        _ => CUDA_ERROR_INVALID_VALUE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("512m"), Some(512 << 20));
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("x"), None);
    }
}
