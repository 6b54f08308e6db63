//! Placement policies (seed 004) against hand-worked assignments and, for
//! greedy largest-first, a brute-force search over every assignment.

use proptest::prelude::*;
use ssp::placement::{Placement, Policy, TableSize};
use ssp::{RowKey, ShardId, TableId};

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
