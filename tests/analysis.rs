//! The analysis module against brute force: every figure is recomputed by routing forged keys (keys with a
//! chosen CRC32) through the [`Worker`] or [`Upstream::route`], which know nothing of arcs or maps.
//!
//! Routing is constant on each ring arc (the lookup is "first point ≥ CRC"), and for the plain hash on each
//! of the 32,768 first-step values, so checking both ends of every arc, or every value, is a check of all
//! 2³² CRC32 values. `full_scan_of_all_crc32_values` (ignored: run it by hand in release mode) counts
//! every value one by one.

use nginx_ketama::analysis::compare::{Against, Comparison};
use nginx_ketama::analysis::forge::{Forger, Target, forge_keys};
use nginx_ketama::analysis::picks::{Arc, HASH_SPACE, PLAIN_VALUES};
use nginx_ketama::analysis::{Diff, Pick, PickMap, Share};
use nginx_ketama::{List, Method, NginxVersion, Peer, Route, Server, Status, Upstream, Worker};
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroUsize;

/// One generated peer: its server string (from a small pool, so strings repeat: several addresses under
/// one name), weight, `down`, whether it refuses connections and its `max_fails` (0 or 1).
#[derive(Debug, Clone)]
struct PeerSpec {
    server: usize,
    weight: u32,
    down: bool,
    failing: bool,
    max_fails: u32,
}

#[derive(Debug, Clone)]
struct Spec {
    method: Method,
    version: NginxVersion,
    peers: Vec<PeerSpec>,
    backups: usize,
}

fn peer_spec() -> impl Strategy<Value = PeerSpec> {
    (0..6usize, 1..=3u32, prop::bool::weighted(0.15), prop::bool::weighted(0.25), 0..=1u32)
        .prop_map(|(server, weight, down, failing, max_fails)| PeerSpec { server, weight, down, failing, max_fails })
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![Just(Method::Consistent), Just(Method::Plain)],
        prop_oneof![Just(NginxVersion::new(1, 26, 3)), Just(NginxVersion::new(1, 30, 6))],
        prop::collection::vec(peer_spec(), 1..8),
        0..3usize,
    )
        .prop_map(|(method, version, peers, backups)| Spec { method, version, peers, backups })
}

/// The upstream of a spec; peer `i` is printed as `10.0.0.i:80`, backups as `10.0.1.i:80`.
fn build(spec: &Spec) -> Upstream {
    let mut b = Upstream::builder(spec.method).version(spec.version);
    for (i, p) in spec.peers.iter().enumerate() {
        b = b.peer(
            Peer::new(format!("s{}.example:80", p.server))
                .with_name(format!("10.0.0.{i}:80"))
                .with_weight(p.weight)
                .with_down(p.down)
                .with_max_fails(p.max_fails)
                .with_fail_timeout(3600),
        );
    }
    for i in 0..spec.backups {
        b = b.backup(Peer::new(format!("10.0.1.{i}:80")).with_max_fails(0));
    }
    b.build().unwrap()
}

fn failing_names(spec: &Spec) -> BTreeSet<String> {
    spec.peers.iter().enumerate().filter(|(_, p)| p.failing).map(|(i, _)| format!("10.0.0.{i}:80")).collect()
}

/// Forged keys have this prefix and so `KEY_LEN` bytes: the plain hash's rehash is exact for them.
const PREFIX: &[u8] = b"key-pre-";
const KEY_LEN: NonZeroUsize = NonZeroUsize::new(16).unwrap();

/// What a worker's outcome says answered the key, in the map's server indexing; `None` when no peer
/// answered without round-robin being involved (every peer refused before 21 misses).
fn answer(up: &Upstream, map: &PickMap, out: &nginx_ketama::Outcome) -> Option<Pick> {
    if out.round_robin {
        return Some(Pick::RoundRobin);
    }
    if out.status != Status::Answered {
        return None;
    }
    let last = up.peer(*out.attempts.last().unwrap());
    Some(Pick::Server(map.servers().iter().position(|s| s == last.server()).unwrap()))
}

/// A worker that has already seen every failing `max_fails=1` peer fail, so it skips them (the state
/// `PickMap` describes for the plain hash; for the consistent hash a fresh worker gives the same answers).
fn warmed<'u>(up: &'u Upstream, failing: &BTreeSet<String>, forger: &Forger) -> Worker<'u> {
    let mut w = Worker::new(up);
    if up.method() == Method::Plain {
        let mut end = 0u32;
        for p in up.primary() {
            let slot = end;
            end += p.weight();
            if failing.contains(p.name()) && p.max_fails() > 0 && !p.is_down() {
                // A key whose first step is `slot` lands on this peer first.
                // (Unless an earlier warming request already tried it.)
                let key = forger.forge(PREFIX, slot << 16);
                w.request(&key, 0, |q| failing.contains(q.name()));
            }
        }
    }
    w
}

/// Every arc's two ends (consistent) or every first-step value (plain), routed by a worker: the map answers
/// alike, and the space summed by the worker's answers is the share.
fn check_share_by_worker(spec: &Spec) {
    let up = build(spec);
    let failing = failing_names(spec);
    let fails = |p: &Peer| failing.contains(p.name());
    let map = PickMap::with_failing(&up, fails, KEY_LEN);
    let share = Share::of(&map);
    assert_eq!(share.servers.iter().map(|s| s.count).sum::<u64>() + share.round_robin, HASH_SPACE);
    let forger = Forger::new();
    let worker = warmed(&up, &failing, &forger);
    let mut by_worker: HashMap<Pick, u64> = HashMap::new();
    let mut check = |crc: u32, weight: u64| {
        let key = forger.forge(PREFIX, crc);
        let out = worker.clone().request(&key, 0, fails);
        match answer(&up, &map, &out) {
            Some(a) => {
                assert_eq!(a, map.pick(crc), "crc {crc:08x}: worker {out:?}");
                *by_worker.entry(a).or_insert(0) += weight;
            }
            None => assert!(!map.answerable(), "crc {crc:08x}: nobody answered but the map has a usable peer"),
        }
    };
    match (spec.method, up.ring()) {
        (Method::Consistent, Some(ring)) if !ring.is_empty() => {
            for i in 0..ring.len() {
                let arc = Arc::of_point(ring, i);
                check(arc.start, 0);
                check(arc.end, arc.len);
            }
        }
        _ => {
            for v in 0..PLAIN_VALUES as u32 {
                // Bit 31 and the low 16 bits do not enter the step: any of them will do.
                check(v << 16 | (v.wrapping_mul(2_654_435_761) & 0x8000_ffff), HASH_SPACE / PLAIN_VALUES as u64);
            }
        }
    }
    if map.answerable() {
        for s in &share.servers {
            let i = map.servers().iter().position(|x| *x == s.server).unwrap();
            assert_eq!(by_worker.get(&Pick::Server(i)).copied().unwrap_or(0), s.count, "{}", s.server);
        }
        assert_eq!(by_worker.get(&Pick::RoundRobin).copied().unwrap_or(0), share.round_robin);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn share_equals_the_worker_on_every_arc_or_value(spec in spec()) {
        check_share_by_worker(&spec);
    }

    /// Forged keys route where `forge` says, through a fresh worker with the same failures.
    #[test]
    fn forged_keys_route_where_they_say(spec in spec(), pick in any::<prop::sample::Index>()) {
        let up = build(&spec);
        let failing = failing_names(&spec);
        let fails = |p: &Peer| failing.contains(p.name());
        let map = PickMap::with_failing(&up, fails, NonZeroUsize::new(PREFIX.len() + 8).unwrap());
        let share = Share::of(&map);
        let live: Vec<&Server> = share.servers.iter().filter(|s| s.count > 0).map(|s| &s.server).collect();
        prop_assume!(!live.is_empty());
        let server = live[pick.index(live.len())];
        for target in [Target::Anywhere, Target::Edges { point: None }] {
            let keys = forge_keys(&up, fails, server, 25, PREFIX, target).unwrap();
            prop_assert!(!keys.is_empty());
            for k in keys {
                let out = Worker::new(&up).request(&k.key, 0, fails);
                prop_assert!(!out.round_robin);
                prop_assert_eq!(up.peer(*out.attempts.last().unwrap()).server(), server);
                prop_assert_eq!(crc32fast::hash(&k.key), k.crc32);
            }
        }
    }

    /// The diff equals routing both upstreams on both ends of every piece between their breakpoints
    /// (every ring point of either, every plain-hash block), by `Upstream::route`.
    #[test]
    fn diff_equals_route_on_every_piece(a in spec(), b in spec()) {
        let (ua, ub) = (build(&a), build(&b));
        let (ma, mb) = (PickMap::with_failing(&ua, |_| false, KEY_LEN), PickMap::with_failing(&ub, |_| false, KEY_LEN));
        let diff = Diff::of(&ma, &mb);
        prop_assert_eq!(Diff::of(&ma, &ma).moved, 0);
        prop_assert_eq!(Diff::of(&mb, &mb).moved, 0);
        let mut cuts: BTreeSet<u64> = BTreeSet::from([0, HASH_SPACE]);
        for up in [&ua, &ub] {
            match up.ring() {
                Some(r) => cuts.extend(r.points().map(|p| u64::from(p.hash) + 1)),
                None => cuts.extend((0..1u64 << 16).map(|b| b << 16)),
            }
        }
        let forger = Forger::new();
        let route = |up: &Upstream, key: &[u8]| match up.route(key) {
            Route::Server(s) => Some(s.clone()),
            Route::RoundRobin => None,
        };
        let mut moved = 0u64;
        let mut matrix: HashMap<(Option<Server>, Option<Server>), u64> = HashMap::new();
        let cuts: Vec<u64> = cuts.into_iter().collect();
        for w in cuts.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let ends = [lo as u32, (hi - 1) as u32];
            let answers: Vec<(Option<Server>, Option<Server>)> = ends
                .iter()
                .map(|&c| {
                    let key = forger.forge(PREFIX, c);
                    (route(&ua, &key), route(&ub, &key))
                })
                .collect();
            prop_assert_eq!(&answers[0], &answers[1], "constant on {:x}..{:x}", lo, hi);
            let (from, to) = answers[0].clone();
            if from != to {
                moved += hi - lo;
                *matrix.entry((from, to)).or_insert(0) += hi - lo;
            }
        }
        prop_assert_eq!(diff.moved, moved);
        for (m, n) in &diff.moves {
            let key = (diff.server_of(m.from).cloned(), diff.server_of(m.to).cloned());
            prop_assert_eq!(matrix.get(&key).copied(), Some(*n));
        }
        prop_assert_eq!(diff.moves.len(), matrix.len());
        for c in &diff.changes {
            prop_assert_eq!(c.after, c.before - c.lost + c.gained);
        }
    }

    /// Counting real keys through the map equals counting them through the worker.
    #[test]
    fn key_shares_equal_the_worker(spec in spec(), keys in prop::collection::vec("[a-z0-9/]{0,12}", 1..200)) {
        let up = build(&spec);
        let failing = failing_names(&spec);
        let fails = |p: &Peer| failing.contains(p.name());
        let map = PickMap::with_failing(&up, fails, KEY_LEN);
        prop_assume!(map.answerable());
        let share = Share::of_keys(&map, keys.iter().map(|k| k.as_bytes()));
        let worker = warmed(&up, &failing, &Forger::new());
        let mut counts: HashMap<Pick, u64> = HashMap::new();
        for k in &keys {
            let out = worker.clone().request(k.as_bytes(), 0, fails);
            *counts.entry(answer(&up, &map, &out).unwrap()).or_insert(0) += 1;
        }
        prop_assert_eq!(share.round_robin, counts.get(&Pick::RoundRobin).copied().unwrap_or(0));
        for (i, s) in share.servers.iter().enumerate() {
            prop_assert_eq!(s.count, counts.get(&Pick::Server(i)).copied().unwrap_or(0));
        }
    }
}

/// The exact pingora agreement against the same figure counted over keys: both are exact, so the keys'
/// agreement is a binomial sample of the exact one (99.99% interval; fixed keys, so deterministic).
#[test]
fn exact_pingora_agreement_predicts_a_key_sample() {
    let up = Upstream::builder(Method::Consistent)
        .peers(["127.0.0.1:080", "127.0.0.1:81", "127.0.0.1", "[::1]:82"].map(Peer::new))
        .build()
        .unwrap();
    let map = PickMap::new(&up);
    let exact = Comparison::exact(&up, &map).unwrap();
    let keys: Vec<Vec<u8>> = nginx_ketama::analysis::compare::sample_keys(11, 50_000).collect();
    let sampled = Comparison::of_keys(&up, &map, Against::PingoraKetama, keys.iter().map(|k| k.as_slice())).unwrap();
    let p = exact.fraction(exact.agree);
    let (lo, hi) = nginx_ketama_harness::testkit::wilson_z(sampled.agree, sampled.total, 3.89);
    assert!(lo <= p && p <= hi, "exact {p} outside {lo}..{hi}");
    assert!(p > 0.0 && p < 1.0, "respelled servers disagree somewhere: {p}");
}

/// The plain hash with one primary and backups differs by version (algorithm §8): from 1.27.3 it is never
/// hashed, before it is (and the lone primary answers).
#[test]
fn plain_share_follows_the_version_rules() {
    for (version, hashed) in [(NginxVersion::new(1, 26, 3), true), (NginxVersion::new(1, 30, 6), false)] {
        let up = Upstream::builder(Method::Plain)
            .version(version)
            .peer(Peer::new("10.0.0.1:80"))
            .backup(Peer::new("10.0.0.2:80"))
            .build()
            .unwrap();
        let share = Share::of(&PickMap::new(&up));
        assert_eq!(share.servers[0].count == HASH_SPACE, hashed, "{version}");
        assert_eq!(share.round_robin == HASH_SPACE, !hashed, "{version}");
        assert_eq!(up.list(List::Backup).len(), 1);
    }
}

/// Every one of the 2³² CRC32 values, counted one by one (`cargo test --release --test analysis --
/// --ignored`, 31 s here): the count of values landing on each point, summed by the
/// worker's answer for that point, is the share.
#[test]
#[ignore = "scans all 2^32 CRC32 values; run by hand in release mode"]
fn full_scan_of_all_crc32_values() {
    let spec = Spec {
        method: Method::Consistent,
        version: NginxVersion::LATEST,
        peers: vec![
            PeerSpec { server: 0, weight: 1, down: false, failing: false, max_fails: 1 },
            PeerSpec { server: 1, weight: 2, down: false, failing: true, max_fails: 1 },
            PeerSpec { server: 2, weight: 1, down: true, failing: false, max_fails: 1 },
            PeerSpec { server: 3, weight: 1, down: false, failing: false, max_fails: 0 },
        ],
        backups: 0,
    };
    let up = build(&spec);
    let failing = failing_names(&spec);
    let fails = |p: &Peer| failing.contains(p.name());
    let ring = up.ring().unwrap();
    let mut per_point = vec![0u64; ring.len()];
    for crc in 0..=u32::MAX {
        per_point[ring.locate(crc)] += 1;
    }
    let map = PickMap::with_failing(&up, fails, KEY_LEN);
    let forger = Forger::new();
    let mut by_worker: HashMap<Pick, u64> = HashMap::new();
    for (i, &n) in per_point.iter().enumerate() {
        let key = forger.forge(PREFIX, ring.point(i).hash);
        let out = Worker::new(&up).request(&key, 0, fails);
        *by_worker.entry(answer(&up, &map, &out).unwrap()).or_insert(0) += n;
    }
    let share = Share::of(&map);
    for (i, s) in share.servers.iter().enumerate() {
        assert_eq!(by_worker.get(&Pick::Server(i)).copied().unwrap_or(0), s.count, "{}", s.server);
    }
    assert_eq!(by_worker.get(&Pick::RoundRobin).copied().unwrap_or(0), share.round_robin);
    eprintln!("all 2^32 values: {:?}", share.servers.iter().map(|s| (s.server.as_str(), s.count)).collect::<Vec<_>>());
}

/// An engine given its own server list: APISIX over nginx's five IPv4 lines plus a sixth endpoint is
/// nginx's ring of the six (lua-resty-balancer's `t/chash.t` TEST 2), so what it keeps is exactly what
/// nginx's own `Diff` from five to six servers leaves in place, and the sixth endpoint, which nginx's
/// upstream does not have, is a row of its own holding what moved.
#[test]
fn an_engine_over_its_own_server_list_counts_by_address() {
    use nginx_ketama::engines::{Backend, Engine};
    let servers = |n: u16| {
        Upstream::builder(Method::Consistent)
            .peers((9001..9001 + n).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
            .build()
            .unwrap()
    };
    let (five, six) = (servers(5), servers(6));
    let map = PickMap::new(&five);
    let moved = Diff::of(&map, &PickMap::new(&six)).moved;
    // The endpoints in another order: the ring does not depend on it.
    let eps: Vec<Backend> =
        [9006, 9003, 9001, 9002, 9005, 9004].map(|p| Backend::new(format!("127.0.0.1:{p}").parse().unwrap(), 1)).into();
    let c = Comparison::against_engine_listed(&five, &map, Engine::Apisix, &eps, 0, 0).unwrap();
    assert_eq!(c.agree, HASH_SPACE - moved);
    assert_eq!(c.servers.len(), 6);
    assert_eq!((c.servers[5].server.as_str(), c.servers[5].nginx, c.servers[5].other), ("127.0.0.1:9006", 0, moved));
    // Keys: each routed by nginx's upstream and, for the engine, by nginx's six-server upstream.
    let keys: Vec<String> = (0..2000).map(|i| format!("/k/{i}")).collect();
    let k = Comparison::of_keys_listed(&five, &map, Engine::Apisix, &eps, &keys).unwrap();
    let same = keys.iter().filter(|key| five.route(key.as_bytes()) == six.route(key.as_bytes())).count();
    assert_eq!((k.agree, k.total), (same as u64, 2000));
    // No endpoints: refused.
    assert!(Comparison::against_engine_listed(&five, &map, Engine::Apisix, &[], 0, 0).is_err());
}
