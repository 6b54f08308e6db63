//! One module per `tofu` subcommand: each has an `Args` (clap) and a `run`.

pub mod check;
