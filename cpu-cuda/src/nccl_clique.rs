//! The meeting point of one NCCL clique's ranks (see [`crate::nccl`]):
//! every call of a communicator has a sequence number; the ranks' calls of
//! one number meet in a round, check they agree (kind, count, root),
//! compute their outputs from one another's buffers, and write them once
//! all have read.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

/// A collective's kind, with its reduction (`ncclRedOp_t`) and root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    /// `ncclAllReduce`.
    AllReduce(i32),
    /// `ncclReduceScatter`.
    ReduceScatter(i32),
    /// `ncclAllGather`.
    AllGather,
    /// `ncclBroadcast` from a root.
    Broadcast(usize),
    /// `ncclReduce` to a root.
    Reduce(i32, usize),
}

/// One rank's part of a round: a collective (send, receive, count) or a
/// group's sends and receives (peer, address, elements).
#[derive(Clone, Debug)]
pub enum Post {
    /// A collective.
    Collective(Collective, usize, usize, usize),
    /// Point-to-point: sends, receives.
    P2p(Vec<(usize, usize, usize)>, Vec<(usize, usize, usize)>),
}

impl Post {
    /// A collective's post.
    pub fn collective(c: Collective, send: usize, recv: usize, n: usize) -> Post {
        Post::Collective(c, send, recv, n)
    }

    /// A group's sends and receives.
    pub fn p2p(sends: Vec<(usize, usize, usize)>, recvs: Vec<(usize, usize, usize)>) -> Post {
        Post::P2p(sends, recvs)
    }

    /// Whether it is sends and receives.
    pub fn is_p2p(&self) -> bool {
        matches!(self, Post::P2p(..))
    }

    /// Add `other`'s sends and receives (both point-to-point).
    pub fn merge(&mut self, other: Post) {
        if let (Post::P2p(s, r), Post::P2p(s2, r2)) = (self, other) {
            s.extend(s2);
            r.extend(r2);
        }
    }
}

#[derive(Default)]
struct Round {
    posts: Vec<Option<Post>>,
    arrived: usize,
    finished: usize,
    left: usize,
}

#[derive(Default)]
struct State {
    rounds: HashMap<u64, Round>,
    aborted: Option<usize>,
}

/// One clique of `n` ranks.
pub struct Clique {
    /// Its ranks.
    pub n: usize,
    state: Mutex<State>,
    cv: Condvar,
}

/// Join (or start) the clique of `id` as `rank` of `n`; `None` where the
/// clique has another size or the rank is out of range.
pub fn join(id: &[u8], n: usize, rank: usize) -> Option<Arc<Clique>> {
    static CLIQUES: OnceLock<Mutex<HashMap<Vec<u8>, Weak<Clique>>>> = OnceLock::new();
    if rank >= n {
        return None;
    }
    let mut all = CLIQUES
        .get_or_init(Default::default)
        .lock()
        .expect("cliques");
    all.retain(|_, c| c.strong_count() > 0);
    if let Some(c) = all.get(id).and_then(Weak::upgrade) {
        return (c.n == n).then_some(c);
    }
    let c = Arc::new(Clique {
        n,
        state: Mutex::new(State::default()),
        cv: Condvar::new(),
    });
    all.insert(id.to_vec(), Arc::downgrade(&c));
    Some(c)
}

fn timeout() -> Duration {
    let s = std::env::var("TOFU_CPU_CUDA_NCCL_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    Duration::from_secs(s)
}

fn reduce(op: i32, a: f32, b: f32) -> f32 {
    match op {
        1 => a * b,
        2 => a.max(b),
        3 => a.min(b),
        _ => a + b,
    }
}

/// `n` f32s at `p`.
///
/// # Safety
/// `p` is a device buffer of at least `n` elements (checked when called).
unsafe fn read(p: usize, n: usize) -> &'static [f32] {
    if n == 0 {
        return &[];
    }
    std::slice::from_raw_parts(p as *const f32, n)
}

impl Clique {
    /// Fail every waiting and later call (`ncclCommAbort` by `rank`).
    pub fn abort(&self, rank: usize) {
        let mut st = self.state.lock().expect("clique");
        st.aborted.get_or_insert(rank);
        self.cv.notify_all();
    }

    /// Wait until `done` holds for round `seq`.
    fn wait<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        seq: u64,
        what: &str,
        done: impl Fn(&Round) -> bool,
    ) -> Result<MutexGuard<'a, State>, String> {
        let end = Instant::now() + timeout();
        loop {
            if st.rounds.get(&seq).is_some_and(&done) {
                return Ok(st);
            }
            if let Some(r) = st.aborted {
                return Err(format!(
                    "call {seq}: the communicator was aborted by rank {r} ({what})"
                ));
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "call {seq}: timed out after {:?} {what}",
                    timeout()
                ));
            }
            st = self.cv.wait_timeout(st, left).expect("clique").0;
        }
    }

    /// Rank `rank`'s call `seq`: meet the others, compute, write.
    pub fn run(&self, seq: u64, rank: usize, post: Post) -> Result<(), String> {
        for (p, v) in self.exchange(seq, rank, post)? {
            // SAFETY: a receive buffer checked when the call was made.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p as *mut f32, v.len()) };
        }
        Ok(())
    }

    /// Rank `rank`'s call `seq`: meet the others, compute; gives the
    /// (receive address, values) to write, once every rank has read.
    pub fn exchange(
        &self,
        seq: u64,
        rank: usize,
        post: Post,
    ) -> Result<Vec<(usize, Vec<f32>)>, String> {
        let n = self.n;
        let mut st = self.state.lock().expect("clique");
        if let Some(r) = st.aborted {
            return Err(format!(
                "call {seq}: the communicator was aborted by rank {r}"
            ));
        }
        let round = st.rounds.entry(seq).or_default();
        round.posts.resize(n, None);
        round.posts[rank] = Some(post);
        round.arrived += 1;
        self.cv.notify_all();
        let st = self.wait(st, seq, "waiting for every rank's call", |r| r.arrived == n)?;
        let posts: Vec<Post> = st.rounds[&seq].posts.iter().flatten().cloned().collect();
        drop(st);
        let out = compute(&posts, rank);
        let mut st = self.state.lock().expect("clique");
        st.rounds.get_mut(&seq).expect("round").finished += 1;
        self.cv.notify_all();
        let mut st = self.wait(st, seq, "waiting for every rank to read", |r| {
            r.finished == n
        })?;
        let round = st.rounds.get_mut(&seq).expect("round");
        round.left += 1;
        if round.left == n {
            st.rounds.remove(&seq);
        }
        drop(st);
        out
    }
}

/// Rank `me`'s outputs of a round: (address, values) to write.
fn compute(posts: &[Post], me: usize) -> Result<Vec<(usize, Vec<f32>)>, String> {
    let mine = &posts[me];
    match mine {
        Post::Collective(c, _, recv, n) => {
            let mut sends = Vec::with_capacity(posts.len());
            for (r, p) in posts.iter().enumerate() {
                match p {
                    Post::Collective(c2, s, _, n2) if c2 == c && n2 == n => sends.push(*s),
                    other => {
                        return Err(format!(
                            "rank {me} called {c:?} of {n} elements, rank {r} {other:?}"
                        ))
                    }
                }
            }
            let k = posts.len();
            // SAFETY (every read): send buffers checked when called.
            let reduced = |op: i32, off: usize| -> Vec<f32> {
                let mut acc = unsafe { read(sends[0] + off * 4, *n) }.to_vec();
                for &s in &sends[1..] {
                    for (a, b) in acc.iter_mut().zip(unsafe { read(s + off * 4, *n) }) {
                        *a = reduce(op, *a, *b);
                    }
                }
                if op == 4 {
                    acc.iter_mut().for_each(|a| *a /= k as f32);
                }
                acc
            };
            Ok(match *c {
                Collective::AllReduce(op) => vec![(*recv, reduced(op, 0))],
                Collective::ReduceScatter(op) => vec![(*recv, reduced(op, me * n))],
                Collective::AllGather => {
                    let v = sends
                        .iter()
                        .flat_map(|&s| unsafe { read(s, *n) }.iter().copied());
                    vec![(*recv, v.collect())]
                }
                Collective::Broadcast(root) if root < k => {
                    vec![(*recv, unsafe { read(sends[root], *n) }.to_vec())]
                }
                Collective::Reduce(op, root) if root < k => {
                    if root == me {
                        vec![(*recv, reduced(op, 0))]
                    } else {
                        Vec::new()
                    }
                }
                _ => return Err(format!("rank {me}: a root out of range in {c:?}")),
            })
        }
        Post::P2p(_, recvs) => {
            let mut out = Vec::new();
            let mut taken = vec![0usize; posts.len()];
            for &(peer, p, n) in recvs {
                let Some(Post::P2p(sends, _)) = posts.get(peer) else {
                    return Err(format!(
                        "rank {me} receives from rank {peer}, which sent nothing in this group"
                    ));
                };
                let to_me: Vec<_> = sends.iter().filter(|s| s.0 == me).collect();
                let Some(&&(_, s, n2)) = to_me.get(taken[peer]) else {
                    return Err(format!(
                        "rank {me} receives more from rank {peer} than it sends"
                    ));
                };
                if n2 != n {
                    return Err(format!(
                        "rank {me} receives {n} elements from rank {peer}, which sends {n2}"
                    ));
                }
                taken[peer] += 1;
                // SAFETY: checked when called.
                out.push((p, unsafe { read(s, n) }.to_vec()));
            }
            Ok(out)
        }
    }
}
