//! Envoy's `RING_HASH` and `MAGLEV` load balancers (the policies under Envoy Gateway, Istio and Contour's
//! consistent hashing).
//!
//! Read from envoyproxy/envoy as stored in the project's source index (the 1.36 line: `VERSION.txt`
//! 1.36.6 at 002eac184; the files below at the blob commits named), not at a tag checked out here:
//!
//! * **Normalised weights** (`source/common/upstream/thread_aware_lb_impl.cc`, `normalizeHostWeights`,
//!   049608543): without locality weights, each healthy host of the priority gets `weight × 1.0 / Σ
//!   weight` (a `double`), and the minimum and maximum of these go to the load balancer.
//! * **Host key** (`thread_aware_lb_impl.h`, `HashingLoadBalancer::hashKey`): the endpoint's
//!   `envoy.lb` metadata `hash_key` if set, else its hostname with `use_hostname_for_hashing`, else
//!   `address()->asString()`: `127.0.0.1:90`, `[::1]:90`.
//! * **Ring** (`source/extensions/load_balancing_policies/ring_hash/ring_hash_lb.cc`, `Ring::Ring`,
//!   0d2acde2e; `ring_hash_lb.h`, `DefaultMinRingSize` 1024, `DefaultMaxRingSize` 8 Mi): `scale =
//!   min(ceil(min_weight × minimum_ring_size) / min_weight, maximum_ring_size)`; for each host in order,
//!   `target += scale × weight` and while `current < target` one entry `hash(key ‖ "_" ‖ i)` (`i` from 0
//!   per host, `current` counted across hosts), the hash being `HashUtil::xxHash64` (seed 0) or, with
//!   `hash_function: MURMUR_HASH_2`, `MurmurHash::murmurHash2` (`source/common/common/hash.cc`: libstdc++'s
//!   64-bit `_Hash_bytes`, seed `0xc70f6907`). Entries sorted by hash (`std::sort`: the order of two
//!   entries with one hash is unspecified). `minimum_ring_size > maximum_ring_size` is refused.
//! * **Ring lookup** (`Ring::chooseHost`): libketama's binary search over signed indices, ported as
//!   written: the first entry whose hash is ≥ the request's, wrapping to entry 0. Every host's share of
//!   the ring moves when a host joins (the scale changes), unlike nginx's fixed 160 points per weight.
//! * **Maglev table** (`source/extensions/load_balancing_policies/maglev/maglev_lb.cc`,
//!   `constructMaglevTableInternal`, `OriginalMaglevTable::constructImplementationInternals`, 104df3de7;
//!   `maglev_lb.h`, `DefaultTableSize` 65537, a prime, checked): hosts sorted by key; `offset =
//!   xxHash64(key) % size`, `skip = xxHash64(key, seed 1) % (size − 1) + 1`; rounds `iteration = 1, 2, …`
//!   over the sorted hosts, a host taking its turn when `iteration × weight ≥ target` (`target` from 0,
//!   then `+= max_weight` per turn) and filling the first free slot of `offset + skip × next`. The compact
//!   table (`CompactMaglevTable`) fills the same slots. Lookup: `table[hash % size]`.
//! * **Request hash** (`source/common/http/hash_policy.cc`): a `header`, `cookie`, `query_parameter`
//!   policy hashes the value with `HashUtil::xxHash64` (seed 0). [`Ring::pick`] and [`Maglev::pick`]
//!   model exactly that for one value; several policies combine their hashes (not modelled).
//!
//! Only the first pick of one priority is modelled: locality weights, priorities and panic mode,
//! `hash_balance_factor` (bounded loads) and retries (`attempt > 0`) are not. Nothing of Envoy runs here:
//! the evidence is Envoy's own unit tests' expected rings and tables, reproduced in this module's tests.

use super::EngineError;
use std::fmt;

/// `DefaultMinRingSize`.
pub const DEFAULT_MIN_RING_SIZE: u64 = 1024;
/// `DefaultMaxRingSize` (8 Mi).
pub const DEFAULT_MAX_RING_SIZE: u64 = 1024 * 1024 * 8;
/// `MaglevTable::DefaultTableSize`.
pub const DEFAULT_TABLE_SIZE: u64 = 65537;
/// The largest Maglev table this model builds (Envoy's limit is the memory of the host).
pub const MAX_TABLE_SIZE: u64 = 5_000_011;

/// `RingHash.hash_function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashFunction {
    /// `XX_HASH`, the default.
    XxHash,
    /// `MURMUR_HASH_2`.
    MurmurHash2,
}

impl HashFunction {
    /// The function over `bytes`.
    pub fn hash(self, bytes: &[u8]) -> u64 {
        match self {
            HashFunction::XxHash => twox_hash::XxHash64::oneshot(0, bytes),
            HashFunction::MurmurHash2 => murmur_hash2(bytes, MURMUR_SEED),
        }
    }
}

/// Which Envoy load balancer, with its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// `RING_HASH`.
    RingHash {
        /// `minimum_ring_size`.
        min_ring_size: u64,
        /// `maximum_ring_size`.
        max_ring_size: u64,
        /// `hash_function`.
        hash_function: HashFunction,
    },
    /// `MAGLEV`.
    Maglev {
        /// `table_size` (a prime).
        table_size: u64,
    },
}

impl Policy {
    /// `RING_HASH` with Envoy's defaults.
    pub const RING_HASH: Policy = Policy::RingHash {
        min_ring_size: DEFAULT_MIN_RING_SIZE,
        max_ring_size: DEFAULT_MAX_RING_SIZE,
        hash_function: HashFunction::XxHash,
    };
    /// `MAGLEV` with Envoy's default table.
    pub const MAGLEV: Policy = Policy::Maglev { table_size: DEFAULT_TABLE_SIZE };

    /// Refuses what Envoy refuses (`minimum_ring_size > maximum_ring_size`, a table size that is not a
    /// prime), and sizes this model will not build.
    ///
    /// # Errors
    ///
    /// [`EngineError::Refused`] with Envoy's message.
    pub fn check(self) -> Result<Policy, EngineError> {
        match self {
            Policy::RingHash { min_ring_size, max_ring_size, .. } => {
                if min_ring_size > max_ring_size {
                    return Err(refused(format!(
                        "ring hash: minimum_ring_size ({min_ring_size}) > maximum_ring_size ({max_ring_size})"
                    )));
                }
                if min_ring_size == 0 || max_ring_size > DEFAULT_MAX_RING_SIZE {
                    return Err(refused(format!(
                        "ring sizes must be between 1 and {DEFAULT_MAX_RING_SIZE} (Envoy's own bound)"
                    )));
                }
            }
            Policy::Maglev { table_size } => {
                if !is_prime(table_size) {
                    return Err(refused("The table size of maglev must be prime number".into()));
                }
                if table_size > MAX_TABLE_SIZE {
                    return Err(refused(format!("table_size above {MAX_TABLE_SIZE} is not modelled")));
                }
            }
        }
        Ok(self)
    }

    /// The load balancer over `hosts`: `(host key, weight)` in the priority's order (weights ≥ 1).
    ///
    /// # Errors
    ///
    /// As [`Policy::check`]; a weight of 0 (Envoy's `load_balancing_weight` is at least 1).
    pub fn build(self, hosts: &[(&[u8], u32)]) -> Result<Balancer, EngineError> {
        if let Some(&(key, _)) = hosts.iter().find(|&&(_, w)| w == 0) {
            return Err(refused(format!(
                "host {}: load_balancing_weight must be at least 1",
                String::from_utf8_lossy(key)
            )));
        }
        Ok(match self.check()? {
            Policy::RingHash { min_ring_size, max_ring_size, hash_function } => {
                Balancer::Ring(Ring::new(hosts, min_ring_size, max_ring_size, hash_function))
            }
            Policy::Maglev { table_size } => Balancer::Maglev(Maglev::new(hosts, table_size)),
        })
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Policy::RingHash { min_ring_size, max_ring_size, hash_function } => {
                f.write_str("envoy")?;
                let mut opts = Vec::new();
                if hash_function == HashFunction::MurmurHash2 {
                    opts.push("murmur2".to_string());
                }
                if min_ring_size != DEFAULT_MIN_RING_SIZE {
                    opts.push(format!("min-ring-size={min_ring_size}"));
                }
                if max_ring_size != DEFAULT_MAX_RING_SIZE {
                    opts.push(format!("max-ring-size={max_ring_size}"));
                }
                if !opts.is_empty() {
                    write!(f, ":{}", opts.join(","))?;
                }
                Ok(())
            }
            Policy::Maglev { table_size } if table_size == DEFAULT_TABLE_SIZE => f.write_str("envoy:maglev"),
            Policy::Maglev { table_size } => write!(f, "envoy:maglev,table-size={table_size}"),
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = EngineError;

    /// The options after `envoy:`, comma-separated: `maglev`, `table-size=N`, `murmur2`, `xxhash`,
    /// `min-ring-size=N`, `max-ring-size=N`.
    fn from_str(s: &str) -> Result<Policy, EngineError> {
        let (mut min, mut max, mut function) = (DEFAULT_MIN_RING_SIZE, DEFAULT_MAX_RING_SIZE, HashFunction::XxHash);
        let (mut maglev, mut table, mut ring_opt) = (false, None, None);
        for opt in s.split(',').filter(|o| !o.is_empty()) {
            let number = |v: &str, option: &'static str| {
                v.parse::<u64>().map_err(|_| EngineError::Option {
                    engine: "envoy",
                    option,
                    value: v.to_string(),
                    expected: "a positive integer",
                })
            };
            match opt.split_once('=') {
                None if opt == "maglev" => maglev = true,
                None if opt == "ring-hash" || opt == "ring_hash" => {}
                None if opt == "murmur2" => (function, ring_opt) = (HashFunction::MurmurHash2, Some(opt)),
                None if opt == "xxhash" => function = HashFunction::XxHash,
                Some(("table-size", v)) => table = Some(number(v, "table-size")?),
                Some(("min-ring-size", v)) => (min, ring_opt) = (number(v, "min-ring-size")?, Some(opt)),
                Some(("max-ring-size", v)) => (max, ring_opt) = (number(v, "max-ring-size")?, Some(opt)),
                _ => {
                    return Err(EngineError::Option {
                        engine: "envoy",
                        option: "option",
                        value: opt.to_string(),
                        expected: "maglev, table-size=N, murmur2, xxhash, min-ring-size=N or max-ring-size=N",
                    });
                }
            }
        }
        let policy = match (maglev, table, ring_opt) {
            (true, _, Some(o)) => {
                return Err(EngineError::Option {
                    engine: "envoy",
                    option: "option",
                    value: o.to_string(),
                    expected: "a ring hash option, not for maglev",
                });
            }
            (false, Some(t), _) => {
                return Err(EngineError::Option {
                    engine: "envoy",
                    option: "option",
                    value: format!("table-size={t}"),
                    expected: "maglev's option: write envoy:maglev,table-size=N",
                });
            }
            (true, t, None) => Policy::Maglev { table_size: t.unwrap_or(DEFAULT_TABLE_SIZE) },
            (false, None, _) => Policy::RingHash { min_ring_size: min, max_ring_size: max, hash_function: function },
        };
        policy.check()
    }
}

fn refused(message: String) -> EngineError {
    EngineError::Refused { engine: "envoy", message }
}

/// A built load balancer.
#[derive(Debug, Clone)]
pub enum Balancer {
    /// A ring.
    Ring(Ring),
    /// A Maglev table.
    Maglev(Maglev),
}

impl Balancer {
    /// The host (index) a request hash goes to; `None` without hosts.
    pub fn choose(&self, hash: u64) -> Option<usize> {
        match self {
            Balancer::Ring(r) => r.choose(hash),
            Balancer::Maglev(m) => m.choose(hash),
        }
    }

    /// The host (index) a key goes to: its xxHash64, as a `header` hash policy computes it.
    pub fn pick(&self, key: &[u8]) -> Option<usize> {
        self.choose(twox_hash::XxHash64::oneshot(0, key))
    }
}

/// A `RING_HASH` ring.
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::envoy::{HashFunction, Ring};
///
/// let hosts: [(&[u8], u32); 2] = [(b"10.0.0.1:80", 1), (b"10.0.0.2:80", 1)];
/// let ring = Ring::new(&hosts, 1024, 8 << 20, HashFunction::XxHash);
/// assert_eq!(ring.len(), 1024);
/// assert!(ring.pick(b"/video/42").is_some());
/// ```
#[derive(Debug, Clone)]
pub struct Ring {
    /// `(hash, host index)`, by hash.
    entries: Vec<(u64, u32)>,
    hashes_per_host: Vec<u64>,
}

impl Ring {
    /// `Ring::Ring` over `(host key, weight)` hosts (weights ≥ 1; callers check, as Envoy's config
    /// validation does).
    pub fn new(hosts: &[(&[u8], u32)], min_ring_size: u64, max_ring_size: u64, function: HashFunction) -> Ring {
        let mut entries = Vec::new();
        let mut hashes_per_host = vec![0; hosts.len()];
        if hosts.is_empty() {
            return Ring { entries, hashes_per_host };
        }
        let sum: u64 = hosts.iter().map(|&(_, w)| u64::from(w)).sum();
        let weights: Vec<f64> = hosts.iter().map(|&(_, w)| f64::from(w) * 1.0 / sum as f64).collect();
        let min_weight = weights.iter().copied().fold(1.0, f64::min);
        let scale = ((min_weight * min_ring_size as f64).ceil() / min_weight).min(max_ring_size as f64);
        let (mut current, mut target) = (0.0f64, 0.0f64);
        let mut buf = Vec::new();
        for (index, (&(key, _), weight)) in hosts.iter().zip(&weights).enumerate() {
            buf.clear();
            buf.extend_from_slice(key);
            buf.push(b'_');
            let stem = buf.len();
            target += scale * weight;
            let mut i: u64 = 0;
            while current < target {
                buf.truncate(stem);
                buf.extend_from_slice(i.to_string().as_bytes());
                entries.push((function.hash(&buf), index as u32));
                i += 1;
                current += 1.0;
            }
            hashes_per_host[index] = i;
        }
        // Stable: of two entries with one hash, the earlier host first (Envoy's order is unspecified).
        entries.sort_by_key(|&(h, _)| h);
        Ring { entries, hashes_per_host }
    }

    /// Number of entries (Envoy's `ring_hash_lb.size` gauge counts `ceil(scale)`, which this equals
    /// but for rounding).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// `true` without entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries per host, in the hosts' order (`min_hashes_per_host`, `max_hashes_per_host`).
    pub fn hashes_per_host(&self) -> &[u64] {
        &self.hashes_per_host
    }

    /// The entries' hashes, ascending, with their hosts.
    pub fn entries(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.entries.iter().map(|&(h, i)| (h, i as usize))
    }

    /// `Ring::chooseHost(h, 0)`: libketama's search as Envoy writes it (signed `lowp`, `highp`,
    /// `midp`; `highp` starts at the ring's size; a `midp` at the size wraps to entry 0).
    pub fn choose(&self, h: u64) -> Option<usize> {
        if self.entries.is_empty() {
            return None;
        }
        let size = self.entries.len() as i64;
        let (mut lowp, mut highp): (i64, i64) = (0, size);
        let mut midp: i64;
        loop {
            midp = (lowp + highp) / 2;
            if midp == size {
                midp = 0;
                break;
            }
            let midval = self.entries[midp as usize].0;
            let midval1 = if midp == 0 { 0 } else { self.entries[midp as usize - 1].0 };
            if h <= midval && h > midval1 {
                break;
            }
            if midval < h {
                lowp = midp + 1;
            } else {
                highp = midp - 1;
            }
            if lowp > highp {
                midp = 0;
                break;
            }
        }
        Some(self.entries[midp as usize].1 as usize)
    }

    /// The host (index) `key` goes to (its xxHash64).
    pub fn pick(&self, key: &[u8]) -> Option<usize> {
        self.choose(twox_hash::XxHash64::oneshot(0, key))
    }
}

/// A `MAGLEV` table.
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::envoy::Maglev;
///
/// let hosts: [(&[u8], u32); 2] = [(b"10.0.0.1:80", 1), (b"10.0.0.2:80", 2)];
/// let table = Maglev::new(&hosts, 65537);
/// assert_eq!(table.entries_per_host().iter().sum::<u64>(), 65537);
/// ```
#[derive(Debug, Clone)]
pub struct Maglev {
    table: Vec<u32>,
    counts: Vec<u64>,
}

impl Maglev {
    /// The table of `table_size` slots (a prime: [`Policy::check`]) over `(host key, weight)` hosts
    /// (weights ≥ 1).
    pub fn new(hosts: &[(&[u8], u32)], table_size: u64) -> Maglev {
        let mut counts = vec![0; hosts.len()];
        if hosts.is_empty() || table_size == 0 {
            return Maglev { table: Vec::new(), counts };
        }
        let sum: u64 = hosts.iter().map(|&(_, w)| u64::from(w)).sum();
        let weights: Vec<f64> = hosts.iter().map(|&(_, w)| f64::from(w) * 1.0 / sum as f64).collect();
        let max_weight = weights.iter().copied().fold(0.0, f64::max);
        // Sorted by key (std::sort of (key, host, weight) tuples; equal keys keep their order here).
        let mut order: Vec<usize> = (0..hosts.len()).collect();
        order.sort_by(|&a, &b| hosts[a].0.cmp(hosts[b].0));
        struct Entry {
            host: usize,
            offset: u64,
            skip: u64,
            weight: f64,
            target: f64,
            next: u64,
        }
        let mut entries: Vec<Entry> = order
            .into_iter()
            .map(|host| {
                let key = hosts[host].0;
                Entry {
                    host,
                    offset: twox_hash::XxHash64::oneshot(0, key) % table_size,
                    skip: twox_hash::XxHash64::oneshot(1, key) % (table_size - 1).max(1) + 1,
                    weight: weights[host],
                    target: 0.0,
                    next: 0,
                }
            })
            .collect();
        const EMPTY: u32 = u32::MAX;
        let mut table = vec![EMPTY; table_size as usize];
        let mut filled: u64 = 0;
        let mut iteration: u32 = 1;
        let permutation = |e: &Entry| {
            ((u128::from(e.offset) + u128::from(e.skip) * u128::from(e.next)) % u128::from(table_size)) as usize
        };
        while filled < table_size {
            for e in entries.iter_mut() {
                if filled >= table_size {
                    break;
                }
                if f64::from(iteration) * e.weight < e.target {
                    continue;
                }
                e.target += max_weight;
                let mut c = permutation(e);
                while table[c] != EMPTY {
                    e.next += 1;
                    c = permutation(e);
                }
                table[c] = e.host as u32;
                e.next += 1;
                counts[e.host] += 1;
                filled += 1;
            }
            iteration += 1;
        }
        Maglev { table, counts }
    }

    /// Slots per host, in the hosts' order (`min_entries_per_host`, `max_entries_per_host`).
    pub fn entries_per_host(&self) -> &[u64] {
        &self.counts
    }

    /// The table: each slot's host (index).
    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.table.iter().map(|&h| h as usize)
    }

    /// `chooseHost(hash, 0)`: `table[hash % size]`.
    pub fn choose(&self, hash: u64) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        Some(self.table[(hash % self.table.len() as u64) as usize] as usize)
    }

    /// The host (index) `key` goes to (its xxHash64).
    pub fn pick(&self, key: &[u8]) -> Option<usize> {
        self.choose(twox_hash::XxHash64::oneshot(0, key))
    }
}

/// `MurmurHash::STD_HASH_SEED`.
const MURMUR_SEED: u64 = 0xc70f_6907;

/// `MurmurHash::murmurHash2` (`source/common/common/hash.cc`): libstdc++'s 64-bit `_Hash_bytes`.
pub fn murmur_hash2(key: &[u8], seed: u64) -> u64 {
    const MUL: u64 = 0xc6a4_a793_5bd1_e995;
    let shift_mix = |v: u64| v ^ (v >> 47);
    let len = key.len() as u64;
    let mut hash = seed ^ len.wrapping_mul(MUL);
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let data = shift_mix(u64::from_le_bytes(word).wrapping_mul(MUL)).wrapping_mul(MUL);
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        // load_bytes: the last byte most significant.
        let data = rest.iter().rev().fold(0u64, |acc, &b| (acc << 8) + u64::from(b));
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    hash = shift_mix(hash).wrapping_mul(MUL);
    shift_mix(hash)
}

/// Trial division (table sizes are at most [`MAX_TABLE_SIZE`]).
fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

/// The ring Envoy's `ring_hash_lb_test.cc` expects in `BasicWithHostname` (and `BasicWithMetadataHashKey`):
/// host keys `90`…`95`, `minimum_ring_size` 12; `(hash, host index)` in ring order.
#[cfg(test)]
pub(crate) const HOSTNAME_TEST_RING: [(u64, usize); 12] = [
    (1975508444536362413, 5),
    (2376063919839173711, 5),
    (2386806903309390596, 3),
    (6749904478991551885, 4),
    (6803900775736438537, 3),
    (7225015537174310577, 2),
    (8787465352164086522, 0),
    (11282020843382717940, 2),
    (13723418369486627818, 1),
    (13776502110861797421, 0),
    (14338313586354474791, 1),
    (15364271037087512980, 4),
];

#[cfg(test)]
mod tests {
    //! Every expectation below is copied from Envoy's own unit tests (envoyproxy/envoy,
    //! `test/extensions/load_balancing_policies/ring_hash/ring_hash_lb_test.cc` at 13e9fdb2d and
    //! `test/extensions/load_balancing_policies/maglev/maglev_lb_test.cc` at 08417eb62, as stored in the
    //! source index): rings and tables Envoy's code printed, never values this model produced.
    use super::*;

    fn ports(range: std::ops::RangeInclusive<u16>) -> Vec<String> {
        range.map(|p| format!("127.0.0.1:{p}")).collect()
    }

    fn hosts<'a>(keys: &'a [String], weights: &[u32]) -> Vec<(&'a [u8], u32)> {
        keys.iter().zip(weights).map(|(k, &w)| (k.as_bytes(), w)).collect()
    }

    fn ring(keys: &[String], weights: &[u32], min: u64, max: u64, f: HashFunction) -> Ring {
        Ring::new(&hosts(keys, weights), min, max, f)
    }

    /// The rings Envoy's tests print: `(position, host index)` in ring order.
    fn assert_ring(r: &Ring, expected: &[(u64, usize)]) {
        assert_eq!(r.entries().collect::<Vec<_>>(), expected);
    }

    /// `RingHashLoadBalancerTest.Basic` (and `BasicWithRetryHostPredicate`): hosts 127.0.0.1:90…95,
    /// `minimum_ring_size` 12.
    const BASIC: [(u64, usize); 12] = [
        (833437586790550860, 4),
        (928266305478181108, 2),
        (1033482794131418490, 0),
        (3551244743356806947, 5),
        (3851675632748031481, 3),
        (5583722120771150861, 1),
        (6311230543546372928, 1),
        (7700377290971790572, 3),
        (13144177310400110813, 5),
        (13444792449719432967, 2),
        (15516499411664133160, 4),
        (16117243373044804889, 0),
    ];

    #[test]
    fn ring_matches_envoys_basic_test() {
        let keys = ports(90..=95);
        let r = ring(&keys, &[1; 6], 12, DEFAULT_MAX_RING_SIZE, HashFunction::XxHash);
        assert_ring(&r, &BASIC);
        assert_eq!(r.hashes_per_host(), &[2; 6]);
        // The test's lookups: 0 and u64::MAX go to :94; a hash equal to an entry takes it; one above,
        // the next.
        assert_eq!(r.choose(0), Some(4));
        assert_eq!(r.choose(u64::MAX), Some(4));
        assert_eq!(r.choose(3551244743356806947), Some(5));
        assert_eq!(r.choose(3551244743356806948), Some(3));
        assert_eq!(r.choose(16117243373044804880), Some(0));
    }

    /// `BasicWithMurmur2`: hosts 127.0.0.1:80…85, `MURMUR_HASH_2`, `minimum_ring_size` 12.
    #[test]
    fn ring_matches_envoys_murmur2_test() {
        let keys = ports(80..=85);
        let r = ring(&keys, &[1; 6], 12, DEFAULT_MAX_RING_SIZE, HashFunction::MurmurHash2);
        assert_ring(
            &r,
            &[
                (1358027074129602068, 5),
                (4361834613929391114, 3),
                (7224494972555149682, 4),
                (7701421856454313576, 1),
                (8649315368077433379, 2),
                (8739448859063030639, 4),
                (9887544217113020895, 1),
                (10150910876324007731, 2),
                (15168472011420622455, 3),
                (15427156902705414897, 0),
                (16375050414328759093, 5),
                (17613279263364193813, 0),
            ],
        );
        assert_eq!(r.choose(0), Some(5));
        assert_eq!(r.choose(u64::MAX), Some(5));
        assert_eq!(r.choose(1358027074129602068), Some(5));
        assert_eq!(r.choose(1358027074129602069), Some(3));
        assert_eq!(r.choose(10150910876324007730), Some(2));
    }

    /// `BasicWithHostname` (also `BasicWithMetadataHashKey`, `BasicWithDoundedLoad`): the host keys are
    /// the hostnames `90`…`95`.
    #[test]
    fn ring_matches_envoys_hostname_test() {
        let keys: Vec<String> = (90..=95).map(|p: u16| p.to_string()).collect();
        let r = ring(&keys, &[1; 6], 12, DEFAULT_MAX_RING_SIZE, HashFunction::XxHash);
        assert_ring(&r, &HOSTNAME_TEST_RING);
        assert_eq!(r.choose(7225015537174310577), Some(2));
        assert_eq!(r.choose(6803900775736438537), Some(3));
    }

    /// `UnevenHosts`: 2 hosts, `minimum_ring_size` 3 → 2 entries each; then :81 and :82.
    #[test]
    fn ring_matches_envoys_uneven_hosts_test() {
        let r = ring(&ports(80..=81), &[1, 1], 3, DEFAULT_MAX_RING_SIZE, HashFunction::XxHash);
        assert_ring(
            &r,
            &[(5454692015285649509, 0), (7859399908942313493, 1), (13838424394637650569, 0), (16064866803292627174, 1)],
        );
        assert_eq!(r.choose(0), Some(0));
        let r = ring(&ports(81..=82), &[1, 1], 3, DEFAULT_MAX_RING_SIZE, HashFunction::XxHash);
        assert_ring(
            &r,
            &[(7859399908942313493, 0), (8241336090459785962, 1), (12882406409176325258, 1), (16064866803292627174, 0)],
        );
    }

    /// `HostWeightedTinyRing`: weights 1, 2, 3 and a ring of exactly 6.
    #[test]
    fn ring_matches_envoys_weighted_tiny_ring_test() {
        let r = ring(&ports(90..=92), &[1, 2, 3], 6, 6, HashFunction::XxHash);
        assert_eq!(r.hashes_per_host(), &[1, 2, 3]);
        for (h, host) in [
            (928266305478181108, 2),
            (4443673547860492590, 2),
            (5583722120771150861, 1),
            (6311230543546372928, 1),
            (13444792449719432967, 2),
            (16117243373044804889, 0),
        ] {
            assert_eq!(r.choose(h), Some(host), "{h}");
        }
    }

    /// Envoy's tests that spread `n` hashes `i × (u64::MAX / n)` over a ring and count the hits.
    fn spread(r: &Ring, n: u64, hosts: usize) -> Vec<u32> {
        let mut counts = vec![0; hosts];
        for i in 0..n {
            counts[r.choose(i * (u64::MAX / n)).unwrap()] += 1;
        }
        counts
    }

    /// `HostWeightedLargeRing` (weights 1, 2, 3, `minimum_ring_size` 6144: 987, 1932, 3081 of 6000),
    /// `LargeFractionalScale` (2 hosts, ring of exactly 1023: 511 and 512 entries, 526 and 497 of 1023)
    /// and `SmallFractionalScale` (4 hosts, ring of 2: two hosts get nothing).
    #[test]
    fn ring_matches_envoys_large_and_fractional_ring_tests() {
        let r = ring(&ports(90..=92), &[1, 2, 3], 6144, DEFAULT_MAX_RING_SIZE, HashFunction::XxHash);
        assert_eq!((r.len(), r.hashes_per_host()), (6144, &[1024, 2048, 3072][..]));
        assert_eq!(spread(&r, 6000, 3), [987, 1932, 3081]);
        let r = ring(&ports(90..=91), &[1, 1], 1023, 1023, HashFunction::XxHash);
        assert_eq!((r.len(), r.hashes_per_host()), (1023, &[512, 511][..]));
        assert_eq!(spread(&r, 1023, 2), [526, 497]);
        let r = ring(&ports(90..=93), &[1; 4], 2, 2, HashFunction::XxHash);
        let counts = spread(&r, 1024, 4);
        assert_eq!((counts.iter().filter(|&&c| c == 0).count(), counts.iter().sum::<u32>()), (2, 1024));
    }

    /// The lookup equals "the first entry ≥ the hash, wrapping": checked at every entry and its
    /// neighbours on Envoy's own ring.
    #[test]
    fn ring_lookup_is_first_entry_at_or_above() {
        let r = ring(&ports(90..=95), &[1; 6], 12, DEFAULT_MAX_RING_SIZE, HashFunction::XxHash);
        let first_ge = |h: u64| BASIC.iter().find(|&&(p, _)| p >= h).unwrap_or(&BASIC[0]).1;
        for &(p, _) in &BASIC {
            for h in [p - 1, p, p + 1] {
                assert_eq!(r.choose(h), Some(first_ge(h)), "{h}");
            }
        }
    }

    /// One changed rule fails Envoy's `Basic` ring: the `_` separator dropped, or `i` counted from 1.
    #[test]
    fn changed_rules_fail_envoys_ring() {
        let expected: Vec<u64> = BASIC.iter().map(|&(h, _)| h).collect();
        let mut no_sep: Vec<u64> = (90..=95)
            .flat_map(|p| (0..2).map(move |i| HashFunction::XxHash.hash(format!("127.0.0.1:{p}{i}").as_bytes())))
            .collect();
        no_sep.sort_unstable();
        assert_ne!(no_sep, expected);
        let mut from_one: Vec<u64> = (90..=95)
            .flat_map(|p| (1..3).map(move |i| HashFunction::XxHash.hash(format!("127.0.0.1:{p}_{i}").as_bytes())))
            .collect();
        from_one.sort_unstable();
        assert_ne!(from_one, expected);
    }

    fn maglev(keys: &[String], weights: &[u32], size: u64) -> Vec<usize> {
        Maglev::new(&hosts(keys, weights), size).slots().collect()
    }

    /// `MaglevLoadBalancerTest.Basic` (`BasicStability`): hosts :90…:95, table 7 →
    /// `{2, 4, 0, 1, 5, 0, 3}`; `BasicWithHostName`: host keys `90`…`95` → `{2, 5, 0, 3, 4, 1, 0}`;
    /// `Weighted`: :90 weight 1 and :91 weight 2, table 17 → 6 and 11 slots in the printed order.
    #[test]
    fn maglev_matches_envoys_tests() {
        assert_eq!(maglev(&ports(90..=95), &[1; 6], 7), [2, 4, 0, 1, 5, 0, 3]);
        let names: Vec<String> = (90..=95).map(|p: u16| p.to_string()).collect();
        assert_eq!(maglev(&names, &[1; 6], 7), [2, 5, 0, 3, 4, 1, 0]);
        let t = Maglev::new(&hosts(&ports(90..=91), &[1, 2]), 17);
        assert_eq!(t.entries_per_host(), &[6, 11]);
        assert_eq!(t.slots().collect::<Vec<_>>(), [1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1]);
        // Shuffling the hosts (BasicStability) changes nothing: the table is built in key order.
        let mut keys = ports(90..=95);
        keys.reverse();
        assert_eq!(maglev(&keys, &[1; 6], 7).into_iter().map(|i| 5 - i).collect::<Vec<_>>(), [2, 4, 0, 1, 5, 0, 3]);
        // `SingleHost`: everything to the one host.
        let one = Maglev::new(&hosts(&ports(90..=90), &[7]), 17);
        assert!((0..17).all(|h| one.choose(h) == Some(0)));
    }

    /// One changed rule fails Envoy's Maglev tests: hosts in configuration order (no sort) fails the
    /// shuffled `BasicStability`; `skip` from seed 0 instead of 1, or `skip` without the `+ 1`, fails
    /// `Basic`.
    #[test]
    fn changed_rules_fail_envoys_maglev() {
        let size = 7u64;
        let fill = |keys: &[&str], seed_skip: u64, plus_one: bool| {
            let mut table = vec![usize::MAX; size as usize];
            let mut next = vec![0u64; keys.len()];
            let mut filled = 0;
            while filled < size {
                for (h, k) in keys.iter().enumerate() {
                    if filled == size {
                        break;
                    }
                    let offset = twox_hash::XxHash64::oneshot(0, k.as_bytes()) % size;
                    let skip = twox_hash::XxHash64::oneshot(seed_skip, k.as_bytes()) % (size - 1) + u64::from(plus_one);
                    let mut c = ((offset + skip * next[h]) % size) as usize;
                    while table[c] != usize::MAX {
                        next[h] += 1;
                        c = ((offset + skip * next[h]) % size) as usize;
                    }
                    table[c] = h;
                    next[h] += 1;
                    filled += 1;
                }
            }
            table
        };
        let keys: Vec<String> = ports(90..=95);
        let sorted: Vec<&str> = keys.iter().map(String::as_str).collect();
        assert_eq!(fill(&sorted, 1, true), [2, 4, 0, 1, 5, 0, 3], "the rule as Envoy writes it");
        assert_ne!(fill(&sorted, 0, true), [2, 4, 0, 1, 5, 0, 3]);
        assert_ne!(fill(&sorted, 1, false), [2, 4, 0, 1, 5, 0, 3]);
        let reversed: Vec<&str> = sorted.iter().rev().copied().collect();
        let unsorted: Vec<usize> = fill(&reversed, 1, true).into_iter().map(|i| 5 - i).collect();
        assert_ne!(unsorted, [2, 4, 0, 1, 5, 0, 3]);
    }

    #[test]
    fn policies_parse_and_refuse_what_envoy_refuses() {
        for s in ["", "maglev", "maglev,table-size=17", "murmur2,min-ring-size=12", "max-ring-size=4096"] {
            let p: Policy = s.parse().unwrap();
            let shown = p.to_string();
            let opts = shown.strip_prefix("envoy").unwrap().trim_start_matches(':');
            assert_eq!(opts.parse::<Policy>().unwrap(), p, "{s}");
        }
        let err = |s: &str| s.parse::<Policy>().unwrap_err().to_string();
        assert_eq!(err("maglev,table-size=65536"), "envoy: The table size of maglev must be prime number");
        assert_eq!(
            err("min-ring-size=20,max-ring-size=10"),
            "envoy: ring hash: minimum_ring_size (20) > maximum_ring_size (10)"
        );
        assert!(err("maglev,murmur2").contains("not for maglev"));
        assert!(err("table-size=7").contains("envoy:maglev,table-size=N"));
        assert!(err("least-request").contains("invalid option \"least-request\""));
    }
}
