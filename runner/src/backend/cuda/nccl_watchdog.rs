//! The NCCL watchdog: a rank waits for its queued NCCL work with a time
//! limit, so that a peer that hangs, dies without closing a connection, or
//! calls a different collective fails the run instead of hanging it
//! (PyTorch's NCCL process group does the same with its watchdog thread and
//! `timeout`, default 10 minutes; issue 37 item 2).
//!
//! Takes a stream, the limit and a probe of the communicator's asynchronous
//! error (`ncclCommGetAsyncError`); gives how the wait ended. Waiting is an
//! event recorded on the stream and polled (`cuEventQuery`): a short spin,
//! then sleeps of at most [`MAX_NAP`], so a finished step is noticed within
//! about that long. The caller aborts the communicator on anything but
//! [`Waited::Done`].

use std::time::{Duration, Instant};

use cudarc::driver::CudaStream;

/// The environment variable that sets the limit, in seconds (fractions
/// allowed).
pub const NCCL_TIMEOUT_ENV: &str = "TOFU_NCCL_TIMEOUT_S";

/// The limit when [`NCCL_TIMEOUT_ENV`] is unset: 600 s, PyTorch's default
/// for NCCL process groups.
pub const DEFAULT_NCCL_TIMEOUT: Duration = Duration::from_secs(600);

/// Longest sleep between two polls of the stream.
pub const MAX_NAP: Duration = Duration::from_micros(100);

/// How often the asynchronous error is probed while waiting.
const PROBE_EVERY: Duration = Duration::from_millis(10);

/// The limit: [`NCCL_TIMEOUT_ENV`] seconds, else [`DEFAULT_NCCL_TIMEOUT`].
///
/// Errors: a value that is not a positive number of seconds, in words that
/// name the variable.
pub fn nccl_timeout() -> Result<Duration, String> {
    match std::env::var(NCCL_TIMEOUT_ENV) {
        Err(_) => Ok(DEFAULT_NCCL_TIMEOUT),
        Ok(v) => parse_timeout(&v),
    }
}

/// `v` as a positive number of seconds.
fn parse_timeout(v: &str) -> Result<Duration, String> {
    match v.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "{NCCL_TIMEOUT_ENV}={v:?}: expected a positive number of seconds (e.g. 600)"
        )),
    }
}

/// How a wait ended.
#[derive(Debug, PartialEq)]
pub(super) enum Waited {
    /// Everything queued before the wait ran.
    Done,
    /// The stream failed (a kernel, copy or collective on it): the driver's
    /// words.
    Failed(String),
    /// NCCL reported an asynchronous error (a peer that failed, a network
    /// error): its words.
    AsyncError(String),
    /// Not done within the limit; how long it waited.
    TimedOut(Duration),
}

/// Wait for the work queued on `stream` so far, at most `limit`, probing
/// `async_error` every [`PROBE_EVERY`].
pub(super) fn wait(
    stream: &CudaStream,
    limit: Duration,
    async_error: impl Fn() -> Result<(), String>,
) -> Waited {
    let done = match stream.record_event(None) {
        Ok(e) => e,
        Err(e) => return Waited::Failed(e.to_string()),
    };
    poll(
        || done.try_is_complete().map_err(|e| e.to_string()),
        limit,
        async_error,
    )
}

/// [`wait`]'s loop on a completion probe.
fn poll(
    complete: impl Fn() -> Result<bool, String>,
    limit: Duration,
    async_error: impl Fn() -> Result<(), String>,
) -> Waited {
    let t0 = Instant::now();
    let mut probed = t0;
    let mut nap = Duration::from_micros(5);
    loop {
        match complete() {
            Ok(true) => return Waited::Done,
            Ok(false) => {}
            Err(e) => return Waited::Failed(e),
        }
        if probed.elapsed() >= PROBE_EVERY {
            probed = Instant::now();
            if let Err(e) = async_error() {
                return Waited::AsyncError(e);
            }
        }
        let waited = t0.elapsed();
        if waited >= limit {
            return Waited::TimedOut(waited);
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(MAX_NAP);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn work_that_finishes_is_done() {
        let polls = Cell::new(0);
        let complete = || {
            polls.set(polls.get() + 1);
            Ok(polls.get() > 3)
        };
        assert_eq!(
            poll(complete, Duration::from_secs(5), || Ok(())),
            Waited::Done
        );
        assert_eq!(polls.get(), 4);
    }

    #[test]
    fn work_that_never_finishes_times_out_near_the_limit() {
        let limit = Duration::from_millis(50);
        let t0 = Instant::now();
        match poll(|| Ok(false), limit, || Ok(())) {
            Waited::TimedOut(w) => assert!(w >= limit, "{w:?}"),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_failed_stream_and_an_async_error_end_the_wait() {
        let limit = Duration::from_secs(30);
        let failed = poll(|| Err("CUDA_ERROR_LAUNCH_FAILED".into()), limit, || Ok(()));
        assert_eq!(failed, Waited::Failed("CUDA_ERROR_LAUNCH_FAILED".into()));
        let t0 = Instant::now();
        let remote = poll(|| Ok(false), limit, || Err("remote process exited".into()));
        assert_eq!(remote, Waited::AsyncError("remote process exited".into()));
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "probed long before the limit"
        );
    }

    #[test]
    fn the_limit_is_a_positive_number_of_seconds() {
        assert_eq!(parse_timeout("2.5"), Ok(Duration::from_millis(2500)));
        for bad in ["0", "-1", "ten", "inf", ""] {
            let e = parse_timeout(bad).unwrap_err();
            assert!(e.contains(NCCL_TIMEOUT_ENV), "{e}");
        }
    }
}
