//! Which upstream server nginx picks for `hash $key consistent;` and `hash $key;`, bit for bit.
//!
//! ```
//! use nginx_ketama::{Method, Peer, Route, Upstream};
//!
//! let up = Upstream::builder(Method::Consistent)
//!     .peer(Peer::new("127.0.0.1:9001").with_weight(3))
//!     .peer(Peer::new("127.0.0.1:9002"))
//!     .peer(Peer::new("[::1]:9101").with_weight(2))
//!     .peer(Peer::new("UNIX:/tmp/ngxrun/b.sock"))
//!     .build()?;
//! // Recorded from a real nginx (docs/nginx-algorithm.md §11 E).
//! assert_eq!(up.route(b"k9"), Route::Server(up.primary()[3].server()));
//! # Ok::<(), nginx_ketama::UpstreamError>(())
//! ```
//!
//! # What nginx really does
//!
//! nginx's consistent hash is *not* "MD5 of `host:i`, 160 virtual nodes": each `server` line's configured
//! string is split into host and port, and `160 × weight` points are chained with CRC32
//! (`crc32(host ‖ 0 ‖ port ‖ le32(previous point))`). A key's CRC32 picks the first point at or above it.
//! Failover walks the ring one point at a time, skipping tried and failed peers, and after 20 empty points
//! gives up hashing for round-robin. Plain `hash` is Cache::Memcached's rehash over weighted slots.
//!
//! The whole algorithm (ring, lookup, failover, plain hash, round-robin fallback, failure accounting and every
//! difference between nginx releases, each rule cited to nginx's source) is described in
//! `docs/nginx-algorithm.md`, shipped in the repository and in the published package. This crate's
//! documentation and comments cite it as "algorithm §N".
//!
//! # Overview
//!
//! * [`Upstream`] — peers in list order (primary and backup), the method and, for `consistent`, the
//!   [`Ring`]; [`Upstream::route`] answers "who gets this key?" statelessly.
//! * [`Worker`] — a per-worker simulator reproducing nginx request by request: retries, the 20-miss budget,
//!   round-robin fallbacks, `max_fails`/`fail_timeout`, several addresses under one name.
//! * [`failure`] — what an attempt can end with (status codes, timeouts, invalid headers, stale keepalive
//!   connections) and nginx's retry policy (`proxy_next_upstream` & co.), applied by the [`Worker`].
//! * [`config`] — reads `upstream` blocks from a real `nginx.conf` (with `include`), with nginx's errors.
//! * [`analysis`] — exact answers over the whole hash space: shares, explanations, diffs, forged keys and
//!   agreement with other ketama implementations.
//! * `md5_variants` (feature `md5`) — the MD5 rings that popular answers describe, kept apart and labelled
//!   *not nginx*.
//!
//! Deliberate differences from nginx are marked `NGINX-DIFF:` in the source and listed in the README.
//!
//! # Crate features
//!
//! * `md5` — the `md5_variants` module (and the `md-5` dependency).
//! * `engines` — the `engines` module: HAProxy, Caddy, ingress-nginx, APISIX, Envoy, Kong and Traefik models, and
//!   `compare` against them (and the `twox-hash` dependency).
//! * `reference` — `ring::reference`, nginx's ring written as plainly as possible: the oracle of this
//!   workspace's tests and benchmarks. Test support, not stable API.
//!
//! With no features the library depends only on `crc32fast`, `thiserror` and `libc`: no async runtime, no
//! Docker, no HTTP. The live conformance harness (`crates/harness`) and the `nginx-ketama` command
//! (`crates/cli`) are separate crates of the same workspace.

#![deny(missing_docs)]
// One module-file convention: `name.rs` beside a `name/` folder of its children, never `name/mod.rs`.
#![deny(clippy::mod_module_files)]

pub mod access_log;
pub mod analysis;
pub mod config;
pub mod dispatch;
#[cfg(feature = "engines")]
pub mod engines;
pub mod failure;
pub mod key;
#[cfg(feature = "md5")]
pub mod md5_variants;
mod peer;
pub mod plain;
pub mod regex;
pub mod request;
pub mod resolve;
pub mod ring;
pub mod server;
pub mod upstream;
pub mod version;
pub mod worker;

/// Compiles the README's Rust examples as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

pub use ring::{Point, Ring, RingError};
pub use server::Server;
pub use upstream::{List, Method, Peer, PeerId, Route, Upstream, UpstreamBuilder, UpstreamError};
pub use version::{Libc, NginxVersion};
pub use worker::{Outcome, Status, Worker};
