//! `tofu launch --nproc-per-node N [--nnodes M --node-rank R --master-addr
//! HOST --master-port P] -- SUBCOMMAND ARGS…`: start one `tofu` process per
//! local rank (one per GPU), in torchrun's conventions.
//!
//! Takes the layout and a tofu subcommand; re-executes this executable once
//! per local rank with `RANK` = R·N + local, `LOCAL_RANK`, `WORLD_SIZE` =
//! N·M, `LOCAL_WORLD_SIZE` = N, `MASTER_ADDR`, `MASTER_PORT` set (rank 0,
//! on node 0, hosts the rendezvous of the `rendezvous` crate there), forwards
//! every line the children print with a `[rank r] ` prefix (stdout to stdout,
//! stderr to stderr), and waits for all. Gives exit code 0 when every rank
//! exits 0; otherwise, once a rank exits non-zero or is killed, the others get
//! `--grace-s` seconds to finish (they normally fail by themselves: the
//! rendezvous names the dead rank), are then killed, and `tofu launch` fails
//! with a message naming the first failed rank and its exit status, and every
//! rank's status.
//!
//! Unless `RAYON_NUM_THREADS` is set, each child gets `RAYON_NUM_THREADS` =
//! cores / N (at least 1): the kernels' thread pools of the node's ranks
//! share its cores instead of each taking all of them.
//!
//! Also the hidden `tofu rendezvous-check`, what the launcher's tests run in
//! each rank: read the environment, join, check that every rank got rank 0's
//! payload, pass barriers, print one JSON line.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use miette::miette;
use rendezvous::{join, Env, RendezvousError};

/// Arguments of `tofu launch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Processes to start on this node (one per local GPU).
    #[arg(long)]
    pub nproc_per_node: usize,
    /// Number of nodes (hosts) in the run.
    #[arg(long, default_value_t = 1)]
    pub nnodes: usize,
    /// This node's index, 0..nnodes; node 0 runs rank 0, which hosts the
    /// rendezvous.
    #[arg(long, default_value_t = 0)]
    pub node_rank: usize,
    /// Address of node 0 as the other nodes reach it.
    #[arg(long, default_value = "127.0.0.1")]
    pub master_addr: String,
    /// TCP port of the rendezvous on node 0.
    #[arg(long, default_value_t = 29500)]
    pub master_port: u16,
    /// Seconds the other ranks get to exit after one fails, before they are
    /// killed.
    #[arg(long, default_value_t = 5.0)]
    pub grace_s: f64,
    /// The tofu subcommand each rank runs, and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "SUBCOMMAND")]
    pub command: Vec<OsString>,
}

/// How often the launcher polls its children.
const POLL: Duration = Duration::from_millis(10);
/// After the first failure, how long to wait for the ranks failing because
/// of it before naming the first.
const SETTLE: Duration = Duration::from_millis(50);

/// Run `tofu launch`.
pub fn run(args: Args) -> miette::Result<ExitCode> {
    let n = args.nproc_per_node;
    if n == 0 || args.nnodes == 0 {
        return Err(miette!("--nproc-per-node and --nnodes must be at least 1"));
    }
    if args.node_rank >= args.nnodes {
        return Err(miette!(
            "--node-rank {} is not below --nnodes {}",
            args.node_rank,
            args.nnodes
        ));
    }
    if args.master_port == 0 {
        return Err(miette!(
            "--master-port 0 cannot be shared with the other ranks; pick a port, e.g. 29500"
        ));
    }
    if !(args.grace_s.is_finite() && args.grace_s >= 0.0) {
        return Err(miette!(
            "--grace-s must be a non-negative number of seconds"
        ));
    }
    if args.command.first().is_some_and(|c| c == "launch") {
        return Err(miette!(
            "`tofu launch -- launch …` would launch launchers; give the subcommand each rank runs, e.g. `-- run plan.json`"
        ));
    }
    let exe = std::env::current_exe()
        .map_err(|e| miette!("cannot find the tofu executable to start the ranks: {e}"))?;
    let world_size = n * args.nnodes;
    let first = args.node_rank * n;

    let mut children: Vec<Child> = Vec::with_capacity(n);
    let mut forwarders: Vec<JoinHandle<()>> = Vec::new();
    let closed: Closed = Arc::new(Mutex::new(vec![Vec::new(); n]));
    for local in 0..n {
        let env = Env {
            rank: first + local,
            local_rank: local,
            world_size,
            master_addr: args.master_addr.clone(),
            master_port: args.master_port,
        };
        let mut cmd = Command::new(&exe);
        cmd.args(&args.command)
            .envs(env.vars())
            .env("LOCAL_WORLD_SIZE", n.to_string());
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
                return Err(miette!(
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

    let statuses = supervise(
        &mut children,
        first,
        Duration::from_secs_f64(args.grace_s),
        &closed,
    );
    for f in forwarders {
        let _ = f.join();
    }
    report(&statuses, first, args.grace_s)
}

/// How one rank ended.
#[derive(Clone, Copy)]
enum End {
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

/// Wait for every child; once one fails, kill the rest after `grace`.
/// Returns each rank's end and the index of the first failure.
fn supervise(
    children: &mut [Child],
    first: usize,
    grace: Duration,
    closed: &Closed,
) -> (Vec<End>, Option<usize>) {
    let mut ends: Vec<Option<End>> = vec![None; children.len()];
    let mut failed: Option<(usize, Instant)> = None;
    loop {
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
        if let Some((_, at)) = failed {
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
    )
}

/// Exit code 0 when every rank exited 0, else an error naming the first
/// failed rank and listing every rank's end.
fn report(
    (ends, failed): &(Vec<End>, Option<usize>),
    first: usize,
    grace_s: f64,
) -> miette::Result<ExitCode> {
    let Some(i) = *failed else {
        return Ok(ExitCode::SUCCESS);
    };
    let what = |e: &End| match e {
        End::Exited(s) => describe(*s),
        End::Killed => format!("killed by tofu launch after the {grace_s} s grace period"),
    };
    let all = ends
        .iter()
        .enumerate()
        .map(|(k, e)| format!("rank {}: {}", first + k, what(e)))
        .collect::<Vec<_>>()
        .join("; ");
    Err(miette!(
        "rank {} failed first ({}); every rank: {all}",
        first + i,
        what(&ends[i])
    ))
}

/// `exit status 3`, `killed by signal 9 (SIGKILL)`.
fn describe(status: ExitStatus) -> String {
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

/// Arguments of the hidden `tofu rendezvous-check` (run under `tofu launch`).
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Seconds the join and each barrier may take.
    #[arg(long, default_value_t = 30.0)]
    pub timeout_s: f64,
    /// Barriers to pass (at least 2; the mean time of all but the first is
    /// reported).
    #[arg(long, default_value_t = 2)]
    pub barriers: usize,
    /// This rank aborts (SIGABRT) after the first barrier, without closing
    /// its session: the others must fail naming it.
    #[arg(long)]
    pub kill_rank: Option<usize>,
    /// This rank sleeps for twice the timeout after the first barrier,
    /// ignoring the others: with `--kill-rank`, `tofu launch` must kill it
    /// after the grace period.
    #[arg(long)]
    pub hang_rank: Option<usize>,
}

/// Run `tofu rendezvous-check`: join, compare payloads, pass barriers, print
/// `{"rank", "local_rank", "world_size", "payload", "same_payload",
/// "barriers", "join_ms", "barrier_us"}` (payload in hex; times: the join
/// and the mean of barriers 2.., this rank's view).
pub fn run_check(args: CheckArgs) -> miette::Result<ExitCode> {
    if !(args.timeout_s.is_finite() && args.timeout_s > 0.0) {
        return Err(miette!("--timeout-s must be a positive number of seconds"));
    }
    let barriers = args.barriers.max(2);
    let env = Env::from_env()
        .map_err(|e| miette!("{e}"))?
        .ok_or_else(|| {
            miette!("RANK and WORLD_SIZE are not set: run it as `tofu launch --nproc-per-node N -- rendezvous-check`")
        })?;
    let rank = env.rank;
    let fail = |e: RendezvousError| miette!("rank {rank}: {e}");
    let t = Instant::now();
    let mut s = join(&env, random_id, Duration::from_secs_f64(args.timeout_s)).map_err(fail)?;
    let join_ms = t.elapsed().as_secs_f64() * 1e3;
    s.barrier().map_err(fail)?;
    if args.kill_rank == Some(rank) {
        eprintln!("rank {rank} aborts (--kill-rank {rank})");
        std::process::abort();
    }
    if args.hang_rank == Some(rank) {
        eprintln!("rank {rank} hangs (--hang-rank {rank})");
        std::thread::sleep(Duration::from_secs_f64(2.0 * args.timeout_s));
    }
    let t = Instant::now();
    for _ in 1..barriers {
        s.barrier().map_err(fail)?;
    }
    let barrier_us = t.elapsed().as_secs_f64() * 1e6 / (barriers - 1) as f64;
    let payload = s.payload().to_vec();
    let all = s.all_gather_bytes(&payload).map_err(fail)?;
    if let Some(other) = all.iter().position(|p| p != &payload) {
        return Err(miette!(
            "rank {rank}: rank {other} received another payload than rank {rank}"
        ));
    }
    s.close().map_err(fail)?;
    let hex: String = payload.iter().map(|b| format!("{b:02x}")).collect();
    println!(
        "{}",
        serde_json::json!({
            "rank": rank,
            "local_rank": env.local_rank,
            "world_size": env.world_size,
            "payload": hex,
            "same_payload": true,
            "barriers": barriers,
            "join_ms": join_ms,
            "barrier_us": barrier_us,
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// 128 bytes that differ from run to run, standing in for NCCL's unique id.
fn random_id() -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    (0..128u64)
        .map(|i| {
            let mut h = state.build_hasher();
            h.write_u64(i);
            h.finish() as u8
        })
        .collect()
}

/// Threads of each rank's kernel pool when `ranks` ranks share `cores` cores.
fn threads_per_rank(cores: usize, ranks: usize) -> usize {
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
