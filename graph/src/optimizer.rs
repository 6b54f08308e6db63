//! Optimizers: which update spec closes a training step, with which
//! hyper-parameters and how many state tensors per weight.
//!
//! Takes nothing; gives [`Optimizer`], used by the training pass
//! ([`super::training_graph`]) to append one update op per weight.

use tdl::{AttrValue, Attrs};

/// The optimizer whose update closes a training step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Optimizer {
    /// Plain SGD: `sgd_update<lr>(w, g) → w_new`; no state.
    Sgd {
        /// Learning rate.
        lr: f64,
    },
    /// SGD with momentum: `momentum_update<lr, momentum>(w, g, v) → (w_new, v_new)`;
    /// one state tensor (velocity) per weight.
    Momentum {
        /// Learning rate.
        lr: f64,
        /// Momentum coefficient.
        momentum: f64,
    },
    /// Adam: `adam_update<lr, beta1, beta2, eps, step>(w, g, m, v) → (w_new, m_new, v_new)`;
    /// two state tensors (m, v) per weight.
    Adam {
        /// Learning rate.
        lr: f64,
        /// Decay of the first moment.
        beta1: f64,
        /// Decay of the second moment.
        beta2: f64,
        /// Denominator epsilon.
        eps: f64,
    },
}

/// `--lr LR` checked: a positive, finite number (or none).
///
/// Errors: any other value, in words naming the flag.
pub fn checked_lr(lr: Option<f64>) -> Result<Option<f64>, String> {
    match lr {
        Some(v) if !(v.is_finite() && v > 0.0) => {
            Err(format!("--lr {v}: must be a positive number"))
        }
        other => Ok(other),
    }
}

/// `--weight-decay λ` checked: a finite number ≥ 0.
///
/// Errors: any other value, in words naming the flag.
pub fn checked_weight_decay(lambda: f64) -> Result<f64, String> {
    if lambda.is_finite() && lambda >= 0.0 {
        Ok(lambda)
    } else {
        Err(format!("--weight-decay {lambda}: must be a number ≥ 0"))
    }
}

impl Default for Optimizer {
    /// Momentum SGD (lr 0.1, momentum 0.9): MXNet's default for the paper's
    /// benchmarks, and what Table 1's sizes count (one state tensor per weight).
    fn default() -> Self {
        Optimizer::Momentum {
            lr: 0.1,
            momentum: 0.9,
        }
    }
}

impl Optimizer {
    /// Parse `sgd`, `momentum` or `adam` (default hyper-parameters).
    pub fn from_name(name: &str) -> Option<Optimizer> {
        match name {
            "sgd" => Some(Optimizer::Sgd { lr: 0.1 }),
            "momentum" => Some(Optimizer::default()),
            "adam" => Some(Optimizer::Adam {
                lr: 1e-3,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
            }),
            _ => None,
        }
    }

    /// `--optimizer NAME [--lr LR]`: [`Optimizer::from_name`], its learning
    /// rate set to `lr` when given.
    ///
    /// Errors: an unknown name, or a learning rate that is not a positive
    /// number, in words naming the flag.
    pub fn from_flags(name: &str, lr: Option<f64>) -> Result<Optimizer, String> {
        let o = Optimizer::from_name(name)
            .ok_or_else(|| format!("--optimizer {name}: expected sgd, momentum or adam"))?;
        match checked_lr(lr)? {
            Some(v) => Ok(o.with_lr(v)),
            None => Ok(o),
        }
    }

    /// The same optimizer with learning rate `lr`.
    pub fn with_lr(mut self, lr: f64) -> Optimizer {
        match &mut self {
            Optimizer::Sgd { lr: l }
            | Optimizer::Momentum { lr: l, .. }
            | Optimizer::Adam { lr: l, .. } => *l = lr,
        }
        self
    }

    /// Name of the update spec.
    pub fn spec(&self) -> &'static str {
        match self {
            Optimizer::Sgd { .. } => "sgd_update",
            Optimizer::Momentum { .. } => "momentum_update",
            Optimizer::Adam { .. } => "adam_update",
        }
    }

    /// Names of the state tensors kept per weight (suffixes of the weight name).
    pub fn state_names(&self) -> &'static [&'static str] {
        match self {
            Optimizer::Sgd { .. } => &[],
            Optimizer::Momentum { .. } => &["velocity"],
            Optimizer::Adam { .. } => &["m", "v"],
        }
    }

    /// Attribute values of the update spec.
    pub(crate) fn attrs(&self) -> Attrs {
        let f = |k: &str, v: f64| (k.to_string(), AttrValue::Float(v));
        match *self {
            Optimizer::Sgd { lr } => [f("lr", lr)].into_iter().collect(),
            Optimizer::Momentum { lr, momentum } => {
                [f("lr", lr), f("momentum", momentum)].into_iter().collect()
            }
            Optimizer::Adam {
                lr,
                beta1,
                beta2,
                eps,
            } => [
                f("lr", lr),
                f("beta1", beta1),
                f("beta2", beta2),
                f("eps", eps),
                ("step".to_string(), AttrValue::Int(1)),
            ]
            .into_iter()
            .collect(),
        }
    }
}
