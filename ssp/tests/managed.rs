//! Managed communication (issue 12, second Done-when item): the bandwidth
//! budget holds in every window, a budget of 0 is plain bounded staleness,
//! and the chosen priority's order holds.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use ssp::managed::{rank, select, Candidate};
use ssp::{ClusterConfig, CommConfig, LocalCluster, Priority, RowKey, RowValues, TableConfig};

/// Per client: `(time, bytes)` of every increment sent.
type SendLogs = Vec<Vec<(Instant, u64)>>;

/// Runs 2 clients × 2 workers that increment many rows per clock; returns
/// the report, the per-client send logs and the oracle sum of increments.
fn busy_run(comm: CommConfig, clocks: u32) -> (ssp::RunReport, SendLogs, Vec<f32>) {
    let rows = 64u64;
    let cfg = ClusterConfig {
        tables: vec![TableConfig::dense(0, 16, 1)],
        shards: 2,
        clients: 2,
        workers_per_client: 2,
        comm,
        checkpoint_every: 0,
    };
    let (cluster, workers) = LocalCluster::start(&cfg).unwrap();
    let threads: Vec<_> = workers
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(w, mut worker)| {
            std::thread::spawn(move || {
                for c in 0..clocks {
                    for r in 0..rows {
                        if (r + w as u64 + u64::from(c)).is_multiple_of(3) {
                            let _ = worker.get_row(RowKey::new(0, r)).unwrap();
                        }
                        let delta = RowValues::Dense(
                            (0..16).map(|j| ((r + j) % 4) as f32 + w as f32).collect(),
                        );
                        worker.inc_row(RowKey::new(0, r), &delta).unwrap();
                        if r % 16 == 0 {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    worker.clock().unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let logs = cluster.send_logs();
    let report = cluster.finish().unwrap();
    // Oracle: every worker added ((r + j) % 4 + w) to column j of row r at
    // every clock.
    let mut want = vec![0.0f32; (rows * 16) as usize];
    for w in 0..4 {
        for r in 0..rows {
            for j in 0..16 {
                want[(r * 16 + j) as usize] += clocks as f32 * (((r + j) % 4) as f32 + w as f32);
            }
        }
    }
    (report, logs, want)
}

fn state(report: &ssp::RunReport) -> Vec<f32> {
    let mut out = Vec::new();
    for r in 0..64u64 {
        out.extend(
            report
                .rows
                .get(&RowKey::new(0, r))
                .map(|v| v.to_dense(16))
                .unwrap_or(vec![0.0; 16]),
        );
    }
    out
}

#[test]
fn bytes_in_any_window_stay_within_budget_plus_one_bucket() {
    let (budget, bucket) = (400_000u64, 8_192u64);
    let comm = CommConfig {
        bandwidth: budget,
        bucket_bytes: bucket,
        priority: Priority::Magnitude,
        record_sends: true,
        ..CommConfig::default()
    };
    let (report, logs, want) = busy_run(comm, 4);
    assert_eq!(
        state(&report),
        want,
        "nothing lost or doubled under the budget"
    );
    assert!(
        report.early_sent > 0,
        "the budget was never used to send early"
    );
    for log in logs {
        let mut prefix = vec![0u64];
        for &(_, b) in &log {
            prefix.push(prefix.last().unwrap() + b);
        }
        for i in 0..log.len() {
            for j in i..log.len() {
                let window = log[j].0.duration_since(log[i].0).as_secs_f64();
                let bytes = prefix[j + 1] - prefix[i];
                // 5 ms of slack: times are taken just after the bucket is spent.
                let allowed = budget as f64 * (window + 0.005) + bucket as f64;
                assert!(
                    bytes as f64 <= allowed,
                    "{bytes} bytes in {window:.4} s > budget × window + one bucket ({allowed})"
                );
            }
        }
    }
}

#[test]
fn budget_zero_is_plain_bounded_staleness() {
    let (report, _, want) = busy_run(CommConfig::default(), 3);
    assert_eq!(report.early_sent, 0, "no early sends without a budget");
    assert_eq!(state(&report), want);
}

fn candidates() -> impl Strategy<Value = Vec<Candidate>> {
    prop::collection::vec((0u64..50, 28u64..200, 0.0f64..10.0, 0.0f64..100.0), 1..40).prop_map(
        |v| {
            let mut seen = BTreeSet::new();
            v.into_iter()
                .filter(|(r, ..)| seen.insert(*r))
                .map(|(r, bytes, magnitude, relative)| Candidate {
                    key: RowKey::new(0, r),
                    bytes,
                    magnitude,
                    relative,
                })
                .collect()
        },
    )
}

proptest! {
    /// No row sent ranks below a held-back one, under every policy, and
    /// what is sent fits the tokens and the queue size.
    #[test]
    fn policy_order_holds(cands in candidates(), tokens in 0u64..3000, queue in 1usize..20, cursor in prop::option::of(0u64..50), seed in any::<u64>()) {
        let cursor = cursor.map(|r| RowKey::new(0, r));
        for policy in [Priority::Random, Priority::RoundRobin, Priority::Magnitude, Priority::RelativeMagnitude] {
            let order = rank(&cands, policy, cursor, &mut StdRng::seed_from_u64(seed));
            let mut sorted = order.clone();
            sorted.sort();
            prop_assert_eq!(sorted, (0..cands.len()).collect::<Vec<_>>(), "rank is a permutation");
            let sent = select(&cands, &order, tokens, queue);
            prop_assert!(sent.len() <= queue);
            prop_assert!(sent.iter().map(|&i| cands[i].bytes).sum::<u64>() <= tokens);
            prop_assert_eq!(&sent[..], &order[..sent.len()], "sent rows are a prefix of the order");
            let held: Vec<usize> = (0..cands.len()).filter(|i| !sent.contains(i)).collect();
            // Independent oracles of "ranks above".
            for &s in &sent {
                for &h in &held {
                    match policy {
                        Priority::Magnitude => prop_assert!(cands[s].magnitude >= cands[h].magnitude),
                        Priority::RelativeMagnitude => prop_assert!(cands[s].relative >= cands[h].relative),
                        Priority::RoundRobin => {
                            // Distance after the cursor in cyclic key order.
                            let d = |i: usize| {
                                let k = cands[i].key.row.0;
                                match cursor { Some(c) if k <= c.row.0 => k + 1000, _ => k }
                            };
                            prop_assert!(d(s) < d(h));
                        }
                        Priority::Random => {}
                    }
                }
            }
        }
    }
}
