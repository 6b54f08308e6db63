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
/// Set in a child: after the first barrier, sleep instead of entering the
/// second (the parent kills it meanwhile).
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
    let mut s = rendezvous::join(
        &env,
        || (0..128u8).map(|i| i ^ (std::process::id() as u8)).collect(),
        Duration::from_secs(TIMEOUT_S),
    )
    .unwrap();
    let hex: String = s.payload().iter().map(|b| format!("{b:02x}")).collect();
    println!("CHILD payload {hex}");
    s.barrier().unwrap();
    println!("CHILD barrier1");
    if std::env::var_os(HANG).is_some() {
        thread::sleep(Duration::from_secs(3600));
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

/// Collect one line starting with `prefix` from each rank in `ranks`.
fn expect(rx: &Receiver<(usize, String)>, ranks: &[usize], prefix: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(TIMEOUT_S + 5);
    let mut got: Vec<Option<String>> = vec![None; ranks.iter().max().unwrap() + 1];
    while ranks.iter().any(|r| got[*r].is_none()) {
        let left = deadline.saturating_duration_since(Instant::now());
        let (rank, line) = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no `{prefix}` from all of {ranks:?}: {got:?}"));
        if line.starts_with(prefix) {
            got[rank] = Some(line);
        }
    }
    ranks.iter().map(|r| got[*r].clone().unwrap()).collect()
}

#[test]
fn processes_exchange_the_payload_and_a_killed_one_is_named() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let world = 4;
    let mut children: Vec<Child> = (0..world).map(|r| spawn(r, world, port, r == 2)).collect();
    let rx = lines(&mut children);
    let payloads = expect(&rx, &[0, 1, 2, 3], "payload");
    assert!(payloads.iter().all(|p| p == &payloads[0]), "{payloads:?}");
    assert_eq!(payloads[0].len(), "payload ".len() + 256);
    expect(&rx, &[0, 1, 2, 3], "barrier1");
    // Rank 2 now sleeps; the others wait for it in barrier #2. Kill it.
    thread::sleep(Duration::from_millis(200));
    let killed_at = Instant::now();
    children[2].kill().unwrap();
    let errors = expect(&rx, &[0, 1, 3], "barrier2");
    let took = killed_at.elapsed();
    for e in &errors {
        assert!(e.contains("error: rank 2 lost its connection"), "{e}");
        assert!(e.ends_with("blamed [2]"), "{e}");
    }
    assert!(took < Duration::from_secs(TIMEOUT_S), "took {took:?}");
    eprintln!("killed rank 2; the others failed naming it after {took:?}");
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}
