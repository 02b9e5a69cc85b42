//! How many keys another ketama implementation sends to the same server as nginx: what a team leaving
//! nginx keeps of its cache affinity.
//!
//! * **pingora-ketama** (Cloudflare, 0.9.1, `Version::V1`) chains the same CRC32 points, but over the
//!   *socket address* formatted as text (`ip ‖ 0 ‖ port`: no brackets, always a port, never the configured
//!   string), and sorts them with an unstable sort. Its answer is a function of the key's CRC32 too, so the
//!   agreement is exact over 2³² ([`PingoraRing`] models it, and the tests prove the model equal to the
//!   crate on every arc).
//! * **libketama** and **MD5 virtual nodes** (`md5_variants`, feature `md5`) hash the key with MD5: the
//!   agreement is measured on a sample of random keys, with a 95% Wilson interval, next to the figure
//!   expected if the two hashes were independent (`Σ nginx share × other share`, both exact).
//!
//! * **Other proxies** (`engines`, feature `engines`): HAProxy, Caddy, ingress-nginx, APISIX
//!   ([`Comparison::against_engine`]): exact where the engine's pick is a function of the key's CRC-32 on
//!   intervals, sampled otherwise.
//!
//! The other side gets the primary peers that are not `down`, with their weights (as one would configure
//! it); nginx's side is its [`PickMap`] (no failing servers).

use super::picks::{HASH_SPACE, Pick, PickMap};
use super::share::Unit;
#[cfg(feature = "engines")]
use crate::engines::{Backend, Engine, EngineError, Model};
#[cfg(feature = "md5")]
use crate::md5_variants::{LibketamaRing, Md5VnodeRing};
use crate::server::Server;
use crate::upstream::Upstream;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::io::Write as _;
use std::net::SocketAddr;

/// The implementation to compare with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Against {
    /// pingora-ketama 0.9.1 (`Continuum`, default `Version::V1`).
    PingoraKetama,
    /// libketama's MD5 ring (`md5_variants::LibketamaRing`, feature `md5`).
    #[cfg(feature = "md5")]
    Libketama,
    /// "MD5 of `server:i`, 160 virtual nodes" (`md5_variants::Md5VnodeRing`, feature `md5`).
    #[cfg(feature = "md5")]
    Md5Vnodes,
    /// Another proxy's consistent hashing (`engines`, feature `engines`).
    #[cfg(feature = "engines")]
    Engine(Engine),
}

impl std::fmt::Display for Against {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(feature = "engines")]
        if let Against::Engine(e) = self {
            return e.fmt(f);
        }
        f.write_str(match self {
            Against::PingoraKetama => "pingora-ketama",
            #[cfg(feature = "md5")]
            Against::Libketama => "libketama",
            #[cfg(feature = "md5")]
            Against::Md5Vnodes => "md5-vnodes",
            #[cfg(feature = "engines")]
            Against::Engine(_) => unreachable!("written above"),
        })
    }
}

/// Why a comparison cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// pingora-ketama takes socket addresses; this peer has none (a `unix:` socket, or a hostname read
    /// without resolving it).
    #[error("pingora-ketama takes IP socket addresses; peer \"{name}\" of server \"{server}\" is not one")]
    NotASocketAddress {
        /// The server string.
        server: Server,
        /// The peer's address as nginx prints it.
        name: String,
    },
    /// Every primary peer is `down`: the other side would have no servers.
    #[error("every primary peer is down: nothing to compare")]
    NoServers,
    /// The engine cannot be set up over these servers.
    #[cfg(feature = "engines")]
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// How a comparison was counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Exactly, over the 2³² CRC32 values.
    Exact,
    /// On `keys` random keys drawn from `seed`.
    Sampled {
        /// How many keys.
        keys: u64,
        /// The generator's seed ([`sample_keys`]).
        seed: u64,
    },
    /// Over a list of real keys.
    Keys,
}

/// Which side lists a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// Both: nginx's server, and (for an engine given its own list) one of the engine's servers has its
    /// address.
    Both,
    /// nginx only: the engine's own list has no server at its address.
    Nginx,
    /// The other side only: a server of the engine's own list no nginx peer has.
    Other,
}

/// One server's agreement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAgreement {
    /// The server string.
    pub server: Server,
    /// Which side lists it.
    pub listed: Listed,
    /// What nginx sends to it.
    pub nginx: u64,
    /// What the other implementation sends to it.
    pub other: u64,
    /// What both send to it.
    pub both: u64,
}

/// The agreement between nginx and another implementation.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::PickMap;
/// use nginx_ketama::analysis::compare::{Against, Comparison};
/// use nginx_ketama::{Method, Peer, Upstream};
///
/// // Canonical `ip:port` strings: pingora hashes the same bytes, so it agrees everywhere.
/// let same = Upstream::builder(Method::Consistent)
///     .peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
///     .build()?;
/// let c = Comparison::exact(&same, &PickMap::new(&same))?;
/// assert_eq!(c.agree, c.total);
///
/// // `127.0.0.1` without a port: nginx hashes "127.0.0.1\0", pingora "127.0.0.1\080".
/// let portless = Upstream::builder(Method::Consistent)
///     .peers(["127.0.0.1", "127.0.0.2", "127.0.0.3"].map(Peer::new))
///     .build()?;
/// let c = Comparison::exact(&portless, &PickMap::new(&portless))?;
/// assert!(c.agree < c.total / 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The other implementation.
    pub against: Against,
    /// How it was counted.
    pub method: Method,
    /// What nginx's side counts (the hash space, or keys).
    pub unit: Unit,
    /// Where both pick the same server.
    pub agree: u64,
    /// The whole (2³², the number of sampled keys, or of listed keys).
    pub total: u64,
    /// What nginx hands to round-robin (never counted as agreement).
    pub round_robin: u64,
    /// What the other side does not hash to a server (never agreement): Caddy's empty keys, which its
    /// fallback policy sends anywhere.
    pub not_hashed: u64,
    /// For MD5 rings: the agreement expected if the key's CRC32 and MD5 were independent,
    /// `Σ nginx share × other share`, from both rings' exact shares.
    pub expected: Option<f64>,
    /// Per server: nginx's servers in map order, then (for an engine given its own server list) the
    /// engine's backends nginx does not have.
    pub servers: Vec<ServerAgreement>,
}

impl Comparison {
    /// pingora-ketama, exactly: a merge of nginx's map with pingora's ring, linear in both.
    ///
    /// # Errors
    ///
    /// [`CompareError`]: a peer without a socket address, or no peer that is not `down`.
    pub fn exact(up: &Upstream, map: &PickMap) -> Result<Comparison, CompareError> {
        let other = PingoraRing::of(up)?.pick_map(up, map);
        let mut acc = Tally::new(map);
        for o in map.merge(&other) {
            acc.add(o.a, o.b, o.len);
        }
        Ok(acc.finish(Against::PingoraKetama, Method::Exact, Unit::HashSpace(map.basis()), HASH_SPACE, None))
    }

    /// Another proxy's model: exactly over the 2³² CRC-32 values when its pick is a function of the key's
    /// CRC-32 on intervals (ingress-nginx, APISIX, HAProxy with `crc32` and no `avalanche`), else on `keys`
    /// random keys from `seed` with a 95% interval ([`Comparison::interval`]). The engine gets the primary
    /// peers that are not `down`, by their addresses, with their weights.
    ///
    /// # Errors
    ///
    /// [`CompareError`]: a peer without a socket address, no peer that is not `down`, or settings the
    /// engine refuses.
    #[cfg(feature = "engines")]
    pub fn against_engine(
        up: &Upstream,
        map: &PickMap,
        engine: Engine,
        keys: u64,
        seed: u64,
    ) -> Result<Comparison, CompareError> {
        Comparison::against_engine_listed(up, map, engine, &engine_backends(up)?, keys, seed)
    }

    /// As [`Comparison::against_engine`], with the engine given its own server list `backends` (its
    /// endpoints, in its order, e.g. read from `kubectl ingress-nginx backends`) instead of the upstream's
    /// peers. A key is kept when both pick the same address: a backend is nginx's server whose peer has
    /// its address; a backend no peer has is a server of its own, after nginx's in
    /// [`Comparison::servers`], with nothing from nginx.
    ///
    /// # Errors
    ///
    /// [`CompareError`]: an empty list, or settings the engine refuses.
    #[cfg(feature = "engines")]
    pub fn against_engine_listed(
        up: &Upstream,
        map: &PickMap,
        engine: Engine,
        backends: &[Backend],
        keys: u64,
        seed: u64,
    ) -> Result<Comparison, CompareError> {
        let side = EngineSide::new(up, map, engine, backends)?;
        let against = Against::Engine(engine);
        if let Some(segments) = side.model.crc32_segments() {
            let other = PickMap::from_segments(map, segments.into_iter().map(|(s, b)| (s, side.owner[b])).collect());
            let mut acc = Tally::with_side(map, Some(&side.owner), side.extra.clone());
            for o in map.merge(&other) {
                acc.add(o.a, o.b, o.len);
            }
            return Ok(acc.finish(against, Method::Exact, Unit::HashSpace(map.basis()), HASH_SPACE, None));
        }
        let mut acc = Tally::with_side(map, Some(&side.owner), side.extra.clone());
        let mut key = Vec::new();
        for i in 0..keys {
            sample_key(seed, i, &mut key);
            acc.add(map.pick_key(&key), side.pick_key(&key), 1);
        }
        Ok(acc.finish(against, Method::Sampled { keys, seed }, Unit::HashSpace(map.basis()), keys, None))
    }

    /// As [`Comparison::of_keys`] for an engine given its own server list (see
    /// [`Comparison::against_engine_listed`]).
    ///
    /// # Errors
    ///
    /// As [`Comparison::against_engine_listed`].
    #[cfg(feature = "engines")]
    pub fn of_keys_listed(
        up: &Upstream,
        map: &PickMap,
        engine: Engine,
        backends: &[Backend],
        keys: impl IntoIterator<Item = impl AsRef<[u8]>>,
    ) -> Result<Comparison, CompareError> {
        Comparison::of_keys_listed_each(up, map, engine, backends, keys, |_, _, _| {})
    }

    /// As [`Comparison::of_keys_listed`], calling `each` with every key, nginx's pick and the engine's
    /// (indices into [`Comparison::servers`]).
    ///
    /// # Errors
    ///
    /// As [`Comparison::against_engine_listed`].
    #[cfg(feature = "engines")]
    pub fn of_keys_listed_each<K: AsRef<[u8]>>(
        up: &Upstream,
        map: &PickMap,
        engine: Engine,
        backends: &[Backend],
        keys: impl IntoIterator<Item = K>,
        mut each: impl FnMut(&K, Pick, Pick),
    ) -> Result<Comparison, CompareError> {
        let side = EngineSide::new(up, map, engine, backends)?;
        let mut acc = Tally::with_side(map, Some(&side.owner), side.extra.clone());
        let mut total = 0;
        for key in keys {
            let (nginx, other) = (map.pick_key(key.as_ref()), side.pick_key(key.as_ref()));
            each(&key, nginx, other);
            acc.add(nginx, other, 1);
            total += 1;
        }
        Ok(acc.finish(Against::Engine(engine), Method::Keys, Unit::Keys, total, None))
    }

    /// `against` on `keys` random keys from `seed` ([`sample_keys`]); for pingora-ketama use
    /// [`Comparison::exact`], which needs no sample.
    ///
    /// # Errors
    ///
    /// As [`Comparison::exact`].
    pub fn sampled(
        up: &Upstream,
        map: &PickMap,
        against: Against,
        keys: u64,
        seed: u64,
    ) -> Result<Comparison, CompareError> {
        let other = Other::new(up, map, against)?;
        let mut acc = Tally::new(map);
        let mut key = Vec::new();
        for i in 0..keys {
            sample_key(seed, i, &mut key);
            acc.add(map.pick_key(&key), other.pick_key(&key), 1);
        }
        let expected = other.expected(map);
        Ok(acc.finish(against, Method::Sampled { keys, seed }, Unit::HashSpace(map.basis()), keys, expected))
    }

    /// `against` over a list of real keys, each routed by both sides. The keys may be borrowed or owned
    /// (streamed from a file, one at a time).
    ///
    /// # Errors
    ///
    /// As [`Comparison::exact`].
    pub fn of_keys(
        up: &Upstream,
        map: &PickMap,
        against: Against,
        keys: impl IntoIterator<Item = impl AsRef<[u8]>>,
    ) -> Result<Comparison, CompareError> {
        Comparison::of_keys_each(up, map, against, keys, |_, _, _| {})
    }

    /// As [`Comparison::of_keys`], calling `each` with every key, nginx's pick and the other's (indices
    /// into [`Comparison::servers`]); a key counts as agreement when both are the same server.
    ///
    /// # Errors
    ///
    /// As [`Comparison::exact`].
    pub fn of_keys_each<K: AsRef<[u8]>>(
        up: &Upstream,
        map: &PickMap,
        against: Against,
        keys: impl IntoIterator<Item = K>,
        mut each: impl FnMut(&K, Pick, Pick),
    ) -> Result<Comparison, CompareError> {
        let other = Other::new(up, map, against)?;
        let mut acc = Tally::new(map);
        let mut total = 0;
        for key in keys {
            let (nginx, theirs) = (map.pick_key(key.as_ref()), other.pick_key(key.as_ref()));
            each(&key, nginx, theirs);
            acc.add(nginx, theirs, 1);
            total += 1;
        }
        Ok(acc.finish(against, Method::Keys, Unit::Keys, total, None))
    }

    /// The server a pick of this comparison names (`None` for round-robin).
    pub fn server_of(&self, pick: Pick) -> Option<&Server> {
        match pick {
            Pick::Server(s) => Some(&self.servers[s].server),
            Pick::RoundRobin => None,
        }
    }

    /// `count / total`.
    pub fn fraction(&self, count: u64) -> f64 {
        if self.total == 0 { 0.0 } else { count as f64 / self.total as f64 }
    }

    /// The 95% Wilson score interval of `count` out of `total`, when the comparison is sampled.
    pub fn interval(&self, count: u64, total: u64) -> Option<(f64, f64)> {
        matches!(self.method, Method::Sampled { .. }).then(|| wilson(count, total))
    }
}

/// The 95% Wilson score interval for `k` successes out of `n` trials (`(0, 1)` for `n = 0`).
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::compare::wilson;
///
/// let (lo, hi) = wilson(50, 100);
/// assert!((lo - 0.4038).abs() < 1e-4 && (hi - 0.5962).abs() < 1e-4);
/// assert_eq!(wilson(0, 10).0, 0.0);
/// assert_eq!(wilson(10, 10).1, 1.0);
/// ```
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    wilson_z(k, n, 1.959_963_984_540_054)
}

/// The Wilson score interval for `k` out of `n` with the normal quantile `z` (1.96 for 95%).
fn wilson_z(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At k = 0 (k = n) the bound is exactly 0 (1); rounding would leave it a hair off.
    let lo = if k == 0.0 { 0.0 } else { (center - half).max(0.0) };
    let hi = if k == n { 1.0 } else { (center + half).min(1.0) };
    (lo, hi)
}

/// Key number `i` of the sample drawn from `seed`, written into `key`: `k-` and 16 hex digits of a
/// splitmix64 output (uniform 64-bit values, so both CRC32 and MD5 of the keys are uniform).
pub fn sample_key(seed: u64, i: u64, key: &mut Vec<u8>) {
    let mut z = seed.wrapping_add(i.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    key.clear();
    let _ = write!(key, "k-{z:016x}");
}

/// The keys [`Comparison::sampled`] uses.
pub fn sample_keys(seed: u64, count: u64) -> impl Iterator<Item = Vec<u8>> {
    (0..count).map(move |i| {
        let mut key = Vec::with_capacity(18);
        sample_key(seed, i, &mut key);
        key
    })
}

/// The backends an engine is given for `up`: its primary peers that are not `down`, by address (as nginx
/// prints the peer), with their weights, in configuration order.
///
/// # Errors
///
/// [`CompareError`]: a peer without an IP socket address, or none that is not `down`.
#[cfg(feature = "engines")]
pub fn engine_backends(up: &Upstream) -> Result<Vec<Backend>, CompareError> {
    let mut backends = Vec::new();
    for p in up.primary().iter().filter(|p| !p.is_down()) {
        let addr: SocketAddr = p
            .name()
            .parse()
            .map_err(|_| CompareError::NotASocketAddress { server: p.server().clone(), name: p.name().to_string() })?;
        backends.push(Backend::new(addr, p.weight()));
    }
    if backends.is_empty() {
        return Err(CompareError::NoServers);
    }
    Ok(backends)
}

/// An engine's model over `backends`, each backend's server index (nginx's server whose primary peer
/// has its address, else one of `extra`, numbered after nginx's servers), and those extra servers.
#[cfg(feature = "engines")]
struct EngineSide {
    model: Model,
    owner: Vec<usize>,
    extra: Vec<Server>,
}

#[cfg(feature = "engines")]
impl EngineSide {
    fn new(up: &Upstream, map: &PickMap, engine: Engine, backends: &[Backend]) -> Result<EngineSide, CompareError> {
        if backends.is_empty() {
            return Err(CompareError::NoServers);
        }
        let nginx: Vec<(SocketAddr, usize)> = up
            .primary()
            .iter()
            .filter_map(|p| Some((p.name().parse().ok()?, map.servers().iter().position(|s| s == p.server())?)))
            .collect();
        let mut extra: Vec<Server> = Vec::new();
        let mut owner = Vec::with_capacity(backends.len());
        for b in backends {
            let index = match nginx.iter().find(|(a, _)| *a == b.addr) {
                Some(&(_, s)) => s,
                None => {
                    let name = Server::new(b.addr.to_string());
                    let at = extra.iter().position(|s| *s == name).unwrap_or_else(|| {
                        extra.push(name);
                        extra.len() - 1
                    });
                    map.servers().len() + at
                }
            };
            owner.push(index);
        }
        Ok(EngineSide { model: engine.model(backends)?, owner, extra })
    }

    fn pick_key(&self, key: &[u8]) -> Pick {
        self.model.pick(key).map_or(Pick::RoundRobin, |b| Pick::Server(self.owner[b]))
    }
}

/// The other side, per key.
enum Other {
    #[cfg(feature = "engines")]
    Engine(EngineSide),
    Pingora(PickMap),
    #[cfg(feature = "md5")]
    Md5 {
        ring: Md5Ring,
        /// nginx map index of each of the ring's servers, in the ring's order.
        index: Vec<usize>,
        /// The same, by server string.
        by_server: HashMap<Server, usize>,
    },
}

#[cfg(feature = "md5")]
enum Md5Ring {
    Libketama(LibketamaRing),
    Vnodes(Md5VnodeRing),
}

impl Other {
    fn new(up: &Upstream, map: &PickMap, against: Against) -> Result<Other, CompareError> {
        match against {
            Against::PingoraKetama => Ok(Other::Pingora(PingoraRing::of(up)?.pick_map(up, map))),
            #[cfg(feature = "engines")]
            Against::Engine(engine) => Ok(Other::Engine(EngineSide::new(up, map, engine, &engine_backends(up)?)?)),
            #[cfg(feature = "md5")]
            Against::Libketama | Against::Md5Vnodes => Other::md5(up, map, against),
        }
    }

    #[cfg(feature = "md5")]
    fn md5(up: &Upstream, map: &PickMap, against: Against) -> Result<Other, CompareError> {
        // One entry per server string that has a live peer, with its heaviest peer's weight (nginx's ring
        // gives a string the points of its heaviest line too).
        let mut servers: Vec<(Server, u32)> = Vec::new();
        for p in up.primary().iter().filter(|p| !p.is_down()) {
            match servers.iter_mut().find(|(s, _)| s == p.server()) {
                Some((_, w)) => *w = (*w).max(p.weight()),
                None => servers.push((p.server().clone(), p.weight())),
            }
        }
        if servers.is_empty() {
            return Err(CompareError::NoServers);
        }
        let list = servers.iter().map(|(s, w)| (s, *w));
        let ring = match against {
            Against::Libketama => Md5Ring::Libketama(LibketamaRing::new(list)),
            _ => Md5Ring::Vnodes(Md5VnodeRing::new(list)),
        };
        let index: Vec<usize> =
            servers.iter().map(|(s, _)| map.servers().iter().position(|x| x == s).expect("a primary server")).collect();
        let by_server = servers.into_iter().map(|(s, _)| s).zip(index.iter().copied()).collect();
        Ok(Other::Md5 { ring, index, by_server })
    }

    fn pick_key(&self, key: &[u8]) -> Pick {
        match self {
            #[cfg(feature = "engines")]
            Other::Engine(side) => side.pick_key(key),
            Other::Pingora(map) => map.pick_key(key),
            #[cfg(feature = "md5")]
            Other::Md5 { ring, by_server, .. } => {
                let owner = match ring {
                    Md5Ring::Libketama(r) => r.owner(key),
                    Md5Ring::Vnodes(r) => r.owner(key),
                };
                owner.map_or(Pick::RoundRobin, |o| Pick::Server(by_server[o]))
            }
        }
    }

    /// `Σ p_s q_s` for MD5 rings.
    #[cfg(feature = "md5")]
    fn expected(&self, map: &PickMap) -> Option<f64> {
        let Other::Md5 { ring, index, .. } = self else { return None };
        let (_, other) = match ring {
            Md5Ring::Libketama(r) => r.space(),
            Md5Ring::Vnodes(r) => r.space(),
        };
        let nginx = super::share::Share::of(map);
        let share = |n: u64| n as f64 / HASH_SPACE as f64;
        Some(index.iter().zip(&other).map(|(&s, &q)| share(nginx.servers[s].count) * share(q)).sum())
    }

    /// No MD5 rings without the `md5` feature.
    #[cfg(not(feature = "md5"))]
    fn expected(&self, _map: &PickMap) -> Option<f64> {
        None
    }
}

/// Counts agreement per server.
struct Tally {
    servers: Vec<Server>,
    listed: Vec<Listed>,
    nginx: Vec<u64>,
    other: Vec<u64>,
    both: Vec<u64>,
    agree: u64,
    round_robin: u64,
    not_hashed: u64,
}

impl Tally {
    fn new(map: &PickMap) -> Tally {
        Tally::with_side(map, None, Vec::new())
    }

    /// Counts over nginx's servers, then (an engine given its own list: `owner`, each of its backends' server
    /// index) the `extra` servers nginx does not have.
    fn with_side(map: &PickMap, owner: Option<&[usize]>, extra: Vec<Server>) -> Tally {
        let n = map.servers().len() + extra.len();
        let mut listed = vec![Listed::Both; map.servers().len()];
        if let Some(owner) = owner {
            for (i, l) in listed.iter_mut().enumerate() {
                if !owner.contains(&i) {
                    *l = Listed::Nginx;
                }
            }
        }
        listed.extend(extra.iter().map(|_| Listed::Other));
        Tally {
            listed,
            servers: map.servers().iter().cloned().chain(extra).collect(),
            nginx: vec![0; n],
            other: vec![0; n],
            both: vec![0; n],
            agree: 0,
            round_robin: 0,
            not_hashed: 0,
        }
    }

    fn add(&mut self, nginx: Pick, other: Pick, n: u64) {
        match nginx {
            Pick::Server(s) => self.nginx[s] += n,
            Pick::RoundRobin => self.round_robin += n,
        }
        match other {
            Pick::Server(o) => {
                self.other[o] += n;
                if nginx == other {
                    self.both[o] += n;
                    self.agree += n;
                }
            }
            Pick::RoundRobin => self.not_hashed += n,
        }
    }

    fn finish(self, against: Against, method: Method, unit: Unit, total: u64, expected: Option<f64>) -> Comparison {
        let servers = self
            .servers
            .into_iter()
            .enumerate()
            .map(|(i, server)| ServerAgreement {
                server,
                listed: self.listed[i],
                nginx: self.nginx[i],
                other: self.other[i],
                both: self.both[i],
            })
            .collect();
        Comparison {
            against,
            method,
            unit,
            agree: self.agree,
            total,
            round_robin: self.round_robin,
            not_hashed: self.not_hashed,
            expected,
            servers,
        }
    }
}

/// pingora-ketama 0.9.1's `Continuum` with the default `Version::V1`, built the way the crate builds it.
///
/// For each bucket (a socket address and a weight) in order: `160 × weight` points chained with CRC32 over
/// `ip ‖ 0x00 ‖ port` (the address formatted by Rust's `Display`: IPv6 without brackets, compressed) and the
/// previous point in little-endian; node numbers are stored through a `u16`, so bucket 65,536 aliases
/// bucket 0. The points are sorted with the standard library's *unstable* sort comparing hashes only, then
/// of equal hashes the first left by the sort is kept. Lookup: the first point `≥ crc32(key)`, wrapping.
///
/// Differences from nginx that follow: the string hashed is the socket address, not the configured
/// server string (`127.0.0.1` hashes as `127.0.0.1:80`, `127.0.0.1:080` as `127.0.0.1:80`, `[::1]:80` as
/// `::1:80`); which server keeps a point two servers share depends on the unstable sort; no `down`, no
/// 20-miss limit.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::compare::PingoraRing;
///
/// let ring = PingoraRing::new(&[("127.0.0.1:9001".parse()?, 1), ("127.0.0.1:9002".parse()?, 1)]);
/// assert_eq!(ring.len(), 320);
/// assert!(ring.node(b"some key").is_some());
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PingoraRing {
    points: Vec<PingoraPoint>,
    addrs: Vec<SocketAddr>,
}

/// A point as pingora lays it out (`PointV1`): node first, then hash, ordered by hash alone. The layout
/// and the ordering are the crate's, so the standard library's unstable sort moves these exactly as it
/// moves pingora's.
#[derive(Clone, Debug, Eq, PartialEq)]
struct PingoraPoint {
    node: u32,
    hash: u32,
}

impl Ord for PingoraPoint {
    fn cmp(&self, other: &Self) -> Ordering {
        self.hash.cmp(&other.hash)
    }
}

impl PartialOrd for PingoraPoint {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PingoraRing {
    /// The ring of `buckets` (address, weight ≥ 1), in order.
    pub fn new(buckets: &[(SocketAddr, u32)]) -> PingoraRing {
        let mut points = Vec::new();
        let mut addrs = Vec::with_capacity(buckets.len());
        for &(addr, weight) in buckets {
            let mut base = Vec::with_capacity(46);
            let _ = write!(base, "{}\0{}", addr.ip(), addr.port());
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(&base);
            addrs.push(addr);
            let node = (addrs.len() - 1) as u16;
            let mut prev: u32 = 0;
            for _ in 0..weight * crate::ring::POINTS_PER_WEIGHT {
                let mut h = hasher.clone();
                h.update(&prev.to_le_bytes());
                prev = h.finalize();
                points.push(PingoraPoint { node: u32::from(node), hash: prev });
            }
        }
        points.sort_unstable();
        points.dedup_by(|a, b| a.hash == b.hash);
        PingoraRing { points, addrs }
    }

    /// The ring pingora would build for the upstream's primary peers that are not `down` (one bucket per
    /// peer, its address as nginx prints it).
    ///
    /// # Errors
    ///
    /// [`CompareError`]: a peer without an IP socket address, or none that is not `down`.
    pub fn of(up: &Upstream) -> Result<PingoraRing, CompareError> {
        let mut buckets = Vec::new();
        for p in up.primary().iter().filter(|p| !p.is_down()) {
            let addr: SocketAddr = p.name().parse().map_err(|_| CompareError::NotASocketAddress {
                server: p.server().clone(),
                name: p.name().to_string(),
            })?;
            buckets.push((addr, p.weight()));
        }
        if buckets.is_empty() {
            return Err(CompareError::NoServers);
        }
        Ok(PingoraRing::new(&buckets))
    }

    /// Number of points after deduplication.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// `true` without points.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The index of the point a CRC32 lands on (the first at or above it, wrapping to 0).
    pub fn locate(&self, crc: u32) -> usize {
        match self.points.binary_search_by(|p| p.hash.cmp(&crc)) {
            Ok(i) => i,
            Err(i) if i == self.points.len() => 0,
            Err(i) => i,
        }
    }

    /// The address pingora picks for `key` (`None` for an empty ring).
    pub fn node(&self, key: &[u8]) -> Option<SocketAddr> {
        self.points.get(self.locate(crc32fast::hash(key))).map(|p| self.addrs[p.node as usize])
    }

    /// The points as `(hash, address)`, in ring order.
    pub fn points(&self) -> impl Iterator<Item = (u32, SocketAddr)> + '_ {
        self.points.iter().map(|p| (p.hash, self.addrs[p.node as usize]))
    }

    /// Pingora's answers as a map over nginx's servers: each address counts for the server string of
    /// the nginx peer printed as that address.
    fn pick_map(&self, up: &Upstream, nginx: &PickMap) -> PickMap {
        let by_addr: HashMap<SocketAddr, usize> = up
            .primary()
            .iter()
            .filter_map(|p| {
                let addr = p.name().parse().ok()?;
                Some((addr, nginx.servers().iter().position(|s| s == p.server())?))
            })
            .collect();
        let owner: Vec<usize> = self.addrs.iter().map(|a| by_addr[a]).collect();
        let n = self.points.len();
        let mut segments = Vec::with_capacity(n + 1);
        // [0, p0] → point 0, (p[i-1], p[i]] → point i, (p[n-1], MAX] → point 0.
        segments.push((0, owner[self.points[0].node as usize]));
        for i in 1..n {
            segments.push((self.points[i - 1].hash + 1, owner[self.points[i].node as usize]));
        }
        if self.points[n - 1].hash < u32::MAX {
            segments.push((self.points[n - 1].hash + 1, owner[self.points[0].node as usize]));
        }
        PickMap::from_segments(nginx, segments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::forge::Forger;
    use crate::peer::Peer;
    use crate::upstream::Method as HashMethod;
    use proptest::prelude::*;

    /// The model against the real crate on every arc: a key forged onto each point and one past it.
    fn same_as_crate(buckets: &[(SocketAddr, u32)]) {
        let ours = PingoraRing::new(buckets);
        let theirs = pingora_ketama::Continuum::new(
            &buckets.iter().map(|&(a, w)| pingora_ketama::Bucket::new(a, w)).collect::<Vec<_>>(),
        );
        let forger = Forger::new();
        let points: Vec<u32> = ours.points().map(|(h, _)| h).collect();
        for h in points.iter().flat_map(|&h| [h, h.wrapping_add(1)]).chain([0, u32::MAX]) {
            let key = forger.forge(b"", h);
            assert_eq!(ours.node(&key), theirs.node(&key), "crc {h:08x}");
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// 127.0.0.1:20195 and :20412 share a point (algorithm §11 F): which one keeps it is the unstable
    /// sort's business, and the model keeps the same one as the crate, in both orders.
    #[test]
    fn model_equals_pingora_on_colliding_rings() {
        same_as_crate(&[(addr("127.0.0.1:20195"), 1), (addr("127.0.0.1:20412"), 1)]);
        same_as_crate(&[(addr("127.0.0.1:20412"), 1), (addr("127.0.0.1:20195"), 1)]);
        same_as_crate(&[(addr("127.0.0.1:20253"), 2), (addr("127.0.0.1:20017"), 1), (addr("[::1]:80"), 3)]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn model_equals_pingora(spec in prop::collection::vec((any::<[u8; 4]>(), 1..65535u16, 1..4u32, any::<bool>()), 1..12)) {
            let buckets: Vec<(SocketAddr, u32)> = spec
                .iter()
                .map(|&(ip, port, w, v6)| {
                    let a: SocketAddr = if v6 {
                        format!("[::{:x}:{:x}]:{port}", ip[0], ip[1]).parse().unwrap()
                    } else {
                        format!("{}.{}.{}.{}:{port}", ip[0], ip[1], ip[2], ip[3]).parse().unwrap()
                    };
                    (a, w)
                })
                .collect();
            same_as_crate(&buckets);
        }
    }

    #[test]
    fn exact_pingora_agreement_counts_respellings() {
        let up = |servers: &[&str]| {
            crate::Upstream::builder(HashMethod::Consistent)
                .peers(servers.iter().map(|s| Peer::new(*s)))
                .build()
                .unwrap()
        };
        // `127.0.0.1:080` prints (and pingora hashes) as 127.0.0.1:80; nginx hashes "080".
        let u = up(&["127.0.0.1:080", "127.0.0.1:81", "127.0.0.1:82"]);
        let c = Comparison::exact(&u, &PickMap::new(&u)).unwrap();
        assert!(c.agree < c.total);
        assert_eq!(c.servers.iter().map(|s| s.other).sum::<u64>(), HASH_SPACE);
        assert!(c.servers[1].both > 0);
        let unix = up(&["unix:/tmp/a.sock", "127.0.0.1:81"]);
        assert!(matches!(Comparison::exact(&unix, &PickMap::new(&unix)), Err(CompareError::NotASocketAddress { .. })));
    }

    #[test]
    #[cfg(feature = "md5")]
    fn md5_samples_agree_about_as_independence_predicts() {
        let u = crate::Upstream::builder(HashMethod::Consistent)
            .peers((1..=4).map(|i| Peer::new(format!("10.0.0.{i}:11211"))))
            .build()
            .unwrap();
        let map = PickMap::new(&u);
        for against in [Against::Libketama, Against::Md5Vnodes] {
            let c = Comparison::sampled(&u, &map, against, 20_000, 7).unwrap();
            // The prediction lies in the 99.99% interval of the sample (z = 3.89; a fixed seed, so the
            // test is deterministic).
            let (lo, hi) = wilson_z(c.agree, c.total, 3.89);
            let expected = c.expected.unwrap();
            assert!(lo <= expected && expected <= hi, "{against}: {lo}..{hi} vs {expected}");
            assert_eq!(c.servers.iter().map(|s| s.other).sum::<u64>(), c.total);
        }
    }
}
