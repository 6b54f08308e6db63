//! Boxes of elements and how splits cut them into tiles.
//!
//! Takes shapes (elements per dim) and split decisions; gives half-open boxes
//! `[lo, hi)` per dim. A range of n elements split into p parts gives the
//! first `n % p` parts `⌊n/p⌋ + 1` elements and the others `⌊n/p⌋` (as
//! `torch.tensor_split` does); parts are empty when n < p.

pub use interval::instantiate::Region;

/// Part `i` of `p` of the range `[lo, hi)`: the first `n % p` parts get
/// one element more (the convention of [`interval::instantiate::part_range`], which the
/// interval analysis, the planner and codegen share).
pub fn part((lo, hi): (i64, i64), p: usize, i: usize) -> (i64, i64) {
    let (a, b) = interval::instantiate::part_range(hi - lo, p, i);
    (lo + a, lo + b)
}

/// The parts `i` of `p` of the range `[lo, hi)` ([`part`]) that meet
/// `[a, b)`: a run of consecutive parts, found without cutting every part
/// (the owners of a region at a level of many parts, issue 44).
pub fn parts_meeting((lo, hi): (i64, i64), p: usize, (a, b): (i64, i64)) -> std::ops::Range<usize> {
    let n = (hi - lo).max(0);
    let (x, y) = ((a - lo).max(0), (b - lo).min(n));
    if x >= y || p == 0 {
        return 0..0;
    }
    let (base, rem) = (n / p as i64, n % p as i64);
    // The part holding element x (0 ≤ x < n; base > 0 past the long parts).
    let of = |x: i64| -> usize {
        let long = rem * (base + 1);
        if x < long {
            (x / (base + 1)) as usize
        } else {
            (rem + (x - long) / base) as usize
        }
    };
    of(x)..of(y - 1) + 1
}

/// The digits of `rank` in the mixed radix of the level factors
/// (`factors[0]` is the outermost level): worker `rank` is in group
/// `digits[0]` at level 0, sub-group `digits[1]` at level 1, …
pub fn digits(rank: usize, factors: &[usize]) -> Vec<usize> {
    let mut d = vec![0; factors.len()];
    let mut r = rank;
    for (i, &f) in factors.iter().enumerate().rev() {
        d[i] = r % f;
        r /= f;
    }
    d
}

/// Every worker's value, in rank order (the mixed radix of [`digits`]),
/// built level by level from `root`: each group's value is cloned into its
/// `factors[l]` sub-groups and sub-group `i`'s copy cut by `cut(value, l,
/// factors[l], i)`, so every worker's value is the one cutting `root` at
/// every level with the worker's digits gives, without re-cutting the
/// outer levels for every worker.
pub fn by_level<T: Clone>(
    root: T,
    factors: &[usize],
    cut: impl Fn(&mut T, usize, usize, usize),
) -> Vec<T> {
    let mut values = vec![root];
    for (l, &f) in factors.iter().enumerate() {
        let mut next = Vec::with_capacity(values.len() * f);
        for v in &values {
            for i in 0..f {
                let mut x = v.clone();
                cut(&mut x, l, f, i);
                next.push(x);
            }
        }
        values = next;
    }
    values
}

/// Split `k ≥ 1` workers into recursion levels (Tofu §4.4): its prime
/// factors, largest first (k = 1 gives no level; 12 gives [3, 2, 2]).
pub fn factorize(k: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut n = k;
    let mut f = 2;
    while f * f <= n {
        while n.is_multiple_of(f) {
            out.push(f);
            n /= f;
        }
        f += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out.sort_by(|a, b| b.cmp(a));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_range_exactly_once() {
        for n in 0..20 {
            for p in 1..7 {
                let mut next = 3;
                for i in 0..p {
                    let (lo, hi) = part((3, 3 + n), p, i);
                    assert_eq!(lo, next);
                    assert!(hi >= lo && hi - lo <= (n + p as i64 - 1) / p as i64);
                    next = hi;
                }
                assert_eq!(next, 3 + n);
            }
        }
    }

    /// The parts `parts_meeting` names are exactly the non-empty parts
    /// meeting the range (against cutting every part).
    #[test]
    fn parts_meeting_are_the_parts_that_meet() {
        for n in 0..14 {
            for p in 1..9 {
                for a in -2..n + 2 {
                    for b in a..n + 3 {
                        let want: Vec<usize> = (0..p)
                            .filter(|&i| {
                                let (x, y) = part((5, 5 + n), p, i);
                                y.min(5 + b) > x.max(5 + a)
                            })
                            .collect();
                        let got: Vec<usize> =
                            parts_meeting((5, 5 + n), p, (5 + a, 5 + b)).collect();
                        assert_eq!(got, want, "n {n} p {p} [{a}, {b})");
                    }
                }
            }
        }
    }

    #[test]
    fn factorize_multiplies_back() {
        for k in 1..200 {
            let f = factorize(k);
            assert_eq!(f.iter().product::<usize>(), k);
            assert!(f.windows(2).all(|w| w[0] >= w[1]));
        }
        assert_eq!(factorize(12), vec![3, 2, 2]);
        assert_eq!(digits(5, &[3, 2]), vec![2, 1]);
        // by_level's values are the cuts of each worker's own digits.
        let each = by_level(Vec::new(), &[3, 2], |v, _, _, i| v.push(i));
        let want: Vec<Vec<usize>> = (0..6).map(|r| digits(r, &[3, 2])).collect();
        assert_eq!(each, want);
    }
}
