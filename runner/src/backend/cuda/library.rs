//! Finding the shared libraries the CUDA backend loads itself (NCCL,
//! cuDNN), and the typed error of a library that cannot be used.
//!
//! cudarc 0.19.10 opens NCCL only as `libnccl.so`, `libnccl.so.13`, `.12`,
//! … `.9` or `.1`, never as `libnccl.so.2`, the one name NCCL's runtime
//! package (`libnccl2`) and PyPI wheel (`nvidia-nccl-cu*`) ship, and panics
//! where none opens. So the backend opens NCCL itself: the candidates of
//! [`nccl_candidates`] in order, the first that opens wins
//! ([`open_first`]), and a library that is missing or lacks a symbol is a
//! [`LibraryError`] naming it and the fix, never a panic.

use crate::backend::BackendError;

/// Environment variable naming the NCCL library to open (a path or a file
/// name), tried before the usual names.
pub const NCCL_ENV: &str = "TOFU_NCCL_LIBRARY";

/// A library the CUDA backend needs cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LibraryError {
    /// None of the library's names opened.
    #[error("{library} could not be loaded (tried {tried}; last error: {last}): {fix}")]
    Missing {
        /// The library, in words (e.g. `"libnccl (NCCL)"`).
        library: &'static str,
        /// The names tried, comma-separated.
        tried: String,
        /// The loader's error for the last name tried.
        last: String,
        /// What to do about it.
        fix: &'static str,
    },
    /// The library opened but lacks a function the backend calls.
    #[error("{library} at `{path}` has no `{symbol}` (too old a version?): {fix}")]
    Symbol {
        /// The library, in words.
        library: &'static str,
        /// The name it was opened under.
        path: String,
        /// The missing function.
        symbol: &'static str,
        /// What to do about it.
        fix: &'static str,
    },
}

impl From<LibraryError> for BackendError {
    fn from(e: LibraryError) -> Self {
        BackendError::Device {
            backend: "cuda",
            message: e.to_string(),
        }
    }
}

/// NCCL, in words.
pub const NCCL: &str = "libnccl (NCCL)";

/// How to get NCCL, or do without it.
pub const NCCL_FIX: &str = "install NCCL 2 (the `libnccl2` package or `pip install \
     nvidia-nccl-cu12`, then add its `lib` folder to LD_LIBRARY_PATH), or name the \
     library in TOFU_NCCL_LIBRARY, or pass --comm host to communicate through the host";

/// The names NCCL is opened under, in order: `explicit` (the value of
/// [`NCCL_ENV`], if set), then `libnccl.so.2` (NCCL 2's soname: the runtime
/// package and the wheel ship only it), then `libnccl.so` (the development
/// package's link), then the names cudarc tries.
pub fn nccl_candidates(explicit: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> = explicit
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .into_iter()
        .collect();
    names.push("libnccl.so.2".into());
    for n in cudarc::get_lib_name_candidates("nccl") {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// Environment variable naming the cuDNN library to open (a path or a
/// file name), tried before the usual names.
pub const CUDNN_ENV: &str = "TOFU_CUDNN_LIBRARY";

/// cuDNN, in words.
pub const CUDNN: &str = "libcudnn (cuDNN)";

/// How to get cuDNN (without it, convolutions run as generated kernels).
pub const CUDNN_FIX: &str = "install cuDNN 9 (the `libcudnn9-cuda-13` package or `pip install \
     nvidia-cudnn-cu13`, then add its `lib` folder to LD_LIBRARY_PATH), or name the \
     library in TOFU_CUDNN_LIBRARY; without it convolutions run as generated CUDA kernels";

/// The names cuDNN is opened under, in order: `explicit` (the value of
/// [`CUDNN_ENV`], if set), then `libcudnn.so.9` (cuDNN 9's soname, the one
/// the runtime package and the wheel ship), then `libcudnn.so`.
pub fn cudnn_candidates(explicit: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> = explicit
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .into_iter()
        .collect();
    names.extend(["libcudnn.so.9".to_string(), "libcudnn.so".to_string()]);
    names
}

/// Open the first of `candidates` that `open` accepts; gives it and the
/// name it opened under.
///
/// Errors: [`LibraryError::Missing`] naming `library`, every name tried,
/// the last loader error and `fix`, where none opens (or there are none).
pub fn open_first<L, E: std::fmt::Display>(
    library: &'static str,
    fix: &'static str,
    candidates: &[String],
    mut open: impl FnMut(&str) -> Result<L, E>,
) -> Result<(L, String), LibraryError> {
    let mut last = "no names to try".to_string();
    for name in candidates {
        match open(name) {
            Ok(lib) => return Ok((lib, name.clone())),
            Err(e) => last = e.to_string(),
        }
    }
    Err(LibraryError::Missing {
        library,
        tried: candidates.join(", "),
        last,
        fix,
    })
}

/// Declare `$api`, a library's C functions the backend calls (each
/// returning the library's status type `$status`, 0 for success) and its
/// error-string function `$err`, with `resolve(lib, path)`, which looks
/// every one up (a missing one is [`LibraryError::Symbol`] naming
/// `$library` and `$fix`), and `words(status)`, the library's text for a
/// status. Used by the NCCL and cuDNN loaders.
macro_rules! c_api {
    ($(#[$doc:meta])* $api:ident: $status:ty, $library:expr, $fix:expr, $err:literal;
     $($field:ident = $symbol:literal : fn($($arg:ty),*);)*) => {
        $(#[$doc])*
        pub(super) struct $api {
            _lib: libloading::Library,
            /// The name it was opened under (for messages; NCCL's name no
            /// message needs).
            #[allow(dead_code)]
            pub(super) path: String,
            $(pub(super) $field: unsafe extern "C" fn($($arg),*) -> $status,)*
            error_string: unsafe extern "C" fn($status) -> *const std::ffi::c_char,
        }

        impl $api {
            /// Resolve every function in `lib` (opened as `path`).
            fn resolve(lib: libloading::Library, path: &str) -> Result<Self, LibraryError> {
                let missing = |symbol| LibraryError::Symbol {
                    library: $library,
                    path: path.to_string(),
                    symbol,
                    fix: $fix,
                };
                // SAFETY: each symbol is the library's function of that name
                // with the signature declared here (its C header's).
                unsafe {
                    $(let $field = *lib
                        .get::<unsafe extern "C" fn($($arg),*) -> $status>(
                            concat!($symbol, "\0").as_bytes(),
                        )
                        .map_err(|_| missing($symbol))?;)*
                    let error_string = *lib
                        .get::<unsafe extern "C" fn($status) -> *const std::ffi::c_char>(
                            concat!($err, "\0").as_bytes(),
                        )
                        .map_err(|_| missing($err))?;
                    Ok($api { _lib: lib, path: path.to_string(), $($field,)* error_string })
                }
            }

            /// The library's words for `status`.
            fn words(&self, status: $status) -> String {
                // SAFETY: the error-string function returns a static C
                // string (or null).
                let p = unsafe { (self.error_string)(status) };
                if p.is_null() {
                    "unknown error".into()
                } else {
                    // SAFETY: non-null, NUL-terminated, static.
                    unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
                }
            }
        }
    };
}
pub(super) use c_api;

/// Run `f`, turning a panic inside it (cudarc panics where a library
/// lacks a function it needs, e.g. a driver older than the CUDA 13 API it
/// was built for) into a [`BackendError::Device`] naming `what`, the panic's
/// message and the fix.
///
/// Errors: `f`'s, or its panic.
pub fn catching<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, BackendError>,
) -> Result<T, BackendError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "(no message)".into());
        Err(BackendError::Device {
            backend: "cuda",
            message: format!(
                "{what}: the CUDA bindings failed: {message}; install an NVIDIA driver and \
                 CUDA libraries of version 13 or newer (`nvidia-smi` shows the driver's \
                 CUDA version), or run with `--backend cpu`"
            ),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_the_bindings_is_an_error_naming_the_call_and_the_fix() {
        let e = catching::<()>("opening device 0", || {
            panic!("Missing symbol cuCtxCreate_v4: undefined symbol")
        })
        .unwrap_err()
        .to_string();
        for want in [
            "opening device 0",
            "Missing symbol cuCtxCreate_v4",
            "--backend cpu",
        ] {
            assert!(e.contains(want), "{want:?} not in {e}");
        }
        assert_eq!(catching("x", || Ok(3)).unwrap(), 3);
        let e = catching::<()>("x", || {
            Err(BackendError::CopyLength {
                expected: 1,
                got: 2,
            })
        });
        assert!(matches!(e, Err(BackendError::CopyLength { .. })));
    }

    #[test]
    fn nccl_is_found_under_its_soname_before_cudarcs_names() {
        let c = nccl_candidates(None);
        assert_eq!(c[0], "libnccl.so.2");
        assert!(c.contains(&"libnccl.so".to_string()));
        let unique: std::collections::HashSet<_> = c.iter().collect();
        assert_eq!(unique.len(), c.len(), "no name twice: {c:?}");
        // cudarc's own list lacks the soname: the reason this list exists.
        assert!(!cudarc::get_lib_name_candidates("nccl").contains(&"libnccl.so.2".to_string()));
    }

    #[test]
    fn an_explicit_library_is_tried_first() {
        let c = nccl_candidates(Some("/opt/nccl/lib/libnccl.so.2.27.3"));
        assert_eq!(c[0], "/opt/nccl/lib/libnccl.so.2.27.3");
        assert_eq!(c[1], "libnccl.so.2");
        assert_eq!(nccl_candidates(Some("")), nccl_candidates(None));
    }

    #[test]
    fn cudnn_is_found_under_an_explicit_name_then_its_soname() {
        let c = cudnn_candidates(Some("/opt/cudnn/libcudnn.so.9.8.0"));
        assert_eq!(
            c,
            [
                "/opt/cudnn/libcudnn.so.9.8.0",
                "libcudnn.so.9",
                "libcudnn.so"
            ]
        );
        assert_eq!(cudnn_candidates(Some("")), ["libcudnn.so.9", "libcudnn.so"]);
    }

    #[test]
    fn the_first_name_that_opens_wins() {
        let names = nccl_candidates(None);
        let mut tried = Vec::new();
        let (lib, name) = open_first(NCCL, NCCL_FIX, &names, |n| {
            tried.push(n.to_string());
            if n == "libnccl.so" {
                Ok(7)
            } else {
                Err(format!("{n}: cannot open shared object file"))
            }
        })
        .unwrap();
        assert_eq!((lib, name.as_str()), (7, "libnccl.so"));
        assert_eq!(tried.last().map(String::as_str), Some("libnccl.so"));
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it_and_the_fix() {
        let names = vec!["libnccl.so.2".to_string(), "libnccl.so".to_string()];
        let e =
            open_first::<(), _>(NCCL, NCCL_FIX, &names, |n| Err(format!("{n}: nope"))).unwrap_err();
        let text = e.to_string();
        for want in [
            "libnccl (NCCL)",
            "libnccl.so.2, libnccl.so",
            "libnccl.so: nope",
            "--comm host",
        ] {
            assert!(text.contains(want), "{want:?} not in {text}");
        }
        let b: BackendError = e.into();
        assert!(b.to_string().starts_with("cuda: libnccl (NCCL)"), "{b}");
    }
}
