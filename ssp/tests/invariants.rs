//! Property tests of the SSP invariants (issue 12, first Done-when item),
//! with workers delayed at random.
//!
//! Oracles are independent of the code under test: increments tagged by
//! (worker, clock) decode into the set of updates a read holds; the final
//! state must equal the sum of every increment made; with s = 0 a run
//! equals a sequential BSP simulation bit for bit.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ssp::{ClusterConfig, CommConfig, LocalCluster, Priority, RowKey, RowValues, TableConfig};

/// Runs `f` on a thread; fails the test if it takes longer than `secs`
/// (shutdown never hangs).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("run did not finish in time: shutdown hangs")
}

/// Does worker `w` increment row `r` at clock `c`? A fixed pseudo-random
/// choice, the oracle of what was sent.
fn chosen(seed: u64, w: usize, c: u32, r: u64) -> bool {
    let mut z = seed ^ (w as u64) << 40 ^ u64::from(c) << 20 ^ r;
    z = (z ^ (z >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    !(z >> 33).is_multiple_of(3)
}

#[derive(Clone, Debug)]
struct Case {
    clients: usize,
    workers: usize,
    shards: usize,
    clocks: u32,
    staleness: u32,
    rows: u64,
    seed: u64,
    managed: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..=3,
        1usize..=3,
        1usize..=3,
        2u32..=8,
        0u32..=3,
        1u64..=5,
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(
            |(clients, workers, shards, clocks, staleness, rows, seed, managed)| Case {
                clients,
                workers,
                shards,
                clocks,
                staleness,
                rows,
                seed,
                managed,
            },
        )
}

/// A read in the BSP comparison: worker, clock, row, values.
type BspRead = (usize, u32, u64, Vec<f32>);

/// A read observed by a worker: its clock, the row, the stamp and values.
type Seen = (usize, u32, u64, u32, Vec<f32>);

fn run_tagged(case: Case) -> (Vec<Seen>, ssp::RunReport) {
    let n_workers = case.clients * case.workers;
    let cols = n_workers as u32 * case.clocks;
    let table = TableConfig::dense(0, cols, case.staleness);
    let comm = if case.managed {
        CommConfig {
            bandwidth: 2_000_000,
            priority: Priority::Random,
            seed: case.seed,
            ..CommConfig::default()
        }
    } else {
        CommConfig::default()
    };
    let cfg = ClusterConfig {
        tables: vec![table],
        shards: case.shards,
        clients: case.clients,
        workers_per_client: case.workers,
        comm,
        checkpoint_every: 2,
    };
    let (cluster, workers) = LocalCluster::start(&cfg).unwrap();
    let mut handles = Vec::new();
    for (ci, ws) in workers.into_iter().enumerate() {
        for (wi, mut worker) in ws.into_iter().enumerate() {
            let w = ci * case.workers + wi;
            let case = case.clone();
            handles.push(std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(case.seed ^ w as u64);
                let mut seen = Vec::new();
                for c in 0..case.clocks {
                    for r in 0..case.rows {
                        if rng.gen_bool(0.5) {
                            std::thread::sleep(Duration::from_micros(rng.gen_range(0..1500)));
                        }
                        let key = RowKey::new(0, r);
                        let (values, stamp) = worker.get_row_stamped(key).unwrap();
                        seen.push((w, c, r, stamp, values.to_dense(cols as usize)));
                        if chosen(case.seed, w, c, r) {
                            worker.inc(key, w as u32 * case.clocks + c, 1.0).unwrap();
                        }
                    }
                    worker.clock().unwrap();
                }
                seen
            }));
        }
    }
    let seen: Vec<Seen> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let report = cluster.finish().unwrap();
    (seen, report)
}

fn check_tagged(case: &Case, seen: &[Seen], report: &ssp::RunReport) -> Result<(), TestCaseError> {
    let rows = &report.rows;
    let n_workers = case.clients * case.workers;
    let cols = n_workers as u32 * case.clocks;
    let s = case.staleness;
    let mut last_stamp: BTreeMap<(usize, u64), u32> = BTreeMap::new();
    for (w, c, r, stamp, values) in seen {
        // Row clocks never go backwards, and the stamp meets the bound.
        let prev = last_stamp.insert((*w, *r), *stamp).unwrap_or(0);
        prop_assert!(
            *stamp >= prev,
            "worker {w} row {r}: stamp went back {prev} -> {stamp}"
        );
        prop_assert!(
            *stamp + s >= *c,
            "worker {w} clock {c}: stamp {stamp} too old for s = {s}"
        );
        for u in 0..n_workers {
            for cu in 0..case.clocks {
                let v = values[(u as u32 * case.clocks + cu) as usize];
                prop_assert!(v == 0.0 || v == 1.0, "an update applied {v} times");
                if cu + s < *c && chosen(case.seed, u, cu, *r) {
                    prop_assert_eq!(
                        v,
                        1.0,
                        "worker {} at clock {} read row {} without worker {}'s update of clock {} (s = {})",
                        w,
                        c,
                        r,
                        u,
                        cu,
                        s
                    );
                }
            }
        }
    }
    // Exactly once: the final state is the sum of all increments.
    for r in 0..case.rows {
        let got = rows
            .get(&RowKey::new(0, r))
            .map(|v| v.to_dense(cols as usize))
            .unwrap_or(vec![0.0; cols as usize]);
        for u in 0..n_workers {
            for cu in 0..case.clocks {
                let want = if chosen(case.seed, u, cu, r) {
                    1.0
                } else {
                    0.0
                };
                prop_assert_eq!(got[(u as u32 * case.clocks + cu) as usize], want);
            }
        }
    }
    // A checkpoint at clock t equals replaying exactly the updates <= t,
    // even with updates sent early (managed communication) or by workers
    // up to s clocks ahead.
    let want_ckpts = (0..case.clocks).filter(|t| (t + 1) % 2 == 0).count() * case.shards;
    prop_assert_eq!(
        report.checkpoints.len(),
        want_ckpts,
        "one checkpoint per shard per 2 clocks"
    );
    for ck in &report.checkpoints {
        let held: BTreeMap<RowKey, &RowValues> = ck.rows.iter().map(|(k, v)| (*k, v)).collect();
        for r in 0..case.rows {
            let key = RowKey::new(0, r);
            if key.shard(case.shards) != ck.shard {
                continue;
            }
            let got = held
                .get(&key)
                .map(|v| v.to_dense(cols as usize))
                .unwrap_or(vec![0.0; cols as usize]);
            for u in 0..n_workers {
                for cu in 0..case.clocks {
                    let want = if cu <= ck.clock && chosen(case.seed, u, cu, r) {
                        1.0
                    } else {
                        0.0
                    };
                    prop_assert_eq!(
                        got[(u as u32 * case.clocks + cu) as usize],
                        want,
                        "checkpoint at clock {} row {} update ({}, {})",
                        ck.clock,
                        r,
                        u,
                        cu
                    );
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// No read at clock c misses an update from a clock <= c - s - 1; every
    /// increment is applied exactly once; stamps never go back; the run ends.
    #[test]
    fn ssp_guarantee_and_exactly_once(case in case()) {
        let c2 = case.clone();
        let (seen, report) = within(60, move || run_tagged(c2));
        check_tagged(&case, &seen, &report)?;
    }
}

/// A sequential BSP simulation: at clock c every worker reads the state
/// after all updates of clocks < c, computes an integer increment from it,
/// and the increments are summed.
fn bsp_reference(
    workers: usize,
    clocks: u32,
    rows: u64,
    len: u32,
) -> (Vec<Vec<f32>>, Vec<BspRead>) {
    let mut state = vec![vec![0.0f32; len as usize]; rows as usize];
    let mut reads = Vec::new();
    for c in 0..clocks {
        let mut next = state.clone();
        for w in 0..workers {
            for r in 0..rows {
                let read = state[r as usize].clone();
                reads.push((w, c, r, read.clone()));
                for (col, d) in step(&read, w, c, r) {
                    next[r as usize][col as usize] += d;
                }
            }
        }
        state = next;
    }
    (state, reads)
}

/// The deterministic, integer-valued update rule both runs use.
fn step(read: &[f32], w: usize, c: u32, r: u64) -> Vec<(u32, f32)> {
    let sum: f32 = read.iter().sum();
    let len = read.len() as u32;
    let col = ((sum as u64 + w as u64 * 3 + u64::from(c) + r) % u64::from(len)) as u32;
    vec![
        (col, (sum as i64 % 5 + 1) as f32),
        ((col + 1) % len, w as f32 + 1.0),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// With s = 0 (one client process, its worker threads sharing the
    /// cache), every read and the final state equal BSP bit for bit.
    #[test]
    fn bsp_bit_for_bit(workers in 1usize..=4, shards in 1usize..=3, clocks in 1u32..=6, rows in 1u64..=4, seed in any::<u64>()) {
        let len = 5;
        let (want_state, mut want_reads) = bsp_reference(workers, clocks, rows, len);
        let (reads, state) = within(60, move || {
            let cfg = ClusterConfig {
                tables: vec![TableConfig::dense(0, len, 0)],
                shards,
                clients: 1,
                workers_per_client: workers,
                comm: CommConfig::default(),
                checkpoint_every: 0,
            };
            let (cluster, mut all) = LocalCluster::start(&cfg).unwrap();
            let handles: Vec<_> = all.remove(0).into_iter().enumerate().map(|(w, mut worker)| {
                std::thread::spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ w as u64);
                    let mut reads = Vec::new();
                    for c in 0..clocks {
                        for r in 0..rows {
                            std::thread::sleep(Duration::from_micros(rng.gen_range(0..800)));
                            let key = RowKey::new(0, r);
                            let read = worker.get_row(key).unwrap().to_dense(len as usize);
                            for (col, d) in step(&read, w, c, r) {
                                worker.inc(key, col, d).unwrap();
                            }
                            reads.push((w, c, r, read));
                        }
                        worker.clock().unwrap();
                    }
                    reads
                })
            }).collect();
            let reads: Vec<_> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
            (reads, cluster.finish().unwrap().rows)
        });
        let mut reads = reads;
        reads.sort_by_key(|a| (a.0, a.1, a.2));
        want_reads.sort_by_key(|a| (a.0, a.1, a.2));
        for (got, want) in reads.iter().zip(&want_reads) {
            prop_assert_eq!(got.3.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want.3.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "read {:?}", (got.0, got.1, got.2));
        }
        prop_assert_eq!(reads.len(), want_reads.len());
        for r in 0..rows {
            let got = state.get(&RowKey::new(0, r)).map(|v| v.to_dense(len as usize)).unwrap_or(vec![0.0; len as usize]);
            prop_assert_eq!(got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want_state[r as usize].iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        }
    }
}

/// Workers that stop at different clocks (one after 1 clock, one after 5)
/// still shut the run down, and what they sent is all applied.
#[test]
fn uneven_workers_shut_down() {
    let report = within(30, || {
        let cfg = ClusterConfig {
            tables: vec![TableConfig::sparse(0, 100, 1)],
            shards: 2,
            clients: 2,
            workers_per_client: 2,
            comm: CommConfig::default(),
            checkpoint_every: 0,
        };
        let (cluster, workers) = LocalCluster::start(&cfg).unwrap();
        let handles: Vec<_> = workers
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(w, mut worker)| {
                std::thread::spawn(move || {
                    for c in 0..(1 + 2 * w as u32) {
                        worker.get_row(RowKey::new(0, 0)).unwrap();
                        worker.inc(RowKey::new(0, w as u64), c, 1.0).unwrap();
                        worker.clock().unwrap();
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        cluster.finish().unwrap()
    });
    for w in 0..4u64 {
        let row = &report.rows[&RowKey::new(0, w)];
        assert_eq!(row.entries().len(), 1 + 2 * w as usize);
    }
}

/// Bad input is an error, not a panic.
#[test]
fn bad_column_and_table_are_errors() {
    let cfg = ClusterConfig {
        tables: vec![TableConfig::dense(0, 4, 0)],
        shards: 1,
        clients: 1,
        workers_per_client: 1,
        comm: CommConfig::default(),
        checkpoint_every: 0,
    };
    let (cluster, mut workers) = LocalCluster::start(&cfg).unwrap();
    let w = workers.remove(0).remove(0);
    assert!(matches!(
        w.inc(RowKey::new(0, 0), 4, 1.0),
        Err(ssp::SspError::Column { col: 4, .. })
    ));
    assert!(matches!(
        w.get_row(RowKey::new(9, 0)),
        Err(ssp::SspError::UnknownTable(_))
    ));
    drop(w);
    cluster.finish().unwrap();
}
