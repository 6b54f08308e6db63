//! Choosing the backend × communicator a run executes on (`tofu run`'s
//! `--backend`, `--devices`, `--ranks-per-device`, `--comm`, `--tf32`).
//!
//! Takes the programs, an [`ExecChoice`] and the run's options; gives the
//! [`RunReport`] of [`crate::run_programs_given`] on the chosen pair: the
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
#[derive(Clone, Debug)]
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

/// What [`ExecChoice::execute`] runs, on whichever ranks it chooses.
struct Job<'a> {
    programs: &'a [Program],
    opts: RunOptions,
    progress: Option<&'a (dyn Fn(usize) + Sync)>,
    given: &'a Given,
}

impl Job<'_> {
    /// Runs the programs on `ranks` (one backend and communicator each).
    fn on<B, C>(&self, ranks: Vec<(B, C)>) -> Result<RunReport, ChooseError>
    where
        B: crate::Backend,
        C: crate::Collectives<B::Buffer>,
    {
        let (programs, given) = (self.programs, self.given);
        Ok(crate::run_programs_given(
            programs,
            self.opts,
            self.progress,
            ranks,
            given,
        )?)
    }
}

impl ExecChoice {
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
        let job = Job {
            programs,
            opts,
            progress,
            given,
        };
        match self.backend {
            BackendKind::Cuda => self.execute_cuda(&job),
            BackendKind::Cpu => job.on(crate::LocalCommunicator::create(programs.len())
                .into_iter()
                .map(|c| (crate::CpuBackend::new(), c))
                .collect()),
        }
    }

    /// [`ExecChoice::execute`] on CUDA devices (in a build without the
    /// `cuda` feature, the dummy backend's [`ChooseError::Unavailable`]).
    fn execute_cuda(&self, job: &Job<'_>) -> Result<RunReport, ChooseError> {
        use crate::backend::cuda::{device_count, CudaBackend, HostStaged, NcclCommunicator};
        use crate::LocalCommunicator;
        let n = device_count()?;
        if n == 0 {
            return Err(ChooseError::NoDevice);
        }
        let devices = self.devices.clone().unwrap_or_else(|| (0..n).collect());
        let world = job.programs.len();
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
