//! Choosing the backend × communicator a run executes on (`tofu run`'s
//! `--backend`, `--devices`, `--ranks-per-device`, `--comm`, `--tf32`).
//!
//! Takes the programs, an [`ExecChoice`] and the run's options; gives the
//! [`RunReport`] of [`crate::run_programs_given`] on the chosen pair (or,
//! through [`RankJob`] and [`ExecChoice::run_job`], whatever other work on
//! the ranks gives: `tofu train`'s fed steps and evaluation): the
//! CPU backend with in-process channels, or (feature `cuda`) one CUDA
//! backend per rank on `devices[r / ranks_per_device]` with NCCL between
//! them, or host-staged communication where ranks share a GPU or ask for
//! it ([`use_nccl`]). A process started by a launcher (torchrun's
//! variables, [`rendezvous::Env`]) running a 1-worker plan over NCCL joins
//! the rendezvous for rank 0's NCCL unique id. Without the `cuda` feature,
//! the CUDA backend is a dummy whose constructors fail, so asking for CUDA
//! is [`ChooseError::Unavailable`], saying why; no `cfg` here.

use program::Program;

use crate::{BackendError, ExecError, Given, RunOptions, RunReport};

/// Which backend runs the ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// [`crate::CpuBackend`], one thread per rank.
    Cpu,
    /// The CUDA backend (a build with the `cuda` feature).
    Cuda,
}

/// How CUDA ranks communicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaComm {
    /// NCCL, one GPU per rank.
    Nccl,
    /// Staged through host memory (ranks sharing a GPU, 1-rank runs).
    Host,
}

/// The backend × communicator of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecChoice {
    /// The backend.
    pub backend: BackendKind,
    /// CUDA devices to use (default: every visible device).
    pub devices: Option<Vec<usize>>,
    /// Ranks sharing one GPU (≥ 1).
    pub ranks_per_device: usize,
    /// CUDA communication; `None`: as [`use_nccl`] decides.
    pub comm: Option<CudaComm>,
    /// Let cuBLAS use TF32 tensor cores.
    pub tf32: bool,
}

/// Why a run could not start on the chosen backend.
#[derive(Debug, thiserror::Error)]
pub enum ChooseError {
    /// `ranks_per_device` is 0.
    #[error("--ranks-per-device must be at least 1")]
    NoRanksPerDevice,
    /// More ranks than devices × ranks per device.
    #[error(
        "the plan has {world} workers but only {devices} GPU(s) × {per_device} rank(s) per device"
    )]
    TooFewDevices {
        /// Ranks of the plan.
        world: usize,
        /// Devices given or visible.
        devices: usize,
        /// Ranks per device.
        per_device: usize,
    },
    /// The driver sees no device.
    #[error(
        "--backend cuda: the driver sees no CUDA device (check nvidia-smi and \
         CUDA_VISIBLE_DEVICES), or use --backend cpu"
    )]
    NoDevice,
    /// Under a launcher, a plan of several workers or several processes
    /// over NCCL (one rank per process is `train::launched`'s, over TCP).
    #[error(
        "under a launcher (WORLD_SIZE={world_size}) each process would run one rank of the {world}-worker plan; \
         one rank per process is not supported yet (only WORLD_SIZE=1 with a 1-worker plan)"
    )]
    Launched {
        /// The launcher's world size.
        world_size: usize,
        /// Ranks of the plan.
        world: usize,
    },
    /// No CUDA backend in this build, or CUDA is not installed.
    #[error("--backend cuda: {0}")]
    Unavailable(String),
    /// A device, cuBLAS or NCCL call failed.
    #[error(transparent)]
    Backend(BackendError),
    /// The launcher's variables or its rendezvous failed.
    #[error(transparent)]
    Rendezvous(#[from] rendezvous::RendezvousError),
    /// A rank failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
}

impl From<BackendError> for ChooseError {
    /// [`ChooseError::Unavailable`] for a backend this build lacks
    /// ([`BackendError::NotBuilt`]), else [`ChooseError::Backend`].
    fn from(e: BackendError) -> Self {
        match e {
            BackendError::NotBuilt { .. } => ChooseError::Unavailable(e.to_string()),
            e => ChooseError::Backend(e),
        }
    }
}

impl ChooseError {
    /// What the user can do instead, where there is something.
    pub fn help(&self) -> Option<String> {
        match self {
            ChooseError::TooFewDevices { world, devices, .. } => Some(format!(
                "ranks can share a GPU through host-staged communication: \
                 pass --ranks-per-device {}",
                world.div_ceil((*devices).max(1))
            )),
            ChooseError::Launched { .. } => Some(
                "run one `tofu run --backend cuda --devices …` process for all local GPUs instead"
                    .into(),
            ),
            _ => None,
        }
    }
}

/// Work that runs on whichever ranks an [`ExecChoice`] makes: one
/// `(backend, communicator)` pair per rank, of the backend's own types
/// (the seam `tofu run --backend` and `tofu train --backend` share; a
/// trait because the pair's types differ per backend).
pub trait RankJob {
    /// What the work gives.
    type Output;

    /// Ranks the work needs (one program each).
    fn world(&self) -> usize;

    /// Run the work on `ranks`, one pair per rank in rank order.
    ///
    /// Errors: the work's, as a [`ChooseError`] (a rank's failure is
    /// [`ChooseError::Exec`]).
    fn on<B, C>(self, ranks: Vec<(B, C)>) -> Result<Self::Output, ChooseError>
    where
        B: crate::Backend,
        C: crate::Collectives<B::Buffer>;
}

/// A fed run of every rank's program ([`crate::run_programs_fed`]) as a
/// [`RankJob`]: [`ExecChoice::execute`]'s (with [`crate::NoFeed`]), and
/// `tofu train`'s steps and held-out evaluation.
pub struct FedJob<'a> {
    /// One program per rank, in rank order.
    pub programs: &'a [Program],
    /// Steps and seed.
    pub opts: RunOptions,
    /// Called after each step with the steps done.
    pub progress: Option<&'a (dyn Fn(usize) + Sync)>,
    /// Values of leaf tensors instead of their fill.
    pub given: &'a Given,
    /// Per-step values and observations.
    pub feed: &'a dyn crate::StepFeed,
}

impl RankJob for FedJob<'_> {
    type Output = RunReport;

    fn world(&self) -> usize {
        self.programs.len()
    }

    /// Runs the programs on `ranks` (one backend and communicator each).
    fn on<B, C>(self, ranks: Vec<(B, C)>) -> Result<RunReport, ChooseError>
    where
        B: crate::Backend,
        C: crate::Collectives<B::Buffer>,
    {
        let (p, o, g) = (self.programs, self.opts, self.given);
        Ok(crate::run_programs_fed(
            p,
            o,
            self.progress,
            ranks,
            g,
            self.feed,
        )?)
    }
}

impl Default for ExecChoice {
    /// The CPU backend (one thread per rank).
    fn default() -> Self {
        ExecChoice::cpu()
    }
}

impl ExecChoice {
    /// The choice of `tofu run`'s and `tofu train`'s `--backend NAME`
    /// (`cuda`, else the CPU), `--devices` and `--ranks-per-device`, with
    /// the communication [`use_nccl`] picks and no TF32.
    pub fn from_flags(
        backend: &str,
        devices: Option<Vec<usize>>,
        ranks_per_device: usize,
    ) -> ExecChoice {
        ExecChoice {
            backend: match backend {
                "cuda" => BackendKind::Cuda,
                _ => BackendKind::Cpu,
            },
            devices,
            ranks_per_device,
            ..ExecChoice::cpu()
        }
    }

    /// The CPU backend with in-process channels.
    pub fn cpu() -> ExecChoice {
        ExecChoice {
            backend: BackendKind::Cpu,
            devices: None,
            ranks_per_device: 1,
            comm: None,
            tf32: false,
        }
    }

    /// Runs `programs` (one per rank) on the chosen backend and
    /// communicator, calling `progress` after each step.
    ///
    /// Errors: see [`ChooseError`].
    pub fn execute(
        &self,
        programs: &[Program],
        opts: RunOptions,
        progress: Option<&(dyn Fn(usize) + Sync)>,
        given: &Given,
    ) -> Result<RunReport, ChooseError> {
        self.run_job(FedJob {
            programs,
            opts,
            progress,
            given,
            feed: &crate::NoFeed,
        })
    }

    /// Runs `job` on the chosen backend and communicator: the CPU backend
    /// with in-process channels, or one CUDA backend per rank (NCCL or
    /// host-staged, as for [`ExecChoice::execute`]). Never falls back to
    /// the CPU when CUDA was asked for.
    ///
    /// Errors: see [`ChooseError`].
    pub fn run_job<J: RankJob>(&self, job: J) -> Result<J::Output, ChooseError> {
        match self.backend {
            BackendKind::Cuda => self.execute_cuda(job),
            BackendKind::Cpu => {
                let ranks = crate::LocalCommunicator::create(job.world())
                    .into_iter()
                    .map(|c| (crate::CpuBackend::new(), c))
                    .collect();
                job.on(ranks)
            }
        }
    }

    /// [`ExecChoice::run_job`] on CUDA devices (in a build without the
    /// `cuda` feature, the dummy backend's [`ChooseError::Unavailable`]).
    fn execute_cuda<J: RankJob>(&self, job: J) -> Result<J::Output, ChooseError> {
        use crate::backend::cuda::{device_count, CudaBackend, HostStaged, NcclCommunicator};
        use crate::LocalCommunicator;
        let n = device_count()?;
        if n == 0 {
            return Err(ChooseError::NoDevice);
        }
        let devices = self.devices.clone().unwrap_or_else(|| (0..n).collect());
        let world = job.world();
        let place = placement(world, &devices, self.ranks_per_device)?;
        let mut backends = Vec::with_capacity(world);
        for d in place {
            let b = CudaBackend::new(d)?;
            b.set_tf32(self.tf32)?;
            backends.push(b);
        }
        // Started by `tofu launch` (or torchrun): join its rendezvous, which
        // hands rank 0's NCCL unique id to every process.
        let launched = rendezvous::Env::from_env()?;
        let launched_world = launched.as_ref().map_or(1, |e| e.world_size);
        let nccl = use_nccl(self.comm, self.ranks_per_device, world, launched_world);
        if let Some(env) = launched.filter(|_| nccl) {
            if env.world_size != 1 || world != 1 {
                return Err(ChooseError::Launched {
                    world_size: env.world_size,
                    world,
                });
            }
            let mut id_err = None;
            let session = rendezvous::join(
                &env,
                || {
                    NcclCommunicator::unique_id().unwrap_or_else(|e| {
                        id_err = Some(e);
                        Vec::new()
                    })
                },
                std::time::Duration::from_secs(60),
            )?;
            if let Some(e) = id_err {
                return Err(e.into());
            }
            let comm = NcclCommunicator::from_unique_id(
                &backends[0],
                env.rank,
                env.world_size,
                session.payload(),
            )?;
            return job.on(backends.into_iter().zip(std::iter::once(comm)).collect());
        }
        if nccl {
            let comms = NcclCommunicator::for_backends(&backends)?;
            job.on(backends.into_iter().zip(comms).collect())
        } else {
            let comms = LocalCommunicator::create(world)
                .into_iter()
                .map(HostStaged::new);
            job.on(backends.into_iter().zip(comms).collect())
        }
    }
}

/// One process's rank of a launched run on CUDA (`tofu launch … -- train
/// --backend cuda`, or torchrun's variables): its backend on device
/// `devices[env.local_rank]` (default: device `local_rank`) and an NCCL
/// communicator of the launcher's world, joined with rank 0's NCCL unique
/// id, which the rendezvous hands to every process. Gives the rendezvous
/// session too, kept open for the run (barriers, gathers, and the host
/// noticing a process that exits).
///
/// Errors: [`ChooseError::Unavailable`] without the CUDA backend,
/// [`ChooseError::NoDevice`], [`ChooseError::TooFewDevices`] when the
/// node's processes outnumber its devices, [`ChooseError::Rendezvous`],
/// [`ChooseError::Backend`] (a device or NCCL failure).
pub fn launched_cuda(
    choice: &ExecChoice,
    env: &rendezvous::Env,
    timeout: std::time::Duration,
) -> Result<
    (
        crate::backend::cuda::CudaBackend,
        crate::backend::cuda::NcclCommunicator,
        rendezvous::Session,
    ),
    ChooseError,
> {
    use crate::backend::cuda::{device_count, CudaBackend, NcclCommunicator};
    let n = device_count()?;
    if n == 0 {
        return Err(ChooseError::NoDevice);
    }
    let devices = choice.devices.clone().unwrap_or_else(|| (0..n).collect());
    let device = *devices
        .get(env.local_rank)
        .ok_or(ChooseError::TooFewDevices {
            world: env.local_rank + 1,
            devices: devices.len(),
            per_device: 1,
        })?;
    let backend = CudaBackend::new(device)?;
    backend.set_tf32(choice.tf32)?;
    let mut id_err = None;
    let session = rendezvous::join(
        env,
        || {
            NcclCommunicator::unique_id().unwrap_or_else(|e| {
                id_err = Some(e);
                Vec::new()
            })
        },
        timeout,
    )?;
    if let Some(e) = id_err {
        return Err(e.into());
    }
    let comm =
        NcclCommunicator::from_unique_id(&backend, env.rank, env.world_size, session.payload())?;
    Ok((backend, comm, session))
}

/// The device of each of `world` ranks: `devices[r / per_device]`.
///
/// Errors: [`ChooseError::NoRanksPerDevice`] for `per_device` = 0,
/// [`ChooseError::TooFewDevices`] (its [`ChooseError::help`] names the
/// `--ranks-per-device` that fits).
pub fn placement(
    world: usize,
    devices: &[usize],
    per_device: usize,
) -> Result<Vec<usize>, ChooseError> {
    if per_device == 0 {
        return Err(ChooseError::NoRanksPerDevice);
    }
    if devices.is_empty() || world > devices.len() * per_device {
        return Err(ChooseError::TooFewDevices {
            world,
            devices: devices.len(),
            per_device,
        });
    }
    Ok((0..world).map(|r| devices[r / per_device]).collect())
}

/// Whether CUDA ranks communicate through NCCL: as `comm` says, else when
/// each rank has its own GPU and there is more than one rank, in this
/// process (`world`) or under a launcher (`launched_world`); a 1-rank run
/// communicates with no one, so it must not need NCCL installed.
pub fn use_nccl(
    comm: Option<CudaComm>,
    ranks_per_device: usize,
    world: usize,
    launched_world: usize,
) -> bool {
    match comm {
        Some(c) => c == CudaComm::Nccl,
        None => ranks_per_device == 1 && world.max(launched_world) > 1,
    }
}

#[cfg(test)]
mod tests {
    use super::{placement, use_nccl, ChooseError, CudaComm};

    #[test]
    fn a_one_rank_run_needs_no_nccl() {
        assert!(!use_nccl(None, 1, 1, 1));
        assert!(use_nccl(None, 1, 2, 1));
        assert!(use_nccl(None, 1, 1, 4), "under a launcher of 4 processes");
        assert!(
            !use_nccl(None, 2, 4, 1),
            "ranks sharing a GPU stage through the host"
        );
        assert!(use_nccl(Some(CudaComm::Nccl), 1, 1, 1), "asked for");
        assert!(!use_nccl(Some(CudaComm::Host), 1, 8, 1));
    }

    #[test]
    fn ranks_fill_each_device_in_turn() {
        assert_eq!(placement(4, &[0, 1], 2).ok(), Some(vec![0, 0, 1, 1]));
        let e = placement(5, &[0, 1], 2).expect_err("5 ranks on 2 × 2");
        assert_eq!(e.help().as_deref(), Some("ranks can share a GPU through host-staged communication: pass --ranks-per-device 3"));
        assert!(matches!(
            placement(1, &[0], 0),
            Err(ChooseError::NoRanksPerDevice)
        ));
    }
}
