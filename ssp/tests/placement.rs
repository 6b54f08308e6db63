//! Placement policies (seed 004) against hand-worked assignments and, for
//! greedy largest-first, a brute-force search over every assignment; and
//! a run whose clients route rows by a placement, checked against the
//! hand-worked shard of every row.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use ssp::placement::{Placement, Policy, TableSize};
use ssp::{ClusterConfig, CommConfig, LocalCluster, RowKey, ShardId, TableConfig, TableId};

fn t(table: u32, rows: u64, cols: u64) -> TableSize {
    TableSize {
        table: TableId(table),
        rows,
        cols,
    }
}

fn shard_of_table(p: &Placement, table: u32) -> u32 {
    p.shard_of(RowKey::new(table, 0)).0
}

#[test]
fn round_robin_deals_tables_in_turn() {
    let tables = [t(0, 5, 1), t(1, 100, 10), t(2, 1, 1), t(3, 7, 7)];
    let p = Placement::new(&tables, 3, Policy::RoundRobin).unwrap();
    let got: Vec<u32> = (0..4).map(|i| shard_of_table(&p, i)).collect();
    assert_eq!(got, vec![0, 1, 2, 0]);
    assert_eq!(p.shard_of(RowKey::new(1, 99)), ShardId(1));
}

#[test]
fn greedy_largest_first_by_hand() {
    // Sizes 64, 40, 30, 20, 10 over 2 shards: 64→0, 40→1, 30→1 (70),
    // 20→0 (84), 10→1 (80).
    let tables = [
        t(0, 10, 1),
        t(1, 20, 1),
        t(2, 64, 1),
        t(3, 30, 1),
        t(4, 40, 1),
    ];
    let p = Placement::new(&tables, 2, Policy::GreedyLargestFirst).unwrap();
    let got: Vec<u32> = (0..5).map(|i| shard_of_table(&p, i)).collect();
    assert_eq!(got, vec![1, 0, 0, 1, 1]);
    assert_eq!(p.load(&tables), vec![84, 80]);
}

#[test]
fn uniform_split_cuts_every_table_evenly() {
    let tables = [t(0, 10, 3), t(1, 2, 5)];
    let p = Placement::new(&tables, 4, Policy::UniformSplit).unwrap();
    // 10 rows over 4 shards: 3, 3, 2, 2 rows.
    let rows: Vec<u32> = (0..10).map(|r| p.shard_of(RowKey::new(0, r)).0).collect();
    assert_eq!(rows, vec![0, 0, 0, 1, 1, 1, 2, 2, 3, 3]);
    // 2 rows over 4 shards: one row each on shards 0 and 1.
    assert_eq!(p.shard_of(RowKey::new(1, 0)), ShardId(0));
    assert_eq!(p.shard_of(RowKey::new(1, 1)), ShardId(1));
    assert_eq!(p.load(&tables), vec![9 + 5, 9 + 5, 6, 6]);
}

/// The best makespan over every assignment of whole tables to shards.
fn brute_force_makespan(sizes: &[u64], shards: usize) -> u64 {
    let n = sizes.len() as u32;
    let mut best = u64::MAX;
    for code in 0..(shards as u64).pow(n) {
        let mut load = vec![0u64; shards];
        let mut c = code;
        for &s in sizes {
            load[(c % shards as u64) as usize] += s;
            c /= shards as u64;
        }
        best = best.min(*load.iter().max().unwrap());
    }
    best
}

proptest! {
    #[test]
    fn greedy_is_within_four_thirds_of_the_best(
        sizes in proptest::collection::vec(1u64..100, 1..7),
        shards in 1usize..4,
    ) {
        let tables: Vec<TableSize> = sizes.iter().enumerate().map(|(i, &s)| t(i as u32, s, 1)).collect();
        let p = Placement::new(&tables, shards, Policy::GreedyLargestFirst).unwrap();
        let load = p.load(&tables);
        prop_assert_eq!(load.iter().sum::<u64>(), sizes.iter().sum::<u64>());
        let best = brute_force_makespan(&sizes, shards);
        // Graham: LPT ≤ (4/3 − 1/(3m)) · OPT.
        prop_assert!(3 * load.iter().max().unwrap() <= 4 * best, "{:?} vs best {}", load, best);
    }

    #[test]
    fn every_row_has_exactly_one_shard_in_range(
        rows in proptest::collection::vec(1u64..50, 1..5),
        shards in 1usize..6,
        policy in prop_oneof![Just(Policy::GreedyLargestFirst), Just(Policy::UniformSplit), Just(Policy::RoundRobin)],
    ) {
        let tables: Vec<TableSize> = rows.iter().enumerate().map(|(i, &r)| t(i as u32, r, 2)).collect();
        let p = Placement::new(&tables, shards, policy).unwrap();
        let mut load = vec![0u64; shards];
        for tb in &tables {
            for r in 0..tb.rows {
                let s = p.shard_of(RowKey::new(tb.table.0, r)).0 as usize;
                prop_assert!(s < shards);
                load[s] += tb.cols;
            }
        }
        prop_assert_eq!(load, p.load(&tables));
    }
}

/// Runs two clients of two workers that each add 1 to every row of two
/// tables (10 rows × 3 columns, 2 rows × 5 columns) over 3 shards routed
/// by `placement`; returns the shard that held each row at the end.
fn held_rows(placement: Option<Placement>) -> BTreeMap<RowKey, ShardId> {
    let tables = vec![TableConfig::dense(0, 3, 1), TableConfig::dense(1, 5, 1)];
    let cfg = ClusterConfig {
        tables,
        shards: 3,
        clients: 2,
        workers_per_client: 2,
        comm: CommConfig {
            placement: placement.map(Arc::new),
            ..CommConfig::default()
        },
        checkpoint_every: 0,
    };
    let (cluster, workers) = LocalCluster::start(&cfg).unwrap();
    let threads: Vec<_> = workers
        .into_iter()
        .flatten()
        .map(|mut w| {
            std::thread::spawn(move || {
                for _ in 0..3 {
                    for (table, rows) in [(0u32, 10u64), (1, 2)] {
                        for r in 0..rows {
                            let key = RowKey::new(table, r);
                            w.get_row(key).unwrap();
                            w.inc(key, 0, 1.0).unwrap();
                        }
                    }
                    w.clock().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let report = cluster.finish().unwrap();
    // Every row got every increment (4 workers × 3 clocks) on its shard.
    assert_eq!(report.rows.len(), 12);
    for (key, v) in &report.rows {
        assert_eq!(v.get(0), 12.0, "row {key:?}");
    }
    report.holder
}

#[test]
fn clients_route_rows_to_the_shards_the_policy_names() {
    let sizes = [t(0, 10, 3), t(1, 2, 5)];
    let shards_of = |held: &BTreeMap<RowKey, ShardId>, table: u32, rows: u64| -> Vec<u32> {
        (0..rows)
            .map(|r| held[&RowKey::new(table, r)].0)
            .collect::<Vec<_>>()
    };
    // Uniform split, by hand: 10 rows over 3 shards are 4, 3, 3 rows; 2
    // rows are one each on shards 0 and 1.
    let held = held_rows(Some(
        Placement::new(&sizes, 3, Policy::UniformSplit).unwrap(),
    ));
    assert_eq!(shards_of(&held, 0, 10), vec![0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
    assert_eq!(shards_of(&held, 1, 2), vec![0, 1]);
    // Round-robin: table 0 on shard 0, table 1 on shard 1.
    let held = held_rows(Some(Placement::new(&sizes, 3, Policy::RoundRobin).unwrap()));
    assert_eq!(shards_of(&held, 0, 10), vec![0; 10]);
    assert_eq!(shards_of(&held, 1, 2), vec![1; 2]);
    // Greedy largest first: table 0 (30 elements) first to shard 0, table 1
    // (10) to the least-loaded shard 1.
    let held = held_rows(Some(
        Placement::new(&sizes, 3, Policy::GreedyLargestFirst).unwrap(),
    ));
    assert_eq!(shards_of(&held, 0, 10), vec![0; 10]);
    assert_eq!(shards_of(&held, 1, 2), vec![1; 2]);
    // No placement: the fixed hash.
    let held = held_rows(None);
    for (key, shard) in &held {
        assert_eq!(*shard, key.shard(3), "row {key:?}");
    }
}

#[test]
fn a_placement_over_other_shards_is_refused() {
    let p = Placement::new(&[t(0, 4, 1)], 2, Policy::UniformSplit).unwrap();
    let cfg = ClusterConfig {
        tables: vec![TableConfig::dense(0, 1, 0)],
        shards: 3,
        clients: 1,
        workers_per_client: 1,
        comm: CommConfig {
            placement: Some(Arc::new(p)),
            ..CommConfig::default()
        },
        checkpoint_every: 0,
    };
    let err = LocalCluster::start(&cfg).err().expect("a config error");
    assert!(
        err.to_string().contains("placement is over 2 shards"),
        "{err}"
    );
}
