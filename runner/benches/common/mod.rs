//! What the runner's benches share.

/// Deterministic inputs in [-1, 1] of the given shapes (row-major f32).
pub fn inputs(shapes: &[Vec<usize>]) -> Vec<Vec<f32>> {
    shapes
        .iter()
        .map(|s| {
            (0..s.iter().product::<usize>())
                .map(|i| ((i * 7919) % 2003) as f32 / 1001.0 - 1.0)
                .collect()
        })
        .collect()
}
