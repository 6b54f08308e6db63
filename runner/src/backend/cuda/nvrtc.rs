//! Compiling generated CUDA C for one device: the architectures this NVRTC
//! supports (for [`super::nvrtc_target`]), the compilation itself
//! ([`compile`]), and the per-key caches that keep ranks' start-up from
//! queueing behind one another's compilations ([`PerKey`]).
//!
//! Without `--gpu-architecture` NVRTC emits PTX for its oldest target, which
//! the driver must JIT, and a driver older than NVRTC refuses the PTX; so a
//! kernel is compiled to the device's own machine code (`sm_XY`, a cubin the
//! driver loads as is) wherever NVRTC knows the device, and to PTX for the
//! newest architecture NVRTC knows otherwise (a device newer than NVRTC).

use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::nvrtc::{result, sys, Ptx};

use super::device::device_err;
use super::target::NvrtcTarget;
use crate::backend::BackendError;

/// The architectures this process's NVRTC compiles for (empty if it
/// cannot say), asked once.
pub(super) fn supported_archs() -> &'static [i32] {
    static ARCHS: OnceLock<Vec<i32>> = OnceLock::new();
    ARCHS.get_or_init(|| std::panic::catch_unwind(asked).unwrap_or_default())
}

/// `nvrtcGetSupportedArchs` (cudarc panics where NVRTC lacks it).
fn asked() -> Vec<i32> {
    let mut n = 0;
    // SAFETY: an out-pointer; NVRTC is loaded (checked by `check_libraries`
    // before any backend exists).
    let r = unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) };
    if r != sys::nvrtcResult::NVRTC_SUCCESS || n <= 0 {
        return Vec::new();
    }
    let mut v = vec![0; n as usize];
    // SAFETY: room for the `n` architectures NVRTC said it has.
    let r = unsafe { sys::nvrtcGetSupportedArchs(v.as_mut_ptr()) };
    if r != sys::nvrtcResult::NVRTC_SUCCESS {
        return Vec::new();
    }
    v
}

/// An NVRTC program, destroyed when dropped.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by `create_program`, destroyed once; a failure
        // only leaks the program.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

fn text(v: &[c_char]) -> String {
    let bytes: Vec<u8> = v.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What NVRTC made of a source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Image {
    /// Machine code (an ELF cubin).
    Cubin(Vec<u8>),
    /// PTX text.
    Ptx(String),
}

impl Image {
    /// The image as cudarc loads it.
    pub(super) fn to_ptx(&self) -> Ptx {
        match self {
            Image::Cubin(b) => Ptx::from_binary(b.clone()),
            Image::Ptx(t) => Ptx::from_src(t.clone()),
        }
    }
}

/// Compile `src` for `target`: a cubin or PTX the driver loads.
///
/// Errors: NVRTC's, with its log and the source.
pub(super) fn compile(src: &str, target: NvrtcTarget) -> Result<Image, BackendError> {
    let fail = |what: String| device_err(format!("NVRTC ({}): {what}", target.option()));
    let c_src = CString::new(src).map_err(|_| fail("a NUL byte in the source".into()))?;
    let prog = Program(result::create_program(&c_src, None).map_err(|e| fail(format!("{e:?}")))?);
    let options = [target.option()];
    // SAFETY: a live program (every call below).
    if let Err(e) = unsafe { result::compile_program(prog.0, &options) } {
        let log = unsafe { result::get_program_log(prog.0) }
            .map(|l| text(&l))
            .unwrap_or_default();
        return Err(fail(format!("{e:?}\n{log}\n--- source ---\n{src}")));
    }
    match target {
        NvrtcTarget::Ptx(_) => {
            let ptx = unsafe { result::get_ptx(prog.0) }.map_err(|e| fail(format!("{e:?}")))?;
            Ok(Image::Ptx(text(&ptx)))
        }
        NvrtcTarget::Sass(_) => {
            let mut size = 0usize;
            let r = unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) };
            if r != sys::nvrtcResult::NVRTC_SUCCESS {
                return Err(fail(format!("nvrtcGetCUBINSize: {r:?}")));
            }
            let mut cubin = vec![0 as c_char; size];
            let r = unsafe { sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr()) };
            if r != sys::nvrtcResult::NVRTC_SUCCESS {
                return Err(fail(format!("nvrtcGetCUBIN: {r:?}")));
            }
            Ok(Image::Cubin(cubin.into_iter().map(|c| c as u8).collect()))
        }
    }
}

/// A cache whose values are made at most once per key, where making one
/// holds only that key's lock: callers with other keys go on (a global lock
/// held during an NVRTC compile would queue every rank's start-up behind
/// it), callers with the same key wait for the one value. A failure is not
/// cached: the next caller tries again.
pub(super) struct PerKey<K, V> {
    cells: Mutex<HashMap<K, Arc<Mutex<Option<V>>>>>,
}

impl<K, V> Default for PerKey<K, V> {
    fn default() -> Self {
        PerKey {
            cells: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> PerKey<K, V> {
    /// The value of `key`, made by `make` if there is none yet.
    ///
    /// Errors: `make`'s.
    pub(super) fn get_or_try_make<E>(
        &self,
        key: K,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        let cell = self
            .cells
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default()
            .clone();
        let mut slot = cell.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = &*slot {
            return Ok(v.clone());
        }
        let v = make()?;
        *slot = Some(v.clone());
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::backend::cuda::target::nvrtc_target;

    /// Whether NVRTC can be loaded (`LD_LIBRARY_PATH` naming the cache of
    /// `scripts/fetch-nvrtc.sh`; `runner/tests/cuda_compile.rs` compiles
    /// every kernel in CI), else says why the test is skipped.
    fn nvrtc_present(test: &str) -> bool {
        // SAFETY: only tries to open the library.
        let ok = unsafe { sys::is_culib_present() };
        if !ok {
            eprintln!("SKIPPED {test}: libnvrtc not loadable (set LD_LIBRARY_PATH)");
        }
        ok
    }

    #[test]
    fn the_copy_kernel_compiles_to_machine_code_and_to_ptx() {
        if !nvrtc_present("the_copy_kernel_compiles_to_machine_code_and_to_ptx") {
            return;
        }
        let archs = supported_archs();
        assert!(archs.contains(&90), "NVRTC supports sm_90: {archs:?}");
        let t = nvrtc_target((9, 0), archs).unwrap();
        match compile(super::super::COPY_SRC, t).unwrap() {
            Image::Cubin(b) => assert_eq!(&b[..4], b"\x7fELF"),
            other => panic!("expected a cubin, got {other:?}"),
        }
        match compile(super::super::COPY_SRC, NvrtcTarget::Ptx(80)).unwrap() {
            Image::Ptx(t) => assert!(t.contains(".target sm_80"), "{t}"),
            other => panic!("expected PTX, got {other:?}"),
        }
        let e = compile("this is not CUDA", t).unwrap_err().to_string();
        assert!(e.contains("sm_90") && e.contains("this is not CUDA"), "{e}");
    }

    #[test]
    fn each_key_is_made_once() {
        let cache: PerKey<&str, usize> = PerKey::default();
        let made = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let v = cache.get_or_try_make("copy_region", || {
                        std::thread::sleep(Duration::from_millis(20));
                        Ok::<_, ()>(made.fetch_add(1, Ordering::SeqCst) + 10)
                    });
                    assert_eq!(v, Ok(10));
                });
            }
        });
        assert_eq!(made.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failure_is_not_cached() {
        let cache: PerKey<u8, u8> = PerKey::default();
        assert_eq!(
            cache.get_or_try_make(1, || Err("NVRTC failed")),
            Err("NVRTC failed")
        );
        assert_eq!(cache.get_or_try_make(1, || Ok::<_, &str>(5)), Ok(5));
        assert_eq!(cache.get_or_try_make(1, || Err("not called")), Ok(5));
    }

    #[test]
    fn one_keys_compile_does_not_hold_up_another_key() {
        // Key "a" is made only once key "b" has been made on another thread:
        // with one lock over the whole cache, "b" would wait for "a" and the
        // test would time out.
        let cache: PerKey<&str, u32> = PerKey::default();
        let cache = &cache;
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            let slow = s.spawn(move || {
                cache.get_or_try_make("a", || {
                    rx.recv_timeout(Duration::from_secs(20))
                        .map_err(|_| "key b was held up behind key a")
                })
            });
            // Let "a" start making first.
            std::thread::sleep(Duration::from_millis(50));
            let b = cache.get_or_try_make("b", || Ok::<_, &str>(2));
            assert_eq!(b, Ok(2));
            tx.send(1).unwrap();
            assert_eq!(slow.join().unwrap(), Ok(1));
        });
    }
}
