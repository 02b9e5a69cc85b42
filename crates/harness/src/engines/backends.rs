//! The echo backends an engine proxies to, and asking the engine where a key goes: backend `i` listens on
//! 127.0.0.`i+1` (distinct addresses, for HAProxy's `hash-key addr`) and answers every request with its
//! index; a request carries its key in `X-Key`, the header both engines hash.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// How long a backend or the engine may take to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Backends that answer with their index; their threads live as long as this process.
#[derive(Debug, Clone)]
pub struct EchoBackends {
    addrs: Vec<SocketAddr>,
}

impl EchoBackends {
    /// `n` backends on 127.0.0.1 to 127.0.0.`n`, each on a free port.
    ///
    /// # Errors
    ///
    /// A listener that cannot be bound.
    pub fn start(n: usize) -> std::io::Result<EchoBackends> {
        let mut addrs = Vec::with_capacity(n);
        for i in 0..n {
            let l = TcpListener::bind(format!("127.0.0.{}:0", i + 1))?;
            addrs.push(l.local_addr()?);
            std::thread::spawn(move || {
                for conn in l.incoming().flatten() {
                    std::thread::spawn(move || serve(conn, i));
                }
            });
        }
        Ok(EchoBackends { addrs })
    }

    /// Their addresses, by index.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }
}

fn serve(mut conn: TcpStream, index: usize) {
    let _ = conn.set_read_timeout(Some(ANSWER_WITHIN));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // One request per connection (the proxies are told to close), so the head is all there is to read.
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = index.to_string();
    let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
}

/// The index of the backend the request with `X-Key: key` reached through the engine at `front`, or `None`
/// for any other answer (the engine answered itself: no server).
///
/// # Errors
///
/// The engine could not be reached or did not answer in time.
pub fn ask(front: SocketAddr, key: &[u8]) -> std::io::Result<Option<usize>> {
    let mut conn = TcpStream::connect(front)?;
    conn.set_read_timeout(Some(ANSWER_WITHIN))?;
    let mut req = b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\nX-Key: ".to_vec();
    req.extend_from_slice(key);
    req.extend_from_slice(b"\r\n\r\n");
    conn.write_all(&req)?;
    let mut resp = Vec::new();
    conn.read_to_end(&mut resp)?;
    let Some(at) = resp.windows(4).position(|w| w == b"\r\n\r\n") else { return Ok(None) };
    if !resp.starts_with(b"HTTP/1.1 200") {
        return Ok(None);
    }
    Ok(std::str::from_utf8(&resp[at + 4..]).ok().and_then(|b| b.trim().parse().ok()))
}
