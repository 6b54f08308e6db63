//! Modules: the "image" the stand-in's NVRTC hands out is the CUDA C source
//! behind a marker ([`IMAGE_MAGIC`]); loading it compiles the source as C++
//! after the C++ shim of CUDA's execution model
//! (`runner/tests/cuda_shim/cuda_shim.h`, the one `cuda_emulated.rs`
//! tests every generated kernel with) into a shared object with g++, cached
//! by the hash of what g++ compiles (`TOFU_CPU_CUDA_CACHE`, default
//! `$TMPDIR/tofu-cpu-cuda-cache`). Each `__global__` function gets two
//! exported wrappers: one giving its parameters' sizes (so a launch can
//! copy its arguments, as the driver does), one running a grid through the
//! shim's scheduler.

use std::ffi::c_void;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;

use crate::status::{CuResult, CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_SOURCE};

/// The first bytes of every image the stand-in's NVRTC makes.
pub const IMAGE_MAGIC: &str = "//tofu-cpu-cuda image\n";

/// The C++ model of CUDA's execution model.
const SHIM: &str = include_str!("../../runner/tests/cuda_shim/cuda_shim.h");

/// Calls a kernel from an array of argument pointers, and its sizes.
const GLUE: &str = r#"
namespace cpucuda {
template <class... A, size_t... I>
int call_(void (*f)(A...), unsigned g, unsigned b, void** p, std::index_sequence<I...>) {
  return cuda_shim::launch(g, b, [&] { f(*(std::remove_cv_t<A>*)p[I]...); });
}
template <class... A>
int call(void (*f)(A...), unsigned g, unsigned b, void** p) {
  return call_(f, g, b, p, std::index_sequence_for<A...>{});
}
template <class... A>
int sizes(void (*)(A...), size_t* s, int cap) {
  size_t v[] = {sizeof(A)..., 0};
  int n = (int)sizeof...(A);
  for (int i = 0; i < n && i < cap; ++i) s[i] = v[i];
  return n;
}
}  // namespace cpucuda
#define CPUCUDA_EXPORT extern "C" __attribute__((visibility("default")))
"#;

/// Runs a grid: (grid, block, argument pointers) → shim status.
pub type LaunchFn = unsafe extern "C" fn(u32, u32, *mut *mut c_void) -> i32;
/// Writes up to `cap` parameter sizes, gives the parameter count.
pub type SizesFn = unsafe extern "C" fn(*mut usize, i32) -> i32;

/// A loaded module (its shared object stays loaded for the process: queued
/// launches may still call into it).
pub struct Module {
    lib: libloading::Library,
}

/// A kernel of a module.
pub struct Function {
    /// Its name, for messages.
    pub name: String,
    /// Runs a grid.
    pub launch: LaunchFn,
    /// Bytes of each parameter.
    pub sizes: Vec<usize>,
}

/// The names of the `__global__` functions in `src`.
fn kernels(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("__global__") {
        rest = &rest[i + "__global__".len()..];
        let after = rest.trim_start();
        let Some(after) = after.strip_prefix("void") else {
            continue;
        };
        let name: String = after
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The C++ translation unit of `src`.
fn unit(src: &str) -> String {
    let mut u = String::from("#include <utility>\n#include <type_traits>\n");
    u.push_str(SHIM);
    u.push_str(GLUE);
    u.push_str("#line 1 \"kernel.cu\"\n");
    u.push_str(src);
    u.push('\n');
    for k in kernels(src) {
        u.push_str(&format!(
            "CPUCUDA_EXPORT int cpucuda_launch_{k}(unsigned g, unsigned b, void** p) \
             {{ return cpucuda::call({k}, g, b, p); }}\n\
             CPUCUDA_EXPORT int cpucuda_sizes_{k}(size_t* s, int cap) \
             {{ return cpucuda::sizes({k}, s, cap); }}\n"
        ));
    }
    u
}

fn cache_dir() -> PathBuf {
    std::env::var_os("TOFU_CPU_CUDA_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("tofu-cpu-cuda-cache"))
}

/// Compile `src` (or find it in the cache) and load it.
///
/// Errors: `CUDA_ERROR_INVALID_SOURCE` where g++ fails (its output on
/// stderr), `CUDA_ERROR_INVALID_IMAGE` where the shared object does not load.
pub fn load(src: &str) -> Result<Module, CuResult> {
    let u = unit(src);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    u.hash(&mut h);
    let dir = cache_dir();
    let so = dir.join(format!("k{:016x}-{}.so", h.finish(), u.len()));
    if !so.exists() {
        std::fs::create_dir_all(&dir).map_err(|_| CUDA_ERROR_INVALID_SOURCE)?;
        let tmp = dir.join(format!(
            "tmp-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let cpp = tmp.with_extension("cpp");
        std::fs::write(&cpp, &u).map_err(|_| CUDA_ERROR_INVALID_SOURCE)?;
        let out = Command::new("g++")
            .args([
                "-std=c++17",
                "-O1",
                "-fPIC",
                "-shared",
                "-fvisibility=hidden",
                "-fcf-protection=none",
                "-w",
                "-o",
            ])
            .arg(&tmp)
            .arg(&cpp)
            .output()
            .map_err(|e| {
                eprintln!("tofu-cpu-cuda: running g++: {e}");
                CUDA_ERROR_INVALID_SOURCE
            })?;
        let _ = std::fs::remove_file(&cpp);
        if !out.status.success() {
            eprintln!(
                "tofu-cpu-cuda: g++ failed on a kernel source:\n{}\n--- source ---\n{src}",
                String::from_utf8_lossy(&out.stderr)
            );
            let _ = std::fs::remove_file(&tmp);
            return Err(CUDA_ERROR_INVALID_SOURCE);
        }
        std::fs::rename(&tmp, &so).map_err(|_| CUDA_ERROR_INVALID_SOURCE)?;
    }
    // SAFETY: a shared object this module compiled; its initialisers are
    // the C++ runtime's.
    let lib = unsafe { libloading::Library::new(&so) }.map_err(|e| {
        eprintln!("tofu-cpu-cuda: loading {}: {e}", so.display());
        CUDA_ERROR_INVALID_IMAGE
    })?;
    Ok(Module { lib })
}

impl Module {
    /// The kernel `name`, if the module has it.
    pub fn function(&self, name: &str) -> Option<Function> {
        // SAFETY: the wrappers `unit` generated, with these signatures.
        unsafe {
            let launch = *self
                .lib
                .get::<LaunchFn>(format!("cpucuda_launch_{name}\0").as_bytes())
                .ok()?;
            let sizes_fn = *self
                .lib
                .get::<SizesFn>(format!("cpucuda_sizes_{name}\0").as_bytes())
                .ok()?;
            let n = sizes_fn(std::ptr::null_mut(), 0).max(0) as usize;
            let mut sizes = vec![0usize; n];
            sizes_fn(sizes.as_mut_ptr(), n as i32);
            Some(Function {
                name: name.to_string(),
                launch,
                sizes,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_are_found_after_global() {
        let src = "extern \"C\" __global__ void a_1(int x) {}\n\
                   __device__ int f();\nextern \"C\" __global__  void b(float* p, int n) {}";
        assert_eq!(kernels(src), ["a_1", "b"]);
    }
}
