//! Ranks as separate processes on loopback (this test binary re-executes
//! itself, one child per rank, with torchrun's variables set): they exchange
//! rank 0's payload and pass a barrier; then one child is killed (SIGKILL)
//! and every other rank fails naming it, long before the timeout.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread;
use std::time::{Duration, Instant};

/// Set in a child: run [`child`]'s body.
const CHILD: &str = "TOFU_RENDEZVOUS_TEST_CHILD";
/// Set in a child: after the first barrier, wait for its stdin to close
/// instead of entering the second barrier (the parent kills it meanwhile;
/// should the parent die first, the pipe closes and the child exits).
const HANG: &str = "TOFU_RENDEZVOUS_TEST_HANG";
/// The children's timeout, seconds.
const TIMEOUT_S: u64 = 10;

/// The child's body (a no-op in a normal test run): join, print the
/// payload, barrier, then a second barrier whose outcome it prints.
#[test]
fn child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let env = rendezvous::Env::from_env().unwrap().expect("RANK is set");
    let joined = rendezvous::join(
        &env,
        || (0..128u8).map(|i| i ^ (std::process::id() as u8)).collect(),
        Duration::from_secs(TIMEOUT_S),
    );
    let mut s = match joined {
        Ok(s) => s,
        Err(e) => {
            println!("CHILD join error: {e}");
            return;
        }
    };
    let hex: String = s.payload().iter().map(|b| format!("{b:02x}")).collect();
    println!("CHILD payload {hex}");
    s.barrier().unwrap();
    println!("CHILD barrier1");
    if std::env::var_os(HANG).is_some() {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        return;
    }
    match s.barrier() {
        Ok(()) => println!("CHILD barrier2 ok"),
        Err(e) => println!("CHILD barrier2 error: {e} | blamed {:?}", e.blamed_ranks()),
    }
}

fn spawn(rank: usize, world_size: usize, port: u16, hang: bool) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("RANK", rank.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("WORLD_SIZE", world_size.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if hang {
        c.env(HANG, "1");
    }
    c.spawn().unwrap()
}

/// The `CHILD …` lines of every child, tagged with its rank.
fn lines(children: &mut [Child]) -> Receiver<(usize, String)> {
    let (tx, rx) = channel();
    for (rank, c) in children.iter_mut().enumerate() {
        let out = c.stdout.take().unwrap();
        let tx = tx.clone();
        thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                // The harness may print `test child ... ` before it.
                if let Some(at) = l.find("CHILD ") {
                    let _ = tx.send((rank, l[at + "CHILD ".len()..].to_string()));
                }
            }
        });
    }
    rx
}

/// Collect one line starting with `prefix` from each rank in `ranks`;
/// lines for later steps that arrive meanwhile wait in `backlog`.
fn expect(
    rx: &Receiver<(usize, String)>,
    backlog: &mut Vec<(usize, String)>,
    ranks: &[usize],
    prefix: &str,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(TIMEOUT_S + 5);
    let mut got: Vec<Option<String>> = vec![None; ranks.iter().max().unwrap() + 1];
    loop {
        backlog.retain(|(rank, line)| {
            let wanted = ranks.contains(rank) && got[*rank].is_none() && line.starts_with(prefix);
            if wanted {
                got[*rank] = Some(line.clone());
            }
            !wanted
        });
        if ranks.iter().all(|r| got[*r].is_some()) {
            return ranks.iter().map(|r| got[*r].clone().unwrap()).collect();
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => backlog.push(l),
            Err(_) => {
                panic!("no `{prefix}` from all of {ranks:?}: {got:?}; other lines: {backlog:?}")
            }
        }
    }
}

/// The children, killed when the test ends, even by a failed assertion.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn processes_exchange_the_payload_and_a_killed_one_is_named() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let world = 4;
    let mut children = Children((0..world).map(|r| spawn(r, world, port, r == 2)).collect());
    let rx = lines(&mut children.0);
    let mut backlog = Vec::new();
    let payloads = expect(&rx, &mut backlog, &[0, 1, 2, 3], "payload");
    assert!(payloads.iter().all(|p| p == &payloads[0]), "{payloads:?}");
    assert_eq!(payloads[0].len(), "payload ".len() + 256);
    expect(&rx, &mut backlog, &[0, 1, 2, 3], "barrier1");
    // Rank 2 now sleeps; the others wait for it in barrier #2. Kill it.
    thread::sleep(Duration::from_millis(200));
    let killed_at = Instant::now();
    children.0[2].kill().unwrap();
    let errors = expect(&rx, &mut backlog, &[0, 1, 3], "barrier2");
    let took = killed_at.elapsed();
    for e in &errors {
        assert!(e.contains("error: rank 2 lost its connection"), "{e}");
        assert!(e.ends_with("blamed [2]"), "{e}");
    }
    assert!(took < Duration::from_secs(TIMEOUT_S), "took {took:?}");
    eprintln!("killed rank 2; the others failed naming it after {took:?}");
}
