//! Planning a move off nginx (feature `engines`, docs/engines.md): what another proxy moves when a server
//! is added or removed there ([`EngineDiff`], beside nginx's [`Diff`]), and the settings of each engine a
//! migration report tries ([`settings`]).
//!
//! Counted as [`compare`](super::compare) counts: exactly over the 2³² CRC-32 values where the engine's
//! pick is a function of the key's CRC-32 on intervals (ingress-nginx, APISIX, HAProxy with `crc32` and
//! no `avalanche`), else on random keys ([`sample_keys`](super::compare::sample_keys)) with a 95% interval.

use super::compare::{Method, sample_key};
use super::diff::Diff;
use super::picks::{HASH_SPACE, Pick, PickMap};
use crate::engines::{Backend, Engine, EngineError, Model, envoy, haproxy, kong};
use std::net::SocketAddr;

/// What an engine moves when its server list changes from `before` to `after`: servers are matched by
/// address (weights may change too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineDiff {
    /// How it was counted ([`Method::Exact`] or [`Method::Sampled`]).
    pub method: Method,
    /// The whole: 2³², or the number of sampled keys.
    pub total: u64,
    /// Keys whose server changes.
    pub moved: u64,
    /// Of those, keys that move from a server present before and after to another such server: moves no
    /// added or removed server explains (nginx's ring has none when only servers are added or removed).
    pub between_kept: u64,
    /// Keys the engine does not hash before or after the change (Caddy's empty keys: its fallback policy
    /// picks anew each time), counted in `total` but neither as kept nor as moved.
    pub not_hashed: u64,
}

impl EngineDiff {
    /// The engine's moves from `before` to `after`; sampled on `keys` keys from `seed` unless exact.
    ///
    /// # Errors
    ///
    /// [`EngineError`]: settings or a server list the engine refuses.
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::analysis::compare::Method;
    /// use nginx_ketama::analysis::migrate::EngineDiff;
    /// use nginx_ketama::engines::Backend;
    ///
    /// let servers = |n: u8| (1..=n).map(|i| Backend::new(format!("10.0.0.{i}:80").parse().unwrap(), 1)).collect::<Vec<_>>();
    /// // ingress-nginx's ring keeps 160 points per endpoint: adding one moves keys only to it.
    /// let d = EngineDiff::of("ingress-nginx".parse()?, &servers(4), &servers(5), 0, 0)?;
    /// assert_eq!((d.method, d.between_kept), (Method::Exact, 0));
    /// // Envoy's ring has a fixed size: every survivor gives entries to the others too.
    /// let d = EngineDiff::of("envoy".parse()?, &servers(4), &servers(5), 20_000, 1)?;
    /// assert!(d.between_kept > 0);
    /// # Ok::<(), nginx_ketama::engines::EngineError>(())
    /// ```
    pub fn of(
        engine: Engine,
        before: &[Backend],
        after: &[Backend],
        keys: u64,
        seed: u64,
    ) -> Result<EngineDiff, EngineError> {
        let (a, b) = (engine.model(before)?, engine.model(after)?);
        let addr = |list: &[Backend], pick: Option<usize>| pick.map(|i| list[i].addr);
        let kept = |x: SocketAddr| before.iter().any(|b| b.addr == x) && after.iter().any(|b| b.addr == x);
        let mut d = EngineDiff { method: Method::Exact, total: 0, moved: 0, between_kept: 0, not_hashed: 0 };
        let mut add = |from: Option<SocketAddr>, to: Option<SocketAddr>, n: u64| {
            d.total += n;
            if from.is_none() || to.is_none() {
                d.not_hashed += n;
            } else if from != to {
                d.moved += n;
                if from.is_some_and(kept) && to.is_some_and(kept) {
                    d.between_kept += n;
                }
            }
        };
        match (a.crc32_segments(), b.crc32_segments()) {
            (Some(sa), Some(sb)) => {
                for (_, len, x, y) in merge(&sa, &sb) {
                    add(addr(before, Some(x)), addr(after, Some(y)), len);
                }
            }
            _ => {
                let mut key = Vec::new();
                for i in 0..keys {
                    sample_key(seed, i, &mut key);
                    add(addr(before, a.pick(&key)), addr(after, b.pick(&key)), 1);
                }
                d.method = Method::Sampled { keys, seed };
            }
        }
        Ok(d)
    }

    /// The engine's moves over real keys, counted one at a time ([`EngineKeyTally::add`]) in constant
    /// memory: each key as the configuration before and after computes it (the same twice unless the
    /// change changes the key expression).
    ///
    /// # Errors
    ///
    /// [`EngineError`]: settings or a server list the engine refuses.
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::analysis::compare::Method;
    /// use nginx_ketama::analysis::migrate::EngineDiff;
    /// use nginx_ketama::engines::Backend;
    ///
    /// let servers = |n: u8| (1..=n).map(|i| Backend::new(format!("10.0.0.{i}:80").parse().unwrap(), 1)).collect::<Vec<_>>();
    /// let mut tally = EngineDiff::over_keys("caddy".parse()?, &servers(3), &servers(3))?;
    /// tally.add(b"/a", b"/a");
    /// tally.add(b"/b", b"/b");
    /// let d = tally.finish();
    /// assert_eq!((d.method, d.total, d.moved), (Method::Keys, 2, 0));
    /// # Ok::<(), nginx_ketama::engines::EngineError>(())
    /// ```
    pub fn over_keys(engine: Engine, before: &[Backend], after: &[Backend]) -> Result<EngineKeyTally, EngineError> {
        Ok(EngineKeyTally {
            a: engine.model(before)?,
            b: engine.model(after)?,
            before: before.to_vec(),
            after: after.to_vec(),
            diff: EngineDiff { method: Method::Keys, total: 0, moved: 0, between_kept: 0, not_hashed: 0 },
        })
    }
}

/// An engine's moves over real keys, as they come ([`EngineDiff::over_keys`]).
#[derive(Debug, Clone)]
pub struct EngineKeyTally {
    a: Model,
    b: Model,
    before: Vec<Backend>,
    after: Vec<Backend>,
    diff: EngineDiff,
}

impl EngineKeyTally {
    /// Counts one request: its key before the change and after it.
    pub fn add(&mut self, from_key: &[u8], to_key: &[u8]) {
        let from = self.a.pick(from_key).map(|i| self.before[i].addr);
        let to = self.b.pick(to_key).map(|i| self.after[i].addr);
        let kept = |x: SocketAddr| self.before.iter().any(|b| b.addr == x) && self.after.iter().any(|b| b.addr == x);
        let d = &mut self.diff;
        d.total += 1;
        if from.is_none() || to.is_none() {
            d.not_hashed += 1;
        } else if from != to {
            d.moved += 1;
            if from.is_some_and(kept) && to.is_some_and(kept) {
                d.between_kept += 1;
            }
        }
    }

    /// What was counted.
    pub fn finish(self) -> EngineDiff {
        self.diff
    }
}

/// The overlaps `(start, length, a's answer, b's answer)` of two segment lists over the 2³² values.
fn merge(a: &[(u32, usize)], b: &[(u32, usize)]) -> Vec<(u64, u64, usize, usize)> {
    let end = |s: &[(u32, usize)], i: usize| s.get(i + 1).map_or(HASH_SPACE, |&(x, _)| u64::from(x));
    let (mut i, mut j, mut at) = (0, 0, 0u64);
    let mut out = Vec::with_capacity(a.len() + b.len());
    while at < HASH_SPACE {
        let stop = end(a, i).min(end(b, j));
        out.push((at, stop - at, a[i].1, b[j].1));
        if end(a, i) == stop {
            i += 1;
        }
        if end(b, j) == stop {
            j += 1;
        }
        at = stop;
    }
    out
}

/// Of nginx's `diff` between the maps `from` and `to`, what moves from a server both maps have to another
/// server both maps have (servers matched by their server string, as [`Diff`] matches them).
pub fn nginx_between_kept(diff: &Diff, from: &PickMap, to: &PickMap) -> u64 {
    let kept = |p: Pick| match diff.server_of(p) {
        Some(s) => from.servers().contains(s) && to.servers().contains(s),
        None => false,
    };
    diff.moves.iter().filter(|(m, _)| kept(m.from) && kept(m.to)).map(|&(_, n)| n).sum()
}

/// Envoy ring sizes a migration report tries: `(minimum_ring_size, maximum_ring_size)`.
pub const ENVOY_RING_SIZES: [(u64, u64); 4] = [
    (1024, 1024),
    (envoy::DEFAULT_MIN_RING_SIZE, envoy::DEFAULT_MAX_RING_SIZE),
    (16384, envoy::DEFAULT_MAX_RING_SIZE),
    (262_144, envoy::DEFAULT_MAX_RING_SIZE),
];

/// Maglev table sizes a migration report tries (primes).
pub const MAGLEV_TABLE_SIZES: [u64; 2] = [envoy::DEFAULT_TABLE_SIZE, 131_071];

/// Kong `slots` a migration report tries.
pub const KONG_SLOTS: [u64; 3] = [1000, kong::DEFAULT_SLOTS, 65536];

/// The settings of `engine` a migration report tries, `engine` as given first:
///
/// * HAProxy (the release given): `hash-type consistent` with each function `sdbm`, `djb2`, `wt6`,
///   `crc32`, with and without `avalanche`, and from 3.0 each `hash-key` (`id`, `addr`, `addr-port`):
///   16 or 24 settings (`none` reads the key as a number, and `map-based` is not consistent: not tried);
/// * Envoy: `RING_HASH` with xxHash and MurmurHash2 over each of [`ENVOY_RING_SIZES`], and `MAGLEV`
///   over each of [`MAGLEV_TABLE_SIZES`];
/// * Kong: each of [`KONG_SLOTS`];
/// * Caddy, ingress-nginx, APISIX, Traefik: nothing to tune, `engine` alone.
pub fn settings(engine: Engine) -> Vec<Engine> {
    let mut out = vec![engine];
    let mut add = |e: Engine| {
        if !out.contains(&e) {
            out.push(e);
        }
    };
    match engine {
        Engine::HaProxy(given) => {
            let keys: &[haproxy::HashKey] = if matches!(given.release, haproxy::Release::V2_2 | haproxy::Release::V2_6)
            {
                &[haproxy::HashKey::Id]
            } else {
                &[haproxy::HashKey::Id, haproxy::HashKey::Addr, haproxy::HashKey::AddrPort]
            };
            for function in
                [haproxy::Function::Sdbm, haproxy::Function::Djb2, haproxy::Function::Wt6, haproxy::Function::Crc32]
            {
                for avalanche in [false, true] {
                    for &hash_key in keys {
                        let o = haproxy::Options {
                            function,
                            avalanche,
                            hash_key,
                            ..haproxy::Options::consistent(given.release)
                        };
                        add(Engine::HaProxy(haproxy::Options { all_backups: given.all_backups, ..o }));
                    }
                }
            }
        }
        Engine::Envoy { use_hostname, .. } => {
            for hash_function in [envoy::HashFunction::XxHash, envoy::HashFunction::MurmurHash2] {
                for (min_ring_size, max_ring_size) in ENVOY_RING_SIZES {
                    add(Engine::Envoy {
                        policy: envoy::Policy::RingHash { min_ring_size, max_ring_size, hash_function },
                        use_hostname,
                    });
                }
            }
            for table_size in MAGLEV_TABLE_SIZES {
                add(Engine::Envoy { policy: envoy::Policy::Maglev { table_size }, use_hostname });
            }
        }
        Engine::Kong { .. } => {
            for slots in KONG_SLOTS {
                add(Engine::Kong { slots });
            }
        }
        Engine::Caddy(_) | Engine::IngressNginx | Engine::Apisix | Engine::Traefik => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Model;

    /// Caddy's empty key is hashed on neither side: counted apart, never as a key that stays.
    #[test]
    fn caddy_empty_keys_are_neither_kept_nor_moved() {
        let mut t = EngineDiff::over_keys("caddy@2.6.2".parse().unwrap(), &servers(3), &servers(4)).unwrap();
        t.add(b"", b"");
        t.add(b"a", b"a");
        let d = t.finish();
        assert_eq!((d.total, d.not_hashed), (2, 1));
        assert!(d.moved <= 1);
    }

    fn servers(n: u8) -> Vec<Backend> {
        (1..=n).map(|i| Backend::new(format!("10.0.0.{i}:80").parse().unwrap(), 1)).collect()
    }

    #[test]
    fn every_setting_tried_is_one_the_engine_takes() {
        for name in ["haproxy@2.2.9", "haproxy", "envoy", "envoy:maglev", "kong", "caddy@2.6.2", "apisix", "traefik"] {
            let engine: Engine = name.parse().unwrap();
            let grid = settings(engine);
            assert_eq!(grid[0], engine);
            for e in &grid {
                assert_eq!(e.to_string().parse::<Engine>().as_ref(), Ok(e), "{e}");
                e.model(&servers(3)).unwrap();
            }
        }
        assert_eq!(settings("haproxy@2.6.12".parse().unwrap()).len(), 8);
        assert_eq!(settings("haproxy".parse().unwrap()).len(), 24);
        assert_eq!(settings("envoy".parse().unwrap()).len(), 10);
        assert_eq!(settings("kong:slots=500".parse().unwrap()).len(), 4);
    }

    /// The segment merge against picks at both ends of every overlap.
    #[test]
    fn exact_diff_follows_the_rings() {
        let engine: Engine = "ingress-nginx".parse().unwrap();
        let (a, b) = (servers(3), servers(4));
        let (ma, mb) = (engine.model(&a).unwrap(), engine.model(&b).unwrap());
        let (Model::Ring(ra), Model::Ring(rb)) = (&ma, &mb) else { panic!("a ring") };
        let (sa, sb) = (ma.crc32_segments().unwrap(), mb.crc32_segments().unwrap());
        let parts = merge(&sa, &sb);
        assert_eq!(parts.iter().map(|p| p.1).sum::<u64>(), HASH_SPACE);
        for &(start, len, x, y) in &parts {
            for crc in [start, start + len - 1] {
                let crc = crc as u32;
                assert_eq!((ra.pick_crc(crc), rb.pick_crc(crc)), (x, y));
            }
        }
    }

    /// Removing a server from a `resty.chash` ring moves exactly what it answered: its share, which the
    /// test computes from the ring's own segments, and nothing between the others.
    #[test]
    fn removing_a_server_moves_its_share_only_on_a_ring() {
        let engine: Engine = "ingress-nginx".parse().unwrap();
        let (four, three) = (servers(4), servers(3));
        let segs = engine.model(&four).unwrap().crc32_segments().unwrap();
        let share: u64 = segs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.1 == 3)
            .map(|(i, s)| segs.get(i + 1).map_or(HASH_SPACE, |n| u64::from(n.0)) - u64::from(s.0))
            .sum();
        let d = EngineDiff::of(engine, &four, &three, 0, 0).unwrap();
        assert_eq!((d.method, d.total, d.moved, d.between_kept), (Method::Exact, HASH_SPACE, share, 0));
    }
}
