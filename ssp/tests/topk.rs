//! Top-k sparsification with residuals (issue 12, seed 004): nothing is
//! lost, and what is sent is the largest part.
//!
//! Oracles: integer-valued increments (so f32 sums are exact) summed here
//! independently; a brute-force ranking of the accumulated values.

use proptest::prelude::*;
use ssp::topk::TopK;

proptest! {
    #[test]
    fn sent_plus_residual_equals_the_sum_of_increments(
        len in 1usize..60,
        fraction in 0.001f32..1.0,
        steps in proptest::collection::vec(proptest::collection::vec(-50i32..50, 60), 1..12),
    ) {
        let mut t = TopK::new(len, fraction);
        let mut total = vec![0.0f32; len];
        let mut sent = vec![0.0f32; len];
        for d in &steps {
            let delta: Vec<f32> = d[..len].iter().map(|&x| x as f32).collect();
            // Brute-force oracle of this step's choice: accumulated values
            // before the step plus the increment, ranked by magnitude.
            let acc: Vec<f32> = t.residual().iter().zip(&delta).map(|(r, x)| r + x).collect();
            let out = t.step(&delta);
            prop_assert_eq!(out.len(), t.k());
            let chosen: Vec<usize> = out.iter().map(|&(i, _)| i).collect();
            let least_sent = out.iter().map(|&(_, v)| v.abs()).fold(f32::INFINITY, f32::min);
            for (i, a) in acc.iter().enumerate() {
                if !chosen.contains(&i) {
                    prop_assert!(a.abs() <= least_sent, "held back {} > sent {}", a, least_sent);
                }
            }
            for &(i, v) in &out {
                prop_assert_eq!(v, acc[i]);
                sent[i] += v;
            }
            for (s, x) in total.iter_mut().zip(&delta) {
                *s += x;
            }
        }
        for i in 0..len {
            prop_assert_eq!(sent[i] + t.residual()[i], total[i], "element {}", i);
        }
    }
}

#[test]
fn one_percent_of_a_hundred_sends_one_and_keeps_the_rest() {
    let mut t = TopK::new(100, 0.01);
    let mut delta = vec![1.0f32; 100];
    delta[37] = -5.0;
    assert_eq!(t.step(&delta), vec![(37, -5.0)]);
    assert_eq!(t.residual().iter().sum::<f32>(), 99.0);
    // Next step: every held-back entry has grown to 2; the first wins ties.
    assert_eq!(t.step(&[1.0; 100]), vec![(0, 2.0)]);
}
