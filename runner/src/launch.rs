//! Launching ranks: one scoped OS thread per rank of one process, each
//! given its own backend and communicator.
//!
//! Takes one value per rank (e.g. a `(backend, communicator)` pair); gives
//! the rank function's results in rank order, `Err` with the panic payload
//! for a rank that panicked. Ranks in other processes or on other hosts are
//! started by a launcher (torchrun's conventions) and run one rank each.

/// Run `f(rank, value)` for every value on its own scoped thread named
/// `rank-{r}`; gives the results in rank order (see the module doc).
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
