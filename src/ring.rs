//! The consistent-hash ring of `hash $key consistent;`.
//!
//! Built exactly like nginx's `ngx_http_upstream_update_chash`: every peer of the primary list contributes
//! `160 × weight` points, chained CRC32 over its server string's `host ‖ 0x00 ‖ port ‖ le32(prev)`, sorted
//! stably by hash, and of equal hashes only the first generated point survives (glibc's stable `qsort`).
//! A key lands on the first point whose hash is `≥ crc32(key)`, wrapping to point 0 past the end.

use crate::server::Server;
use std::collections::HashMap;
use std::fmt;

/// Points each unit of weight adds to the ring (nginx hard-codes 160).
pub const POINTS_PER_WEIGHT: u32 = 160;

/// The largest ring this crate builds, in points before deduplication.
///
/// NGINX-DIFF: nginx has no limit and allocates `160 × total_weight` points whatever the weights say; we
/// refuse rings above 2^26 points (512 MiB of points) with [`RingError::TooLarge`] instead of exhausting memory.
pub const MAX_POINTS: u64 = 1 << 26;

/// Why a ring could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RingError {
    /// A peer with weight 0 (nginx rejects `weight=0` in the config).
    #[error("server \"{0}\" has weight 0")]
    ZeroWeight(Server),
    /// More than [`MAX_POINTS`] points.
    #[error("ring would have {points} points, more than the {max} this library builds", max = MAX_POINTS)]
    TooLarge {
        /// `160 × total weight`.
        points: u64,
    },
}

/// One point of the ring: a hash and the server string that owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point<'a> {
    /// The point's position on the ring (a CRC32 value).
    pub hash: u32,
    /// The configured server string that generated it.
    pub server: &'a Server,
}

/// A consistent-hash ring, as one nginx worker builds it for `hash $key consistent;`.
///
/// Points are stored compactly (hash and owner index side by side) and looked up through a small index on
/// the top bits of the hash; the layout is private.
///
/// # Example
///
/// ```
/// use nginx_ketama::{Ring, Server};
///
/// // Test vector recorded from nginx: five servers of weight 1, key "k0" lands on point 700.
/// let servers: Vec<Server> = (9001..=9005).map(|p| Server::new(format!("127.0.0.1:{p}"))).collect();
/// let ring = Ring::new(servers.iter().map(|s| (s, 1)))?;
/// assert_eq!(ring.len(), 800);
/// assert_eq!(ring.locate(crc32fast::hash(b"k0")), 700);
/// assert_eq!(ring.owner(b"k0").map(|s| s.as_str()), Some("127.0.0.1:9005"));
/// # Ok::<(), nginx_ketama::RingError>(())
/// ```
#[derive(Clone)]
pub struct Ring {
    /// Point hashes, ascending and unique.
    hashes: Box<[u32]>,
    /// `owners[i]` indexes `servers` for point `i`.
    owners: Box<[u32]>,
    /// Distinct server strings, in order of first appearance.
    servers: Box<[Server]>,
    /// `index[b]` is the first point whose hash has top bits `>= b`; `index.len() == 2^bits + 1`.
    index: Box<[u32]>,
    /// How many top bits of the hash `index` covers (0 for tiny rings).
    bits: u32,
}

impl Ring {
    /// Builds the ring from peers in list order: `(server string, weight)`.
    ///
    /// Peers sharing a server string share points (only the extra points of a heavier duplicate are new).
    ///
    /// # Errors
    ///
    /// [`RingError::ZeroWeight`] for a weight of 0, [`RingError::TooLarge`] above [`MAX_POINTS`].
    pub fn new<'a, I>(peers: I) -> Result<Ring, RingError>
    where
        I: IntoIterator<Item = (&'a Server, u32)>,
    {
        // For every distinct string: its index and how many points of its chain are already generated.
        let mut seen: HashMap<&'a Server, (u32, u32)> = HashMap::new();
        let mut servers: Vec<Server> = Vec::new();
        // (hash, owner) in generation order; only new points of a chain are generated.
        let mut points: Vec<(u32, u32)> = Vec::new();
        let mut total: u64 = 0;
        for (server, weight) in peers {
            if weight == 0 {
                return Err(RingError::ZeroWeight(server.clone()));
            }
            total += u64::from(weight) * u64::from(POINTS_PER_WEIGHT);
            if total > MAX_POINTS {
                return Err(RingError::TooLarge { points: total });
            }
            let wanted = weight * POINTS_PER_WEIGHT;
            let (owner, done) = *seen.entry(server).or_insert_with(|| {
                servers.push(server.clone());
                ((servers.len() - 1) as u32, 0)
            });
            if wanted <= done {
                continue;
            }
            let (host, port) = server.ketama_parts();
            let mut base = crc32fast::Hasher::new();
            base.update(host);
            base.update(&[0]);
            base.update(port);
            let mut prev = 0u32;
            for i in 0..wanted {
                let mut h = base.clone();
                h.update(&prev.to_le_bytes());
                let hash = h.finalize();
                if i >= done {
                    points.push((hash, owner));
                }
                prev = hash;
            }
            seen.insert(server, (owner, wanted));
        }
        // Stable: among equal hashes the earliest generated point stays first, and dedup keeps it.
        points.sort_by_key(|&(hash, _)| hash);
        points.dedup_by_key(|&mut (hash, _)| hash);
        let hashes: Box<[u32]> = points.iter().map(|&(h, _)| h).collect();
        let owners: Box<[u32]> = points.iter().map(|&(_, o)| o).collect();
        let (index, bits) = build_index(&hashes);
        Ok(Ring { hashes, owners, servers: servers.into_boxed_slice(), index, bits })
    }

    /// Number of points after deduplication.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// `true` when the ring has no points (no peers).
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The index of the first point whose hash is `≥ hash`, or 0 past the last point (nginx's
    /// `ngx_http_upstream_find_chash_point` followed by the modulo that wraps it). 0 for an empty ring.
    #[inline]
    pub fn locate(&self, hash: u32) -> usize {
        let (lo, hi) = if self.bits == 0 {
            (0, self.hashes.len())
        } else {
            let b = (hash >> (32 - self.bits)) as usize;
            (self.index[b] as usize, self.index[b + 1] as usize)
        };
        let i = lo + self.hashes[lo..hi].partition_point(|&p| p < hash);
        if i == self.hashes.len() { 0 } else { i }
    }

    /// The server that owns `key` on an intact ring: the owner of point `locate(crc32(key))`.
    /// `None` for an empty ring. This ignores `down` and failed peers; see [`crate::Upstream::route`].
    #[inline]
    pub fn owner(&self, key: &[u8]) -> Option<&Server> {
        if self.hashes.is_empty() {
            return None;
        }
        Some(self.server_at(self.locate(crc32fast::hash(key))))
    }

    /// The point at `index`, taken modulo [`Ring::len`] (as nginx walks past the end).
    ///
    /// # Panics
    ///
    /// Panics if the ring is empty.
    pub fn point(&self, index: usize) -> Point<'_> {
        let i = index % self.hashes.len();
        Point { hash: self.hashes[i], server: self.server_at(i) }
    }

    /// All points in ring order.
    pub fn points(&self) -> impl ExactSizeIterator<Item = Point<'_>> + '_ {
        (0..self.hashes.len()).map(|i| Point { hash: self.hashes[i], server: self.server_at(i) })
    }

    /// The distinct server strings on the ring, in order of first appearance in the peer list.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// Bytes of heap memory the ring's points and index take.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.hashes)
            + std::mem::size_of_val(&*self.owners)
            + std::mem::size_of_val(&*self.index)
    }

    #[inline]
    pub(crate) fn server_index_at(&self, index: usize) -> usize {
        self.owners[index % self.owners.len()] as usize
    }

    #[inline]
    fn server_at(&self, index: usize) -> &Server {
        &self.servers[self.owners[index] as usize]
    }
}

/// Chooses about one index bucket per four points and fills it.
fn build_index(hashes: &[u32]) -> (Box<[u32]>, u32) {
    let n = hashes.len();
    if n < 64 {
        return (Box::new([]), 0);
    }
    let bits = (usize::BITS - (n / 4).leading_zeros()).clamp(4, 24);
    let buckets = 1usize << bits;
    let mut index = Vec::with_capacity(buckets + 1);
    let mut i = 0usize;
    for b in 0..buckets {
        let start = (b as u64) << (32 - bits);
        while i < n && u64::from(hashes[i]) < start {
            i += 1;
        }
        index.push(i as u32);
    }
    index.push(n as u32);
    (index.into_boxed_slice(), bits)
}

impl fmt::Debug for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring").field("points", &self.hashes.len()).field("servers", &self.servers).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(spec: &[(&str, u32)]) -> Ring {
        let servers: Vec<(Server, u32)> = spec.iter().map(|&(s, w)| (Server::new(s), w)).collect();
        Ring::new(servers.iter().map(|(s, w)| (s, *w))).unwrap()
    }

    /// The first points of a chain, as recorded from nginx (spec §3.1).
    #[test]
    fn chain_starts_like_nginx() {
        let r = ring(&[("127.0.0.1:9001", 1)]);
        let mut hashes: Vec<u32> = r.points().map(|p| p.hash).collect();
        assert_eq!(hashes.len(), 160);
        // Regenerate the chain order independently: the first three chained values.
        let mut prev = 0u32;
        let mut chain = vec![];
        for _ in 0..3 {
            let mut input = b"127.0.0.1\x009001".to_vec();
            input.extend_from_slice(&prev.to_le_bytes());
            prev = crc32fast::hash(&input);
            chain.push(prev);
        }
        assert_eq!(chain, [0x70533e04, 0x10571e62, 0x1f895401]);
        hashes.retain(|h| chain.contains(h));
        assert_eq!(hashes.len(), 3);
        let p0 = |s: &str| {
            let r = ring(&[(s, 1)]);
            let server = Server::new(s);
            let (h, p) = server.ketama_parts();
            let mut input = h.to_vec();
            input.push(0);
            input.extend_from_slice(p);
            input.extend_from_slice(&0u32.to_le_bytes());
            let first = crc32fast::hash(&input);
            assert!(r.points().any(|pt| pt.hash == first));
            first
        };
        assert_eq!(p0("127.0.0.1"), 0xc3b5e186);
        assert_eq!(p0("127.0.0.1:80"), 0xb205012f);
    }

    /// Spec §3.2 / §11 F: two different servers whose points collide; the one listed first keeps the point.
    #[test]
    fn collision_keeps_the_first_listed_server() {
        for (first, second) in [("127.0.0.1:20195", "127.0.0.1:20412"), ("127.0.0.1:20412", "127.0.0.1:20195")] {
            let r = ring(&[(first, 1), (second, 1)]);
            assert_eq!(r.len(), 319);
            let i = r.locate(0x32a8f0fa);
            assert_eq!(r.point(i).hash, 0x32a8f0fa);
            assert_eq!(r.point(i).server.as_str(), first);
            assert_eq!(r.owner(b"k261").unwrap().as_str(), first);
        }
    }

    #[test]
    fn lookup_is_first_point_at_or_above_and_wraps() {
        let r = ring(&[("a:1", 3), ("b:2", 2), ("c", 1)]);
        let pts: Vec<u32> = r.points().map(|p| p.hash).collect();
        assert!(pts.windows(2).all(|w| w[0] < w[1]));
        for (i, &h) in pts.iter().enumerate() {
            assert_eq!(r.locate(h), i, "exactly on a point");
            if h < u32::MAX {
                assert_eq!(r.locate(h + 1), (i + 1) % pts.len(), "one past a point");
            }
        }
        assert_eq!(r.locate(0), 0, "hash 0 is at or below the first point");
        assert_eq!(r.locate(u32::MAX), if *pts.last().unwrap() == u32::MAX { pts.len() - 1 } else { 0 });
        assert_eq!(r.locate(pts.last().unwrap() + 1), 0);
    }

    #[test]
    fn indexed_lookup_equals_binary_search() {
        let spec: Vec<(String, u32)> =
            (0..300).map(|i| (format!("10.0.{}.{}:80", i / 256, i % 256), 1 + i % 3)).collect();
        let servers: Vec<(Server, u32)> = spec.iter().map(|(s, w)| (Server::new(s.as_str()), *w)).collect();
        let r = Ring::new(servers.iter().map(|(s, w)| (s, *w))).unwrap();
        assert!(r.bits > 0);
        let pts: Vec<u32> = r.points().map(|p| p.hash).collect();
        let mut x = 0x9e37_79b9u32;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let want = pts.partition_point(|&p| p < x) % pts.len();
            assert_eq!(r.locate(x), want);
        }
    }

    #[test]
    fn duplicate_strings_share_points_and_heavier_duplicates_extend_the_chain() {
        assert_eq!(ring(&[("a:80", 1), ("a:80", 1)]).len(), 160);
        assert_eq!(ring(&[("a:80", 1), ("a:80", 5)]).len(), 800);
        assert_eq!(ring(&[("a:80", 5), ("a:80", 1)]).len(), 800);
        assert_eq!(ring(&[("a:80", 1), ("a:80", 1)]).servers().len(), 1);
    }

    #[test]
    fn errors_and_empty_ring() {
        let s = Server::new("a");
        assert_eq!(Ring::new([(&s, 0)]).unwrap_err(), RingError::ZeroWeight(s.clone()));
        assert!(matches!(Ring::new([(&s, u32::MAX)]), Err(RingError::TooLarge { .. })));
        let empty = Ring::new(std::iter::empty()).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.owner(b"k"), None);
        assert_eq!(empty.locate(5), 0);
    }
}
