//! NCCL between processes: the process that makes a unique id
//! (`ncclGetUniqueId`) serves its clique on a unix socket whose path the
//! id carries (as NCCL's bootstrap root); every rank of a communicator made
//! from that id (`ncclCommInitRank`, in any process, this one included)
//! connects to it. A rank's call sends its send buffers' values and its
//! post; the server runs it in the clique ([`Clique::exchange`], with the
//! values as send buffers and receive buffers numbered 0, 1, …) and sends
//! back what each receive buffer gets, which the rank writes. A closed
//! connection (`ncclCommAbort`, a process that died) aborts the clique.

use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::nccl_clique::{join, Clique, Collective, Post};

fn put_u64(w: &mut impl Write, v: u64) -> std::io::Result<()> {
    w.write_all(&v.to_le_bytes())
}

fn get_u64(r: &mut impl Read) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn put_f32s(w: &mut impl Write, v: &[f32]) -> std::io::Result<()> {
    put_u64(w, v.len() as u64)?;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    w.write_all(&bytes)
}

fn get_f32s(r: &mut impl Read) -> std::io::Result<Vec<f32>> {
    let n = get_u64(r)? as usize;
    let mut b = vec![0u8; n * 4];
    r.read_exact(&mut b)?;
    Ok(b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// A collective's kind as three words (code, op, root).
fn encode(c: Collective) -> [u64; 3] {
    match c {
        Collective::AllReduce(op) => [0, op as u64, 0],
        Collective::ReduceScatter(op) => [1, op as u64, 0],
        Collective::AllGather => [2, 0, 0],
        Collective::Broadcast(root) => [3, 0, root as u64],
        Collective::Reduce(op, root) => [4, op as u64, root as u64],
    }
}

fn decode(w: [u64; 3]) -> Option<Collective> {
    let (op, root) = (w[1] as i32, w[2] as usize);
    Some(match w[0] {
        0 => Collective::AllReduce(op),
        1 => Collective::ReduceScatter(op),
        2 => Collective::AllGather,
        3 => Collective::Broadcast(root),
        4 => Collective::Reduce(op, root),
        _ => return None,
    })
}

/// The elements a collective reads from its send buffer on rank `me` of `k`.
fn send_len(c: Collective, n: usize, k: usize, me: usize) -> usize {
    match c {
        Collective::ReduceScatter(_) => n * k,
        Collective::Broadcast(root) if root != me => 0,
        _ => n,
    }
}

/// Serve the clique of `id` on `path` (a thread per rank).
pub fn serve(path: PathBuf, id: Vec<u8>) -> std::io::Result<()> {
    let listener = UnixListener::bind(&path)?;
    std::thread::Builder::new()
        .name("cpu-cuda-nccl-root".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let id = id.clone();
                std::thread::spawn(move || {
                    let _ = rank_thread(conn, &id);
                });
            }
        })?;
    Ok(())
}

fn rank_thread(conn: UnixStream, id: &[u8]) -> std::io::Result<()> {
    let mut r = BufReader::new(conn.try_clone()?);
    let mut w = BufWriter::new(conn);
    let (n, rank) = (get_u64(&mut r)? as usize, get_u64(&mut r)? as usize);
    let Some(clique) = join(id, n, rank) else {
        return Ok(());
    };
    loop {
        let Ok(seq) = get_u64(&mut r) else {
            clique.abort(rank);
            return Ok(());
        };
        let reply = match serve_call(&clique, seq, rank, &mut r)? {
            Ok(out) => out,
            Err(e) => {
                put_u64(&mut w, 1)?;
                let b = e.into_bytes();
                put_u64(&mut w, b.len() as u64)?;
                w.write_all(&b)?;
                w.flush()?;
                continue;
            }
        };
        put_u64(&mut w, 0)?;
        put_u64(&mut w, reply.len() as u64)?;
        for (token, v) in reply {
            put_u64(&mut w, token as u64)?;
            put_f32s(&mut w, &v)?;
        }
        w.flush()?;
    }
}

/// Read one call of `rank` and run it: (receive number, values) or the
/// clique's error.
#[allow(clippy::type_complexity)]
fn serve_call(
    clique: &Clique,
    seq: u64,
    rank: usize,
    r: &mut impl Read,
) -> std::io::Result<Result<Vec<(usize, Vec<f32>)>, String>> {
    let kind = get_u64(r)?;
    // Send values stay alive until the exchange is over.
    let mut data: Vec<Vec<f32>> = Vec::new();
    let post = if kind == 5 {
        let mut sends = Vec::new();
        for _ in 0..get_u64(r)? {
            let peer = get_u64(r)? as usize;
            data.push(get_f32s(r)?);
            let v = data.last().expect("pushed");
            sends.push((peer, v.as_ptr() as usize, v.len()));
        }
        let mut recvs = Vec::new();
        for i in 0..get_u64(r)? {
            recvs.push((get_u64(r)? as usize, i as usize, get_u64(r)? as usize));
        }
        Post::p2p(sends, recvs)
    } else {
        let w = [kind, get_u64(r)?, get_u64(r)?];
        let n = get_u64(r)? as usize;
        data.push(get_f32s(r)?);
        let Some(c) = decode(w) else {
            return Ok(Err(format!("rank {rank}: an unknown collective {w:?}")));
        };
        Post::collective(c, data[0].as_ptr() as usize, 0, n)
    };
    Ok(clique.exchange(seq, rank, post))
}

/// A rank's connection to its clique's server.
pub struct Remote {
    conn: Mutex<(BufReader<UnixStream>, BufWriter<UnixStream>)>,
    /// The socket again, outside the lock: [`Remote::close`] must not wait
    /// for a call in flight (it is how `ncclCommAbort` ends one).
    shutdown: UnixStream,
    /// Ranks in the clique.
    pub n: usize,
}

impl Remote {
    /// Connect to the server at `path` as `rank` of `n`.
    pub fn connect(path: &Path, n: usize, rank: usize) -> std::io::Result<Arc<Remote>> {
        let s = UnixStream::connect(path)?;
        let mut w = BufWriter::new(s.try_clone()?);
        put_u64(&mut w, n as u64)?;
        put_u64(&mut w, rank as u64)?;
        w.flush()?;
        Ok(Arc::new(Remote {
            shutdown: s.try_clone()?,
            conn: Mutex::new((BufReader::new(s), w)),
            n,
        }))
    }

    /// Close the connection (the server aborts the clique), ending a call
    /// in flight on it with an error.
    pub fn close(&self) {
        let _ = self.shutdown.shutdown(std::net::Shutdown::Both);
    }

    /// Run rank `me`'s call `seq` through the server and write its outputs.
    ///
    /// # Safety
    /// The post's buffers are device buffers of the sizes it names
    /// (checked when the call was made).
    pub unsafe fn run(&self, seq: u64, me: usize, post: &Post) -> Result<(), String> {
        let mut c = self.conn.lock().expect("connection");
        let (r, w) = &mut *c;
        let io = |e: std::io::Error| format!("call {seq}: the clique's server is gone: {e}");
        let recvs: Vec<usize> = send_call(w, seq, me, self.n, post).map_err(io)?;
        if get_u64(r).map_err(io)? != 0 {
            let n = get_u64(r).map_err(io)? as usize;
            let mut b = vec![0u8; n];
            r.read_exact(&mut b).map_err(io)?;
            return Err(String::from_utf8_lossy(&b).into_owned());
        }
        for _ in 0..get_u64(r).map_err(io)? {
            let token = get_u64(r).map_err(io)? as usize;
            let v = get_f32s(r).map_err(io)?;
            let Some(&p) = recvs.get(token) else {
                return Err(format!("call {seq}: a reply for receive {token}"));
            };
            std::ptr::copy_nonoverlapping(v.as_ptr(), p as *mut f32, v.len());
        }
        Ok(())
    }
}

/// Write a call; gives its receive addresses by number.
///
/// # Safety
/// As [`Remote::run`].
unsafe fn send_call(
    w: &mut impl Write,
    seq: u64,
    me: usize,
    k: usize,
    post: &Post,
) -> std::io::Result<Vec<usize>> {
    let read = |p: usize, n: usize| -> &[f32] {
        if n == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(p as *const f32, n)
        }
    };
    put_u64(w, seq)?;
    let recvs = match post {
        Post::P2p(sends, recvs) => {
            put_u64(w, 5)?;
            put_u64(w, sends.len() as u64)?;
            for &(peer, p, n) in sends {
                put_u64(w, peer as u64)?;
                put_f32s(w, read(p, n))?;
            }
            put_u64(w, recvs.len() as u64)?;
            for &(peer, _, n) in recvs {
                put_u64(w, peer as u64)?;
                put_u64(w, n as u64)?;
            }
            recvs.iter().map(|r| r.1).collect()
        }
        Post::Collective(c, send, recv, n) => {
            for x in encode(*c) {
                put_u64(w, x)?;
            }
            put_u64(w, *n as u64)?;
            put_f32s(w, read(*send, send_len(*c, *n, k, me)))?;
            vec![*recv]
        }
    };
    w.flush()?;
    Ok(recvs)
}
