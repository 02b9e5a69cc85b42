//! Fuzzing on the stable toolchain: random configuration text, `server` strings and route keys. Nothing may
//! panic, overflow the stack or take a second on one input.
//!
//! `cargo test --test config_fuzz` runs a short pass (256 cases per property). For a long run set
//! `FUZZ_CASES`, e.g. `FUZZ_CASES=1000000 cargo test --release --test config_fuzz` (figure in docs/config-reader.md).

use nginx_ketama::config::{Balancer, Config, Input, LoadOptions};
use nginx_ketama::server::{Address, Server};
use nginx_ketama::{Method, NginxVersion, Peer, Upstream};
use proptest::prelude::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(1);

/// CPU time this thread has used: unlike the wall clock, other work on a busy machine does not count, so the
/// limit measures the input, once, with no second chance.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f`; it fails if it used more than [`LIMIT`] of CPU time.
fn within_limit(f: impl FnOnce()) -> Result<(), TestCaseError> {
    let started = thread_cpu_time();
    f();
    let used = thread_cpu_time() - started;
    if used < LIMIT { Ok(()) } else { Err(TestCaseError::fail(format!("{used:?} of CPU time (limit {LIMIT:?})"))) }
}

fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

/// Pieces that exercise nginx's grammar; mixed with arbitrary bytes.
const PIECES: &[&str] = &[
    "events",
    "{",
    "}",
    ";",
    " ",
    "\n",
    "\r",
    "\t",
    "http",
    "stream",
    "upstream",
    "u",
    "U",
    "server",
    "127.0.0.1:1",
    "[::1]:80",
    "[:1::]",
    "unix:/x",
    "localhost",
    "hash",
    "$remote_addr",
    "$request_uri",
    "${uri}",
    "${",
    "$",
    "consistent",
    "\"",
    "'",
    "\\",
    "#",
    "weight=",
    "weight=2",
    "max_fails=",
    "fail_timeout=",
    "1é",
    "backup",
    "down",
    "drain",
    "resolve",
    "route=a",
    "service=http",
    "zone",
    "z",
    "64k",
    "keepalive",
    "0",
    "16",
    "local",
    "resolver",
    "random",
    "two",
    "least_conn",
    "ip_hash",
    "sticky",
    "cookie",
    "include",
    "*",
    "?",
    "[",
    "]",
    "location",
    "/",
    "if",
    "(",
    ")",
    "=",
    "map",
    "geo",
    "types",
    "set",
    "proxy_pass",
    "http://u:8080",
    "load_module",
    "ngx_stream_module.so",
    "\u{feff}",
    "\u{0}",
    "\u{e9}",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
];

fn config_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        4 => proptest::sample::select(PIECES).prop_map(|p| p.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(piece, 0..120).prop_map(|v| v.concat())
}

fn versions() -> impl Strategy<Value = NginxVersion> {
    proptest::sample::select(nginx_ketama::version::PROBED.to_vec())
}

fn inputs() -> impl Strategy<Value = Input> {
    proptest::sample::select(vec![Input::Config, Input::Fragment, Input::StreamFragment])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn config_text_never_panics(text in config_bytes(), version in versions(), input in inputs(), key in any::<Vec<u8>>()) {
        // No DNS, and a prefix that does not exist, so `include` reads nothing from this machine.
        let options = LoadOptions { resolve: false, version, input, ..LoadOptions::default() };
        within_limit(|| {
            if let Ok(conf) = Config::parse_bytes(&text, "/nonexistent-nk-fuzz/fuzz.conf", &options) {
                for u in &conf.upstreams {
                    if let Balancer::Hash { upstream, .. } = &u.balancer {
                        let _ = upstream.route(&key);
                    }
                }
                let _ = conf.hash_upstream(None).map(|h| h.upstream.route(&key));
            }
        })?;
    }

    #[test]
    fn server_strings_never_panic(s in "\\PC{0,40}|\\[[0-9a-fA-F:.]{0,30}\\](:[0-9]{0,6})?", weight in 1u32..4, key in any::<Vec<u8>>()) {
        within_limit(|| {
            let _ = Address::parse(&s);
            let _ = Server::new(s.clone()).ketama_parts();
            for method in [Method::Consistent, Method::Plain] {
                if let Ok(up) = Upstream::builder(method).peer(Peer::new(s.clone()).with_weight(weight)).peer(Peer::new("127.0.0.1:1")).build() {
                    let _ = up.route(&key);
                }
            }
            let text = format!("upstream u {{ hash $uri consistent; server {s}; }}");
            let _ = Config::parse_str(&text, "/nonexistent-nk-fuzz/f.conf", &LoadOptions { resolve: false, ..LoadOptions::fragment() });
        })?;
    }

    #[test]
    fn route_inputs_never_panic(key in any::<Vec<u8>>(), weights in proptest::collection::vec(1u32..5, 1..6)) {
        let servers: String = weights.iter().enumerate().map(|(i, w)| format!("server 127.0.0.1:{} weight={w};", 9000 + i)).collect();
        within_limit(|| {
            for method in ["consistent", ""] {
                let text = format!("upstream u {{ hash $arg_k {method}; {servers} }}");
                let conf = Config::parse_str(&text, "f.conf", &LoadOptions { resolve: false, ..LoadOptions::fragment() }).unwrap();
                let _ = conf.hash_upstream(None).unwrap().upstream.route(&key);
            }
        })?;
    }
}
