//! The consistent-hash ring of `hash $key consistent;`.
//!
//! Built exactly like nginx's `ngx_http_upstream_update_chash`: every peer of the primary list contributes
//! `160 × weight` points, chained CRC32 over its server string's `host ‖ 0x00 ‖ port ‖ le32(prev)`, sorted
//! by hash with the C library's `qsort`, and of equal hashes only the point that sort leaves first survives:
//! the first generated one with glibc's stable sort, the one a model of musl's smoothsort computes with
//! musl ([`Libc`], algorithm §3.2). A key lands on the first point whose hash is `≥ crc32(key)`, wrapping to
//! point 0 past the end.

use crate::server::Server;
use crate::version::Libc;
use std::collections::HashMap;
use std::fmt;

mod musl_qsort;
#[cfg(any(test, feature = "reference"))]
pub mod reference;

/// Points each unit of weight adds to the ring (nginx hard-codes 160).
pub const POINTS_PER_WEIGHT: u32 = 160;

/// The largest ring this crate builds, in points before deduplication.
///
/// NGINX-DIFF: nginx has no limit and allocates `160 × total_weight` points whatever the weights say; we
/// refuse rings above 2^26 points (512 MiB of points) with [`RingError::TooLarge`] instead of exhausting memory.
pub const MAX_POINTS: u64 = 1 << 26;

/// Why a ring could not be built.
///
/// # Example
///
/// ```
/// use nginx_ketama::{Ring, RingError, Server};
///
/// let s = Server::new("a:80");
/// assert_eq!(Ring::new([(&s, 0)]).unwrap_err(), RingError::ZeroWeight(s.clone()));
/// assert!(matches!(Ring::new([(&s, 1_000_000)]), Err(RingError::TooLarge { .. })));
/// ```
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
///
/// # Example
///
/// ```
/// use nginx_ketama::{Ring, Server};
///
/// let servers = [Server::new("127.0.0.1:9001")];
/// let ring = Ring::new(servers.iter().map(|s| (s, 1)))?;
/// // Every point of a one-server ring is that server's; they are sorted by hash.
/// assert!(ring.points().all(|p| p.server == &servers[0]));
/// assert!(ring.point(0).hash < ring.point(1).hash);
/// # Ok::<(), nginx_ketama::RingError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point<'a> {
    /// The point's position on the ring (a CRC32 value).
    pub hash: u32,
    /// The configured server string that generated it.
    pub server: &'a Server,
}

/// A consistent-hash ring, as one nginx worker builds it for `hash $key consistent;`.
///
/// Points are stored compactly (hashes and owners in separate arrays, owners as `u16` when there are at most
/// 65,536 distinct servers) and looked up through a small index on the top bits of the hash: at most 8 bytes
/// per point in all, index included. The layout is private; see [`Ring::locate`] for how a lookup works.
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
    /// Point hashes, ascending and unique, followed by [`WINDOW`] copies of `u32::MAX` so that the lookup
    /// window starting at any point index (or at `len`) stays in bounds. The padding is never a point.
    hashes: Box<[u32]>,
    /// `owners[i]` indexes `servers` for point `i`.
    owners: Owners,
    /// Distinct server strings, in order of first appearance.
    servers: Box<[Server]>,
    /// `index[b]` is the first point whose hash has top bits `>= b` (so `index[2^bits] == len`).
    index: Box<[u32]>,
    /// `32 - bits`: a hash's bucket is `hash >> shift`. `bits >= 1`, so the shift never overflows.
    shift: u32,
    /// A fresh CRC32 state, cloned for every key: `crc32fast::hash` would detect the CPU's features on
    /// every call, which costs about a third of hashing a 25-byte key.
    crc: crc32fast::Hasher,
}

/// Lookup window: a lookup searches this many consecutive point hashes without a branch.
///
/// Buckets hold 2–4 points on average (see [`index_bits`]); a key beyond the 8th point of its bucket is
/// rare (Poisson tail: well under 1% of keys) and takes the slow path in [`Ring::locate_past_window`].
const WINDOW: usize = 8;

/// Owner of each point: an index into `Ring::servers`, as narrow as the number of servers allows.
#[derive(Clone)]
enum Owners {
    /// At most 65,536 distinct servers (every realistic upstream).
    Narrow(Box<[u16]>),
    /// More distinct servers than `u16` can index.
    Wide(Box<[u32]>),
}

impl Owners {
    fn new(owners: impl ExactSizeIterator<Item = u32>, servers: usize) -> Owners {
        if servers <= 1 << 16 {
            Owners::Narrow(owners.map(|o| o as u16).collect())
        } else {
            Owners::Wide(owners.collect())
        }
    }

    #[inline]
    fn get(&self, i: usize) -> usize {
        match self {
            Owners::Narrow(o) => usize::from(o[i]),
            Owners::Wide(o) => o[i] as usize,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Owners::Narrow(o) => std::mem::size_of_val(&**o),
            Owners::Wide(o) => std::mem::size_of_val(&**o),
        }
    }
}

impl Ring {
    /// Builds the ring from peers in list order: `(server string, weight)`, as nginx built with glibc does
    /// ([`Libc::Glibc`]; see [`Ring::with_libc`]).
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
        Ring::with_libc(Libc::Glibc, peers)
    }

    /// Builds the ring from peers in list order, as nginx built against `libc` does: the C library's
    /// `qsort` decides which of two points with the same hash survives (algorithm §3.2).
    ///
    /// # Errors
    ///
    /// [`RingError::ZeroWeight`] for a weight of 0, [`RingError::TooLarge`] above [`MAX_POINTS`].
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::{Libc, Ring, Server};
    ///
    /// // Point #45 of 127.0.0.1:20195 and point #109 of 127.0.0.1:20412 share the hash 0x32a8f0fa
    /// // (algorithm §11 F; both outcomes recorded from nginx built with each C library).
    /// let servers = [Server::new("127.0.0.1:20195"), Server::new("127.0.0.1:20412")];
    /// let glibc = Ring::with_libc(Libc::Glibc, servers.iter().map(|s| (s, 1)))?;
    /// let musl = Ring::with_libc(Libc::Musl, servers.iter().map(|s| (s, 1)))?;
    /// let owner = |r: &Ring| r.point(r.locate(0x32a8f0fa)).server.as_str().to_string();
    /// assert_eq!(owner(&glibc), "127.0.0.1:20195"); // stable: the first generated point
    /// assert_eq!(owner(&musl), "127.0.0.1:20412"); // musl's smoothsort leaves the other one first
    /// # Ok::<(), nginx_ketama::RingError>(())
    /// ```
    pub fn with_libc<'a, I>(libc: Libc, peers: I) -> Result<Ring, RingError>
    where
        I: IntoIterator<Item = (&'a Server, u32)>,
    {
        let peers: Vec<(&'a Server, u32)> = peers.into_iter().collect();
        let mut total: u64 = 0;
        for &(server, weight) in &peers {
            if weight == 0 {
                return Err(RingError::ZeroWeight(server.clone()));
            }
            total += u64::from(weight) * u64::from(POINTS_PER_WEIGHT);
            if total > MAX_POINTS {
                return Err(RingError::TooLarge { points: total });
            }
        }

        // The plan. One chain per distinct server string, in order of first appearance (its index is the
        // owner index of its points). One segment per peer that adds points: points `from..to` of its string's
        // chain; a duplicate string regenerates the same chain, so only a heavier duplicate adds any
        // (docs/nginx-algorithm.md §3.1). Segments are numbered in list order, the order in which nginx generates points.
        let mut chain_of: HashMap<&'a Server, usize> = HashMap::new();
        let mut servers: Vec<Server> = Vec::new();
        let mut chains: Vec<Chain> = Vec::new();
        let mut segments: Vec<Segment> = Vec::new();
        // Per peer, its chain and how many of its points it generates (what nginx puts in the array).
        let mut generated: Vec<(usize, u32)> = Vec::with_capacity(peers.len());
        for (server, weight) in peers {
            let c = *chain_of.entry(server).or_insert_with(|| {
                servers.push(server.clone());
                let (host, port) = server.ketama_parts();
                let mut base = crc32fast::Hasher::new();
                base.update(host);
                base.update(&[0]);
                base.update(port);
                chains.push(Chain { base: base.finalize(), len: 0 });
                chains.len() - 1
            });
            let wanted = weight * POINTS_PER_WEIGHT;
            generated.push((c, wanted));
            if wanted > chains[c].len {
                segments.push(Segment { chain: c as u32, from: chains[c].len, to: wanted });
                chains[c].len = wanted;
            }
        }

        // Every point, packed as `hash << 32 | segment`.
        let mut points = generate(&chains, &segments);
        match libc {
            Libc::Glibc => {
                // Ordered by (hash, segment): among equal hashes the earliest generated point comes first,
                // exactly as nginx's stable sort leaves them, and dedup keeps it (algorithm §3.2). Two points
                // of one segment that share a hash share their owner too, so their order does not matter.
                sort_points(&mut points);
                points.dedup_by_key(|p| *p >> 32);
                for p in &mut points {
                    *p = *p & !0xffff_ffff | u64::from(segments[*p as u32 as usize].chain);
                }
            }
            Libc::Musl => points = musl_points(&points, &chains, &generated),
        }
        Ok(Ring::from_sorted(&points, servers))
    }

    /// Lays out points that are sorted by hash, unique, and packed as `hash << 32 | owner`.
    fn from_sorted(points: &[u64], servers: Vec<Server>) -> Ring {
        let n = points.len();
        let mut hashes: Vec<u32> = Vec::with_capacity(n + WINDOW);
        hashes.extend(points.iter().map(|&p| (p >> 32) as u32));
        let bits = index_bits(n);
        let index = build_index(&hashes, bits);
        hashes.extend([u32::MAX; WINDOW]);
        let owners = Owners::new(points.iter().map(|&p| p as u32), servers.len());
        Ring {
            hashes: hashes.into_boxed_slice(),
            owners,
            servers: servers.into_boxed_slice(),
            index,
            shift: 32 - bits,
            crc: crc32fast::Hasher::new(),
        }
    }

    /// Number of points after deduplication.
    #[inline]
    pub fn len(&self) -> usize {
        self.hashes.len() - WINDOW
    }

    /// `true` when the ring has no points (no peers).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The index of the first point whose hash is `≥ hash`, or 0 past the last point (nginx's
    /// `ngx_http_upstream_find_chash_point` followed by the modulo that wraps it). 0 for an empty ring.
    ///
    /// How: the top bits of `hash` pick a bucket, and `lo = index[bucket]` is the first point at or above
    /// the bucket's start, so the answer is `lo` or after it. Only points of this bucket can be `< hash`
    /// (later buckets start above it, the padding is `u32::MAX`), so if the last of the `WINDOW` (8) hashes
    /// from `lo` on is `>= hash`, the answer is in the window, found by a branch-free binary search;
    /// otherwise the bucket is longer than the window and the rest of it is searched.
    #[inline]
    pub fn locate(&self, hash: u32) -> usize {
        let bucket = (hash >> self.shift) as usize;
        let lo = self.index[bucket] as usize;
        let window: &[u32; WINDOW] = self.hashes[lo..lo + WINDOW].try_into().expect("padded");
        let i = if window[WINDOW - 1] < hash {
            self.locate_past_window(bucket, lo, hash)
        } else {
            // The answer is in the window: a branch-free binary search over its 8 sorted hashes.
            let mut at = 0;
            at += usize::from(window[at + 3] < hash) * 4;
            at += usize::from(window[at + 1] < hash) * 2;
            at += usize::from(window[at] < hash);
            lo + at
        };
        if i == self.len() { 0 } else { i }
    }

    /// The rare case of [`Ring::locate`]: the first [`WINDOW`] points of the bucket are all below `hash`.
    #[cold]
    #[inline(never)]
    fn locate_past_window(&self, bucket: usize, lo: usize, hash: u32) -> usize {
        // All window points are `< hash`, hence in this bucket, so the bucket ends at or after `lo + WINDOW`.
        let rest = lo + WINDOW;
        let hi = self.index[bucket + 1] as usize;
        rest + self.hashes[rest..hi].partition_point(|&p| p < hash)
    }

    /// The server that owns `key` on an intact ring: the owner of point `locate(crc32(key))`.
    /// `None` for an empty ring. This ignores `down` and failed peers; see [`crate::Upstream::route`].
    #[inline]
    pub fn owner(&self, key: &[u8]) -> Option<&Server> {
        if self.is_empty() {
            return None;
        }
        Some(self.server_at(self.locate_key(key)))
    }

    /// `locate(crc32(key))`, hashing with the ring's prepared CRC32 state (see the `crc` field).
    #[inline]
    pub(crate) fn locate_key(&self, key: &[u8]) -> usize {
        let mut crc = self.crc.clone();
        crc.update(key);
        self.locate(crc.finalize())
    }

    /// The point at `index`, taken modulo [`Ring::len`] (as nginx walks past the end).
    ///
    /// # Panics
    ///
    /// Panics if the ring is empty.
    pub fn point(&self, index: usize) -> Point<'_> {
        let i = index % self.len();
        Point { hash: self.hashes[i], server: self.server_at(i) }
    }

    /// All points in ring order.
    pub fn points(&self) -> impl ExactSizeIterator<Item = Point<'_>> + '_ {
        (0..self.len()).map(|i| Point { hash: self.hashes[i], server: self.server_at(i) })
    }

    /// The distinct server strings on the ring, in order of first appearance in the peer list.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// Bytes of heap memory the ring's points and index take (hashes with their padding, owners, index).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.hashes) + self.owners.bytes() + std::mem::size_of_val(&*self.index)
    }

    /// The point hashes in ring order (ascending, unique), without the lookup padding.
    #[inline]
    pub(crate) fn hashes(&self) -> &[u32] {
        &self.hashes[..self.len()]
    }

    #[inline]
    pub(crate) fn server_index_at(&self, index: usize) -> usize {
        self.owners.get(index % self.len())
    }

    #[inline]
    fn server_at(&self, index: usize) -> &Server {
        &self.servers[self.owners.get(index)]
    }
}

/// One server string's point chain while the ring is built.
struct Chain {
    /// `crc32(host ‖ 0x00 ‖ port)`.
    base: u32,
    /// How many of its points the peers so far ask for.
    len: u32,
}

/// The points one peer adds: `from..to` of a chain.
struct Segment {
    /// Index of the chain (and owner).
    chain: u32,
    /// First point of the chain this peer adds.
    from: u32,
    /// One past the last.
    to: u32,
}

/// Chains generated side by side (see [`generate`]).
const LANES: usize = 4;

/// Every segment's points, packed as `hash << 32 | segment number`, chain after chain.
///
/// One step of a chain needs the previous one, and a step is a chain of dependent table lookups, so
/// [`LANES`] independent chains are computed side by side to keep the CPU busy. Each chain is tagged with
/// its first segment (which starts at point 0), then the points of any later segment are retagged.
fn generate(chains: &[Chain], segments: &[Segment]) -> Vec<u64> {
    let total: usize = chains.iter().map(|c| c.len as usize).sum();
    let mut points = vec![0u64; total];
    let mut first_segment = vec![0u32; chains.len()];
    for (s, seg) in segments.iter().enumerate().rev() {
        first_segment[seg.chain as usize] = s as u32;
    }
    let mut jobs: Vec<(u32, u64, &mut [u64])> = Vec::with_capacity(chains.len());
    let mut rest = &mut points[..];
    for (chain, &tag) in chains.iter().zip(&first_segment) {
        let (out, tail) = rest.split_at_mut(chain.len as usize);
        jobs.push((chain.base, u64::from(tag), out));
        rest = tail;
    }
    for group in jobs.chunks_mut(LANES) {
        match group {
            [a, b, c, d] => fill_lanes([a, b, c, d]),
            [a, b, c] => fill_lanes([a, b, c]),
            [a, b] => fill_lanes([a, b]),
            [a] => fill_lanes([a]),
            _ => unreachable!("chunks of 1..=LANES"),
        }
    }
    drop(jobs);
    // Retag the points of segments that extend a chain (a heavier duplicate string).
    let mut start = Vec::with_capacity(chains.len());
    let mut sum = 0;
    for chain in chains {
        start.push(sum);
        sum += chain.len as usize;
    }
    for (s, seg) in segments.iter().enumerate().filter(|(_, seg)| seg.from > 0) {
        let at = start[seg.chain as usize];
        for p in &mut points[at + seg.from as usize..at + seg.to as usize] {
            *p = *p & !0xffff_ffff | s as u64;
        }
    }
    points
}

/// The ring's points as nginx built against musl leaves them, packed as `hash << 32 | chain`, from
/// `chained` (every chain's points, chain after chain, as [`generate`] lays them out).
///
/// musl's `qsort` is not stable, so where equal hashes end up depends on every element of the array it
/// sorts: the array is rebuilt exactly as nginx fills it (each peer in list order generates its string's
/// first `160 × weight` points, duplicates of an earlier string included), sorted by the model of musl's
/// smoothsort comparing hashes only, and the first of each run of equal hashes is kept (algorithm §3.2).
fn musl_points(chained: &[u64], chains: &[Chain], generated: &[(usize, u32)]) -> Vec<u64> {
    let mut start = Vec::with_capacity(chains.len());
    let mut sum = 0;
    for chain in chains {
        start.push(sum);
        sum += chain.len as usize;
    }
    let total: usize = generated.iter().map(|&(_, n)| n as usize).sum();
    let mut points = Vec::with_capacity(total);
    for &(c, n) in generated {
        let tag = c as u64;
        points.extend(chained[start[c]..start[c] + n as usize].iter().map(|&p| p & !0xffff_ffff | tag));
    }
    musl_qsort::sort_by(&mut points, |a, b| (a >> 32).cmp(&(b >> 32)));
    points.dedup_by_key(|p| *p >> 32);
    points
}

/// `L` chains side by side: `(crc32 of the chain's base, tag, output)`, each output filled with its chain.
fn fill_lanes<const L: usize>(mut jobs: [&mut (u32, u64, &mut [u64]); L]) {
    let common = jobs.iter().map(|job| job.2.len()).min().unwrap_or(0);
    let mut prev = [0u32; L];
    for i in 0..common {
        for (job, prev) in jobs.iter_mut().zip(&mut prev) {
            *prev = chain_next(job.0, *prev);
            job.2[i] = u64::from(*prev) << 32 | job.1;
        }
    }
    // Chains of different lengths: the rest one by one.
    for (job, mut prev) in jobs.into_iter().zip(prev) {
        for p in &mut job.2[common..] {
            prev = chain_next(job.0, prev);
            *p = u64::from(prev) << 32 | job.1;
        }
    }
}

/// `crc32(base ‖ le32(prev))` from `crc32(base)`: one step of a point chain (algorithm §3.1).
///
/// CRC-32 can be resumed from a finished value (undo the final inversion, feed more bytes, invert again);
/// the four bytes of `prev` are fed at once with slicing-by-4 tables. This is what nginx computes, without
/// rehashing the host and port for every point; tests check it against `crc32fast` on the whole input.
#[inline(always)]
fn chain_next(base: u32, prev: u32) -> u32 {
    let x = !base ^ prev;
    let t = &CRC_TABLES;
    !(t[3][(x & 0xff) as usize]
        ^ t[2][((x >> 8) & 0xff) as usize]
        ^ t[1][((x >> 16) & 0xff) as usize]
        ^ t[0][(x >> 24) as usize])
}

/// Slicing-by-4 tables of the reflected CRC-32 (IEEE 802.3) polynomial: `CRC_TABLES[k][b]` is the CRC
/// register after byte `b` followed by `k` zero bytes.
static CRC_TABLES: [[u32; 256]; 4] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 4] {
    let mut t = [[0u32; 256]; 4];
    let mut b = 0;
    while b < 256 {
        let mut c = b as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 == 1 { (c >> 1) ^ 0xedb8_8320 } else { c >> 1 };
            bit += 1;
        }
        t[0][b] = c;
        b += 1;
    }
    let mut k = 1;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            let prev = t[k - 1][b];
            t[k][b] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

/// Sorts packed points (`hash << 32 | tag`) as integers: by hash, then tag.
///
/// A least-significant-digit radix sort on the top bits of the hash, about two bits more than `log2(n)`,
/// in passes of at most 11 bits, each a counting sort. That leaves few points sharing a prefix, and an
/// insertion sort finishes the order (linear and well predicted for CRC-distributed hashes). Should it need
/// many moves (crafted input), the standard library's sort finishes instead.
fn sort_points(points: &mut Vec<u64>) {
    let n = points.len();
    let prefix = (usize::BITS - n.leading_zeros() + 2).min(32);
    let passes = prefix.div_ceil(11);
    if n > 1 {
        let width = prefix.div_ceil(passes);
        let mask = (1u64 << width) - 1;
        // Pass `d` sorts by the `width` bits that start `(d + 1) * width` bits below the top of the hash.
        let shift = |d: u32| 64 - (d + 1) * width;
        let mut counts = vec![0u32; (passes as usize) << width];
        for &p in points.iter() {
            for d in 0..passes {
                counts[((d as usize) << width) + ((p >> shift(d)) & mask) as usize] += 1;
            }
        }
        let mut scratch = vec![0u64; n];
        // Least significant digit first: the last pass (the top bits) decides the final order, and every
        // pass is stable, so points that agree on this pass's bits stay in the order of the passes before.
        for d in (0..passes).rev() {
            let next = &mut counts[(d as usize) << width..][..1 << width];
            let mut sum = 0;
            for slot in next.iter_mut() {
                (*slot, sum) = (sum, sum + *slot);
            }
            for &p in points.iter() {
                let slot = &mut next[((p >> shift(d)) & mask) as usize];
                scratch[*slot as usize] = p;
                *slot += 1;
            }
            std::mem::swap(points, &mut scratch);
        }
    }
    let mut budget = 4 * n;
    for i in 1..n {
        let p = points[i];
        let mut j = i;
        while j > 0 && points[j - 1] > p {
            points[j] = points[j - 1];
            j -= 1;
        }
        points[j] = p;
        budget = budget.saturating_sub(i - j);
        if budget == 0 {
            points.sort_unstable();
            return;
        }
    }
}

/// How many top bits of the hash the lookup index covers for `n` points: as many as possible while the
/// index and the window padding take at most 2 bytes per point (4 + 2 + 2 = 8 bytes per point in all with
/// narrow owners), so buckets hold 2 to 4 points on average. At least 1, so the shift stays below 32.
fn index_bits(n: usize) -> u32 {
    let mut bits = 1;
    while bits < 25 && 4 * ((1usize << (bits + 1)) + 1) + 4 * WINDOW <= 2 * n {
        bits += 1;
    }
    bits
}

/// `index[b]` = the first point whose top `bits` bits are `>= b`, for `b` in `0..=2^bits`: the number of
/// points in the buckets before `b` (counted, then summed up).
fn build_index(hashes: &[u32], bits: u32) -> Box<[u32]> {
    let shift = 32 - bits;
    let mut index = vec![0u32; (1 << bits) + 1];
    for &h in hashes {
        index[(h >> shift) as usize + 1] += 1;
    }
    for b in 1..index.len() {
        index[b] += index[b - 1];
    }
    index.into_boxed_slice()
}

impl fmt::Debug for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring").field("points", &self.len()).field("servers", &self.servers).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ring(spec: &[(&str, u32)]) -> Ring {
        let servers: Vec<(Server, u32)> = spec.iter().map(|&(s, w)| (Server::new(s), w)).collect();
        Ring::new(servers.iter().map(|(s, w)| (s, *w))).unwrap()
    }

    /// The first points of a chain, as recorded from nginx (algorithm §3.1).
    #[test]
    fn chain_starts_like_nginx() {
        let r = ring(&[("127.0.0.1:9001", 1)]);
        let mut hashes: Vec<u32> = r.points().map(|p| p.hash).collect();
        assert_eq!(hashes.len(), 160);
        // The reference chain's first three values are in the ring.
        let chain = reference::chain(&Server::new("127.0.0.1:9001"), 3);
        assert_eq!(chain, [0x70533e04, 0x10571e62, 0x1f895401]);
        hashes.retain(|h| chain.contains(h));
        assert_eq!(hashes.len(), 3);
        let p0 = |s: &str| {
            let first = reference::chain(&Server::new(s), 1)[0];
            assert!(ring(&[(s, 1)]).points().any(|pt| pt.hash == first));
            first
        };
        assert_eq!(p0("127.0.0.1"), 0xc3b5e186);
        assert_eq!(p0("127.0.0.1:80"), 0xb205012f);
    }

    /// Algorithm §3.2 / §11 F: two different servers whose points collide; the one listed first keeps the point.
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

    /// The same collision under musl: its smoothsort leaves the *later* generated point first in both line
    /// orders, so the second listed server keeps it (observed on the musl build of nginx 1.26.3, key `k261`;
    /// also in the golden vectors' musl groups).
    #[test]
    fn musl_collision_keeps_the_point_its_sort_leaves_first() {
        for (first, second) in [("127.0.0.1:20195", "127.0.0.1:20412"), ("127.0.0.1:20412", "127.0.0.1:20195")] {
            let servers = [Server::new(first), Server::new(second)];
            let r = Ring::with_libc(Libc::Musl, servers.iter().map(|s| (s, 1))).unwrap();
            assert_eq!(r.len(), 319);
            assert_eq!(r.point(r.locate(0x32a8f0fa)).server.as_str(), second);
            assert_eq!(r.owner(b"k261").unwrap().as_str(), second);
        }
    }

    /// A collision between point #67 of `127.0.0.1:20017` and point #214 of `127.0.0.1:20253`: which one
    /// survives depends on generation order (list order, chain by chain), not on which server appeared first.
    /// With `a:1, b:1, a:2` nginx generates a's points 0..160, then b's, then a's 160..320, so b's point
    /// comes first and survives, although a is listed first.
    #[test]
    fn collision_with_an_extended_chain_follows_generation_order() {
        let (a, b) = ("127.0.0.1:20253", "127.0.0.1:20017");
        for (spec, len, survivor) in [
            (&[(a, 1), (b, 1), (a, 2)][..], 479, b),
            (&[(a, 2), (b, 1)][..], 479, a),
            (&[(b, 1), (a, 2)][..], 479, b),
            (&[(a, 1), (b, 1)][..], 320, b),
        ] {
            let r = ring(spec);
            assert_eq!(r.len(), len, "{spec:?}");
            let i = r.locate(0xc7e627aa);
            if len == 479 {
                assert_eq!(r.point(i).hash, 0xc7e627aa);
            }
            assert_eq!(r.point(i).server.as_str(), survivor, "{spec:?}");
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
        assert!(r.index.len() > 3, "the index is in use");
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

    // -----------------------------------------------------------------------------------------------------
    // The fast path against the reference ring (`reference`), nginx's algorithm written as plainly as possible.

    /// The reference ring for `peers` (algorithm §3.1–3.2), with owners as server strings.
    fn reference_points(libc: Libc, peers: &[(Server, u32)]) -> Vec<(u32, Server)> {
        reference::points_with(libc, peers.iter().map(|(s, w)| (s, *w)))
            .into_iter()
            .map(|(h, i)| (h, peers[i].0.clone()))
            .collect()
    }

    /// Checks a ring against the reference on every point, one below and one past every point, 0,
    /// `u32::MAX`, and the given hashes and keys.
    fn check_against_reference(ring: &Ring, want: &[(u32, Server)], hashes: &[u32], keys: &[Vec<u8>]) {
        assert_eq!(ring.len(), want.len());
        for (i, p) in ring.points().enumerate() {
            assert_eq!((p.hash, p.server), (want[i].0, &want[i].1), "point {i}");
        }
        let mut probes: Vec<u32> = vec![0, 1, u32::MAX - 1, u32::MAX];
        probes.extend_from_slice(hashes);
        for &(h, _) in want {
            probes.extend([h, h.wrapping_add(1), h.wrapping_sub(1)]);
        }
        for h in probes {
            let i = reference::locate(want, h);
            assert_eq!(ring.locate(h), i, "locate({h:#010x})");
            assert_eq!(&ring.servers()[ring.server_index_at(i)], &want[i].1);
            assert_eq!(ring.server_index_at(i + ring.len()), ring.server_index_at(i), "wraps");
        }
        for key in keys {
            let i = reference::locate(want, crc32fast::hash(key));
            assert_eq!(ring.owner(key), Some(&want[i].1), "owner({key:?})");
        }
    }

    /// Server strings of every shape nginx hashes, plus the two strings whose chains really collide (algorithm
    /// §3.2), so that random rings regularly contain a collision that only a stable sort resolves right.
    fn server_string() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => (any::<[u8; 4]>(), 1..65536u32).prop_map(|(ip, port)| format!("{}.{}.{}.{}:{port}", ip[0], ip[1], ip[2], ip[3])),
            1 => "[a-z0-9.-]{1,12}(:[0-9]{0,5})?",
            1 => "(unix|UNIX):/[a-z/]{1,10}",
            1 => "\\[[0-9a-f:]{2,10}\\](:[0-9]{1,5})?",
            1 => "[ -~]{0,16}",
            1 => Just("127.0.0.1:20195".to_string()),
            1 => Just("127.0.0.1:20412".to_string()),
            1 => Just("127.0.0.1:20017".to_string()),
            1 => Just("127.0.0.1:20253".to_string()),
        ]
    }

    /// Peers drawn from a small pool of strings, so that duplicate strings (with equal or different
    /// weights) are common.
    fn peers() -> impl Strategy<Value = Vec<(Server, u32)>> {
        prop::collection::vec(server_string(), 1..6).prop_flat_map(|pool| {
            let n = pool.len();
            prop::collection::vec((0..n, 1..=20u32), 1..9).prop_map(move |picks| {
                picks.into_iter().map(|(i, w)| (Server::new(pool[i].as_str()), w)).collect::<Vec<_>>()
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn fast_path_equals_reference_path(
            peers in peers(),
            hashes in prop::collection::vec(any::<u32>(), 0..200),
            keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..50),
        ) {
            for libc in Libc::ALL {
                let ring = Ring::with_libc(libc, peers.iter().map(|(s, w)| (s, *w))).unwrap();
                check_against_reference(&ring, &reference_points(libc, &peers), &hashes, &keys);
            }
        }

        #[test]
        fn chain_step_is_crc32_of_the_whole_input(base in prop::collection::vec(any::<u8>(), 0..40), prev in any::<u32>()) {
            let mut input = base.clone();
            input.extend_from_slice(&prev.to_le_bytes());
            prop_assert_eq!(chain_next(crc32fast::hash(&base), prev), crc32fast::hash(&input));
        }

        /// Many equal hashes and crowded prefixes (the fallback): the sort must equal the standard library's,
        /// and with tags in generation order, that is a stable sort by hash.
        #[test]
        fn sort_is_exact(hashes in prop::collection::vec(prop_oneof![any::<u32>(), 0..4u32, Just(u32::MAX), (0..300u32).prop_map(|x| 0x8000_0000 + x)], 0..3000)) {
            let mut points: Vec<u64> = hashes.iter().enumerate().map(|(i, &h)| u64::from(h) << 32 | i as u64).collect();
            let mut want = points.clone();
            want.sort_by_key(|&p| p >> 32);
            sort_points(&mut points);
            prop_assert_eq!(points, want);
        }

        /// Buckets far longer than the lookup window (the slow path of `locate`), on synthetic points (never
        /// an empty ring: that has no owner to check, and `tiny_rings` covers its `locate`).
        #[test]
        fn crowded_buckets_locate_exactly(
            spread in prop::collection::vec(any::<u32>(), 1..300),
            cluster in prop::collection::vec(0..1000u32, 0..300),
            base in any::<u32>(),
            hashes in prop::collection::vec(any::<u32>(), 0..100),
        ) {
            let mut all: Vec<u32> = spread;
            all.extend(cluster.iter().map(|&x| base.saturating_add(x)));
            all.sort_unstable();
            all.dedup();
            let servers: Vec<Server> = (0..7).map(|i| Server::new(format!("s{i}"))).collect();
            let packed: Vec<u64> = all.iter().map(|&h| u64::from(h) << 32 | u64::from(h % 7)).collect();
            let ring = Ring::from_sorted(&packed, servers.clone());
            let want: Vec<(u32, Server)> = all.iter().map(|&h| (h, servers[(h % 7) as usize].clone())).collect();
            check_against_reference(&ring, &want, &hashes, &[]);
        }
    }

    /// Bench shapes (spec'd in BENCHMARKS.md) stay within 8 bytes per point, index included.
    #[test]
    fn at_most_eight_bytes_per_point() {
        for (n, w) in [(3, 1), (100, 1), (9, 100), (1000, 1), (253, 10), (1, 1), (2, 3), (7, 7)] {
            let servers: Vec<Server> =
                (0..n).map(|i| Server::new(format!("10.0.{}.{}:80", i / 256, i % 256))).collect();
            let ring = Ring::new(servers.iter().map(|s| (s, w))).unwrap();
            assert!(
                ring.memory_bytes() <= 8 * ring.len(),
                "{n}x{w}: {} bytes for {} points",
                ring.memory_bytes(),
                ring.len()
            );
        }
    }

    /// More than 65,536 distinct servers: owners switch to `u32`, lookups unchanged.
    #[test]
    fn wide_owners() {
        let servers: Vec<Server> = (0..70_000).map(|i| Server::new(format!("s{i}"))).collect();
        let packed: Vec<u64> = (0..70_000u64).map(|i| (i * 61_356) << 32 | i).collect();
        let ring = Ring::from_sorted(&packed, servers.clone());
        assert!(matches!(ring.owners, Owners::Wide(_)));
        let want: Vec<(u32, Server)> =
            (0..70_000usize).map(|i| ((i as u64 * 61_356) as u32, servers[i].clone())).collect();
        check_against_reference(&ring, &want, &[], &[]);
    }

    #[test]
    fn tiny_rings() {
        for hashes in [vec![], vec![0], vec![u32::MAX], vec![0, u32::MAX], vec![5, 6, 7]] {
            let packed: Vec<u64> = hashes.iter().map(|&h| u64::from(h) << 32).collect();
            let ring = Ring::from_sorted(&packed, vec![Server::new("a")]);
            let want: Vec<(u32, Server)> = hashes.iter().map(|&h| (h, Server::new("a"))).collect();
            assert_eq!(ring.len(), want.len());
            for h in [0, 1, 4, 5, 6, 7, 8, u32::MAX - 1, u32::MAX] {
                assert_eq!(ring.locate(h), if want.is_empty() { 0 } else { reference::locate(&want, h) });
            }
        }
    }
}
