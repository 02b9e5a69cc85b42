//! A pipelined HTTP/1.1 client: every request of a run travels, in order, on one keep-alive connection.
//!
//! nginx handles the requests of one connection strictly one after another, so one connection gives the
//! per-worker simulator exactly the request order nginx saw — and pipelining keeps the connection busy.
//! Keys travel as raw bytes in the `X-Key` header (never URL-encoded).

use crate::nginx::netns::Net;
use crate::run::clock::{CLOCK_HEADER, Window};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

/// What nginx answered to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// The `X-Upstream` header (`$upstream_addr`), if present.
    pub upstream_addr: Option<String>,
    /// The seconds nginx's clock can have read while handling it (the [`CLOCK_HEADER`]), if reported.
    pub clock: Option<Window>,
    /// The `X-Upstream-Status` header (`$upstream_status`), if present.
    pub upstream_status: Option<String>,
}

/// Sends one GET per key (no `X-Key` header for an empty key) on a single connection to `front` (opened
/// in `net`) and returns the responses in order. `progress` is called with the number of responses read so far, every 256.
///
/// # Errors
///
/// I/O errors, a connection closed early, or an unparsable response.
pub fn pipeline(
    net: Net<'_>,
    front: SocketAddr,
    keys: &[Vec<u8>],
    progress: &mut dyn FnMut(usize),
) -> io::Result<Vec<Response>> {
    let requests: Vec<u8> = keys.iter().flat_map(|k| request(Method::Get, k)).collect();
    send_pipelined(net, front, requests, keys.len(), progress)
}

/// The request methods the client sends (a POST has an empty body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Method {
    /// `GET`.
    #[default]
    Get,
    /// `POST` with `Content-Length: 0`.
    Post,
}

impl Method {
    /// The method's name on the request line.
    pub fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }

    /// The method as nginx's retry rules see it.
    pub fn as_request_method(self) -> nginx_ketama::failure::RequestMethod {
        match self {
            Method::Get => nginx_ketama::failure::RequestMethod::Get,
            Method::Post => nginx_ketama::failure::RequestMethod::Post,
        }
    }
}

/// [`pipeline`] with a method per request.
///
/// # Errors
///
/// As [`pipeline`].
pub fn pipeline_methods(
    net: Net<'_>,
    front: SocketAddr,
    requests: &[(Method, &[u8])],
    progress: &mut dyn FnMut(usize),
) -> io::Result<Vec<Response>> {
    let bytes: Vec<u8> = requests.iter().flat_map(|(m, k)| request(*m, k)).collect();
    send_pipelined(net, front, bytes, requests.len(), progress)
}

fn send_pipelined(
    net: Net<'_>,
    front: SocketAddr,
    requests: Vec<u8>,
    count: usize,
    progress: &mut dyn FnMut(usize),
) -> io::Result<Vec<Response>> {
    let stream = net.connect(front, None, Duration::from_secs(5))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut writer = stream.try_clone()?;
    let mut responses = Vec::with_capacity(count);
    std::thread::scope(|scope| {
        let sender = scope.spawn(move || -> io::Result<()> {
            for chunk in requests.chunks(64 * 1024) {
                writer.write_all(chunk)?;
            }
            writer.flush()
        });
        let mut reader = BufReader::with_capacity(64 * 1024, &stream);
        let mut result = Ok(());
        for i in 0..count {
            match read_response(&mut reader) {
                Ok(r) => responses.push(r),
                Err(e) => {
                    result = Err(io::Error::new(e.kind(), format!("response {} of {count}: {e}", i + 1)));
                    break;
                }
            }
            if (i + 1) % 256 == 0 {
                progress(i + 1);
            }
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
        let sent = sender.join().expect("sender thread");
        result.and(sent.or_else(|e| if responses.len() == count { Ok(()) } else { Err(e) }))
    })?;
    progress(count);
    Ok(responses)
}

/// One raw request on a connection of its own from `from` (port 0: any): `head` is the request line and
/// header lines, each ended by CRLF; `Connection: close` and the empty line are added. Returns nginx's
/// response and the connection's client address.
///
/// # Errors
///
/// I/O errors or an unparsable response.
pub fn send_raw(net: Net<'_>, front: SocketAddr, from: SocketAddr, head: &[u8]) -> io::Result<(Response, SocketAddr)> {
    let mut stream = net.connect(front, Some(from), Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let client = stream.local_addr()?;
    let mut bytes = head.to_vec();
    bytes.extend_from_slice(b"Connection: close\r\n\r\n");
    stream.write_all(&bytes)?;
    Ok((read_response(&mut BufReader::new(&stream))?, client))
}

/// One `GET path` on a connection of its own (the harness's probes).
///
/// # Errors
///
/// I/O errors or an unparsable response.
pub fn get(net: Net<'_>, front: SocketAddr, path: &str) -> io::Result<Response> {
    let mut stream = net.connect(front, None, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: parity\r\nConnection: close\r\n\r\n").as_bytes())?;
    read_response(&mut BufReader::new(&stream))
}

fn request(method: Method, key: &[u8]) -> Vec<u8> {
    let mut r = match method {
        Method::Get => b"GET / HTTP/1.1\r\nHost: parity\r\n".to_vec(),
        Method::Post => b"POST / HTTP/1.1\r\nHost: parity\r\nContent-Length: 0\r\n".to_vec(),
    };
    if !key.is_empty() {
        r.extend_from_slice(b"X-Key: ");
        r.extend_from_slice(key);
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"\r\n");
    r
}

fn read_response(reader: &mut impl BufRead) -> io::Result<Response> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
    let mut line = Vec::new();
    if reader.read_until(b'\n', &mut line)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    let status_line = String::from_utf8_lossy(&line);
    let status: u16 =
        status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| bad("bad status line"))?;
    let mut upstream_addr = None;
    let mut upstream_status = None;
    let mut clock = None;
    let mut length: Option<usize> = None;
    let mut chunked = false;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed in headers"));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else { return Err(bad("bad header")) };
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "x-upstream" => upstream_addr = Some(value.to_string()),
            "x-upstream-status" => upstream_status = Some(value.to_string()),
            n if n.eq_ignore_ascii_case(CLOCK_HEADER) => clock = Window::parse(value),
            "content-length" => length = value.parse().ok(),
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    if chunked {
        loop {
            line.clear();
            reader.read_until(b'\n', &mut line)?;
            let size =
                usize::from_str_radix(String::from_utf8_lossy(&line).trim(), 16).map_err(|_| bad("bad chunk"))?;
            let mut skip = vec![0; size + 2];
            reader.read_exact(&mut skip)?;
            if size == 0 {
                break;
            }
        }
    } else if let Some(n) = length {
        io::copy(&mut reader.take(n as u64), &mut io::sink())?;
    }
    Ok(Response { status, upstream_addr, clock, upstream_status })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_and_chunked_bodies() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Upstream: 127.0.0.1:1, unix:/a\r\n\
X-Clock: 1764620001.002 1.003\r\n\r\nok\
HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\nX-Upstream: parity\r\n\r\n2\r\nab\r\n0\r\n\r\n";
        let mut r = BufReader::new(&raw[..]);
        assert_eq!(
            read_response(&mut r).unwrap(),
            Response {
                status: 200,
                upstream_addr: Some("127.0.0.1:1, unix:/a".into()),
                clock: Some(Window { first: 1764619999, last: 1764620001 }),
                upstream_status: None,
            }
        );
        assert_eq!(
            read_response(&mut r).unwrap(),
            Response { status: 502, upstream_addr: Some("parity".into()), clock: None, upstream_status: None }
        );
        assert!(read_response(&mut r).is_err());
        assert_eq!(request(Method::Get, b""), b"GET / HTTP/1.1\r\nHost: parity\r\n\r\n");
        assert_eq!(
            request(Method::Post, b"k"),
            b"POST / HTTP/1.1\r\nHost: parity\r\nContent-Length: 0\r\nX-Key: k\r\n\r\n"
        );
    }
}
