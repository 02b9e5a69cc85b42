//! The golden-vector catalog: named, reviewed upstreams with explicit keys, recorded from real nginx by
//! `scripts/record-vectors` (see [`super::golden`]) and replayed offline by `tests/golden.rs`.
//!
//! Every [`Case`] is an explicit [`Topology`] (server lines as written, which of them refuse connections)
//! plus an explicit key list sent in order to one fresh nginx worker. Only loopback addresses (`127.0.C.x`,
//! with C ≥ 1 so they never meet the random topologies of the parity sweep, and `[::1]`) and unix sockets
//! under [`UNIX_DIR`] are used. Nothing here says what nginx answers: that comes only from recordings.
//!
//! A case is *stateless* when each key's result does not depend on the requests before it; the recorder
//! proves that claim against nginx by recording such cases twice, in order and in reverse order, each on a
//! fresh nginx. *Stateful* cases (round-robin sequences, alternation among addresses of one name, failure
//! accounting) must be replayed in order on one fresh worker.

use super::forge::Forger;
use super::topology::{Endpoint, Listen, ServerLine, Spelling, Topology};
use crate::ring::reference;
use crate::server::Server;
use crate::upstream::{Method, default_name};
use crate::version::NginxVersion;
use std::net::{IpAddr, SocketAddr};

/// Where the catalog's unix sockets live (a fixed path, because it is part of the recorded config).
pub const UNIX_DIR: &str = "/tmp/nkv";

/// One request key of a case, with why it is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseKey {
    /// The raw key bytes (sent as the `X-Key` header; empty = no header).
    pub key: Vec<u8>,
    /// A short human note (e.g. `on point 17 (127.0.2.3:9001)`), or empty.
    pub comment: String,
    /// Flags (see [`super::golden::FLAGS`]) describing the key.
    pub flags: Vec<&'static str>,
}

/// One named catalog case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Kebab-case name, unique in the catalog (also the vector group name and, with `-` → `_`, the
    /// snapshot name `catalog__<name>`).
    pub name: &'static str,
    /// One line saying what the case shows.
    pub description: &'static str,
    /// The upstream nginx runs.
    pub topology: Topology,
    /// Keys in sending order.
    pub keys: Vec<CaseKey>,
    /// Whether results depend on request order (replay in order on one worker).
    pub stateful: bool,
    /// Flags that apply to every key of the case.
    pub flags: Vec<&'static str>,
    /// Why nginx versions are expected to disagree on this case (docs/nginx-algorithm.md §8), if they are. A
    /// recording where versions disagree without such a note is reported as unexplained.
    pub versions_differ: Option<&'static str>,
}

/// A server line with the catalog's defaults: weight 1, `max_fails=0` (so refused connections never take a
/// peer out and results stay stateless), live, primary. The endpoint is derived from the spelling:
/// `127.0.2.1:9001`, `127.0.2.1` (port 80), `127.0.2.1:09001` (port 9001), `[::1]:9101`, `[::1]`,
/// `unix:/path` / `UNIX:/path`. Hostnames go through [`host_line`].
pub fn line(server: &str) -> ServerLine {
    let lower = server.to_ascii_lowercase();
    let (spelling, listen, name) = if lower.starts_with("unix:") {
        let spelling = if server.starts_with("unix:") { Spelling::Unix } else { Spelling::UnixUpper };
        (spelling, Listen::Unix(server[5..].to_string()), server.to_string())
    } else {
        let name = default_name(&Server::new(server), 80);
        let addr: SocketAddr = name.parse().unwrap_or_else(|_| panic!("catalog server {server:?} is not a literal"));
        let has_port = server.rsplit_once(':').is_some_and(|(_, p)| !p.ends_with(']'));
        let spelling = match (server.starts_with('['), has_port) {
            (true, true) => Spelling::Ipv6Port,
            (true, false) => Spelling::Ipv6NoPort,
            (false, false) => Spelling::IpNoPort,
            (false, true) if server.rsplit_once(':').is_some_and(|(_, p)| p.starts_with('0')) => Spelling::IpOddPort,
            (false, true) => Spelling::IpPort,
        };
        (spelling, Listen::Tcp(addr), name)
    };
    ServerLine {
        server: server.to_string(),
        spelling,
        weight: 1,
        down: false,
        dead: false,
        backup: false,
        max_fails: 0,
        fail_timeout: 10,
        endpoints: vec![Endpoint { listen, name }],
    }
}

/// A `name:port` line whose name resolves (through the case's private hosts file) to `ips`, in file order.
/// The recorder asks nginx for its resolver's order before recording.
/// Without a port, the line is `name` and connects to port 80.
pub fn host_line(topology: &mut Topology, name: &str, port: Option<u16>, ips: &[IpAddr]) -> ServerLine {
    let mut l = line("127.0.0.1:1");
    l.server = match port {
        Some(p) => format!("{name}:{p}"),
        None => name.to_string(),
    };
    let port = port.unwrap_or(80);
    l.spelling = if ips.len() > 1 { Spelling::HostnameTwoAddresses } else { Spelling::Hostname };
    l.endpoints = ips
        .iter()
        .map(|&ip| {
            topology.hosts.push((ip, name.to_string()));
            let a = SocketAddr::new(ip, port);
            Endpoint { listen: Listen::Tcp(a), name: a.to_string() }
        })
        .collect();
    l
}

/// Chainable setters for catalog lines.
trait LineExt {
    fn weight(self, w: u32) -> Self;
    fn down(self) -> Self;
    fn dead(self) -> Self;
    fn backup(self) -> Self;
    fn accounting(self) -> Self;
}

impl LineExt for ServerLine {
    fn weight(mut self, w: u32) -> Self {
        self.weight = w;
        self
    }
    fn down(mut self) -> Self {
        self.down = true;
        self
    }
    fn dead(mut self) -> Self {
        self.dead = true;
        self
    }
    fn backup(mut self) -> Self {
        self.backup = true;
        self
    }
    /// `max_fails=1 fail_timeout=3600s`: a refused connection takes the peer out for the whole run.
    fn accounting(mut self) -> Self {
        self.max_fails = 1;
        self.fail_timeout = 3600;
        self
    }
}

fn topo(method: Method, lines: Vec<ServerLine>) -> Topology {
    Topology { seed: 0, method, lines, hosts: Vec::new() }
}

fn key(k: impl Into<Vec<u8>>) -> CaseKey {
    CaseKey { key: k.into(), comment: String::new(), flags: Vec::new() }
}

fn flagged(k: impl Into<Vec<u8>>, comment: impl Into<String>, flags: &[&'static str]) -> CaseKey {
    CaseKey { key: k.into(), comment: comment.into(), flags: flags.to_vec() }
}

/// `count` reproducible printable keys (`prefix` + a mix of ids, paths and random ASCII), never empty and
/// never with leading or trailing white space (HTTP strips it from header values).
pub fn sample_keys(prefix: &str, seed: u64, count: usize) -> Vec<CaseKey> {
    let mut state = seed ^ 0x243f_6a88_85a3_08d3;
    let mut next = move || {
        // splitmix64: tiny, portable and frozen here, so the catalog never changes with a crate upgrade.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..count)
        .map(|i| {
            let r = next();
            let text = match r % 4 {
                0 => format!("{prefix}{i}"),
                1 => format!("user:{}", next() % 1_000_000),
                2 => format!("/api/v1/items/{}?page={}", next() % 100_000, next() % 50),
                _ => {
                    let len = 1 + (next() % 32) as usize;
                    let s: String = (0..len).map(|_| char::from(0x21 + (next() % 94) as u8)).collect();
                    s
                }
            };
            key(text)
        })
        .collect()
}

/// Keys at the ring's edges and on/past every `stride`-th point of `topology`'s ring (as this library
/// builds it; nginx's answers are recorded, never derived from it).
fn ring_keys(topology: &Topology, stride: usize) -> Vec<CaseKey> {
    let forger = Forger::new();
    let up = topology.upstream(NginxVersion::LATEST).expect("catalog topologies are valid");
    let ring = up.ring().expect("consistent");
    let mut out = vec![
        flagged(forger.forge(b"edge-", 0), "crc32 0 (below every point: first point)", &["RingEdge"]),
        flagged(forger.forge(b"edge-", u32::MAX), "crc32 0xffffffff (above every point: wraps)", &["RingEdge"]),
    ];
    let last = ring.len() - 1;
    for (i, p) in ring.points().enumerate() {
        if i % stride != 0 && i != last {
            continue;
        }
        let prefix = format!("pt{i}-");
        out.push(flagged(
            forger.forge(prefix.as_bytes(), p.hash),
            format!("exactly on point {i} ({})", p.server),
            &["OnPoint"],
        ));
        if p.hash != u32::MAX {
            out.push(flagged(
                forger.forge(prefix.as_bytes(), p.hash + 1),
                format!("one past point {i} ({}): next point", p.server),
                &["PastPoint"],
            ));
        }
    }
    out
}

/// Keys on, just below and just past the hash two different servers share.
fn collision_keys(hash: u32) -> Vec<CaseKey> {
    let f = Forger::new();
    vec![
        flagged(f.forge(b"coll-", hash), format!("on the shared point {hash:08x}"), &["Collision", "OnPoint"]),
        flagged(
            f.forge(b"coll-b-", hash),
            format!("on the shared point {hash:08x}, another key"),
            &["Collision", "OnPoint"],
        ),
        flagged(f.forge(b"coll-", hash - 1), "one below the shared point: same point", &["Collision"]),
        flagged(f.forge(b"coll-", hash + 1), "one past the shared point: next point", &["PastPoint"]),
    ]
}

/// Two `127.0.20.1:PORT` strings whose point chains share one hash, found with [`find_point_collisions`]
/// over ports 10000–19999: point #104 of port 10064 and point #47 of port 10291.
pub const COLLISION: (&str, &str, u32) = ("127.0.20.1:10064", "127.0.20.1:10291", 0xf5b5_4a41);
/// The pair of algorithm §11 F (ties: §3.2): point #45 of 127.0.0.1:20195 and point #109 of 127.0.0.1:20412.
pub const SPEC_COLLISION: (&str, &str, u32) = ("127.0.0.1:20195", "127.0.0.1:20412", 0x32a8_f0fa);

/// Birthday search: every pair of *different* server strings among `servers` (weight 1) whose point
/// chains share a hash, as `(first server, its point number, second server, its point number, hash)`.
pub fn find_point_collisions(servers: &[String]) -> Vec<(String, usize, String, usize, u32)> {
    let mut seen: std::collections::HashMap<u32, (usize, usize)> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (si, s) in servers.iter().enumerate() {
        for (pi, h) in reference::chain(&Server::new(s.as_str()), 160).into_iter().enumerate() {
            match seen.get(&h) {
                Some(&(sj, pj)) if sj != si => out.push((servers[sj].clone(), pj, s.clone(), pi, h)),
                Some(_) => {}
                None => {
                    seen.insert(h, (si, pi));
                }
            }
        }
    }
    out
}

fn ip(a: u8, b: u8) -> IpAddr {
    IpAddr::from([127, 0, a, b])
}

/// The whole catalog, in review order.
pub fn catalog() -> Vec<Case> {
    let mut cases = Vec::new();
    let u = UNIX_DIR;

    // --- basics ---------------------------------------------------------------------------------------
    let t = topo(Method::Consistent, (1..=5).map(|i| line(&format!("127.0.2.{i}:9001"))).collect());
    let mut keys: Vec<CaseKey> = (0..12).map(|i| key(format!("k{i}"))).collect();
    keys.extend(sample_keys("eq-", 1, 60));
    cases.push(Case {
        name: "weights-equal",
        description: "Five servers of weight 1 (800 points); ordinary keys each land on one server.",
        topology: t,
        keys,
        stateful: false,
        flags: vec![],
        versions_differ: None,
    });

    let weights = [1u32, 2, 5, 10, 37, 100];
    let t = topo(
        Method::Consistent,
        weights.iter().enumerate().map(|(i, &w)| line(&format!("127.0.3.{}:9001", i + 1)).weight(w)).collect(),
    );
    cases.push(Case {
        name: "weights-mixed",
        description: "Weights 1, 2, 5, 10, 37 and 100: each weight unit adds 160 points to a server's share.",
        topology: t,
        keys: sample_keys("w-", 2, 80),
        stateful: false,
        flags: vec!["Weighted"],
        versions_differ: None,
    });

    let t = topo(Method::Consistent, vec![line("127.0.4.1:9001")]);
    let mut keys = sample_keys("one-", 3, 10);
    keys.push(flagged("", "empty key", &["EmptyKey"]));
    keys.push(key("k0"));
    cases.push(Case {
        name: "single-server",
        description: "One server: nginx skips the hash entirely (round-robin over one peer), for every key.",
        topology: t,
        keys,
        stateful: false,
        flags: vec!["SingleServer"],
        versions_differ: None,
    });

    // --- spellings ------------------------------------------------------------------------------------
    let mut t = topo(Method::Consistent, vec![]);
    let mut lines = vec![
        line("127.0.5.1:9001"),
        line("127.0.5.2"),
        line("127.0.5.3:09001"),
        line("127.0.5.4:0080"),
        line("[::1]:9101"),
        line("[::1]"),
        line(&format!("unix:{u}/a.sock")),
        line(&format!("UNIX:{u}/b.sock")),
    ];
    lines.push(host_line(&mut t, "backend.test", Some(9002), &[ip(5, 10)]));
    lines.push(host_line(&mut t, "web.test", None, &[ip(5, 11)]));
    t.lines = lines;
    let mut keys = sample_keys("sp-", 4, 80);
    keys.extend(ring_keys(&t, 97));
    cases.push(Case {
        name: "spellings",
        description: "Every server spelling: ip:port, no port (80), leading-zero ports, [::1]:port, [::1], \
                      unix:, UNIX:, and hostnames with and without a port; the ring hashes each string as written.",
        topology: t,
        keys,
        stateful: false,
        flags: vec!["OddSpelling", "Ipv6", "UnixSocket", "Hostname"],
        versions_differ: None,
    });

    let t = topo(
        Method::Consistent,
        vec![line(&format!("unix:{u}/c.sock")), line(&format!("UNIX:{u}/c.sock")), line("127.0.6.1:9001")],
    );
    cases.push(Case {
        name: "unix-prefix-case",
        description: "unix:/p and UNIX:/p hash the same bytes, so all 160 points of the second line are \
                      duplicates and are dropped: the first-listed spelling gets every such key.",
        topology: t,
        keys: sample_keys("ux-", 5, 40),
        stateful: false,
        flags: vec!["UnixSocket", "Collision", "OddSpelling"],
        versions_differ: None,
    });

    // --- down, dead, failover -------------------------------------------------------------------------
    let t = topo(
        Method::Consistent,
        (1..=6)
            .map(|i| {
                if i % 3 == 0 { line(&format!("127.0.7.{i}:9001")).down() } else { line(&format!("127.0.7.{i}:9001")) }
            })
            .collect(),
    );
    let mut keys = sample_keys("dn-", 6, 60);
    keys.extend(ring_keys(&t, 61));
    cases.push(Case {
        name: "down",
        description: "Two of six servers are `down`: they keep their points and keys landing there move to \
                      the next point's server.",
        topology: t,
        keys,
        stateful: false,
        flags: vec!["Down"],
        versions_differ: None,
    });

    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.8.1:9001"),
            line("127.0.8.1:9002"),
            line("127.0.8.1:9901").dead(),
            line("127.0.8.1:9902").dead(),
            line("127.0.8.1:9903").dead(),
        ],
    );
    let mut keys: Vec<CaseKey> = (0..12).map(|i| key(format!("k{i}"))).collect();
    keys.extend(sample_keys("dd-", 7, 50));
    cases.push(Case {
        name: "dead-failover",
        description: "Three of five servers refuse connections (max_fails=0): nginx walks the ring point by \
                      point, skipping tried servers, until one answers.",
        topology: t,
        keys,
        stateful: false,
        flags: vec!["DeadServers"],
        versions_differ: None,
    });

    let mut lines = vec![line("127.0.9.1:9001")];
    lines.extend((1..=25).map(|i| line(&format!("127.0.9.{}:9001", 100 + i)).down()));
    lines.push(line("127.0.9.2:9001"));
    lines.push(line("127.0.9.3:9001").dead());
    let t = topo(Method::Consistent, lines);
    let mut keys = sample_keys("mm-", 8, 120);
    keys.extend(ring_keys(&t, 211));
    cases.push(Case {
        name: "failover-over-20-misses",
        description: "25 down servers around two live ones and a dead one: a key whose walk meets more than 20 \
                      points without a usable server falls back to round-robin for the rest of the request.",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["Down", "DeadServers", "ManyMisses"],
        versions_differ: None,
    });

    let mut lines = vec![line("127.0.10.9:9001").backup()];
    lines.extend((1..=20).map(|i| line(&format!("127.0.10.{}:9001", 100 + i)).down()));
    lines.push(line("127.0.10.1:9001").dead());
    lines.push(line("127.0.10.2:9001").dead());
    lines.push(line("127.0.10.8:9001").backup());
    let t = topo(Method::Consistent, lines);
    let mut keys = sample_keys("bk-", 9, 40);
    keys.push(flagged("", "empty key", &["EmptyKey"]));
    keys.push(flagged("", "empty key", &["EmptyKey"]));
    cases.push(Case {
        name: "backup-before-hash",
        description: "Backups declared before `hash` (accepted silently): the ring ignores them, so they are \
                      reached only through the round-robin fallback once every primary has failed.",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["Backup", "Down", "DeadServers", "ManyMisses"],
        versions_differ: None,
    });

    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.11.1:9001").accounting(),
            line("127.0.11.2:9001").accounting().dead(),
            line("127.0.11.3:9001").accounting(),
            line("127.0.11.4:9001").accounting().dead(),
        ],
    );
    let mut keys = sample_keys("fa-", 10, 30);
    let again = keys.clone();
    keys.extend(again.into_iter().map(|k| CaseKey { comment: "sent again".into(), flags: vec!["RepeatedKey"], ..k }));
    cases.push(Case {
        name: "failure-accounting",
        description: "max_fails=1 fail_timeout=3600s: the first refused connection takes a server out, so later \
                      keys (and the same keys sent again) skip it without trying.",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["DeadServers", "FailureAccounting"],
        versions_differ: None,
    });

    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.17.1:9001").accounting().dead(),
            line("127.0.17.2:9001").accounting().dead(),
            line("127.0.17.3:9001").down(),
        ],
    );
    let mut keys = sample_keys("ad-", 26, 8);
    keys.push(flagged("", "empty key", &["EmptyKey"]));
    cases.push(Case {
        name: "all-dead-then-none-left",
        description: "Every server refuses or is down (max_fails=1): the first request tries both live-looking \
                      servers and fails (502); after that none is usable and nginx reports no live upstreams.",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["DeadServers", "Down", "FailureAccounting"],
        versions_differ: None,
    });

    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.27.1:9001").dead(),
            line("127.0.27.2:9001").down(),
            line("127.0.27.3:9001").dead(),
            line("127.0.27.4:9001").down(),
            line("127.0.27.5:9001").dead(),
            line("127.0.27.6:9001").down(),
        ],
    );
    cases.push(Case {
        name: "retry-budget-skips-down",
        description: "Three refusing and three down servers: the retry budget counts only non-down peers (since \
                      1.19.6), so each request tries the three refusing servers and fails with a 502.",
        topology: t,
        keys: sample_keys("rb-", 27, 10),
        stateful: false,
        flags: vec!["DeadServers", "Down"],
        versions_differ: None,
    });

    let mut heavy = line("127.0.28.1:9001").weight(4).dead();
    heavy.max_fails = 2;
    heavy.fail_timeout = 3600;
    let t = topo(Method::Consistent, vec![heavy, line("127.0.28.2:9001").weight(4), line("127.0.28.3:9001")]);
    let mut keys = Vec::new();
    for _ in 0..24 {
        keys.push(flagged("", "empty key", &["EmptyKey"]));
    }
    cases.push(Case {
        name: "failure-accounting-weights",
        description: "Round-robin with a refusing weight-4 server (max_fails=2): each failure lowers its \
                      effective weight by weight/max_fails, it recovers by 1 per pass, and after two failures it \
                      is out for fail_timeout.",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["DeadServers", "FailureAccounting", "Weighted"],
        versions_differ: None,
    });

    // --- round-robin state ----------------------------------------------------------------------------
    let t = topo(
        Method::Consistent,
        vec![line("127.0.12.1:9001").weight(3), line("127.0.12.2:9001").weight(2), line("127.0.12.3:9001")],
    );
    let mut keys = Vec::new();
    for i in 0..18 {
        keys.push(flagged("", "empty key", &["EmptyKey"]));
        if i % 4 == 3 {
            keys.push(key(format!("k{i}")));
        }
    }
    cases.push(Case {
        name: "empty-key",
        description: "The empty key is never hashed: nginx uses smooth weighted round-robin (3:2:1), whose \
                      state carries from request to request.",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["Weighted"],
        versions_differ: None,
    });

    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.13.1:9001"),
            line("127.0.13.2:9001").weight(3),
            line("127.0.13.1:9001"),
            line("127.0.13.3:9001"),
        ],
    );
    let base = sample_keys("dup-", 11, 30);
    let mut keys = base.clone();
    keys.extend(base.into_iter().map(|k| CaseKey { comment: "sent again".into(), flags: vec!["RepeatedKey"], ..k }));
    cases.push(Case {
        name: "duplicate-lines",
        description: "The same server line twice: both peers share one chain of points and take turns by \
                      weighted round-robin (same address, so $upstream_addr looks the same).",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["DuplicateLines", "Weighted"],
        versions_differ: None,
    });

    let mut t = topo(Method::Consistent, vec![]);
    let multi = host_line(&mut t, "multi.test", Some(9004), &[ip(14, 2), ip(14, 3)]);
    t.lines = vec![line("127.0.14.1:9001"), multi, line("127.0.14.4:9001")];
    let base = sample_keys("mu-", 12, 20);
    let mut keys = Vec::new();
    for k in &base {
        for n in 0..3 {
            let mut k = k.clone();
            if n > 0 {
                k.comment = "sent again".into();
                k.flags.push("RepeatedKey");
            }
            keys.push(k);
        }
    }
    cases.push(Case {
        name: "hostname-two-addresses",
        description: "A name with two addresses: one chain of points, and the two addresses alternate for the \
                      same key by weighted round-robin.",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["Hostname", "MultiAddress"],
        versions_differ: None,
    });

    // --- collisions and ring edges --------------------------------------------------------------------
    for (name, first, second, hash, description) in [
        (
            "collision-order-ab",
            COLLISION.0,
            COLLISION.1,
            COLLISION.2,
            "Two different servers share point hash f5b54a41 (10064 #104, 10291 #47); 10064 listed first (nginx keeps its point).",
        ),
        (
            "collision-order-ba",
            COLLISION.1,
            COLLISION.0,
            COLLISION.2,
            "The same collision with the lines swapped: 10291 listed first (nginx now keeps 10291).",
        ),
        (
            "collision-spec-order-ab",
            SPEC_COLLISION.0,
            SPEC_COLLISION.1,
            SPEC_COLLISION.2,
            "The spec's pair sharing 32a8f0fa (20195 #45, 20412 #109); 20195 listed first.",
        ),
        (
            "collision-spec-order-ba",
            SPEC_COLLISION.1,
            SPEC_COLLISION.0,
            SPEC_COLLISION.2,
            "The spec's pair with the lines swapped: 20412 listed first.",
        ),
    ] {
        let t = topo(Method::Consistent, vec![line(first), line(second)]);
        let mut keys = collision_keys(hash);
        if name.starts_with("collision-spec") {
            keys.push(flagged("k261", "the spec's key on the shared point", &["Collision"]));
        }
        keys.extend(sample_keys("co-", 13, 10));
        cases.push(Case {
            name,
            description,
            topology: t,
            keys,
            stateful: false,
            flags: vec![],
            versions_differ: None,
        });
    }

    let t = topo(
        Method::Consistent,
        vec![line("127.0.15.1:9001"), line("127.0.15.2:9001").weight(2), line("127.0.15.3:9001")],
    );
    let keys = ring_keys(&t, 7);
    cases.push(Case {
        name: "ring-edges",
        description: "Forged keys with CRC32 0 and 0xffffffff, exactly on points and one past them (every 7th \
                      point, and the last one): lookup takes the first point at or above the key's hash.",
        topology: t,
        keys,
        stateful: false,
        flags: vec![],
        versions_differ: None,
    });

    let t = topo(Method::Consistent, (1..=4).map(|i| line(&format!("127.0.16.{i}:9001"))).collect());
    let mut keys = Vec::new();
    for (n, len) in [(0u8, 4096usize), (1, 4097), (2, 8191), (3, 20000)] {
        let k: Vec<u8> = (0..len).map(|i| b'a' + ((i * 7 + usize::from(n)) % 26) as u8).collect();
        keys.push(flagged(k, format!("{len} bytes of ASCII"), &["LongKey"]));
    }
    for text in ["ключ", "κλειδί", "键值", "キー🔑", "naïve café", "😀😃😄", "ä", "mixed ascii — and dash"]
    {
        keys.push(flagged(text, "UTF-8 text", &["NonAscii"]));
    }
    let long_utf8: String = "日本語テキスト".repeat(200);
    keys.push(flagged(long_utf8, "4200 bytes of UTF-8", &["LongKey", "NonAscii"]));
    for raw in [&b"\xff\xfe\xfd"[..], b"caf\xe9", b"\x80", b"key\xc3(invalid)"] {
        keys.push(flagged(raw, "raw bytes that are not UTF-8", &["NonAscii", "InvalidUtf8"]));
    }
    keys.push(flagged("with inner  spaces\tand tab", "inner white space is kept", &[]));
    keys.extend(sample_keys("lk-", 14, 10));
    cases.push(Case {
        name: "long-and-non-ascii-keys",
        description: "Keys of 4 KiB and more, UTF-8 text and raw non-UTF-8 bytes: nginx hashes the raw header \
                      bytes.",
        topology: t,
        keys,
        stateful: false,
        flags: vec![],
        versions_differ: None,
    });

    // --- a large ring ---------------------------------------------------------------------------------
    let lines: Vec<ServerLine> = (0..1000u32)
        .map(|i| {
            let l = line(&format!("127.0.{}.{}:9010", 100 + i / 200, 1 + i % 200));
            if i % 10 == 7 { l.dead() } else { l }
        })
        .collect();
    let t = topo(Method::Consistent, lines);
    let names: Vec<String> = t.lines.iter().map(|l| l.server.clone()).collect();
    let forger = Forger::new();
    let mut keys = sample_keys("big-", 15, 300);
    for (a, pa, b, pb, h) in find_point_collisions(&names) {
        keys.push(flagged(
            forger.forge(b"big-coll-", h),
            format!("on {h:08x}, shared by {a} #{pa} and {b} #{pb}"),
            &["Collision", "OnPoint"],
        ));
    }
    keys.extend(ring_keys(&t, 4001));
    cases.push(Case {
        name: "large-ring",
        description: "1000 servers (160,000 points, 100 of them refusing): sampled keys, points that two \
                      different servers share, and forged keys on every 4001st point.",
        topology: t,
        keys,
        stateful: false,
        flags: vec!["LargeRing", "DeadServers"],
        versions_differ: None,
    });

    // --- plain hash -----------------------------------------------------------------------------------
    let t = topo(Method::Plain, (1..=5).map(|i| line(&format!("127.0.30.{i}:9001"))).collect());
    let mut keys: Vec<CaseKey> = (0..12).map(|i| key(format!("k{i}"))).collect();
    keys.extend(sample_keys("pe-", 20, 50));
    cases.push(Case {
        name: "plain-weights-equal",
        description: "Plain `hash`: five servers of weight 1; (crc32 >> 16) & 0x7fff modulo the total weight.",
        topology: t,
        keys,
        stateful: false,
        flags: vec![],
        versions_differ: None,
    });

    let t = topo(
        Method::Plain,
        vec![
            line("127.0.31.1:9001").weight(3),
            line("127.0.31.2:9001").dead(),
            line("127.0.31.3:9001").weight(5).down(),
            line("127.0.31.4:9001").weight(2).dead(),
            line("127.0.31.5:9001"),
            line("127.0.31.6:9001").weight(100),
        ],
    );
    let mut keys: Vec<CaseKey> = (0..12).map(|i| key(format!("k{i}"))).collect();
    keys.extend(sample_keys("pw-", 21, 80));
    cases.push(Case {
        name: "plain-weights-failures",
        description: "Plain `hash` with weights, a down server and two refusing ones: a miss rehashes with a \
                      decimal prefix and the running sum continues across retries.",
        topology: t,
        keys,
        stateful: false,
        flags: vec!["Weighted", "Down", "DeadServers"],
        versions_differ: None,
    });

    let mut lines = vec![line("127.0.32.1:9001")];
    lines.extend((1..=25).map(|i| line(&format!("127.0.32.{}:9001", 100 + i)).down()));
    lines.push(line("127.0.32.2:9001").dead());
    let t = topo(Method::Plain, lines);
    let mut keys = sample_keys("pm-", 22, 80);
    keys.push(flagged("", "empty key", &["EmptyKey"]));
    keys.push(flagged("", "empty key", &["EmptyKey"]));
    keys.push(flagged("", "empty key", &["EmptyKey"]));
    cases.push(Case {
        name: "plain-over-20-misses",
        description: "Plain `hash` with 25 of 27 servers down: after 21 rehashes without a usable server the \
                      request falls back to round-robin, whose state carries over.",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["Down", "DeadServers", "ManyMisses"],
        versions_differ: None,
    });

    let t = topo(
        Method::Plain,
        vec![
            line("127.0.33.2:9001").backup().dead(),
            line("127.0.33.1:9001").dead(),
            line("127.0.33.3:9001").backup().dead(),
            line("127.0.33.4:9001").backup(),
        ],
    );
    cases.push(Case {
        name: "plain-one-primary-backups",
        description: "Plain `hash` with one refusing primary and three backups (declared before `hash`), one \
                      of which answers.",
        topology: t,
        keys: sample_keys("pb-", 23, 40),
        stateful: true,
        flags: vec!["Backup", "DeadServers"],
        versions_differ: Some(
            "since 1.27.3 (db6870e06dde) plain `hash` bypasses to round-robin when the current list has fewer \
             than two peers, instead of only when the upstream has a single peer and no backups: 1.26.3 and \
             older hash onto the lone primary, miss 21 times and then round-robin through the backups; 1.27.3 \
             and newer round-robin at once and, once on the backup list, hash over it (docs/nginx-algorithm.md §8).",
        ),
    });

    let t = topo(
        Method::Plain,
        vec![line("127.0.34.1:9001").backup(), line("127.0.34.2:9001").dead(), line("127.0.34.3:9001").dead()],
    );
    let mut keys = sample_keys("pk-", 24, 20);
    keys.push(flagged("", "empty key", &["EmptyKey"]));
    cases.push(Case {
        name: "plain-backup-before-hash",
        description: "Plain `hash`, two refusing primaries and a backup declared before `hash`: the backup is \
                      reached through round-robin once both primaries have failed.",
        topology: t,
        keys,
        stateful: true,
        flags: vec!["Backup", "DeadServers"],
        versions_differ: None,
    });

    let t = topo(Method::Plain, (1..=3).map(|i| line(&format!("127.0.36.{i}:9001")).dead()).collect());
    cases.push(Case {
        name: "plain-all-dead",
        description: "Plain `hash`, every server refuses (max_fails=0): each request tries all three in rehash \
                      order, then fails with 502.",
        topology: t,
        keys: sample_keys("pd-", 27, 12),
        stateful: false,
        flags: vec!["DeadServers"],
        versions_differ: None,
    });

    let t = topo(Method::Plain, vec![line("127.0.35.1:9001")]);
    let mut keys = sample_keys("ps-", 25, 6);
    keys.push(flagged("", "empty key", &["EmptyKey"]));
    cases.push(Case {
        name: "plain-single-server",
        description: "Plain `hash` with one server: round-robin over one peer for every key.",
        topology: t,
        keys,
        stateful: false,
        flags: vec!["SingleServer"],
        versions_differ: None,
    });

    cases
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::netns::EPHEMERAL_PORTS;
    use crate::harness::site::{FRONT_HTTP_PORT, FRONT_STREAM_PORT};
    use crate::harness::topology::Listen;

    /// The fixed addresses never use a port the kernel may hand out as a source port (a dead one could
    /// connect to itself), nor the front servers' ports.
    #[test]
    fn fixed_addresses_stay_out_of_the_ephemeral_range() {
        for case in catalog() {
            for ep in case.topology.lines.iter().flat_map(|l| &l.endpoints) {
                if let Listen::Tcp(a) = ep.listen {
                    assert!(!EPHEMERAL_PORTS.contains(&a.port()), "{}: {a}", case.name);
                    assert!(![FRONT_HTTP_PORT, FRONT_STREAM_PORT].contains(&a.port()), "{}: {a}", case.name);
                }
            }
        }
    }

    #[test]
    fn names_are_unique_and_kebab_case() {
        let cases = catalog();
        let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
        assert!(names.iter().all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')));
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn collision_pairs_really_collide() {
        let point_chain = |s: &str, n| reference::chain(&Server::new(s), n);
        for (a, b, h) in [COLLISION, SPEC_COLLISION] {
            let ca = point_chain(a, 160);
            let cb = point_chain(b, 160);
            assert!(ca.contains(&h) && cb.contains(&h), "{a} {b} {h:08x}");
        }
        assert_eq!(point_chain(COLLISION.0, 160)[104], COLLISION.2);
        assert_eq!(point_chain(COLLISION.1, 160)[47], COLLISION.2);
        let found = find_point_collisions(&[COLLISION.0.to_string(), COLLISION.1.to_string()]);
        assert_eq!(found, vec![(COLLISION.0.to_string(), 104, COLLISION.1.to_string(), 47, COLLISION.2)]);
    }

    #[test]
    fn every_flag_is_defined() {
        let defined: Vec<&str> = crate::harness::golden::FLAGS.iter().map(|f| f.0).collect();
        for case in catalog() {
            for f in case.flags.iter().chain(case.keys.iter().flat_map(|k| &k.flags)) {
                assert!(defined.contains(f), "{}: flag {f} is not in golden::FLAGS", case.name);
            }
        }
    }

    #[test]
    fn keys_are_sendable() {
        for case in catalog() {
            for k in &case.keys {
                assert!(k.key.len() < 60_000, "{}", case.name);
                assert!(!k.key.contains(&b'\r') && !k.key.contains(&b'\n'), "{}", case.name);
                if !k.key.is_empty() {
                    assert!(!k.key[0].is_ascii_whitespace() && !k.key.last().unwrap().is_ascii_whitespace());
                }
            }
        }
    }
}
