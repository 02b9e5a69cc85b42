//! The echo backends an engine proxies to, and asking the engine where a key goes: backend `i` listens on
//! 127.0.0.`i+1` (distinct addresses, for HAProxy's `hash-key addr`) and answers every request with its
//! index; a request carries its key in `X-Key` (the header both engines hash), or in its URI, its query
//! or its source address (Caddy's `uri_hash`, `query`, `ip_hash`, `client_ip_hash`).

use crate::nginx::netns::connect_from;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
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

/// One request as sent to the engine: `GET target` with `headers`, from 127.0.0.1 or the `from` address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The request-target (origin form: path and query).
    pub target: Vec<u8>,
    /// Header fields besides `Host` and `Connection`.
    pub headers: Vec<(&'static str, Vec<u8>)>,
    /// The source address the connection is bound to (any of 127.0.0.0/8 is local), or the default.
    pub from: Option<Ipv4Addr>,
}

impl Request {
    /// `GET /` with `X-Key: key`.
    pub fn keyed(key: &[u8]) -> Request {
        Request { target: b"/".to_vec(), headers: vec![("X-Key", key.to_vec())], from: None }
    }
}

/// The index of the backend `request` reached through the engine at `front`, or `None` for any other
/// answer (the engine answered itself: no server).
///
/// # Errors
///
/// The engine could not be reached or did not answer in time.
pub fn ask(front: SocketAddr, request: &Request) -> std::io::Result<Option<usize>> {
    let mut conn = match request.from {
        Some(ip) => connect_from(SocketAddr::from((ip, 0)), front)?,
        None => TcpStream::connect(front)?,
    };
    conn.set_read_timeout(Some(ANSWER_WITHIN))?;
    let mut req = b"GET ".to_vec();
    req.extend_from_slice(&request.target);
    req.extend_from_slice(b" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (name, value) in &request.headers {
        req.extend_from_slice(name.as_bytes());
        req.extend_from_slice(b": ");
        req.extend_from_slice(value);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"\r\n");
    conn.write_all(&req)?;
    let mut resp = Vec::new();
    conn.read_to_end(&mut resp)?;
    let Some(at) = resp.windows(4).position(|w| w == b"\r\n\r\n") else { return Ok(None) };
    if !resp.starts_with(b"HTTP/1.1 200") {
        return Ok(None);
    }
    Ok(std::str::from_utf8(&resp[at + 4..]).ok().and_then(|b| b.trim().parse().ok()))
}
