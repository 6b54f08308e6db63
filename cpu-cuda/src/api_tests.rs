//! Tests of the exported entry points against independent oracles: GEMM
//! against a triple loop, stream order and events under random delays,
//! out-of-memory, NCCL's collectives and grouped sends between threads
//! against host arithmetic, a count mismatch and an abort.

use std::ffi::c_void;
use std::ptr::null_mut;

use crate::cublas::*;
use crate::device::context_handle;
use crate::driver::*;
use crate::driver_mem::*;
use crate::nccl::*;
use crate::status::*;

/// The tests share the process's devices and their sticky errors: one at
/// a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn bind(d: usize) {
    assert_eq!(cuCtxSetCurrent(context_handle(d)), CUDA_SUCCESS);
}

fn upload(v: &[f32]) -> u64 {
    let mut p = 0u64;
    assert_eq!(cuMemAlloc_v2(&mut p, v.len() * 4), CUDA_SUCCESS);
    let r = cuMemcpyHtoDAsync_v2(p, v.as_ptr().cast(), v.len() * 4, null_mut());
    assert_eq!(r, CUDA_SUCCESS);
    p
}

fn download(p: u64, n: usize) -> Vec<f32> {
    let mut v = vec![0f32; n];
    let r = cuMemcpyDtoHAsync_v2(v.as_mut_ptr().cast(), p, n * 4, null_mut());
    assert_eq!(r, CUDA_SUCCESS);
    v
}

/// Deterministic test values.
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 250.0 - 2.0)
        .collect()
}

#[test]
fn sgemm_matches_a_triple_loop_for_every_transpose() {
    let _one = serial();
    bind(0);
    let mut h = null_mut();
    assert_eq!(cublasCreate_v2(&mut h), 0);
    let (m, n, k) = (5usize, 3usize, 4usize);
    for (ta, tb) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
        let (lda, ldb, ldc) = (
            if ta == 1 { k } else { m } + 1,
            if tb == 1 { n } else { k } + 2,
            m,
        );
        let a = values(lda * m.max(k), 1);
        let b = values(ldb * n.max(k), 2);
        let c0 = values(ldc * n, 3);
        let (pa, pb, pc) = (upload(&a), upload(&b), upload(&c0));
        let (alpha, beta) = (1.5f32, -0.5f32);
        let r = cublasSgemm_v2(
            h, ta, tb, m as i32, n as i32, k as i32, &alpha, pa, lda as i32, pb, ldb as i32, &beta,
            pc, ldc as i32,
        );
        assert_eq!(r, 0);
        let got = download(pc, ldc * n);
        for i in 0..m {
            for j in 0..n {
                let mut s = 0f64;
                for l in 0..k {
                    let x = if ta == 1 {
                        a[l + i * lda]
                    } else {
                        a[i + l * lda]
                    };
                    let y = if tb == 1 {
                        b[j + l * ldb]
                    } else {
                        b[l + j * ldb]
                    };
                    s += x as f64 * y as f64;
                }
                let want = alpha as f64 * s + beta as f64 * c0[i + j * ldc] as f64;
                let g = got[i + j * ldc] as f64;
                assert!(
                    (g - want).abs() < 1e-4,
                    "({ta},{tb}) C[{i},{j}] = {g}, want {want}"
                );
            }
        }
        for p in [pa, pb, pc] {
            assert_eq!(cuMemFree_v2(p), CUDA_SUCCESS);
        }
    }
    assert_eq!(cublasDestroy_v2(h), 0);
}

#[test]
fn a_stream_waits_for_an_event_of_another_stream() {
    let _one = serial();
    std::env::set_var("TOFU_CPU_CUDA_SEED", "5");
    bind(0);
    let (mut s1, mut s2, mut e) = (null_mut(), null_mut(), null_mut());
    assert_eq!(cuStreamCreate(&mut s1, 1), CUDA_SUCCESS);
    assert_eq!(cuStreamCreate(&mut s2, 1), CUDA_SUCCESS);
    assert_eq!(cuEventCreate(&mut e, 0), CUDA_SUCCESS);
    let src = values(4096, 9);
    let a = upload(&vec![0.0; 4096]);
    let b = upload(&vec![0.0; 4096]);
    assert_eq!(cuStreamSynchronize(null_mut()), CUDA_SUCCESS);
    // s1: a ← src, then the event; s2 waits for it, then b ← a.
    assert_eq!(
        cuMemcpyHtoDAsync_v2(a, src.as_ptr().cast(), 4096 * 4, s1),
        CUDA_SUCCESS
    );
    assert_eq!(cuEventRecord(e, s1), CUDA_SUCCESS);
    assert_eq!(cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);
    assert_eq!(cuMemcpyDtoDAsync_v2(b, a, 4096 * 4, s2), CUDA_SUCCESS);
    assert_eq!(cuStreamSynchronize(s2), CUDA_SUCCESS);
    assert_eq!(download(b, 4096), src);
    assert_eq!(cuEventQuery(e), CUDA_SUCCESS);
    for s in [s1, s2] {
        assert_eq!(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    }
    assert_eq!(cuEventDestroy_v2(e), CUDA_SUCCESS);
}

#[test]
fn memory_beyond_the_device_is_out_of_memory_and_copies_stay_inside() {
    let _one = serial();
    bind(1);
    let mut p = 0u64;
    assert_eq!(cuMemAlloc_v2(&mut p, 1 << 50), CUDA_ERROR_OUT_OF_MEMORY);
    assert_eq!(cuMemAlloc_v2(&mut p, 64), CUDA_SUCCESS);
    let v = [0f32; 32];
    let r = cuMemcpyHtoDAsync_v2(p, v.as_ptr().cast(), 128, null_mut());
    assert_eq!(r, CUDA_ERROR_INVALID_VALUE, "a copy past the allocation");
    assert_eq!(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_eq!(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE, "freed twice");
}

/// Rank `r` of `comms` on its own thread: run `f` with its device bound.
fn on_ranks<T: Send>(comms: &[usize], f: impl Fn(usize, *mut c_void) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .enumerate()
            .map(|(r, &c)| {
                let f = &f;
                s.spawn(move || {
                    bind(r);
                    f(r, c as *mut c_void)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("rank")).collect()
    })
}

fn init_all(n: usize) -> Vec<usize> {
    let mut comms = vec![null_mut(); n];
    let devs: Vec<i32> = (0..n as i32).collect();
    assert_eq!(
        ncclCommInitAll(comms.as_mut_ptr(), n as i32, devs.as_ptr()),
        0
    );
    comms.into_iter().map(|c| c as usize).collect()
}

#[test]
fn nccl_collectives_between_threads_match_host_arithmetic() {
    let _one = serial();
    let comms = init_all(2);
    let n = 6;
    let out = on_ranks(&comms, |r, c| {
        let x = values(2 * n, r as u32 + 10);
        let buf = upload(&x);
        let recv = upload(&vec![0.0; 2 * n]);
        // In-place all-reduce, then reduce-scatter and all-gather.
        assert_eq!(
            ncclAllReduce(buf as _, buf as _, 2 * n, 7, 0, c, null_mut()),
            0
        );
        let summed = download(buf, 2 * n);
        assert_eq!(
            ncclReduceScatter(buf as _, recv as _, n, 7, 2, c, null_mut()),
            0
        );
        let scattered = download(recv, n);
        assert_eq!(ncclAllGather(recv as _, buf as _, n, 7, c, null_mut()), 0);
        (x, summed, scattered, download(buf, 2 * n))
    });
    let sum: Vec<f32> = (0..2 * n).map(|i| out[0].0[i] + out[1].0[i]).collect();
    for (r, (_, summed, scattered, gathered)) in out.iter().enumerate() {
        assert_eq!(summed, &sum, "all-reduce on rank {r}");
        // max of two equal sums is the sum.
        assert_eq!(
            scattered[..],
            sum[r * n..(r + 1) * n],
            "reduce-scatter on rank {r}"
        );
        assert_eq!(gathered, &sum, "all-gather on rank {r}");
    }
    for c in comms {
        assert_eq!(ncclCommAbort(c as _), 0);
    }
}

#[test]
fn grouped_sends_and_receives_exchange_and_a_mismatch_fails() {
    let _one = serial();
    let comms = init_all(2);
    let out = on_ranks(&comms, |r, c| {
        let mine = upload(&values(3, r as u32 + 20));
        let theirs = upload(&[0.0; 3]);
        assert_eq!(ncclGroupStart(), 0);
        assert_eq!(ncclSend(mine as _, 3, 7, 1 - r as i32, c, null_mut()), 0);
        assert_eq!(ncclRecv(theirs as _, 3, 7, 1 - r as i32, c, null_mut()), 0);
        assert_eq!(ncclGroupEnd(), 0);
        let got = download(theirs, 3);
        // Counts that disagree: a launch failure (sticky on the stream),
        // not a hang.
        let mut s = null_mut();
        assert_eq!(cuStreamCreate(&mut s, 1), CUDA_SUCCESS);
        assert_eq!(ncclAllReduce(mine as _, mine as _, 1 + r, 7, 0, c, s), 0);
        let sync = cuStreamSynchronize(s);
        assert_eq!(cuStreamDestroy_v2(s), CUDA_SUCCESS);
        (got, sync)
    });
    assert_eq!(out[0].0, values(3, 21));
    assert_eq!(out[1].0, values(3, 20));
    for (_, sync) in &out {
        assert_eq!(*sync, CUDA_ERROR_LAUNCH_FAILED);
    }
}

/// Rank `rank` of 2 from the unique id `id`: an in-place all-reduce of
/// `values(4, 30 + rank)`, checked against the host sum of both ranks'.
fn all_reduce_rank(id: UniqueId, rank: usize) {
    bind(rank);
    let mut c = null_mut();
    assert_eq!(ncclCommInitRank(&mut c, 2, id, rank as i32), 0);
    let buf = upload(&values(4, 30 + rank as u32));
    assert_eq!(ncclAllReduce(buf as _, buf as _, 4, 7, 0, c, null_mut()), 0);
    let want: Vec<f32> = (0..4)
        .map(|i| values(4, 30)[i] + values(4, 31)[i])
        .collect();
    assert_eq!(download(buf, 4), want, "rank {rank}");
    assert_eq!(ncclCommAbort(c), 0);
}

/// The second process of the test below (a no-op unless it set
/// `TOFU_CPU_CUDA_TEST_ID`).
#[test]
fn nccl_second_process() {
    let Ok(hex) = std::env::var("TOFU_CPU_CUDA_TEST_ID") else {
        return;
    };
    let mut id = UniqueId { internal: [0; 128] };
    for (i, b) in id.internal.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex") as _;
    }
    all_reduce_rank(id, 1);
}

#[test]
fn nccl_between_two_processes_reduces() {
    let _one = serial();
    let mut id = UniqueId { internal: [0; 128] };
    assert_eq!(ncclGetUniqueId(&mut id), 0);
    let hex: String = id
        .internal
        .iter()
        .map(|&b| format!("{:02x}", b as u8))
        .collect();
    let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "api_tests::nccl_second_process", "--nocapture"])
        .env("TOFU_CPU_CUDA_TEST_ID", hex)
        .spawn()
        .expect("second process");
    all_reduce_rank(id, 0);
    let out = child.wait_with_output().expect("second process");
    assert!(out.status.success(), "the second process failed");
}

/// An all-reduce queued on `comm` (whose peer never calls), on a fresh
/// stream of the current device; gives the stream.
fn waiting_all_reduce(comm: *mut c_void) -> *mut c_void {
    let buf = upload(&values(4, 40));
    let mut s = null_mut();
    assert_eq!(cuStreamCreate(&mut s, 1), CUDA_SUCCESS);
    assert_eq!(ncclAllReduce(buf as _, buf as _, 4, 7, 0, comm, s), 0);
    s
}

#[test]
fn an_abort_ends_a_call_waiting_for_a_peer_and_is_an_async_error() {
    let _one = serial();
    // Between threads: rank 0 waits for rank 1, which aborts instead.
    let comms = init_all(2);
    bind(0);
    let s = waiting_all_reduce(comms[0] as _);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut e = 0;
    assert_eq!(ncclCommGetAsyncError(comms[0] as _, &mut e), 0);
    assert_eq!(e, 0, "no error while the call waits");
    assert_eq!(ncclCommAbort(comms[1] as _), 0);
    assert_eq!(cuStreamSynchronize(s), CUDA_ERROR_LAUNCH_FAILED);
    assert_eq!(ncclCommGetAsyncError(comms[0] as _, &mut e), 0);
    assert_eq!(e, 6, "ncclRemoteError once the call failed");
    assert_eq!(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    assert_eq!(ncclCommAbort(comms[0] as _), 0);
}

#[test]
fn aborting_a_rank_of_a_served_clique_ends_its_call_in_flight_at_once() {
    let _one = serial();
    // Rank 0 of 2 through the id's server; rank 1 never joins. Its own
    // abort must end the call in flight (the NCCL watchdog's way out), not
    // wait for the stand-in's timeout (120 s).
    let mut id = UniqueId { internal: [0; 128] };
    assert_eq!(ncclGetUniqueId(&mut id), 0);
    bind(0);
    let mut c = null_mut();
    assert_eq!(ncclCommInitRank(&mut c, 2, id, 0), 0);
    let s = waiting_all_reduce(c);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let t0 = std::time::Instant::now();
    assert_eq!(ncclCommAbort(c), 0);
    assert_eq!(cuStreamSynchronize(s), CUDA_ERROR_LAUNCH_FAILED);
    assert!(t0.elapsed().as_secs() < 10, "{:?}", t0.elapsed());
    assert_eq!(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}
