//! The launcher's supervisor: start one process per local rank with
//! torchrun's variables, forward their output line by line with a
//! `[rank r] ` prefix, and wait; once a rank fails, the others get a grace
//! period before they are killed, and the outcome names the rank that most
//! likely failed first (what `tofu launch` runs; no tofu dependencies).
//! The same happens when the [`Heartbeat`] declares another node lost; and
//! on one node, a failed group is restarted up to `--max-restarts` times.
//!
//! Takes the executable and arguments each rank runs, the node layout
//! ([`Layout`]), the grace period, the restarts allowed and the heartbeat;
//! gives a [`LaunchOutcome`]: how every rank ended, which failed first, the
//! node lost (if one was) and the restarts made.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::heartbeat::{Heartbeat, Lost};
use crate::Env;

/// Where this node's ranks sit in the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Processes on this node (ranks `node_rank · nproc_per_node …`).
    pub nproc_per_node: usize,
    /// Nodes in the run.
    pub nnodes: usize,
    /// This node's index.
    pub node_rank: usize,
    /// Rank 0's host (`MASTER_ADDR`).
    pub master_addr: String,
    /// Rank 0's rendezvous port (`MASTER_PORT`).
    pub master_port: u16,
}

/// How every rank of this node ended, and which failed first (by local
/// index; `None` when all exited 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchOutcome {
    /// Global rank of local rank 0.
    pub first_rank: usize,
    /// Each local rank's end.
    pub ends: Vec<End>,
    /// The local rank that most likely failed first.
    pub failed: Option<usize>,
    /// The node declared lost by the heartbeats, if one was (then this
    /// node's ranks were stopped because of it).
    pub lost: Option<Lost>,
    /// How many times the group was restarted before this outcome.
    pub restarts: usize,
}

impl LaunchOutcome {
    /// `rank r failed first (…); every rank: rank 0: …` when a rank failed
    /// (`grace_s`: the grace period, for killed ranks).
    pub fn failure(&self, grace_s: f64) -> Option<String> {
        let what = |e: &End| match e {
            End::Exited(s) => describe(*s),
            End::Killed => format!("killed by tofu launch after the {grace_s} s grace period"),
        };
        let all = self
            .ends
            .iter()
            .enumerate()
            .map(|(k, e)| format!("rank {}: {}", self.first_rank + k, what(e)))
            .collect::<Vec<_>>()
            .join("; ");
        if let Some(lost) = &self.lost {
            return Some(format!("{lost}; this node's ranks were stopped: {all}"));
        }
        let i = self.failed?;
        Some(format!(
            "rank {} failed first ({}); every rank: {all}",
            self.first_rank + i,
            what(&self.ends[i])
        ))
    }
}

/// The variables that tell a rank how many times its group was restarted
/// (`tofu launch --max-restarts`): tofu's own and torchrun's.
pub const RESTART_VARS: [&str; 2] = ["TOFU_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT"];

/// How often this process's group was restarted ([`RESTART_VARS`]; 0 when
/// neither is set or readable).
pub fn restart_count() -> usize {
    RESTART_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(0)
}

/// [`launch_once`], and after a failure of this node's ranks (not a lost
/// node: the world size is fixed) up to `max_restarts` more times, the
/// whole group restarted with [`RESTART_VARS`] = the restart's number, as
/// torchrun's non-elastic `--max-restarts` (a run with checkpoints resumes
/// from its latest, e.g. `tofu train --checkpoint-dir`). Gives the last
/// attempt's outcome, with `restarts` set.
///
/// Errors: restarts asked for a run of several nodes (not supported yet:
/// a node that restarts its ranks could reach the rendezvous of the old
/// group, still alive on another node, before that group has ended;
/// restarting across nodes needs rendezvous rounds, as torchrun's), and
/// [`launch_once`]'s.
pub fn launch(
    exe: &Path,
    args: &[OsString],
    layout: &Layout,
    (grace, max_restarts): (Duration, usize),
    heartbeat: &Heartbeat,
) -> Result<LaunchOutcome, String> {
    if max_restarts > 0 && layout.nnodes > 1 {
        return Err(format!(
            "--max-restarts {max_restarts} with --nnodes {}: restarts work on one node only for now (every node's old ranks must end before any new one joins); run with --max-restarts 0, or on one node",
            layout.nnodes
        ));
    }
    let mut attempt = 0;
    loop {
        let mut outcome = launch_once(exe, args, layout, grace, heartbeat, attempt)?;
        outcome.restarts = attempt;
        let failed = outcome.failed.is_some() && outcome.lost.is_none();
        if !failed || attempt >= max_restarts {
            return Ok(outcome);
        }
        attempt += 1;
        eprintln!(
            "tofu launch: {}; restarting this node's ranks (restart {attempt} of {max_restarts})",
            outcome.failure(grace.as_secs_f64()).unwrap_or_default()
        );
    }
}

/// Start this node's ranks (`exe` with `args`, torchrun's variables,
/// [`RESTART_VARS`] = `attempt`, and `RAYON_NUM_THREADS` = cores / ranks
/// unless set), forward their output, and supervise them with `grace` (see
/// the module doc); once `heartbeat` declares a node lost, this node's
/// ranks get `grace` to exit and are then killed.
///
/// Errors: a message naming the rank that could not be started (the ranks
/// already started are killed).
pub fn launch_once(
    exe: &Path,
    args: &[OsString],
    layout: &Layout,
    grace: Duration,
    heartbeat: &Heartbeat,
    attempt: usize,
) -> Result<LaunchOutcome, String> {
    let n = layout.nproc_per_node;
    let world_size = n * layout.nnodes;
    let first = layout.node_rank * n;
    let mut children: Vec<Child> = Vec::with_capacity(n);
    let mut forwarders: Vec<JoinHandle<()>> = Vec::new();
    let closed: Closed = Arc::new(Mutex::new(vec![Vec::new(); n]));
    for local in 0..n {
        let env = Env {
            rank: first + local,
            local_rank: local,
            world_size,
            master_addr: layout.master_addr.clone(),
            master_port: layout.master_port,
        };
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .envs(env.vars())
            .env("LOCAL_WORLD_SIZE", n.to_string())
            .envs(RESTART_VARS.map(|v| (v, attempt.to_string())));
        // The node's cores shared among its ranks (torchrun sets
        // OMP_NUM_THREADS for the same reason), unless the user chose.
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            let cores = thread::available_parallelism().map_or(1, |c| c.get());
            cmd.env("RAYON_NUM_THREADS", threads_per_rank(cores, n).to_string());
        }
        let spawned = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                for c in &mut children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(format!(
                    "cannot start rank {} ({}): {e}",
                    env.rank,
                    exe.display()
                ));
            }
        };
        if let Some(out) = child.stdout.take() {
            forwarders.push(forward(env.rank, out, false, closed.clone(), local));
        }
        if let Some(err) = child.stderr.take() {
            forwarders.push(forward(env.rank, err, true, closed.clone(), local));
        }
        children.push(child);
    }
    let (ends, failed, lost) = supervise(&mut children, first, grace, &closed, heartbeat);
    for f in forwarders {
        let _ = f.join();
    }
    if failed.is_none() && lost.is_none() {
        heartbeat.finish();
    }
    Ok(LaunchOutcome {
        first_rank: first,
        ends,
        failed,
        lost,
        restarts: 0,
    })
}

const POLL: Duration = Duration::from_millis(10);
/// After the first failure, how long to wait for the ranks failing because
/// of it before naming the first.
const SETTLE: Duration = Duration::from_millis(50);

/// How one rank ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Exited by itself with this status.
    Exited(ExitStatus),
    /// Killed by the launcher after the grace period.
    Killed,
}

/// When each child's output pipes closed (one entry per pipe), by local
/// rank: when it exited, to a few microseconds, seen by the forwarders.
type Closed = Arc<Mutex<Vec<Vec<Instant>>>>;

/// Of the ranks that failed, the one that most likely failed first (the
/// cause; the others usually fail because the rendezvous told them): a
/// rank killed by a signal before one that exited with a status (a rank
/// that fails because of another exits with status 1), then the earliest
/// to close its output pipes (when it exited, seen by the forwarders, which
/// are waited for briefly), then the lowest.
fn first_to_fail(candidates: &[(usize, ExitStatus)], closed: &Closed) -> usize {
    let deadline = Instant::now() + Duration::from_millis(200);
    let times = loop {
        let times: Vec<Option<Instant>> = {
            let c = closed.lock().unwrap_or_else(|e| e.into_inner());
            candidates
                .iter()
                .map(|(i, _)| {
                    (c[*i].len() == 2)
                        .then(|| c[*i].iter().max().copied())
                        .flatten()
                })
                .collect()
        };
        if times.iter().all(Option::is_some) || Instant::now() >= deadline {
            break times;
        }
        thread::sleep(Duration::from_millis(1));
    };
    let k = (0..candidates.len())
        .min_by_key(|k| {
            let (rank, status) = candidates[*k];
            (
                status.code().is_some(),
                times[*k].is_none(),
                times[*k],
                rank,
            )
        })
        .expect("a failed rank");
    candidates[k].0
}

/// Collect the children that ended since the last look; gives those that
/// failed (non-zero status or a signal).
fn sweep(children: &mut [Child], ends: &mut [Option<End>]) -> Vec<(usize, ExitStatus)> {
    let mut failed = Vec::new();
    for (i, c) in children.iter_mut().enumerate() {
        if ends[i].is_some() {
            continue;
        }
        match c.try_wait() {
            Ok(Some(status)) => {
                ends[i] = Some(End::Exited(status));
                if !status.success() {
                    failed.push((i, status));
                }
            }
            Ok(None) => {}
            Err(_) => {
                // Cannot observe it: stop it; it counts as killed.
                let _ = c.kill();
                let _ = c.wait();
                ends[i] = Some(End::Killed);
            }
        }
    }
    failed
}

/// Wait for every child; once one fails or `heartbeat` declares a node
/// lost, kill the rest after `grace`. Returns each rank's end, the index of
/// the first failure, and the node lost while ranks were running.
fn supervise(
    children: &mut [Child],
    first: usize,
    grace: Duration,
    closed: &Closed,
    heartbeat: &Heartbeat,
) -> (Vec<End>, Option<usize>, Option<Lost>) {
    let mut ends: Vec<Option<End>> = vec![None; children.len()];
    let mut failed: Option<(usize, Instant)> = None;
    let mut lost_at: Option<(Lost, Instant)> = None;
    loop {
        if lost_at.is_none() {
            if let Some(lost) = heartbeat.lost() {
                lost_at = Some((lost.clone(), Instant::now()));
                eprintln!(
                    "tofu launch: {lost}; this node's ranks have {:.1} s to exit before they are killed",
                    grace.as_secs_f64()
                );
            }
        }
        let mut failed_now = sweep(children, &mut ends);
        if failed.is_none() && !failed_now.is_empty() {
            // Ranks failing because of this one follow within milliseconds:
            // look again after a moment, then pick the cause among all.
            thread::sleep(SETTLE);
            failed_now.extend(sweep(children, &mut ends));
            let i = first_to_fail(&failed_now, closed);
            failed = Some((i, Instant::now()));
            if ends.iter().any(Option::is_none) {
                let status = failed_now.iter().find(|(k, _)| *k == i).expect("failed").1;
                eprintln!(
                    "tofu launch: rank {} {}; the other ranks have {:.1} s to exit before they are killed",
                    first + i,
                    describe(status),
                    grace.as_secs_f64()
                );
            }
        }
        if failed.is_none() {
            if let Some(i) = ends.iter().position(|e| matches!(e, Some(End::Killed))) {
                failed = Some((i, Instant::now()));
            }
        }
        if ends.iter().all(Option::is_some) {
            break;
        }
        let since = failed
            .map(|(_, at)| at)
            .into_iter()
            .chain(lost_at.as_ref().map(|(_, at)| *at))
            .min();
        if let Some(at) = since {
            if at.elapsed() >= grace {
                for (i, c) in children.iter_mut().enumerate() {
                    if ends[i].is_none() {
                        let _ = c.kill();
                        let _ = c.wait();
                        ends[i] = Some(End::Killed);
                    }
                }
                break;
            }
        }
        thread::sleep(POLL);
    }
    (
        ends.into_iter()
            .map(|e| e.expect("every rank ended"))
            .collect(),
        failed.map(|(i, _)| i),
        lost_at.map(|(l, _)| l),
    )
}

/// `exit status 3`, `killed by signal 9 (SIGKILL)`.
pub fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                1 => " (SIGHUP)",
                2 => " (SIGINT)",
                6 => " (SIGABRT)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            return format!("was killed by signal {sig}{name}");
        }
    }
    format!("ended with {status}")
}

/// Copy a child's output line by line with a `[rank r] ` prefix; note
/// when the pipe closed in `closed[local]`.
fn forward(
    rank: usize,
    from: impl Read + Send + 'static,
    to_stderr: bool,
    closed: Closed,
    local: usize,
) -> JoinHandle<()> {
    thread::spawn(move || {
        let mut reader = BufReader::new(from);
        let prefix = format!("[rank {rank}] ");
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => {
                    let mut c = closed.lock().unwrap_or_else(|e| e.into_inner());
                    c[local].push(Instant::now());
                    return;
                }
                Ok(_) => {}
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            let mut out = prefix.clone().into_bytes();
            out.extend_from_slice(&line);
            // One write per line, under the stream's lock: lines of
            // different ranks never interleave.
            let _ = if to_stderr {
                std::io::stderr().lock().write_all(&out)
            } else {
                std::io::stdout().lock().write_all(&out)
            };
        }
    })
}

/// Threads of each rank's kernel pool when `ranks` ranks share `cores` cores.
pub fn threads_per_rank(cores: usize, ranks: usize) -> usize {
    (cores / ranks.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::threads_per_rank;

    #[test]
    fn ranks_share_the_cores_and_each_keeps_one() {
        assert_eq!(threads_per_rank(16, 4), 4);
        assert_eq!(threads_per_rank(2, 4), 1);
        assert_eq!(threads_per_rank(2, 1), 2);
        assert_eq!(threads_per_rank(7, 2), 3);
    }
}
