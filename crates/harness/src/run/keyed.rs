//! Requests that carry their key in themselves (issue 21 point 4): generated requests for a key
//! expression — targets with percent-escapes (valid and invalid), `.`/`..` segments, doubled slashes and
//! query arguments; cookies and repeated headers; Host variants (case, port, absent, an absolute-form
//! target); methods; client addresses across `127.0.0.0/8` — each sent on a connection of its own, and
//! judged by the library: it reads the nginx.conf of the run and dispatches each request as nginx would
//! ([`nginx_ketama::dispatch`]) to its key bytes (or to nginx's own answer), then routes the key. Nothing here
//! computes a key itself.

use crate::nginx::netns::Net;
use crate::run::client::send_raw;
use crate::run::observation::{Observation, observation};
use crate::run::parity::{KeyKind, Mismatch};
use nginx_ketama::Worker;
use nginx_ketama::config::Config;
use nginx_ketama::dispatch::{Dispatch, Dispatcher};
use nginx_ketama::request::{Request, Scheme};
use nginx_ketama::upstream::{Peer, Upstream};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};

/// One generated request: the client address it comes from and its head (request line and header lines,
/// each ended by CRLF, without the final empty line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The source address (a port is chosen when connecting).
    pub client: Ipv4Addr,
    /// Request line and headers.
    pub head: Vec<u8>,
}

/// `n` requests exercising the `variables` a key reads (lower-case names without `$`), reproducible from
/// `seed`.
pub fn requests(variables: &[String], seed: u64, n: usize) -> Vec<Generated> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x006b_6579_6578_7072);
    let args: Vec<&str> = variables.iter().filter_map(|v| v.strip_prefix("arg_")).collect();
    let cookies: Vec<&str> = variables.iter().filter_map(|v| v.strip_prefix("cookie_")).collect();
    let headers: Vec<String> = variables
        .iter()
        .filter_map(|v| v.strip_prefix("http_"))
        .filter(|h| !matches!(*h, "host" | "cookie"))
        .map(|h| h.replace('_', "-"))
        .collect();
    (0..n).map(|_| one(&mut rng, &args, &cookies, &headers)).collect()
}

/// Path segments: ordinary ones, and (one in ten) those nginx normalises or refuses.
const SEGMENTS: &[&str] = &["a", "b", "img", "API", "x.png", "%41", "caf%C3%A9", "a+b", "~u", "%20", "v1"];
const ODD_SEGMENTS: &[&str] = &["%2F", "%2e%2e", "%zz", "%4", "..", ".", "", "%00"];
const VALUES: &[&str] = &["1", "42", "abc", "alpha", "north-eu", "ALPHA", "A%20B", "x+y", "", "%zz", "ü", "a=b", "7,8"];

fn pick<'a>(rng: &mut ChaCha8Rng, from: &[&'a str]) -> &'a str {
    from[rng.random_range(0..from.len())]
}

fn one(rng: &mut ChaCha8Rng, args: &[&str], cookies: &[&str], headers: &[String]) -> Generated {
    let mut path = String::new();
    for _ in 0..rng.random_range(1..=4) {
        path.push('/');
        if rng.random_range(0..8) == 0 {
            path.push('/');
        }
        let segment = if rng.random_range(0..10) == 0 { pick(rng, ODD_SEGMENTS) } else { pick(rng, SEGMENTS) };
        path.push_str(segment);
    }
    if rng.random_range(0..6) == 0 {
        path.push('/');
    }
    let mut query: Vec<String> = Vec::new();
    for name in args.iter().copied().chain(["q", "id"]) {
        match rng.random_range(0..6) {
            0 => {}
            1 => query.push(format!("{}={}", name.to_ascii_uppercase(), pick(rng, VALUES))),
            2 => query.push(name.to_string()),
            3 => {
                query.push(format!("{name}={}", pick(rng, VALUES)));
                query.push(format!("{name}={}", pick(rng, VALUES)));
            }
            _ => query.push(format!("{name}={}", pick(rng, VALUES))),
        }
    }
    let mut target = path;
    if !query.is_empty() || rng.random_range(0..8) == 0 {
        target.push('?');
        target.push_str(&query.join("&"));
    }
    let method = ["GET", "GET", "GET", "POST", "PUT", "DELETE", "OPTIONS"][rng.random_range(0..7)];
    let host = ["shop.example", "Shop.Example", "shop.example:8080", "SHOP.example.", "127.0.0.1", "a.b.test"]
        [rng.random_range(0..6)];
    let (line, host_header) = match rng.random_range(0..12) {
        0 => (format!("{method} http://{host}{target} HTTP/1.1"), Some("ignored.example")),
        1 => (format!("{method} {target} HTTP/1.0"), None),
        _ => (format!("{method} {target} HTTP/1.1"), Some(host)),
    };
    let mut head = format!("{line}\r\n");
    if let Some(h) = host_header {
        let _ = write!(head, "Host: {h}\r\n");
    }
    if method != "GET" {
        head.push_str("Content-Length: 0\r\n");
    }
    for name in headers {
        for _ in 0..rng.random_range(0..=2) {
            let _ = write!(head, "{name}: {}\r\n", pick(rng, VALUES));
        }
    }
    if !cookies.is_empty() || rng.random_range(0..4) == 0 {
        for _ in 0..rng.random_range(0..=2) {
            let mut pairs: Vec<String> = Vec::new();
            for name in cookies.iter().copied().chain(["sid"]) {
                if rng.random_range(0..4) != 0 {
                    pairs.push(format!("{name}={}", pick(rng, VALUES)));
                }
            }
            let _ = write!(head, "Cookie: {}\r\n", pairs.join("; "));
        }
    }
    let client = Ipv4Addr::new(127, rng.random_range(0..=255), rng.random_range(0..=255), rng.random_range(1..=254));
    Generated { client, head: head.into_bytes() }
}

/// What a run of generated requests compared.
#[derive(Debug, Clone, Default)]
pub struct KeyedRun {
    /// Requests compared.
    pub requests: usize,
    /// Of which nginx answered itself (a 400 and the like), as the library predicted or not.
    pub refused: usize,
    /// Every request the library predicted otherwise (the key is the request head when it had none).
    pub mismatches: Vec<Mismatch>,
}

/// Why generated requests could not be judged: the library does not model where one of them goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotModelled(pub String);

/// Where generated requests go.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The network to connect in.
    pub net: Net<'a>,
    /// Where to connect.
    pub front: SocketAddr,
    /// The address nginx sees the requests arrive at (`front`, unless a container's port is mapped).
    pub server: SocketAddr,
    /// Send each request from its own client address (else from `127.0.0.1`: a container's port proxy
    /// hides it anyway).
    pub client_addresses: bool,
}

/// Sends each of `generated` to `target` and judges nginx's answer: `config` is
/// the run's nginx.conf as the library reads it, `upstream` the model of its hash upstream, whose peers
/// `refuses` says refuse connections. One worker carries state across the requests, as nginx's does.
///
/// # Errors
///
/// I/O errors talking to nginx (the outer `Result`); a request the library cannot dispatch (the inner).
pub fn run(
    target: Target<'_>,
    generated: &[Generated],
    config: &Config,
    upstream: &Upstream,
    refuses: impl Fn(&Peer) -> bool,
) -> std::io::Result<Result<KeyedRun, NotModelled>> {
    let dispatcher = Dispatcher::new(config);
    let mut worker = Worker::new(upstream);
    let mut out = KeyedRun::default();
    for (index, g) in generated.iter().enumerate() {
        let from = if target.client_addresses { g.client } else { Ipv4Addr::LOCALHOST };
        let (resp, client) = send_raw(target.net, target.front, SocketAddr::new(from.into(), 0), &g.head)?;
        let mut head = g.head.clone();
        head.extend_from_slice(b"Connection: close\r\n");
        let Ok(request) = Request::from_head(&head, client, target.server, Scheme::Http) else {
            return Ok(Err(NotModelled(format!("request {index} has no request line"))));
        };
        let (expected, key) = match dispatcher.dispatch(&request) {
            Ok(Dispatch::Hash { key, .. }) => {
                let o = worker.request(&key, crate::run::parity::RUN_CLOCK, &refuses);
                (observation(upstream, &o), key)
            }
            Ok(Dispatch::BadRequest(bad)) => match bad.status() {
                Some(status) => {
                    (Observation { status, upstream_addr: String::new(), upstream_status: None }, Vec::new())
                }
                None => return Ok(Err(NotModelled(format!("nginx's answer to a request: {bad}")))),
            },
            Ok(other) => return Ok(Err(NotModelled(format!("a request went {other:?}, not to the upstream")))),
            Err(e) => return Ok(Err(NotModelled(e.to_string()))),
        };
        let actual = Observation {
            status: resp.status,
            upstream_addr: resp.upstream_addr.clone().unwrap_or_default(),
            upstream_status: None,
        };
        out.requests += 1;
        out.refused += usize::from(expected.upstream_addr.is_empty() && expected.status != 200);
        if expected != actual {
            let key = if key.is_empty() { g.head.clone() } else { key };
            out.mismatches.push(Mismatch { index, key, kind: KeyKind::Random, expected, actual });
        }
    }
    Ok(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn requests_carry_what_the_key_reads() {
        let variables = ["arg_user".to_string(), "cookie_session".into(), "http_x_tenant".into()];
        let got = requests(&variables, 1, 200);
        let text: Vec<String> = got.iter().map(|g| String::from_utf8_lossy(&g.head).into_owned()).collect();
        assert!(text.iter().any(|t| t.contains("user=")));
        assert!(text.iter().any(|t| t.contains("Cookie: ") && t.contains("session=")));
        assert!(text.iter().any(|t| t.matches("x-tenant: ").count() == 2), "repeated headers");
        assert!(text.iter().any(|t| t.contains("HTTP/1.0\r\n") && !t.contains("Host:")), "no Host");
        assert!(got.iter().map(|g| g.client).collect::<BTreeSet<_>>().len() > 100, "many client addresses");
        assert_eq!(got, requests(&variables, 1, 200), "reproducible");
    }
}
