//! Streams and events: each stream an ordered queue of work run by its own
//! thread, so the host and other streams really run ahead of it; work is
//! delayed at random under a seed (`TOFU_CPU_CUDA_SEED`, up to
//! `TOFU_CPU_CUDA_DELAY_US` microseconds before each copy, kernel or
//! collective), so a missing synchronisation reads stale or unset data
//! instead of passing by luck. Events record a point of a stream and really
//! wait for it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::status::{CuResult, CUDA_SUCCESS};

/// Work on a stream: gives a failure code to make sticky, or success.
pub type Work = Box<dyn FnOnce() -> CuResult + Send>;

/// Whether a piece of work may be delayed (copies, kernels, collectives).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Delay {
    /// Runs as soon as it is reached.
    No,
    /// Waits a random time first when seeded delays are on.
    Random,
}

struct State {
    work: VecDeque<(Delay, Work)>,
    enqueued: u64,
    done: u64,
    /// The first failure of work on the stream (sticky, as a GPU's).
    error: CuResult,
    closed: bool,
}

/// One stream (see the module doc); its device is `device`.
pub struct Stream {
    /// The device ordinal the stream's work runs on.
    pub device: usize,
    state: Mutex<State>,
    cv: Condvar,
}

/// Streams made so far (seeds each stream's delays differently).
static STREAMS: AtomicU64 = AtomicU64::new(0);

/// `TOFU_CPU_CUDA_SEED` and the largest delay, if seeded delays are on.
fn delays() -> Option<(u64, u64)> {
    let seed = std::env::var("TOFU_CPU_CUDA_SEED").ok()?.parse().ok()?;
    let max = std::env::var("TOFU_CPU_CUDA_DELAY_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    Some((seed, max))
}

impl Stream {
    /// A stream on `device` with its thread started.
    pub fn start(device: usize) -> Arc<Stream> {
        let s = Arc::new(Stream {
            device,
            state: Mutex::new(State {
                work: VecDeque::new(),
                enqueued: 0,
                done: 0,
                error: CUDA_SUCCESS,
                closed: false,
            }),
            cv: Condvar::new(),
        });
        let id = STREAMS.fetch_add(1, Ordering::Relaxed);
        let me = s.clone();
        std::thread::Builder::new()
            .name(format!("cpu-cuda-stream-{device}-{id}"))
            .spawn(move || me.run(id))
            .expect("starting a stream thread");
        s
    }

    fn run(&self, id: u64) {
        let delays = delays();
        let mut rng = StdRng::seed_from_u64(delays.map_or(0, |(s, _)| s) ^ (id << 32));
        loop {
            let (delay, work) = {
                let mut st = self.state.lock().expect("stream");
                loop {
                    if let Some(w) = st.work.pop_front() {
                        break w;
                    }
                    if st.closed {
                        return;
                    }
                    st = self.cv.wait(st).expect("stream");
                }
            };
            if let (Delay::Random, Some((_, max))) = (delay, delays) {
                std::thread::sleep(Duration::from_micros(rng.gen_range(0..=max)));
            }
            let r = work();
            let mut st = self.state.lock().expect("stream");
            if r != CUDA_SUCCESS && st.error == CUDA_SUCCESS {
                st.error = r;
            }
            st.done += 1;
            self.cv.notify_all();
        }
    }

    /// Queue `work` behind everything queued before.
    pub fn enqueue(&self, delay: Delay, work: Work) {
        let mut st = self.state.lock().expect("stream");
        st.work.push_back((delay, work));
        st.enqueued += 1;
        self.cv.notify_all();
    }

    /// Wait for everything queued so far; gives the stream's sticky error.
    pub fn synchronize(&self) -> CuResult {
        let mut st = self.state.lock().expect("stream");
        let target = st.enqueued;
        while st.done < target {
            st = self.cv.wait(st).expect("stream");
        }
        st.error
    }

    /// Whether everything queued has run.
    pub fn idle(&self) -> bool {
        let st = self.state.lock().expect("stream");
        st.done == st.enqueued
    }

    /// Stop the thread once the queue is empty.
    pub fn close(&self) {
        self.state.lock().expect("stream").closed = true;
        self.cv.notify_all();
    }
}

/// An event: the generations recorded and reached.
#[derive(Default)]
pub struct Event {
    state: Mutex<(u64, u64)>,
    cv: Condvar,
}

impl Event {
    /// Record the current end of `stream`: the event is reached when the
    /// stream's work queued so far has run.
    pub fn record(self: &Arc<Self>, stream: &Stream) {
        let gen = {
            let mut st = self.state.lock().expect("event");
            st.0 += 1;
            st.0
        };
        let me = self.clone();
        stream.enqueue(
            Delay::No,
            Box::new(move || {
                let mut st = me.state.lock().expect("event");
                st.1 = st.1.max(gen);
                me.cv.notify_all();
                CUDA_SUCCESS
            }),
        );
    }

    /// Make `stream` wait (on its own thread) for the last recording.
    pub fn wait_on(self: &Arc<Self>, stream: &Stream) {
        let gen = self.state.lock().expect("event").0;
        let me = self.clone();
        stream.enqueue(
            Delay::No,
            Box::new(move || {
                me.wait_for(gen);
                CUDA_SUCCESS
            }),
        );
    }

    fn wait_for(&self, gen: u64) {
        let mut st = self.state.lock().expect("event");
        while st.1 < gen {
            st = self.cv.wait(st).expect("event");
        }
    }

    /// Block the calling thread until the last recording is reached.
    pub fn synchronize(&self) {
        let gen = self.state.lock().expect("event").0;
        self.wait_for(gen);
    }

    /// Whether the last recording is reached.
    pub fn reached(&self) -> bool {
        let st = self.state.lock().expect("event");
        st.1 >= st.0
    }
}
