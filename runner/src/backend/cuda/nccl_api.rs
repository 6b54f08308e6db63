//! NCCL's C API, opened by the backend itself (see [`super::library`]):
//! the functions [`super::NcclCommunicator`] calls, resolved once per
//! process when NCCL is first needed, every one checked at open so a
//! missing library or symbol is an error, not a panic; [`RawComm`], a
//! communicator aborted on drop without panicking; and [`grouped`], which
//! ends every group it starts.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use libloading::Library;

use super::library::{c_api, nccl_candidates, open_first, LibraryError, NCCL, NCCL_ENV, NCCL_FIX};

/// `ncclResult_t`: 0 is success.
type Status = c_int;
/// `ncclComm_t`.
pub(super) type CommPtr = *mut c_void;
/// `cudaStream_t` (a `CUstream`).
pub(super) type StreamPtr = *mut c_void;

/// `ncclFloat32`.
pub(super) const FLOAT32: c_int = 7;

/// `ncclUniqueId`: 128 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct UniqueId {
    /// The bytes.
    pub internal: [c_char; 128],
}

c_api! {
    /// The NCCL functions the backend calls.
    NcclApi: Status, NCCL, NCCL_FIX, "ncclGetErrorString";
    get_unique_id = "ncclGetUniqueId": fn(*mut UniqueId);
    comm_init_rank = "ncclCommInitRank": fn(*mut CommPtr, c_int, UniqueId, c_int);
    comm_init_all = "ncclCommInitAll": fn(*mut CommPtr, c_int, *const c_int);
    comm_abort = "ncclCommAbort": fn(CommPtr);
    comm_get_async_error = "ncclCommGetAsyncError": fn(CommPtr, *mut Status);
    group_start = "ncclGroupStart": fn();
    group_end = "ncclGroupEnd": fn();
    all_reduce = "ncclAllReduce":
        fn(*const c_void, *mut c_void, usize, c_int, c_int, CommPtr, StreamPtr);
    reduce_scatter = "ncclReduceScatter":
        fn(*const c_void, *mut c_void, usize, c_int, c_int, CommPtr, StreamPtr);
    all_gather = "ncclAllGather":
        fn(*const c_void, *mut c_void, usize, c_int, CommPtr, StreamPtr);
    broadcast = "ncclBroadcast":
        fn(*const c_void, *mut c_void, usize, c_int, c_int, CommPtr, StreamPtr);
    reduce = "ncclReduce":
        fn(*const c_void, *mut c_void, usize, c_int, c_int, c_int, CommPtr, StreamPtr);
    send = "ncclSend": fn(*const c_void, usize, c_int, c_int, CommPtr, StreamPtr);
    recv = "ncclRecv": fn(*mut c_void, usize, c_int, c_int, CommPtr, StreamPtr);
}

impl NcclApi {
    /// Open NCCL from `candidates` (the first that opens) and resolve its
    /// functions.
    ///
    /// Errors: no candidate opens, or the library lacks a function.
    pub(super) fn open(candidates: &[String]) -> Result<Self, LibraryError> {
        // SAFETY: opening NCCL runs its initialisers, which have no
        // preconditions.
        let (lib, path) = open_first(NCCL, NCCL_FIX, candidates, |n| unsafe { Library::new(n) })?;
        Self::resolve(lib, &path)
    }

    /// `Ok` for success, else NCCL's words for `status`.
    pub(super) fn check(&self, status: Status) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        Err(format!("{} (ncclResult_t {status})", self.words(status)))
    }
}

/// NCCL, opened once per process (from [`NCCL_ENV`] or the usual names).
///
/// Errors: the [`LibraryError`] of the first attempt, every time.
pub(super) fn nccl() -> Result<&'static NcclApi, LibraryError> {
    static API: OnceLock<Result<NcclApi, LibraryError>> = OnceLock::new();
    API.get_or_init(|| {
        let explicit = std::env::var(NCCL_ENV).ok();
        NcclApi::open(&nccl_candidates(explicit.as_deref()))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// An NCCL communicator, aborted when dropped (`ncclCommAbort`, as cudarc
/// did: it frees the communicator without waiting for peers that may have
/// failed; an error then is reported on stderr, since a drop cannot return
/// it and must not panic, where cudarc's panicked).
pub(super) struct RawComm {
    pub(super) api: &'static NcclApi,
    pub(super) ptr: CommPtr,
}

impl RawComm {
    /// Abort the communicator now (`ncclCommAbort`: every call queued on it,
    /// here and, through NCCL, on the peers, fails instead of waiting); the
    /// handle is then empty, and a later abort or drop does nothing.
    ///
    /// Errors: NCCL's words for a failing abort.
    pub(super) fn abort(&mut self) -> Result<(), String> {
        let ptr = std::mem::replace(&mut self.ptr, std::ptr::null_mut());
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: a communicator NCCL created, aborted once (the handle is
        // emptied first).
        self.api.check(unsafe { (self.api.comm_abort)(ptr) })
    }

    /// The communicator's asynchronous error (`ncclCommGetAsyncError`):
    /// `Ok(())` while none, else NCCL's words (a peer that failed, a network
    /// error). An aborted handle has none.
    pub(super) fn async_error(&self) -> Result<(), String> {
        if self.ptr.is_null() {
            return Ok(());
        }
        let mut found: Status = 0;
        // SAFETY: a live communicator; writes one `ncclResult_t`.
        self.api
            .check(unsafe { (self.api.comm_get_async_error)(self.ptr, &mut found) })?;
        self.api.check(found)
    }
}

impl Drop for RawComm {
    fn drop(&mut self) {
        if let Err(e) = self.abort() {
            eprintln!("tofu: ncclCommAbort failed while dropping a communicator: {e}");
        }
    }
}

/// Run `body` inside a group: `start`, then `body`, then `end` whenever
/// `start` succeeded, whatever `body` returned (NCCL is left inside a
/// group otherwise, and every later call of the thread hangs or fails).
///
/// Errors: `start`'s, else `body`'s, else `end`'s.
pub(super) fn grouped<E>(
    start: impl FnOnce() -> Result<(), E>,
    body: impl FnOnce() -> Result<(), E>,
    end: impl FnOnce() -> Result<(), E>,
) -> Result<(), E> {
    start()?;
    let r = body();
    let ended = end();
    r.and(ended)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A stand-in for NCCL's group calls that records them and fails where
    /// told.
    #[derive(Default)]
    struct Faulty {
        calls: RefCell<Vec<&'static str>>,
        fail: Vec<&'static str>,
    }

    impl Faulty {
        fn failing(fail: &[&'static str]) -> Self {
            Faulty {
                fail: fail.to_vec(),
                ..Faulty::default()
            }
        }

        fn call(&self, what: &'static str) -> Result<(), String> {
            self.calls.borrow_mut().push(what);
            if self.fail.contains(&what) {
                Err(format!("{what} failed"))
            } else {
                Ok(())
            }
        }

        fn run(&self) -> Result<(), String> {
            grouped(
                || self.call("start"),
                || {
                    self.call("send")?;
                    self.call("recv")
                },
                || self.call("end"),
            )
        }
    }

    #[test]
    fn a_group_ends_after_its_calls() {
        let f = Faulty::default();
        assert_eq!(f.run(), Ok(()));
        assert_eq!(*f.calls.borrow(), ["start", "send", "recv", "end"]);
    }

    #[test]
    fn an_error_inside_a_group_still_ends_it() {
        let f = Faulty::failing(&["send"]);
        assert_eq!(f.run(), Err("send failed".into()));
        assert_eq!(*f.calls.borrow(), ["start", "send", "end"]);
    }

    #[test]
    fn the_first_error_wins_and_a_failed_end_is_reported() {
        let f = Faulty::failing(&["recv", "end"]);
        assert_eq!(f.run(), Err("recv failed".into()));
        let f = Faulty::failing(&["end"]);
        assert_eq!(f.run(), Err("end failed".into()));
    }

    #[test]
    fn a_group_that_did_not_start_is_not_ended() {
        let f = Faulty::failing(&["start"]);
        assert_eq!(f.run(), Err("start failed".into()));
        assert_eq!(*f.calls.borrow(), ["start"]);
    }

    static ABORTED: AtomicUsize = AtomicUsize::new(0);
    static GROUP_ENDS: AtomicUsize = AtomicUsize::new(0);

    /// Never called: fills the stand-in's slots the tests do not reach.
    unsafe extern "C" fn never() -> Status {
        std::process::abort()
    }

    /// [`never`] as a function pointer of type `F`.
    fn unreached<F: Copy>() -> F {
        let f: unsafe extern "C" fn() -> Status = never;
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of_val(&f));
        // SAFETY: one function pointer type read as another of the same
        // size; the tests never call it (it would abort, not misbehave).
        unsafe { std::mem::transmute_copy(&f) }
    }

    unsafe extern "C" fn abort_fails(_: CommPtr) -> Status {
        ABORTED.fetch_add(1, Ordering::SeqCst);
        3
    }

    unsafe extern "C" fn group_start_ok() -> Status {
        0
    }

    unsafe extern "C" fn group_end_counted() -> Status {
        GROUP_ENDS.fetch_add(1, Ordering::SeqCst);
        0
    }

    unsafe extern "C" fn send_fails(
        _: *const c_void,
        _: usize,
        _: c_int,
        _: c_int,
        _: CommPtr,
        _: StreamPtr,
    ) -> Status {
        5
    }

    unsafe extern "C" fn error_string(status: Status) -> *const c_char {
        match status {
            3 => c"internal error".as_ptr(),
            _ => c"invalid usage".as_ptr(),
        }
    }

    /// A stand-in for NCCL, its functions failing: a library handle (libc)
    /// with fake functions in the slots the tests call.
    fn faulty_nccl() -> &'static NcclApi {
        // SAFETY: opening libc has no preconditions.
        let lib = unsafe { Library::new("libc.so.6") }.expect("libc");
        Box::leak(Box::new(NcclApi {
            _lib: lib,
            path: "libc.so.6".into(),
            get_unique_id: unreached(),
            comm_init_rank: unreached(),
            comm_init_all: unreached(),
            comm_abort: abort_fails,
            comm_get_async_error: unreached(),
            group_start: group_start_ok,
            group_end: group_end_counted,
            all_reduce: unreached(),
            reduce_scatter: unreached(),
            all_gather: unreached(),
            broadcast: unreached(),
            reduce: unreached(),
            send: send_fails,
            recv: unreached(),
            error_string,
        }))
    }

    #[test]
    fn a_failing_abort_on_drop_is_reported_not_a_panic() {
        let api = faulty_nccl();
        let before = ABORTED.load(Ordering::SeqCst);
        drop(RawComm {
            api,
            ptr: std::ptr::NonNull::<u8>::dangling().as_ptr().cast(),
        });
        assert_eq!(ABORTED.load(Ordering::SeqCst), before + 1);
        // A communicator never created is not aborted.
        drop(RawComm {
            api,
            ptr: std::ptr::null_mut(),
        });
        assert_eq!(ABORTED.load(Ordering::SeqCst), before + 1);
    }

    #[test]
    fn nccls_errors_are_in_its_words() {
        let api = faulty_nccl();
        assert_eq!(api.check(0), Ok(()));
        assert_eq!(api.check(3), Err("internal error (ncclResult_t 3)".into()));
    }

    #[test]
    fn a_failing_send_inside_a_group_still_ends_it() {
        let api = faulty_nccl();
        let before = GROUP_ENDS.load(Ordering::SeqCst);
        let (p, c, s) = (std::ptr::null(), std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: the stand-in's functions read none of their arguments.
        let r = grouped(
            || api.check(unsafe { (api.group_start)() }),
            || api.check(unsafe { (api.send)(p, 4, FLOAT32, 1, c, s) }),
            || api.check(unsafe { (api.group_end)() }),
        );
        assert_eq!(r, Err("invalid usage (ncclResult_t 5)".into()));
        assert_eq!(GROUP_ENDS.load(Ordering::SeqCst), before + 1);
    }

    #[test]
    fn a_real_nccl_has_every_function_the_backend_calls() {
        // Found under the usual names or TOFU_NCCL_LIBRARY (e.g. the
        // `libnccl.so.2` of a PyTorch or nvidia-nccl wheel).
        let explicit = std::env::var(NCCL_ENV).ok();
        match NcclApi::open(&nccl_candidates(explicit.as_deref())) {
            Ok(_) => {}
            Err(LibraryError::Missing { tried, .. }) => {
                eprintln!("SKIPPED: no NCCL on this machine (tried {tried}; set {NCCL_ENV})")
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_missing_nccl_is_an_error_not_a_panic() {
        let e = NcclApi::open(&["libtofu-no-such-nccl.so.2".to_string()])
            .err()
            .expect("no such library");
        assert!(matches!(e, LibraryError::Missing { .. }), "{e}");
        assert!(e.to_string().contains("libtofu-no-such-nccl.so.2"), "{e}");
    }

    #[test]
    fn a_library_without_nccls_functions_is_an_error_naming_the_symbol() {
        // libc opens everywhere and has no NCCL symbols.
        let e = NcclApi::open(&["libc.so.6".to_string()])
            .err()
            .expect("libc is not NCCL");
        match &e {
            LibraryError::Symbol { path, symbol, .. } => {
                assert_eq!((path.as_str(), *symbol), ("libc.so.6", "ncclGetUniqueId"));
            }
            other => panic!("expected a missing symbol, got {other}"),
        }
        assert!(e.to_string().contains("--comm host"), "{e}");
    }
}
