//! Shared by the multi-process `tofu ssp` tests: starting server and
//! worker processes (on loopback or inside network namespaces), waiting
//! for them with a time limit, and reading their JSON.
//!
//! Every process is held by a [`Procs`], which kills whatever is still
//! running when it is dropped, so a failed assertion leaves nothing behind.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tofu_tests::tofu_bin;

/// Processes of one run; those still running are killed on drop. With
/// `pipe_stderr`, the processes' stderr is captured ([`Procs::wait_all`])
/// instead of shown.
#[derive(Default)]
pub struct Procs(Vec<(String, Option<Child>)>, pub bool);

impl Procs {
    /// Starts `prefix… tofu args…` (prefix: e.g. `ip netns exec NS`, or
    /// nothing) with stdout piped; returns its index.
    pub fn spawn(&mut self, what: &str, prefix: &[String], args: &[String]) -> usize {
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(tofu_bin());
                c
            }
            None => Command::new(tofu_bin()),
        };
        let child = cmd
            .args(args)
            .stdout(Stdio::piped())
            .stderr(if self.1 {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        self.0.push((what.to_string(), Some(child)));
        self.0.len() - 1
    }

    /// Waits for process `i` at most `secs` and returns whether it
    /// succeeded and its stdout; kills it and fails on a hang.
    pub fn wait(&mut self, i: usize, secs: u64) -> (bool, String) {
        let (ok, out, _) = self.wait_all(i, secs);
        (ok, out)
    }

    /// As [`Procs::wait`], also giving its stderr (empty unless piped).
    pub fn wait_all(&mut self, i: usize, secs: u64) -> (bool, String, String) {
        let (what, slot) = &mut self.0[i];
        let mut child = slot.take().expect("waited for twice");
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if child.try_wait().expect("try_wait").is_some() {
                let out = child.wait_with_output().expect("output");
                return (
                    out.status.success(),
                    String::from_utf8_lossy(&out.stdout).into_owned(),
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what} did not exit within {secs} s (hang)");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for process `i`, asserts it succeeded and parses its stdout
    /// as one JSON object.
    pub fn json(&mut self, i: usize, secs: u64) -> serde_json::Value {
        let what = self.0[i].0.clone();
        let (ok, out) = self.wait(i, secs);
        assert!(ok, "{what} failed");
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{what}: no JSON on stdout ({e}): {out}"))
    }

    /// Kills process `i` now (a server "crash").
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.0[i].1.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// True while process `i` runs.
    pub fn running(&mut self, i: usize) -> bool {
        match &mut self.0[i].1 {
            Some(c) => c.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            if let Some(c) = c {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// A port free on this host's loopback now.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct ports free on this host's loopback now. Every listener is
/// held until all `n` are chosen: ports picked one at a time by binding
/// port 0 and closing can repeat (two shards were once given one port).
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("local address").port())
        .collect()
}

/// Where a process runs: the command prefix that puts it there and the
/// address it is reached at.
#[derive(Clone, Debug)]
pub struct Host {
    /// E.g. `["ip", "netns", "exec", "NS"]`, or empty for this host.
    pub prefix: Vec<String>,
    /// The host's address as the others reach it.
    pub ip: String,
}

impl Host {
    /// This host, on loopback.
    pub fn loopback() -> Host {
        Host {
            prefix: Vec::new(),
            ip: "127.0.0.1".into(),
        }
    }
}

/// An MF run as processes: `servers` server processes of
/// `shards_per_server` shards each, `clients` worker processes of
/// `workers` threads each.
#[derive(Clone, Debug)]
pub struct MfRun {
    pub data: PathBuf,
    pub clients: usize,
    pub workers: usize,
    pub servers: usize,
    pub shards_per_server: usize,
    pub staleness: u32,
    pub epochs: u32,
    pub rank: u32,
    pub clocks_per_epoch: u32,
    /// More flags for every worker process (and the in-process run).
    pub worker_flags: Vec<String>,
    /// More flags for every server process.
    pub server_flags: Vec<String>,
    /// The addresses the workers connect to instead of the servers' own
    /// (e.g. `tofu_tests::relay`s in front of them).
    pub via: Option<Vec<String>>,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl MfRun {
    /// A small MF run on `data`: 2 servers, 2 clients of 2 workers, rank
    /// 8, 3 epochs of 5 clocks.
    pub fn small(data: PathBuf, staleness: u32) -> MfRun {
        MfRun {
            data,
            clients: 2,
            workers: 2,
            servers: 2,
            shards_per_server: 1,
            staleness,
            epochs: 3,
            rank: 8,
            clocks_per_epoch: 5,
            worker_flags: Vec::new(),
            server_flags: Vec::new(),
            via: None,
        }
    }

    fn shape(&self) -> Vec<String> {
        let mut v = strings(&["--app", "mf"]);
        for (flag, value) in [
            ("--clients", self.clients.to_string()),
            ("--workers", self.workers.to_string()),
            ("--num-servers", self.servers.to_string()),
            ("--shards-per-server", self.shards_per_server.to_string()),
            ("--staleness", self.staleness.to_string()),
            ("--rank", self.rank.to_string()),
        ] {
            v.push(flag.into());
            v.push(value);
        }
        v
    }

    fn schedule(&self) -> Vec<String> {
        let mut v = vec![
            "--data".to_string(),
            self.data.display().to_string(),
            "--epochs".into(),
            self.epochs.to_string(),
            "--clocks-per-epoch".into(),
            self.clocks_per_epoch.to_string(),
        ];
        v.extend(self.worker_flags.iter().cloned());
        v
    }

    /// The same run in one process: `tofu ssp mf --json` with as many
    /// client caches, shards and workers.
    pub fn in_process(&self) -> serde_json::Value {
        let mut args = strings(&["ssp", "mf", "--json"]);
        for (flag, value) in [
            ("--workers", (self.clients * self.workers).to_string()),
            ("--clients", self.clients.to_string()),
            (
                "--shards",
                (self.servers * self.shards_per_server).to_string(),
            ),
            ("--staleness", self.staleness.to_string()),
            ("--rank", self.rank.to_string()),
        ] {
            args.push(flag.into());
            args.push(value);
        }
        args.extend(self.schedule());
        let mut procs = Procs::default();
        let i = procs.spawn("in-process ssp mf", &[], &args);
        procs.json(i, 120)
    }

    /// Starts the servers (server i on `server_hosts[i]`, port
    /// `ports[i]`) and the workers (client c on `client_hosts[c]`) into
    /// `procs`; returns their indices.
    pub fn start(
        &self,
        procs: &mut Procs,
        server_hosts: &[Host],
        client_hosts: &[Host],
        ports: &[u16],
        extra_server: &[String],
        extra_worker: &[String],
    ) -> (Vec<usize>, Vec<usize>) {
        let addrs: Vec<String> = (0..self.servers)
            .map(|i| format!("{}:{}", server_hosts[i].ip, ports[i]))
            .collect();
        let servers = (0..self.servers)
            .map(|i| {
                let mut args = strings(&["ssp", "server", "--json"]);
                args.extend(self.shape());
                args.extend(strings(&["--index", &i.to_string(), "--listen", &addrs[i]]));
                args.extend(self.server_flags.iter().cloned());
                args.extend(extra_server.iter().cloned());
                procs.spawn(&format!("server {i}"), &server_hosts[i].prefix, &args)
            })
            .collect();
        let workers = (0..self.clients)
            .map(|c| {
                let mut args = strings(&["ssp", "worker", "--json"]);
                args.extend(self.shape());
                args.extend(self.schedule());
                args.extend(strings(&[
                    "--client",
                    &c.to_string(),
                    "--servers",
                    &self.via.as_ref().unwrap_or(&addrs).join(","),
                ]));
                args.extend(extra_worker.iter().cloned());
                procs.spawn(&format!("worker {c}"), &client_hosts[c].prefix, &args)
            })
            .collect();
        (servers, workers)
    }

    /// Per-epoch (training, held-out) ratings counted in a run's JSON.
    pub fn counts(v: &serde_json::Value) -> Vec<(u64, u64)> {
        v["ratings_per_epoch"]
            .as_array()
            .unwrap_or_else(|| panic!("no ratings_per_epoch: {v}"))
            .iter()
            .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
            .collect()
    }

    /// Runs the servers and workers to the end; returns the servers' and
    /// the workers' JSON.
    pub fn processes(
        &self,
        server_hosts: &[Host],
        client_hosts: &[Host],
        ports: &[u16],
    ) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
        let mut procs = Procs::default();
        let (s, w) = self.start(&mut procs, server_hosts, client_hosts, ports, &[], &[]);
        let workers: Vec<_> = w.into_iter().map(|i| procs.json(i, 900)).collect();
        let servers: Vec<_> = s.into_iter().map(|i| procs.json(i, 30)).collect();
        (servers, workers)
    }

    /// The run on loopback.
    pub fn on_loopback(&self) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
        let ports = free_ports(self.servers);
        let hosts = vec![Host::loopback(); self.servers.max(self.clients)];
        self.processes(&hosts, &hosts, &ports)
    }
}

/// (training, held-out) ratings of the 90/10 split of a `.inter` file,
/// counted from the file itself.
pub fn split_counts(file: &std::path::Path) -> (u64, u64) {
    let text = std::fs::read_to_string(file).expect("read the ratings file");
    let n = text
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .count() as f64;
    let train = (n * 0.9).round() as u64;
    (train, n as u64 - train)
}

/// Distinct users and items (first two columns) of a `.inter` file.
pub fn users_items(file: &std::path::Path) -> (u64, u64) {
    let text = std::fs::read_to_string(file).expect("read the ratings file");
    let (mut users, mut items) = (
        std::collections::HashSet::new(),
        std::collections::HashSet::new(),
    );
    for l in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let mut f = l.split('\t');
        users.insert(f.next().unwrap_or_default().to_string());
        items.insert(f.next().unwrap_or_default().to_string());
    }
    (users.len() as u64, items.len() as u64)
}

/// A JSON array of numbers.
pub fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

/// Asserts two per-epoch RMSE lists agree within `tol` at every epoch.
pub fn assert_close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}: epochs differ");
    for (e, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol,
            "{what}, epoch {}: {x} vs {y} (tolerance {tol})",
            e + 1
        );
    }
}
