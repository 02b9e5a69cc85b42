//! Properties of consistent hashing that nginx's ring must have, over many random upstreams, and the
//! agreement of the stateless [`Upstream::route`] with a fresh [`Worker`].

use nginx_ketama::ring::reference;
use nginx_ketama::{Method, Peer, Route, Server, Upstream, Worker};
use proptest::prelude::*;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

fn random_servers(rng: &mut ChaCha8Rng, n: usize) -> Vec<(String, u32)> {
    (0..n)
        .map(|_| {
            let ip = format!(
                "10.{}.{}.{}",
                rng.random_range(0..=255u8),
                rng.random_range(0..=255u8),
                rng.random_range(1..=254u8)
            );
            let spelling = match rng.random_range(0..4) {
                0 => ip,
                1 => format!("{ip}:{}", rng.random_range(1..=65535u16)),
                2 => format!("unix:/run/{ip}.sock"),
                _ => format!("host-{}.example:8080", rng.random_range(0..100000)),
            };
            (spelling, rng.random_range(1..=5))
        })
        .collect()
}

fn upstream(servers: &[(String, u32)], down: Option<usize>) -> Upstream {
    Upstream::builder(Method::Consistent)
        .peers(
            servers
                .iter()
                .enumerate()
                .map(|(i, (s, w))| Peer::new(s.as_str()).with_weight(*w).with_down(Some(i) == down)),
        )
        .build()
        .unwrap()
}

fn owner(up: &Upstream, key: &[u8]) -> String {
    match up.route(key) {
        Route::Server(s) => s.to_string(),
        Route::RoundRobin => "round-robin".into(),
    }
}

fn keys(rng: &mut ChaCha8Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| format!("/cache/{}/{}", rng.random_range(0..1_000_000u32), rng.random::<u64>()).into_bytes())
        .collect()
}

#[test]
fn removing_a_server_moves_only_its_own_keys() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut moved_total = 0;
    for _ in 0..30 {
        let n = rng.random_range(3..40);
        let servers = random_servers(&mut rng, n);
        let victim = rng.random_range(0..n);
        let mut fewer = servers.clone();
        let gone = fewer.remove(victim).0;
        let (before, after) = (upstream(&servers, None), upstream(&fewer, None));
        for key in keys(&mut rng, 2000) {
            let (a, b) = (owner(&before, &key), owner(&after, &key));
            if a == gone {
                moved_total += 1;
                assert_ne!(b, gone);
            } else if servers.iter().filter(|(s, _)| *s == gone).count() == 1 {
                assert_eq!(a, b, "a key not on the removed server moved");
            }
        }
    }
    assert!(moved_total > 0);
}

#[test]
fn adding_a_server_only_takes_keys_for_itself() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for _ in 0..30 {
        let n = rng.random_range(2..40);
        let servers = random_servers(&mut rng, n + 1);
        let (before, after) = (upstream(&servers[..n], None), upstream(&servers, None));
        let newcomer = &servers[n].0;
        for key in keys(&mut rng, 2000) {
            let (a, b) = (owner(&before, &key), owner(&after, &key));
            assert!(a == b || b == *newcomer, "{a} -> {b}");
        }
    }
}

#[test]
fn a_down_server_moves_only_its_keys_and_keeps_its_points() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for _ in 0..30 {
        let n = rng.random_range(3..40);
        let servers = random_servers(&mut rng, n);
        let d = rng.random_range(0..n);
        let (up, down) = (upstream(&servers, None), upstream(&servers, Some(d)));
        assert_eq!(up.ring().unwrap().len(), down.ring().unwrap().len(), "down peers keep their points");
        let name = &servers[d].0;
        let shared = servers.iter().filter(|(s, _)| s == name).count() > 1;
        for key in keys(&mut rng, 2000) {
            let (a, b) = (owner(&up, &key), owner(&down, &key));
            if a != *name {
                assert_eq!(a, b);
            } else if !shared {
                assert_ne!(b, *name);
            }
        }
    }
}

#[test]
fn point_counts_follow_weights() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for _ in 0..20 {
        let n = rng.random_range(1..30);
        let servers = random_servers(&mut rng, n);
        let up = upstream(&servers, None);
        let ring = up.ring().unwrap();
        let mut distinct: Vec<&(String, u32)> = Vec::new();
        for s in &servers {
            match distinct.iter_mut().find(|d| d.0 == s.0) {
                Some(d) if d.1 < s.1 => *d = s,
                Some(_) => {}
                None => distinct.push(s),
            }
        }
        let expected: usize = distinct.iter().map(|(_, w)| 160 * *w as usize).sum();
        // CRC collisions between different servers are rare (≈ N²/2³³) and only ever lower the count.
        assert!(ring.len() <= expected && ring.len() + 2 >= expected, "{} vs {expected}", ring.len());
        for (name, w) in &distinct {
            let mine = ring.points().filter(|p| p.server.as_str() == name).count();
            assert!(mine <= 160 * *w as usize && mine + 2 >= 160 * *w as usize);
        }
        // And exactly: the ring is the reference ring, point for point.
        let peers: Vec<(Server, u32)> = servers.iter().map(|(s, w)| (Server::new(s.as_str()), *w)).collect();
        let want = reference::points(peers.iter().map(|(s, w)| (s, *w)));
        assert_eq!(ring.len(), want.len());
        for (p, &(h, i)) in ring.points().zip(&want) {
            assert_eq!((p.hash, p.server), (h, &peers[i].0));
        }
    }
}

// -------------------------------------------------------------------------------------------------------------
// `route` is a fresh worker's first attempt.

/// One `server` line: a string from a small pool (so duplicate lines are common), a weight, `down`.
fn line(pool: &'static [&'static str]) -> impl Strategy<Value = Peer> {
    (prop::sample::select(pool), 1..=5u32, prop::bool::weighted(0.3))
        .prop_map(|(s, w, down)| Peer::new(s).with_weight(w).with_down(down))
}

/// Random upstreams of both methods and every recorded version: 1–8 primary lines, 0–3 backups.
fn upstreams() -> impl Strategy<Value = Upstream> {
    const POOL: &[&str] = &[
        "127.0.0.1:9001",
        "127.0.0.1:9002",
        "127.0.0.1:9003",
        "10.0.0.7",
        "[::1]:9101",
        "unix:/tmp/a.sock",
        "cache-a:11211",
        "127.0.0.1:20195",
        "127.0.0.1:20412",
    ];
    let method = prop_oneof![Just(Method::Consistent), Just(Method::Plain)];
    // Every probed release: 1.18.0 (retry budget counting `down`), 1.22.1, 1.26.3 and the newest.
    let version = prop::sample::select(nginx_ketama::version::PROBED.to_vec());
    let primary = prop::collection::vec(line(POOL), 1..=8);
    let backup = prop::collection::vec(line(POOL), 0..=3);
    (method, version, primary, backup).prop_map(|(method, version, primary, backup)| {
        backup
            .into_iter()
            .fold(Upstream::builder(method).version(version).peers(primary), |b, p| b.backup(p))
            .build()
            .unwrap()
    })
}

/// Keys of any bytes, the empty key among them.
fn any_keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop_oneof![1 => Just(Vec::new()), 8 => prop::collection::vec(any::<u8>(), 1..24)], 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// [`Upstream::route`] names the server of a fresh worker's first attempt when that attempt comes from the
    /// hash, and says [`Route::RoundRobin`] exactly when it does not (every peer healthy, only `down` counts).
    #[test]
    fn route_is_a_fresh_workers_first_attempt(up in upstreams(), keys in any_keys()) {
        for key in &keys {
            let out = Worker::new(&up).request(key, 0, |_| false);
            match up.route(key) {
                Route::Server(server) => {
                    prop_assert!(!out.round_robin, "{key:?}: route hashed, the worker did not");
                    prop_assert_eq!(up.peer(out.attempts[0]).server(), server, "{:?}", key);
                }
                Route::RoundRobin => prop_assert!(out.round_robin, "{key:?}: the worker hashed, route did not"),
            }
        }
    }
}
