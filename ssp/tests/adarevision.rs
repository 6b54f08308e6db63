//! AdaRevision (issue 12, third Done-when item) on a scripted sequence of
//! reads and updates, including delayed ones, against the formula written
//! out here on scalars (the oracle), coordinate by coordinate.

use ssp::adarevision::AdaRevisionRow;

/// The formula for one coordinate, kept as plain scalars.
struct Oracle {
    alpha: f32,
    x: f32,
    gbar: f32,
    z: f32,
    z_max: f32,
    /// ḡ at each version (the snapshot a read at that version takes).
    history: Vec<f32>,
}

impl Oracle {
    fn new(alpha: f32) -> Oracle {
        Oracle {
            alpha,
            x: 0.0,
            gbar: 0.0,
            z: 1.0,
            z_max: 1.0,
            history: vec![0.0],
        }
    }
    fn update(&mut self, g: f32, v: usize) {
        let g_bck = self.gbar - self.history[v];
        let eta_old = self.alpha / self.z_max.sqrt();
        self.z += g * g + 2.0 * g * g_bck;
        self.z_max = self.z_max.max(self.z);
        let eta = self.alpha / self.z_max.sqrt();
        self.x += -eta * g + (eta_old - eta) * g_bck;
        self.gbar += g;
        self.history.push(self.gbar);
    }
}

#[test]
fn scripted_reads_and_delayed_updates_match_the_formula() {
    let alpha = 0.5;
    let mut row = AdaRevisionRow::new(2, alpha, 8);
    let mut oracle = [Oracle::new(alpha), Oracle::new(alpha)];
    // Worker A and B read version 0; A updates at once; B's update comes
    // late (computed from version 0 after two newer updates); C reads
    // version 1 and updates after B; a negative gradient makes z shrink
    // (z_max keeps the largest).
    let (_, va) = row.read().unwrap();
    let (_, vb) = row.read().unwrap();
    assert_eq!((va, vb), (0, 0));
    let mut step = |row: &mut AdaRevisionRow, g: [f32; 2], v: u64| {
        row.update(&g, v).unwrap();
        row.release(v);
        for (j, o) in oracle.iter_mut().enumerate() {
            o.update(g[j], v as usize);
        }
        for (j, o) in oracle.iter().enumerate() {
            assert!(
                (row.values()[j] - o.x).abs() <= 1e-6 * o.x.abs().max(1.0),
                "coordinate {j}: {} vs {}",
                row.values()[j],
                o.x
            );
        }
    };
    step(&mut row, [1.0, -2.0], va); // A: fresh, version 0
    let (_, vc) = row.read().unwrap();
    assert_eq!(vc, 1);
    let (_, vd) = row.read().unwrap();
    step(&mut row, [0.25, 0.5], vd); // D: fresh, version 1
    step(&mut row, [3.0, -1.0], vb); // B: delayed, version 0, two behind
    step(&mut row, [-4.0, 2.5], vc); // C: delayed, version 1
    assert_eq!(row.version(), 4);
    // Idle: every read was followed by its update, so no snapshot is left.
    assert_eq!(row.live_snapshots(), 0);
}

#[test]
fn versions_are_never_merged_and_the_cap_holds() {
    let mut row = AdaRevisionRow::new(1, 0.1, 2);
    let (_, v0) = row.read().unwrap();
    let (_, v0b) = row.read().unwrap();
    assert_eq!(v0, v0b, "readers of one version share one snapshot");
    assert_eq!(row.live_snapshots(), 1);
    row.update(&[1.0], v0).unwrap();
    row.release(v0);
    let (_, v1) = row.read().unwrap();
    assert_ne!(v1, v0);
    assert_eq!(row.live_snapshots(), 2, "version 0 and 1 kept apart");
    row.update(&[1.0], v1).unwrap();
    row.release(v1);
    // Version 1's snapshot was freed by its only reader's release; version
    // 0 still has a reader.
    assert_eq!(row.live_snapshots(), 1);
    let (_, v2) = row.read().unwrap();
    row.update(&[0.5], v2).unwrap();
    row.release(v2);
    let (_, v3) = row.read().unwrap();
    assert_eq!(row.live_snapshots(), 2);
    assert!(row.read().is_ok(), "same version shares the snapshot");
    row.update(&[0.5], v3).unwrap();
    row.release(v3);
    assert!(
        row.read().is_err(),
        "a third live snapshot is refused at cap 2"
    );
    // Release the outstanding reads: back to zero when idle.
    row.release(v3);
    row.release(v0b);
    assert_eq!(row.live_snapshots(), 0);
    assert!(
        row.update(&[1.0], v0).is_err(),
        "a released version cannot be updated"
    );
}
