//! Ranks of one process on threads: one scoped OS thread per rank, named
//! `rank-{r}`, each given its own value (a communicator, or a backend and a
//! communicator).
//!
//! Takes one value per rank, in rank order; gives the rank function's
//! results in rank order, `Err` with the panic payload for a rank that
//! panicked (the others still run to the end). Ranks in other processes or
//! on other hosts are started by a launcher (torchrun's conventions) and run
//! one rank each.

/// Run `f(rank, value)` for every value on its own scoped thread named
/// `rank-{rank}` (`rank` = the value's index); gives the results in rank
/// order (see the module doc).
///
/// # Panics
/// When the OS refuses to spawn a thread.
pub fn on_threads<V, T, F>(values: Vec<V>, f: F) -> Vec<std::thread::Result<T>>
where
    V: Send,
    T: Send,
    F: Fn(usize, V) -> T + Sync,
{
    std::thread::scope(|s| {
        let handles: Vec<_> = values
            .into_iter()
            .enumerate()
            .map(|(r, v)| {
                let f = &f;
                std::thread::Builder::new()
                    .name(format!("rank-{r}"))
                    .spawn_scoped(s, move || f(r, v))
                    .expect("spawn a rank thread")
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    })
}
