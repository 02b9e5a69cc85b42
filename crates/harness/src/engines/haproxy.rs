//! HAProxy's random topologies: every hash function with and without `avalanche`, `map-based`, `hash-key
//! addr`/`addr-port` (3.0 on), backups with and without `allbackups`, over servers with weights 1–4,
//! explicit `id`s and a `disabled` server; the `haproxy.cfg` that holds one; and the keys it is asked — at
//! both ends of every segment of the model's answer where the hash is computable from the key (`crc32` by
//! forging keys, `none` by writing the number), ties between two nodes included, plus random keys.

use super::random::Gen;
use nginx_ketama::analysis::compare::sample_key;
use nginx_ketama::analysis::forge::Forger;
use nginx_ketama::engines::haproxy::{Backend, Function, HashKey, Method, Options, Release, Server};
use std::net::SocketAddr;

/// Random keys per topology unless asked otherwise (the boundary keys come on top).
pub const DEFAULT_KEYS: usize = 150;

/// One kind of topology: what the `backend` section sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `hash-type consistent FUNCTION [avalanche]`; `ids`: some servers carry an explicit `id`.
    Consistent {
        /// The hash function.
        function: Function,
        /// `avalanche`.
        avalanche: bool,
        /// Explicit `id`s on some servers.
        ids: bool,
    },
    /// `hash-type map-based FUNCTION`.
    MapBased(Function),
    /// `hash-type consistent crc32` with `hash-key` on every server (3.0 on).
    HashKey(HashKey),
    /// Every active server disabled: the backups take over, with or without `option allbackups`.
    Backups {
        /// `consistent` or `map-based`.
        method: Method,
        /// `option allbackups`.
        all_backups: bool,
    },
}

/// Every kind of topology `release` has, in the order topologies cycle through them.
pub fn kinds(release: Release) -> Vec<Kind> {
    let mut kinds = Vec::new();
    let functions: Vec<Function> =
        Function::ALL.into_iter().filter(|&f| f != Function::None || release.has_hash_key()).collect();
    for (k, &function) in functions.iter().enumerate() {
        for avalanche in [false, true] {
            kinds.push(Kind::Consistent { function, avalanche, ids: k % 2 == 0 });
        }
        kinds.push(Kind::MapBased(function));
    }
    if release.has_hash_key() {
        kinds.extend([Kind::HashKey(HashKey::Addr), Kind::HashKey(HashKey::AddrPort)]);
    }
    for all_backups in [false, true] {
        for method in [Method::Consistent, Method::MapBased] {
            kinds.push(Kind::Backups { method, all_backups });
        }
    }
    kinds
}

/// One topology: its options and servers, in `server` line order.
#[derive(Debug, Clone)]
pub struct Case {
    /// What it sets (`consistent crc32 avalanche`).
    pub name: String,
    /// The `backend`'s options.
    pub options: Options,
    /// Its servers.
    pub servers: Vec<Server>,
}

/// A random topology of `kind` for `release` over `backends` (at least 5: backups take the fifth on).
pub fn case(release: Release, kind: Kind, backends: &[SocketAddr], rng: &mut Gen) -> Case {
    let consistent = Options::consistent(release);
    match kind {
        Kind::Consistent { function, avalanche, ids } => Case {
            name: format!("consistent {function}{}", if avalanche { " avalanche" } else { "" }),
            options: Options { avalanche, ..consistent.with_function(function) },
            servers: random_servers(rng, backends, ids),
        },
        Kind::MapBased(function) => Case {
            name: format!("map-based {function}"),
            options: Options { method: Method::MapBased, ..consistent.with_function(function) },
            servers: random_servers(rng, backends, false),
        },
        Kind::HashKey(hash_key) => Case {
            name: format!("hash-key {hash_key}"),
            options: Options { hash_key, ..consistent.with_function(Function::Crc32) },
            servers: random_servers(rng, backends, false),
        },
        Kind::Backups { method, all_backups } => {
            let mut servers = random_servers(rng, &backends[..4], false);
            servers.iter_mut().for_each(|s| s.disabled = true);
            for &a in &backends[4..] {
                servers.push(Server { backup: true, weight: 1 + rng.below(3) as u32, ..Server::new(a) });
            }
            Case {
                name: format!("backups {method} allbackups={all_backups}"),
                options: Options { method, all_backups, ..consistent.with_function(Function::Crc32) },
                servers,
            }
        }
    }
}

fn random_servers(rng: &mut Gen, backends: &[SocketAddr], ids: bool) -> Vec<Server> {
    let n = 2 + rng.below(backends.len() as u64 - 1) as usize;
    let mut servers: Vec<Server> =
        backends[..n].iter().map(|&a| Server { weight: 1 + rng.below(4) as u32, ..Server::new(a) }).collect();
    if ids {
        // Explicit ids on some servers: the others take the first unused numbers.
        for s in servers.iter_mut() {
            if rng.below(3) == 0 {
                s.id = Some(1 + rng.below(9) as u32);
            }
        }
        let mut seen = Vec::new();
        for s in servers.iter_mut() {
            if let Some(id) = s.id {
                if seen.contains(&id) {
                    s.id = None;
                } else {
                    seen.push(id);
                }
            }
        }
    }
    if n > 2 && rng.below(2) == 0 {
        servers[rng.below(n as u64) as usize].disabled = true;
    }
    servers
}

/// The `haproxy.cfg` of `case` with its front on 127.0.0.1:`port`, hashing the `X-Key` header.
pub fn config(case: &Case, port: u16) -> String {
    let o = &case.options;
    let mut c = String::from(
        "global\n    maxconn 200\n\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\n",
    );
    c += &format!(
        "frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    balance hdr(X-Key)\n"
    );
    c += &format!("    hash-type {} {}{}\n", o.method, o.function, if o.avalanche { " avalanche" } else { "" });
    if o.all_backups {
        c += "    option allbackups\n";
    }
    for (i, s) in case.servers.iter().enumerate() {
        c += &format!("    server s{i} {} weight {}", s.addr, s.weight);
        if let Some(id) = s.id {
            c += &format!(" id {id}");
        }
        if s.backup {
            c += " backup";
        }
        if s.disabled {
            c += " disabled";
        }
        // A server keyword in 3.0 (`srv_parse_hash_key`).
        if o.release.has_hash_key() && o.hash_key != HashKey::Id {
            c += &format!(" hash-key {}", o.hash_key);
        }
        c += "\n";
    }
    c
}

/// The keys `case` is asked: `random` random keys, then both ends of every segment of the model's answer
/// where the hash is computable from the key.
pub fn keys(case: &Case, model: &Backend, forger: &Forger, rng: &mut Gen, random: usize) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut key = Vec::new();
    for i in 0..random {
        sample_key(rng.next_u64(), i as u64, &mut key);
        keys.push(key.clone());
    }
    let at = |h: u32| -> Option<Vec<u8>> {
        match (case.options.function, case.options.avalanche) {
            (Function::Crc32, false) => Some(forger.forge(b"k", h)),
            (Function::None, false) => Some(h.to_string().into_bytes()),
            _ => None,
        }
    };
    if let Some(segments) = model.hash_segments() {
        for (start, _) in segments {
            for h in [start, start.wrapping_sub(1)] {
                keys.extend(at(h));
            }
        }
    }
    keys
}

/// The deliberately wrong model of `verify --engine haproxy --wrong-model`: on a `consistent` ring every
/// boundary of the answer one hash value early (a key at the last value of a segment goes to the next
/// one; a tie between two nodes goes to the node above, as with `dp < dn`), which only the keys at the
/// boundaries can tell; `map-based` answers as the model does.
pub fn wrong_pick(model: &Backend, key: &[u8]) -> Option<usize> {
    match model.options().method {
        Method::Consistent => model.pick_hash(model.options().hash(key).wrapping_add(1)),
        Method::MapBased => model.pick(key),
    }
}
