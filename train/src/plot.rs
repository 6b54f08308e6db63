//! The loss curve of a training run as an SVG chart (`tofu train --plot
//! loss.svg`), drawn with plotters.
//!
//! Takes the training loss per step (from a first step) and the held-out
//! loss at each evaluation; gives an 800×480 SVG file with both lines and a
//! legend. Units: loss in nats, steps.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

/// The chart could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct PlotError {
    /// The SVG file.
    pub path: PathBuf,
    /// The drawing backend's (I/O) error.
    pub message: String,
}

/// Draw `train` (loss per step, from step `first`) and `test` ((step,
/// held-out loss) pairs) into an SVG file at `path`, titled `title`.
///
/// Errors: [`PlotError`], the drawing backend's (I/O) error, naming the
/// file.
pub fn loss_svg(
    path: &Path,
    title: &str,
    first: usize,
    train: &[f32],
    test: &[(usize, f64)],
) -> Result<(), PlotError> {
    let fail = |e: &dyn std::fmt::Display| PlotError {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let finite = |v: f64| v.is_finite().then_some(v);
    let ys = train
        .iter()
        .map(|&v| v as f64)
        .chain(test.iter().map(|t| t.1))
        .filter_map(finite);
    let top = ys.fold(0.0f64, f64::max).max(1e-6) * 1.05;
    let last = first + train.len().max(1);
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(first as f64..last as f64, 0.0..top)
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("loss (nats)")
        .draw()
        .map_err(|e| fail(&e))?;
    let train_points = train
        .iter()
        .enumerate()
        .map(|(i, &v)| ((first + i) as f64, v as f64));
    chart
        .draw_series(LineSeries::new(train_points, &BLUE))
        .map_err(|e| fail(&e))?
        .label("train (batch)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    let test_points = test.iter().map(|&(s, v)| ((s + 1) as f64, v));
    chart
        .draw_series(LineSeries::new(test_points, RED.stroke_width(2)))
        .map_err(|e| fail(&e))?
        .label("held-out")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}
