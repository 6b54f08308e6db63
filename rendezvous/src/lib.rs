//! A torchrun-style rendezvous over TCP: the processes of a multi-process
//! run find each other, receive one payload from rank 0 (NCCL's unique id,
//! for an NCCL communicator) and synchronise, and a missing or dead process
//! is an error naming its rank on every other rank, never a hang.
//!
//! * [`Env`]: who this process is, from torchrun's variables (`RANK`,
//!   `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`), as set by
//!   `tofu launch` or any other launcher.
//! * [`join`] → [`Session`]: rank 0 hosts the rendezvous on
//!   `MASTER_ADDR:MASTER_PORT` (background threads, `server.rs`); every rank
//!   connects, registers and receives rank 0's payload; then
//!   [`Session::barrier`] and [`Session::all_gather_bytes`].
//! * [`check`]: the launcher's self-check, one rank's join, barriers and
//!   payload comparison (`tofu rendezvous-check`).
//! * [`launcher`]: what `tofu launch` runs, one process per local rank
//!   supervised; [`layout_check`]: a node layout checked before any starts;
//!   [`heartbeat`]: the launchers of a multi-node run watch each other, so a
//!   node that vanishes without closing a socket stops the run.
//! * [`RendezvousError`] and [`Failure`]: typed errors; a failure of the
//!   session is decided once by the host and sent to every rank, so every
//!   rank names the same rank(s) ([`RendezvousError::blamed_ranks`]).
//!
//! Takes: an [`Env`], rank 0's payload and a timeout. Gives: a [`Session`]
//! whose collectives complete on every rank or fail on every rank within the
//! timeout (plus a small margin), or at once when a process exits.
//! Messages are serde enums, one JSON value each (`wire.rs`); no byte is
//! parsed by hand. The host is for a handful of small messages per run, not
//! for tensor data.
//!
//! ```no_run
//! use std::time::Duration;
//! # fn nccl_unique_id() -> Vec<u8> { vec![0; 128] }
//! let env = rendezvous::Env::from_env()?.expect("run under tofu launch or torchrun");
//! let mut session = rendezvous::join(&env, nccl_unique_id, Duration::from_secs(60))?;
//! let id: &[u8] = session.payload(); // the same 128 bytes on every rank
//! # let _ = id;
//! session.barrier()?;
//! session.close()?;
//! # Ok::<(), rendezvous::RendezvousError>(())
//! ```
#![warn(missing_docs)]

pub mod check;
mod env;
mod error;
pub mod heartbeat;
pub mod launcher;
pub mod layout_check;
mod server;
mod session;
mod wire;

pub use env::{seconds, Env, VARS};
pub use error::{Failure, RendezvousError};
pub use session::{join, Session};
