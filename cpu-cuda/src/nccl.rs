//! NCCL (`nccl*`, the C signatures of `nccl.h`) between threads and
//! processes: a communicator joins the clique of its unique id (or of one
//! `ncclCommInitAll`); each collective or group of sends and receives is
//! queued on its stream and, when the stream reaches it, meets the other
//! ranks' calls of the same sequence number ([`crate::nccl_clique`]):
//! once all have arrived each computes its output from the others' device
//! buffers (f32 only: the backend's type), waits for all to finish reading,
//! then writes it (so in-place calls are right). Calls inside
//! `ncclGroupStart`/`ncclGroupEnd` are issued at the outermost end, a
//! communicator's sends and receives as one exchange. `ncclCommAbort`
//! fails the clique's waiting and later calls; a call that waits longer
//! than `TOFU_CPU_CUDA_NCCL_TIMEOUT_S` (default 120) fails too (a sticky
//! launch failure on its stream, reported on stderr naming the rank).
//! Communicators from a unique id meet through the id's server, in this
//! process or another ([`crate::nccl_net`]): NCCL between processes.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::device::{current, devices, stream_of};
use crate::driver::put;
use crate::memory::check;
use crate::nccl_clique::{join, Clique, Collective, Post};
use crate::nccl_net::{serve, Remote};
use crate::status::{CUDA_ERROR_LAUNCH_FAILED, CUDA_SUCCESS};
use crate::stream::Delay;
use std::os::unix::ffi::OsStringExt;

/// `ncclResult_t`.
pub type NcclResult = u32;
const NCCL_SUCCESS: NcclResult = 0;
const NCCL_SYSTEM_ERROR: NcclResult = 2;
const NCCL_INVALID_ARGUMENT: NcclResult = 4;
const NCCL_INVALID_USAGE: NcclResult = 5;
/// `ncclRemoteError`: a peer failed or a connection broke.
const NCCL_REMOTE_ERROR: NcclResult = 6;
/// `ncclFloat32`.
const FLOAT32: c_int = 7;

/// `ncclUniqueId`: 128 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    /// The bytes.
    pub internal: [c_char; 128],
}

/// How a communicator meets its clique.
#[derive(Clone)]
enum Transport {
    /// In this process (`ncclCommInitAll`).
    Local(Arc<Clique>),
    /// Through the server of its unique id ([`crate::nccl_net`]).
    Remote(Arc<Remote>),
}

/// A communicator: rank `rank` of a clique on `device`.
pub struct Comm {
    transport: Transport,
    /// Ranks in the clique.
    n: usize,
    rank: usize,
    device: usize,
    /// Calls issued so far (the next call's sequence number).
    seq: AtomicU64,
    /// Whether a call of it failed on its stream (`ncclCommGetAsyncError`).
    failed: Arc<AtomicBool>,
}

/// A call waiting for the end of its group.
struct Pending {
    comm: usize,
    stream: usize,
    post: Post,
}

thread_local! {
    static GROUP: RefCell<(u32, Vec<Pending>)> = const { RefCell::new((0, Vec::new())) };
}

#[no_mangle]
pub extern "C" fn ncclGetErrorString(r: NcclResult) -> *const c_char {
    match r {
        NCCL_SUCCESS => c"no error".as_ptr(),
        NCCL_INVALID_ARGUMENT => c"invalid argument (tofu-cpu-cuda)".as_ptr(),
        NCCL_INVALID_USAGE => {
            c"invalid usage (tofu-cpu-cuda: e.g. a unique id of another process)".as_ptr()
        }
        NCCL_REMOTE_ERROR => {
            c"remote process exited or there was a network error (tofu-cpu-cuda)".as_ptr()
        }
        _ => c"internal error (tofu-cpu-cuda)".as_ptr(),
    }
}

static IDS: AtomicU64 = AtomicU64::new(1);

/// A fresh id: this process, a counter, then `path` (NUL-terminated).
fn fresh_id(path: &[u8]) -> [u8; 128] {
    let mut b = [0u8; 128];
    b[..8].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
    b[8..16].copy_from_slice(&IDS.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    b[16..16 + path.len()].copy_from_slice(path);
    b
}

/// Where a clique's server listens (a unix socket path of at most 100 bytes).
fn socket_path() -> Option<std::path::PathBuf> {
    let n = IDS.load(Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("tofu-cpu-cuda-nccl-{}-{n}", std::process::id()));
    (p.as_os_str().len() <= 100).then_some(p)
}

/// A unique id whose clique is served from this process, on a unix socket
/// whose path the id carries ([`crate::nccl_net`]).
#[no_mangle]
pub extern "C" fn ncclGetUniqueId(id: *mut UniqueId) -> NcclResult {
    let Some(path) = socket_path() else {
        return NCCL_SYSTEM_ERROR;
    };
    let b = fresh_id(path.as_os_str().as_encoded_bytes());
    let _ = std::fs::remove_file(&path);
    if let Err(e) = serve(path.clone(), b.to_vec()) {
        eprintln!(
            "tofu-cpu-cuda: serving an NCCL clique on {}: {e}",
            path.display()
        );
        return NCCL_SYSTEM_ERROR;
    }
    put(
        id,
        UniqueId {
            internal: b.map(|x| x as c_char),
        },
    );
    NCCL_SUCCESS
}

fn new_comm(
    out: *mut *mut c_void,
    transport: Transport,
    n: usize,
    rank: usize,
    device: usize,
) -> NcclResult {
    let c = Box::new(Comm {
        transport,
        n,
        rank,
        device,
        seq: AtomicU64::new(0),
        failed: Arc::new(AtomicBool::new(false)),
    });
    put(out, Box::into_raw(c) as *mut c_void);
    NCCL_SUCCESS
}

#[no_mangle]
pub extern "C" fn ncclCommInitRank(
    comm: *mut *mut c_void,
    n: c_int,
    id: UniqueId,
    rank: c_int,
) -> NcclResult {
    let (Ok(n), Ok(rank)) = (usize::try_from(n), usize::try_from(rank)) else {
        return NCCL_INVALID_ARGUMENT;
    };
    let Some(device) = current() else {
        return NCCL_INVALID_USAGE;
    };
    if rank >= n {
        return NCCL_INVALID_ARGUMENT;
    }
    let bytes: Vec<u8> = id.internal.iter().map(|&c| c as u8).collect();
    let path: Vec<u8> = bytes[16..]
        .iter()
        .copied()
        .take_while(|&b| b != 0)
        .collect();
    let path = std::path::PathBuf::from(std::ffi::OsString::from_vec(path));
    match Remote::connect(&path, n, rank) {
        Ok(r) => new_comm(comm, Transport::Remote(r), n, rank, device),
        Err(e) => {
            eprintln!(
                "tofu-cpu-cuda: NCCL rank {rank} of {n}: connecting to the clique's server at {}: {e}",
                path.display()
            );
            NCCL_SYSTEM_ERROR
        }
    }
}

#[no_mangle]
pub extern "C" fn ncclCommInitAll(
    comms: *mut *mut c_void,
    n: c_int,
    devs: *const c_int,
) -> NcclResult {
    let Ok(n) = usize::try_from(n) else {
        return NCCL_INVALID_ARGUMENT;
    };
    if comms.is_null() || n == 0 {
        return NCCL_INVALID_ARGUMENT;
    }
    let bytes = fresh_id(&[]);
    for r in 0..n {
        // SAFETY: the caller's `n` device ordinals (or none: 0..n).
        let d = if devs.is_null() {
            r
        } else {
            unsafe { *devs.add(r) as usize }
        };
        if d >= devices().len() {
            return NCCL_INVALID_ARGUMENT;
        }
        let Some(c) = join(&bytes, n, r) else {
            return NCCL_INVALID_ARGUMENT;
        };
        // SAFETY: the caller's array of `n` communicator slots.
        new_comm(unsafe { comms.add(r) }, Transport::Local(c), n, r, d);
    }
    NCCL_SUCCESS
}

#[no_mangle]
pub extern "C" fn ncclCommAbort(comm: *mut c_void) -> NcclResult {
    if comm.is_null() {
        return NCCL_SUCCESS;
    }
    // SAFETY: from `ncclCommInitRank`/`InitAll`, aborted once; queued
    // calls hold the clique, not the communicator.
    let c = unsafe { Box::from_raw(comm as *mut Comm) };
    match &c.transport {
        Transport::Local(clique) => clique.abort(c.rank),
        Transport::Remote(remote) => remote.close(),
    }
    NCCL_SUCCESS
}

/// `ncclRemoteError` once a call of `comm` failed on its stream (a peer
/// that aborted or exited, a timeout), else `ncclSuccess`.
#[no_mangle]
pub extern "C" fn ncclCommGetAsyncError(comm: *mut c_void, error: *mut NcclResult) -> NcclResult {
    if comm.is_null() || error.is_null() {
        return NCCL_INVALID_ARGUMENT;
    }
    // SAFETY: a live communicator handle.
    let c = unsafe { &*(comm as *const Comm) };
    let e = if c.failed.load(Ordering::SeqCst) {
        NCCL_REMOTE_ERROR
    } else {
        NCCL_SUCCESS
    };
    // SAFETY: the caller's `ncclResult_t`.
    unsafe { *error = e };
    NCCL_SUCCESS
}

#[no_mangle]
pub extern "C" fn ncclGroupStart() -> NcclResult {
    GROUP.with(|g| g.borrow_mut().0 += 1);
    NCCL_SUCCESS
}

#[no_mangle]
pub extern "C" fn ncclGroupEnd() -> NcclResult {
    let pending = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        g.0 = g.0.saturating_sub(1);
        if g.0 == 0 {
            std::mem::take(&mut g.1)
        } else {
            Vec::new()
        }
    });
    // A communicator's sends and receives of the group are one exchange.
    let mut merged: Vec<Pending> = Vec::new();
    for p in pending {
        let into = merged
            .iter_mut()
            .find(|m| m.comm == p.comm && m.post.is_p2p() && p.post.is_p2p());
        match into {
            Some(m) => m.post.merge(p.post),
            None => merged.push(p),
        }
    }
    let mut r = NCCL_SUCCESS;
    for p in merged {
        let e = issue(p);
        if r == NCCL_SUCCESS {
            r = e;
        }
    }
    r
}

/// Queue one call (or one group's exchange) on its stream.
fn issue(p: Pending) -> NcclResult {
    // SAFETY: a live communicator handle (checked non-null by `call`).
    let comm = unsafe { &*(p.comm as *const Comm) };
    // The null stream is the communicator's device's default stream.
    let stream = match p.stream {
        0..=2 => Some(devices()[comm.device].default.clone()),
        s => stream_of(s as *mut c_void),
    };
    let Some(stream) = stream else {
        return NCCL_INVALID_USAGE;
    };
    if stream.device != comm.device {
        return NCCL_INVALID_USAGE;
    }
    let seq = comm.seq.fetch_add(1, Ordering::Relaxed);
    let (transport, rank) = (comm.transport.clone(), comm.rank);
    let failed = comm.failed.clone();
    stream.enqueue(
        Delay::Random,
        Box::new(move || {
            let r = match &transport {
                Transport::Local(clique) => clique.run(seq, rank, p.post),
                // SAFETY: the post's buffers were checked by `call`.
                Transport::Remote(remote) => unsafe { remote.run(seq, rank, &p.post) },
            };
            match r {
                Ok(()) => CUDA_SUCCESS,
                Err(e) => {
                    eprintln!("tofu-cpu-cuda: NCCL rank {rank}: {e}");
                    failed.store(true, Ordering::SeqCst);
                    CUDA_ERROR_LAUNCH_FAILED
                }
            }
        }),
    );
    NCCL_SUCCESS
}

/// Check a call's buffers and type, then issue it (or keep it for its
/// group's end).
fn call(
    comm: *mut c_void,
    stream: *mut c_void,
    dtype: c_int,
    buffers: &[(usize, usize)],
    post: Post,
) -> NcclResult {
    if comm.is_null() || dtype != FLOAT32 {
        return NCCL_INVALID_ARGUMENT;
    }
    for &(p, elems) in buffers {
        if elems > 0 && check(p as u64, elems * 4) != CUDA_SUCCESS {
            return NCCL_INVALID_ARGUMENT;
        }
    }
    let p = Pending {
        comm: comm as usize,
        stream: stream as usize,
        post,
    };
    let kept = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.0 > 0 {
            g.1.push(p);
            None
        } else {
            Some(p)
        }
    });
    kept.map_or(NCCL_SUCCESS, issue)
}

fn ranks(comm: *mut c_void) -> usize {
    if comm.is_null() {
        return 0;
    }
    // SAFETY: non-null handles are live communicators.
    let c = unsafe { &*(comm as *const Comm) };
    c.n
}

#[no_mangle]
pub extern "C" fn ncclAllReduce(
    s: *const c_void,
    r: *mut c_void,
    n: usize,
    t: c_int,
    op: c_int,
    comm: *mut c_void,
    st: *mut c_void,
) -> NcclResult {
    let post = Post::collective(Collective::AllReduce(op), s as usize, r as usize, n);
    call(comm, st, t, &[(s as usize, n), (r as usize, n)], post)
}

#[no_mangle]
pub extern "C" fn ncclReduceScatter(
    s: *const c_void,
    r: *mut c_void,
    n: usize,
    t: c_int,
    op: c_int,
    comm: *mut c_void,
    st: *mut c_void,
) -> NcclResult {
    let post = Post::collective(Collective::ReduceScatter(op), s as usize, r as usize, n);
    call(
        comm,
        st,
        t,
        &[(s as usize, n * ranks(comm)), (r as usize, n)],
        post,
    )
}

#[no_mangle]
pub extern "C" fn ncclAllGather(
    s: *const c_void,
    r: *mut c_void,
    n: usize,
    t: c_int,
    comm: *mut c_void,
    st: *mut c_void,
) -> NcclResult {
    let post = Post::collective(Collective::AllGather, s as usize, r as usize, n);
    call(
        comm,
        st,
        t,
        &[(s as usize, n), (r as usize, n * ranks(comm))],
        post,
    )
}

#[no_mangle]
pub extern "C" fn ncclBroadcast(
    s: *const c_void,
    r: *mut c_void,
    n: usize,
    t: c_int,
    root: c_int,
    comm: *mut c_void,
    st: *mut c_void,
) -> NcclResult {
    let post = Post::collective(
        Collective::Broadcast(root as usize),
        s as usize,
        r as usize,
        n,
    );
    call(comm, st, t, &[(r as usize, n)], post)
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn ncclReduce(
    s: *const c_void,
    r: *mut c_void,
    n: usize,
    t: c_int,
    op: c_int,
    root: c_int,
    comm: *mut c_void,
    st: *mut c_void,
) -> NcclResult {
    let post = Post::collective(
        Collective::Reduce(op, root as usize),
        s as usize,
        r as usize,
        n,
    );
    call(comm, st, t, &[(s as usize, n)], post)
}

#[no_mangle]
pub extern "C" fn ncclSend(
    s: *const c_void,
    n: usize,
    t: c_int,
    peer: c_int,
    comm: *mut c_void,
    st: *mut c_void,
) -> NcclResult {
    let post = Post::p2p(vec![(peer as usize, s as usize, n)], Vec::new());
    call(comm, st, t, &[(s as usize, n)], post)
}

#[no_mangle]
pub extern "C" fn ncclRecv(
    r: *mut c_void,
    n: usize,
    t: c_int,
    peer: c_int,
    comm: *mut c_void,
    st: *mut c_void,
) -> NcclResult {
    let post = Post::p2p(Vec::new(), vec![(peer as usize, r as usize, n)]);
    call(comm, st, t, &[(r as usize, n)], post)
}
