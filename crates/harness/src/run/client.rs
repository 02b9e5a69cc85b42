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
    let stream = net.connect(front, None, Duration::from_secs(5))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut writer = stream.try_clone()?;
    let requests: Vec<u8> = keys.iter().flat_map(|k| request(k)).collect();
    let mut responses = Vec::with_capacity(keys.len());
    std::thread::scope(|scope| {
        let sender = scope.spawn(move || -> io::Result<()> {
            for chunk in requests.chunks(64 * 1024) {
                writer.write_all(chunk)?;
            }
            writer.flush()
        });
        let mut reader = BufReader::with_capacity(64 * 1024, &stream);
        let mut result = Ok(());
        for i in 0..keys.len() {
            match read_response(&mut reader) {
                Ok(r) => responses.push(r),
                Err(e) => {
                    result = Err(io::Error::new(e.kind(), format!("response {} of {}: {e}", i + 1, keys.len())));
                    break;
                }
            }
            if (i + 1) % 256 == 0 {
                progress(i + 1);
            }
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
        let sent = sender.join().expect("sender thread");
        result.and(sent.or_else(|e| if responses.len() == keys.len() { Ok(()) } else { Err(e) }))
    })?;
    progress(keys.len());
    Ok(responses)
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

fn request(key: &[u8]) -> Vec<u8> {
    let mut r = b"GET / HTTP/1.1\r\nHost: parity\r\n".to_vec();
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
    Ok(Response { status, upstream_addr, clock })
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
                clock: Some(Window { first: 1764619999, last: 1764620001 })
            }
        );
        assert_eq!(
            read_response(&mut r).unwrap(),
            Response { status: 502, upstream_addr: Some("parity".into()), clock: None }
        );
        assert!(read_response(&mut r).is_err());
        assert_eq!(request(b""), b"GET / HTTP/1.1\r\nHost: parity\r\n\r\n");
    }
}
