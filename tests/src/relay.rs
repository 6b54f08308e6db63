//! A TCP relay that makes a link slow and lossy as an application sees it,
//! for tests on kernels without `tc netem` (this project's machines have
//! none: `Specified qdisc kind is unknown`).
//!
//! Every connection to the relay is forwarded to `target`; each chunk read
//! from either side is written to the other `delay` later, and with
//! probability `loss` a chunk is held one more retransmission timeout
//! (200 ms, Linux's minimum RTO): what TCP makes of a lost segment, seen
//! from above the socket (TCP delivers every byte, in order, late). Order
//! is kept: a chunk is never released before the one read before it.
//! Not modelled: loss of the connection's own handshake or FIN, congestion
//! control's reaction to loss (the window shrinking), bandwidth.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// What TCP adds to a lost segment: one retransmission timeout (Linux's
/// minimum, 200 ms).
const RTO: Duration = Duration::from_millis(200);

/// A running relay; it serves until the test process exits.
pub struct Relay {
    /// Where to connect instead of the target.
    pub addr: SocketAddr,
}

impl Relay {
    /// Relay connections on a loopback port to `target`, each chunk
    /// delayed by `delay` and, with probability `loss`, by one RTO more
    /// (a fixed-seed generator: `seed`).
    pub fn start(target: SocketAddr, delay: Duration, loss: f64, seed: u64) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("a bound address");
        thread::spawn(move || {
            for (k, client) in listener.incoming().flatten().enumerate() {
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let shape = (delay, loss, seed.wrapping_add(2 * k as u64));
                pipe(&client, &server, shape);
                pipe(&server, &client, (delay, loss, shape.2 + 1));
            }
        });
        Relay { addr }
    }
}

/// Forward `from` → `to` with `(delay, loss, seed)` on two threads: a
/// reader stamping each chunk with its release time, a writer releasing it.
fn pipe(from: &TcpStream, to: &TcpStream, (delay, loss, seed): (Duration, f64, u64)) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut state = seed | 1;
        let mut last = Instant::now();
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            // xorshift64: a fixed-seed draw per chunk.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let lost = (state % 1_000_000) as f64 / 1e6 < loss;
            let at = (Instant::now() + delay + if lost { RTO } else { Duration::ZERO }).max(last);
            last = at;
            if tx.send((at, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    });
    thread::spawn(move || {
        for (at, bytes) in rx {
            thread::sleep(at.saturating_duration_since(Instant::now()));
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
