//! AdaRevision on the server (thesis §3.2.3; McMahan & Streeter's
//! adaptive revision): versioned rows whose step size shrinks for
//! gradients computed from stale values.
//!
//! Takes reads (which snapshot the accumulated gradient ḡ and return the
//! row with its version) and gradients tagged with the version they were
//! computed from; gives the updated row. Per coordinate, with state ḡ = 0,
//! z = z_max = 1 and base rate α, a gradient g read at version v does
//! (Bösen's public implementation):
//!
//! ```text
//! g_bck = ḡ − ḡ_snapshot(v);  η_old = α/√z_max
//! z += g² + 2·g·g_bck;        z_max = max(z_max, z);  η = α/√z_max
//! x += −η·g + (η_old − η)·g_bck;  ḡ += g
//! ```
//!
//! Keeps true: gradients of different versions are never merged (each
//! update names exactly one snapshot); a snapshot lives while some reader
//! of its version has not released it, so snapshots return to zero when
//! the row is idle; at most `cap` snapshots live at once (a read that
//! would need one more is refused with an error naming the cap).
//!
//! On the server ([`crate::server`]) a reader is a client holding a copy
//! of the row: it acquires the version when the shard sends it the row and
//! releases it (a `Release` message) once no cached copy, worker read or
//! buffered update of that client still refers to it.

use std::collections::BTreeMap;

use crate::error::SspError;

#[derive(Clone, Debug)]
struct Snapshot {
    gbar: Vec<f32>,
    readers: u32,
}

/// One AdaRevision row: values, per-coordinate state and live snapshots.
#[derive(Clone, Debug)]
pub struct AdaRevisionRow {
    alpha: f32,
    x: Vec<f32>,
    gbar: Vec<f32>,
    z: Vec<f32>,
    z_max: Vec<f32>,
    version: u64,
    snapshots: BTreeMap<u64, Snapshot>,
    cap: usize,
}

impl AdaRevisionRow {
    /// A row of `len` zeros with base rate `alpha` and at most `cap` live
    /// snapshots (`cap >= 1`).
    pub fn new(len: usize, alpha: f32, cap: usize) -> AdaRevisionRow {
        AdaRevisionRow {
            alpha,
            x: vec![0.0; len],
            gbar: vec![0.0; len],
            z: vec![1.0; len],
            z_max: vec![1.0; len],
            version: 0,
            snapshots: BTreeMap::new(),
            cap: cap.max(1),
        }
    }

    /// A row holding `values` (a restart from a checkpoint: ḡ, z and
    /// z_max start afresh).
    pub fn with_values(values: Vec<f32>, alpha: f32, cap: usize) -> AdaRevisionRow {
        let mut row = AdaRevisionRow::new(values.len(), alpha, cap);
        row.x = values;
        row
    }

    /// Reads the row: snapshots ḡ at the current version (shared by every
    /// reader of that version) and returns the values and the version.
    ///
    /// # Errors
    /// As [`AdaRevisionRow::acquire`].
    pub fn read(&mut self) -> Result<(Vec<f32>, u64), SspError> {
        let v = self.acquire()?;
        Ok((self.x.clone(), v))
    }

    /// One more reader of the current version (its ḡ snapshot is taken, or
    /// shared when the version already has readers); returns the version.
    ///
    /// # Errors
    /// [`SspError::Config`] when `cap` snapshots already live and the
    /// current version has none (retry after an update or release).
    pub fn acquire(&mut self) -> Result<u64, SspError> {
        if !self.snapshots.contains_key(&self.version) && self.snapshots.len() >= self.cap {
            return Err(SspError::Config(format!(
                "AdaRevision snapshot cap {} reached (versions {:?} still read)",
                self.cap,
                self.snapshots.keys().collect::<Vec<_>>()
            )));
        }
        let gbar = &self.gbar;
        let snap = self
            .snapshots
            .entry(self.version)
            .or_insert_with(|| Snapshot {
                gbar: gbar.clone(),
                readers: 0,
            });
        snap.readers += 1;
        Ok(self.version)
    }

    /// Applies gradient `g` computed from the row read at `version` (the
    /// read stays outstanding until [`AdaRevisionRow::release`]: one read
    /// may carry several updates, e.g. one per clock).
    ///
    /// # Errors
    /// [`SspError::Config`] when no reader of `version` is outstanding or
    /// `g` has the wrong length.
    pub fn update(&mut self, g: &[f32], version: u64) -> Result<(), SspError> {
        if g.len() != self.x.len() {
            return Err(SspError::Config(format!(
                "gradient of {} values for a row of {}",
                g.len(),
                self.x.len()
            )));
        }
        let snap = self
            .snapshots
            .get(&version)
            .ok_or_else(|| SspError::Config(format!("no outstanding read of version {version}")))?;
        for (j, &gj) in g.iter().enumerate() {
            let g_bck = self.gbar[j] - snap.gbar[j];
            let eta_old = self.alpha / self.z_max[j].sqrt();
            self.z[j] += gj * gj + 2.0 * gj * g_bck;
            self.z_max[j] = self.z_max[j].max(self.z[j]);
            let eta = self.alpha / self.z_max[j].sqrt();
            self.x[j] += -eta * gj + (eta_old - eta) * g_bck;
            self.gbar[j] += gj;
        }
        self.version += 1;
        Ok(())
    }

    /// Drops one reader of `version` (its updates are all applied and its
    /// copy replaced); frees the snapshot when it was the last.
    pub fn release(&mut self, version: u64) {
        if let Some(s) = self.snapshots.get_mut(&version) {
            s.readers -= 1;
            if s.readers == 0 {
                self.snapshots.remove(&version);
            }
        }
    }

    /// The row's values.
    pub fn values(&self) -> &[f32] {
        &self.x
    }

    /// The current version (updates applied so far).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Snapshots alive now.
    pub fn live_snapshots(&self) -> usize {
        self.snapshots.len()
    }
}
