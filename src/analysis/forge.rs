//! Keys that land on a chosen server: printable keys forged to a chosen CRC32 ([`Forger`]), aimed at the
//! arcs a server answers ([`forge_keys`]), each checked through the ring and a fresh worker before it is
//! returned.
//!
//! CRC32 is affine over GF(2): for a fixed length, `crc(P ‖ S ⊕ δ) = crc(P ‖ S) ⊕ L(δ)` where `L` is linear
//! and depends only on the length of the suffix. We append an 8-character suffix over the 32-character
//! alphabet `@A–Z[\]^_` (`0x40 | five free bits`), whose 40 free bits span all 32 CRC bits, and solve for
//! the bits by Gaussian elimination (see "Reversing CRC – Theory and Practice", Stigge et al., 2006).

use super::picks::{Arc, Pick, PickMap};
use crate::peer::Peer;
use crate::server::Server;
use crate::upstream::{Method, Upstream};
use crate::worker::Worker;
use std::num::NonZeroUsize;

/// Characters in the forged suffix.
pub const SUFFIX_LEN: usize = 8;
/// Free bits per suffix character.
const FREE_BITS: usize = 5;
const VARS: usize = SUFFIX_LEN * FREE_BITS;

/// Solves `crc32(prefix ‖ suffix) = target` for printable suffixes.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::forge::Forger;
///
/// let key = Forger::new().forge(b"user-", 0xdeadbeef);
/// assert_eq!(crc32fast::hash(&key), 0xdeadbeef);
/// assert!(key.starts_with(b"user-") && key.len() == 13);
/// ```
#[derive(Debug, Clone)]
pub struct Forger {
    /// Row-reduced system: for each CRC output bit that has a pivot, (pivot variable, row over variables
    /// as a bitmask, and the combination of output bits that row stands for).
    rows: Vec<(usize, u64, u32)>,
}

impl Default for Forger {
    fn default() -> Self {
        Forger::new()
    }
}

impl Forger {
    /// Precomputes the linear map for 8-character suffixes.
    pub fn new() -> Forger {
        let base = [b'@'; SUFFIX_LEN];
        let c0 = crc32fast::hash(&base);
        // Column j: how flipping free bit j changes the CRC (independent of any prefix).
        let cols: Vec<u32> = (0..VARS)
            .map(|j| {
                let mut s = base;
                s[j / FREE_BITS] ^= 1 << (j % FREE_BITS);
                crc32fast::hash(&s) ^ c0
            })
            .collect();
        // Equations: for output bit b, sum_j cols[j].bit(b) * x_j = delta.bit(b). Track which delta bits
        // each reduced row combines (the `rhs` mask) so solving is a parity per row.
        let mut eqs: Vec<(u64, u32)> = (0..32)
            .map(|b| {
                let mut row = 0u64;
                for (j, c) in cols.iter().enumerate() {
                    if c >> b & 1 == 1 {
                        row |= 1 << j;
                    }
                }
                (row, 1u32 << b)
            })
            .collect();
        let mut rows = Vec::new();
        for var in 0..VARS {
            let Some(p) = eqs.iter().position(|&(r, _)| r >> var & 1 == 1) else { continue };
            let (prow, prhs) = eqs.swap_remove(p);
            for e in eqs.iter_mut() {
                if e.0 >> var & 1 == 1 {
                    e.0 ^= prow;
                    e.1 ^= prhs;
                }
            }
            for (_, row, rhs) in rows.iter_mut() {
                if *row >> var & 1 == 1 {
                    *row ^= prow;
                    *rhs ^= prhs;
                }
            }
            rows.push((var, prow, prhs));
        }
        assert_eq!(rows.len(), 32, "the suffix alphabet must span every CRC bit");
        Forger { rows }
    }

    /// A printable key `prefix ‖ suffix` (suffix of [`SUFFIX_LEN`] characters over `@A–Z[\]^_`) whose
    /// CRC32 is `target`.
    pub fn forge(&self, prefix: &[u8], target: u32) -> Vec<u8> {
        let mut key = prefix.to_vec();
        key.extend_from_slice(&[b'@'; SUFFIX_LEN]);
        let delta = crc32fast::hash(&key) ^ target;
        let mut x = 0u64;
        for &(var, _, rhs) in &self.rows {
            if (delta & rhs).count_ones() % 2 == 1 {
                x |= 1 << var;
            }
        }
        let n = prefix.len();
        for j in 0..VARS {
            if x >> j & 1 == 1 {
                key[n + j / FREE_BITS] ^= 1 << (j % FREE_BITS);
            }
        }
        debug_assert_eq!(crc32fast::hash(&key), target);
        key
    }
}

/// Where on the server's part of the hash space to aim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Spread over everything the server answers, in proportion to each arc's length.
    Anywhere,
    /// Inside the arc closed by this ring point (consistent hash only).
    Arc {
        /// The point's index.
        point: usize,
    },
    /// At both ends of the server's arcs: its first and last CRC32 value (of one ring point's arc, or of
    /// every arc of the server in turn).
    Edges {
        /// One ring point's arc, or all of them.
        point: Option<usize>,
    },
}

/// A forged key and where it lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgedKey {
    /// The key.
    pub key: Vec<u8>,
    /// Its CRC32.
    pub crc32: u32,
    /// The ring point it lands on (consistent hash).
    pub point: Option<usize>,
}

/// Why no keys could be forged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForgeError {
    /// No server of the upstream has this string.
    #[error("no server \"{server}\" in upstream \"{upstream}\"; servers: {known}")]
    UnknownServer {
        /// The string asked for.
        server: String,
        /// The upstream.
        upstream: String,
        /// Its server strings, comma-separated.
        known: String,
    },
    /// The server answers no key (all its peers `down` or failing, or it sits only on arcs that fall to
    /// round-robin).
    #[error("server \"{0}\" answers no key (down, failing, or behind more than 20 empty points)")]
    NoShare(Server),
    /// An arc or edge target on a plain-hash upstream.
    #[error("plain hash has no ring points: aim anywhere")]
    NoRing,
    /// The point's arc is not answered by the server.
    #[error("point {point} is not answered by \"{server}\" (its arc goes to {answer})")]
    NotOnServer {
        /// The point.
        point: usize,
        /// The server asked for.
        server: Server,
        /// Who answers that arc.
        answer: String,
    },
    /// The ring has no such point.
    #[error("point {point} is out of range (the ring has {len} points)")]
    NoSuchPoint {
        /// The point.
        point: usize,
        /// The ring's length.
        len: usize,
    },
    /// A forged key did not route where aimed (a bug: please report it).
    #[error("forged key {key:?} (crc32 {crc32:08x}) does not route to \"{server}\"")]
    Unverified {
        /// The key, lossily decoded.
        key: String,
        /// Its CRC32.
        crc32: u32,
        /// The server it was aimed at.
        server: Server,
    },
}

/// Up to `count` distinct keys `prefix ‖ 8 characters` that `server` answers when the peers `failing`
/// accepts refuse connections (its first pick, or the server a failover walk ends on).
///
/// Each key is checked twice before it is returned: its CRC32 is looked up in the [`PickMap`], and a fresh
/// [`Worker`] routes it with the same failures and must end on `server` without falling to round-robin.
/// Fewer than `count` keys come back when the target holds fewer CRC32 values.
///
/// # Errors
///
/// [`ForgeError`]: an unknown server, one that answers nothing, a ring target on a plain upstream, a point
/// out of range or answered by another server; [`ForgeError::Unverified`] would be a bug.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::forge::{Target, forge_keys};
/// use nginx_ketama::{Method, Peer, Route, Server, Upstream};
///
/// let up = Upstream::builder(Method::Consistent)
///     .peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
///     .build()?;
/// let s = Server::new("127.0.0.1:9003");
/// let keys = forge_keys(&up, |_| false, &s, 3, b"/img/", Target::Anywhere)?;
/// for k in &keys {
///     assert_eq!(up.route(&k.key), Route::Server(&s));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn forge_keys(
    upstream: &Upstream,
    failing: impl Fn(&Peer) -> bool,
    server: &Server,
    count: usize,
    prefix: &[u8],
    target: Target,
) -> Result<Vec<ForgedKey>, ForgeError> {
    // Forged keys have one length, so the plain hash's rehash steps are exact for them.
    let key_len = NonZeroUsize::new(prefix.len() + SUFFIX_LEN).expect("the suffix is not empty");
    let map = PickMap::with_failing(upstream, &failing, key_len);
    let Some(s) = map.servers().iter().position(|x| x == server) else {
        return Err(ForgeError::UnknownServer {
            server: server.to_string(),
            upstream: upstream.name().to_string(),
            known: map.servers().iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
        });
    };
    let ranges = target_ranges(upstream, &map, s, target)?;
    let total: u64 = ranges.iter().map(|r| r.1).sum();
    if total == 0 {
        return Err(ForgeError::NoShare(server.clone()));
    }
    let crcs: Vec<u32> = match target {
        Target::Edges { .. } => {
            let mut ends: Vec<u32> = Vec::new();
            for &(start, len) in &ranges {
                for c in [start, start.wrapping_add((len - 1) as u32)] {
                    if !ends.contains(&c) {
                        ends.push(c);
                    }
                }
            }
            ends.truncate(count);
            ends
        }
        _ => spread(&ranges, total, count),
    };
    let forger = Forger::new();
    let ring = upstream.ring();
    crcs.into_iter()
        .map(|crc| {
            let key = forger.forge(prefix, crc);
            let crc32 = crc32fast::hash(&key);
            let unverified = || ForgeError::Unverified {
                key: String::from_utf8_lossy(&key).into_owned(),
                crc32,
                server: server.clone(),
            };
            if crc32 != crc || map.pick_key(&key) != Pick::Server(s) {
                return Err(unverified());
            }
            let out = Worker::new(upstream).request(&key, 0, &failing);
            let last = out.attempts.last().map(|&id| upstream.peer(id).server());
            if out.round_robin || last != Some(server) {
                return Err(unverified());
            }
            let point = ring.map(|r| r.locate(crc32));
            Ok(ForgedKey { key, crc32, point })
        })
        .collect()
}

/// The CRC32 ranges `(start, len)` the target covers within server `s`'s part of the map; a range may
/// wrap past `u32::MAX` to 0 (the arc across 0 is one arc, with one start and one end).
fn target_ranges(up: &Upstream, map: &PickMap, s: usize, target: Target) -> Result<Vec<(u32, u64)>, ForgeError> {
    let point = match target {
        Target::Anywhere | Target::Edges { point: None } => {
            let mut ranges: Vec<(u32, u64)> =
                map.segments().filter(|g| g.pick == Pick::Server(s)).map(|g| (g.start, g.len)).collect();
            // The last segment continues into the first when both are the server's (and they are two).
            if ranges.len() > 1 {
                let (first, last) = (ranges[0], ranges[ranges.len() - 1]);
                if first.0 == 0 && u64::from(last.0) + last.1 == 1 << 32 {
                    ranges[0] = (last.0, last.1 + first.1);
                    ranges.pop();
                }
            }
            return Ok(ranges);
        }
        Target::Arc { point } | Target::Edges { point: Some(point) } => point,
    };
    let ring = match up.method() {
        Method::Consistent => up.ring().expect("consistent upstreams have a ring"),
        Method::Plain => return Err(ForgeError::NoRing),
    };
    if point >= ring.len() {
        return Err(ForgeError::NoSuchPoint { point, len: ring.len() });
    }
    let arc = Arc::of_point(ring, point);
    match map.pick(arc.end) {
        Pick::Server(x) if x == s => Ok(vec![(arc.start, arc.len)]),
        other => Err(ForgeError::NotOnServer {
            point,
            server: map.servers()[s].clone(),
            answer: match other {
                Pick::Server(x) => map.servers()[x].to_string(),
                Pick::RoundRobin => "round-robin".to_string(),
            },
        }),
    }
}

/// `count` distinct CRC32 values spread over the ranges in proportion to their lengths (a golden-ratio
/// sequence over their concatenation, so every prefix of the answer is spread too).
fn spread(ranges: &[(u32, u64)], total: u64, count: usize) -> Vec<u32> {
    let count = count.min(usize::try_from(total).unwrap_or(usize::MAX));
    let mut ends = Vec::with_capacity(ranges.len());
    let mut sum = 0u64;
    for &(_, len) in ranges {
        sum += len;
        ends.push(sum);
    }
    let mut out: Vec<u32> = Vec::with_capacity(count);
    let mut seen = std::collections::HashSet::new();
    // frac(j·φ) in 64-bit fixed point, scaled to the total: distinct for distinct j while count ≤ total,
    // except for rounding; a collision takes the next free offset.
    const PHI: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut j: u64 = 0;
    while out.len() < count {
        j += 1;
        let mut offset = ((u128::from(j.wrapping_mul(PHI)) * u128::from(total)) >> 64) as u64;
        while !seen.insert(offset) {
            offset = (offset + 1) % total;
        }
        let r = ends.partition_point(|&e| e <= offset);
        let before = if r == 0 { 0 } else { ends[r - 1] };
        out.push(ranges[r].0.wrapping_add((offset - before) as u32));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::Route;

    #[test]
    fn forged_keys_hit_their_targets_and_stay_printable() {
        let f = Forger::new();
        let mut t = 0x1234_5678u32;
        for i in 0..5000u32 {
            t = t.wrapping_mul(2_654_435_761).wrapping_add(i);
            for target in [t, 0, u32::MAX, 1, 0x8000_0000] {
                let key = f.forge(format!("arc{i}-").as_bytes(), target);
                assert_eq!(crc32fast::hash(&key), target);
                assert!(key.iter().all(|b| (0x21..0x7f).contains(b)), "{key:?}");
            }
        }
    }

    fn five(method: Method) -> Upstream {
        Upstream::builder(method)
            .peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}")).with_max_fails(0)))
            .build()
            .unwrap()
    }

    #[test]
    fn edges_of_one_arc() {
        let up = five(Method::Consistent);
        let ring = up.ring().unwrap();
        let owner = ring.point(700).server.clone();
        let keys = forge_keys(&up, |_| false, &owner, 10, b"k", Target::Edges { point: Some(700) }).unwrap();
        let arc = Arc::of_point(ring, 700);
        assert_eq!(keys.iter().map(|k| k.crc32).collect::<Vec<_>>(), [arc.start, arc.end]);
        assert!(keys.iter().all(|k| k.point == Some(700) && up.route(&k.key) == Route::Server(&owner)));
        let other = ring.servers().iter().find(|s| **s != owner).unwrap();
        assert!(matches!(
            forge_keys(&up, |_| false, other, 1, b"k", Target::Arc { point: 700 }),
            Err(ForgeError::NotOnServer { point: 700, .. })
        ));
    }

    #[test]
    fn failing_and_plain_and_errors() {
        for method in [Method::Consistent, Method::Plain] {
            let up = five(method);
            let s = Server::new("127.0.0.1:9002");
            let failing = |p: &Peer| p.name() == "127.0.0.1:9001";
            let keys = forge_keys(&up, failing, &s, 50, b"/a/", Target::Anywhere).unwrap();
            assert_eq!(keys.len(), 50);
            let distinct: std::collections::HashSet<&Vec<u8>> = keys.iter().map(|k| &k.key).collect();
            assert_eq!(distinct.len(), 50);
            let dead = Server::new("127.0.0.1:9001");
            assert_eq!(
                forge_keys(&up, failing, &dead, 1, b"", Target::Anywhere),
                Err(ForgeError::NoShare(dead.clone()))
            );
            assert!(matches!(
                forge_keys(&up, failing, &Server::new("x"), 1, b"", Target::Anywhere),
                Err(ForgeError::UnknownServer { .. })
            ));
        }
        assert_eq!(
            forge_keys(
                &five(Method::Plain),
                |_| false,
                &Server::new("127.0.0.1:9002"),
                1,
                b"",
                Target::Arc { point: 0 }
            ),
            Err(ForgeError::NoRing)
        );
    }

    #[test]
    fn spread_is_distinct_and_in_range() {
        let ranges = [(10u32, 3u64), (u32::MAX - 1, 4)];
        let got = spread(&ranges, 7, 10);
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 10, 11, 12, u32::MAX - 1, u32::MAX]);
    }

    /// Point 0's arc wraps past u32::MAX: its edges are its first and last value, nothing at the wrap.
    #[test]
    fn the_arc_across_zero_has_two_edges() {
        let up = five(Method::Consistent);
        let ring = up.ring().unwrap();
        let owner = ring.point(0).server.clone();
        let arc = Arc::of_point(ring, 0);
        assert!(arc.start > arc.end, "point 0's arc wraps");
        let keys = forge_keys(&up, |_| false, &owner, 10, b"", Target::Edges { point: Some(0) }).unwrap();
        assert_eq!(keys.iter().map(|k| k.crc32).collect::<Vec<_>>(), [arc.start, arc.end]);
        let all = forge_keys(&up, |_| false, &owner, 10_000, b"", Target::Edges { point: None }).unwrap();
        assert!(all.iter().all(|k| k.crc32 != 0 && k.crc32 != u32::MAX), "no edge at the wrap");
        let share = crate::analysis::Share::of(&PickMap::new(&up));
        let arcs = share.servers.iter().find(|s| s.server == owner).unwrap().arcs;
        assert_eq!(all.len(), 2 * arcs);
    }
}
