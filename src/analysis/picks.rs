//! [`PickMap`]: which server answers each of the 2³² CRC32 values of a non-empty key.
//!
//! **Consistent hash.** Point `i` closes the arc `(hash[i−1], hash[i]]` (point 0 the arc that wraps past
//! the last point): every key whose CRC32 falls there lands on point `i` (algorithm §3.3). From there nginx
//! walks on point by point while no peer of the point's server string is usable, and after more than
//! [`MAX_HASH_MISSES`] empty points hands the request to round-robin (algorithm §3.4). So the server that
//! answers is a function of the arc: the first usable point among the arc's point and the 20 after it, or
//! round-robin. One backward pass over the ring computes it for every arc.
//!
//! **Plain hash.** The first step adds `(crc >> 16) & 0x7fff` to the sum, so the first pick depends on
//! 15 bits: each of the 32,768 values covers 2¹⁷ CRC32 values (algorithm §4). When a slot's peer cannot be
//! used nginx rehashes `decimal(n) ‖ key`; CRC32 is affine, so `crc32(decimal(n) ‖ key) = crc32(key) ⊕
//! K(n, len(key))` with `K` depending only on `n` and the key's length: for keys of one length the whole
//! rehash sequence is again a function of those 15 bits ([`rehash_offsets`]). The map is then exact for
//! that key length ([`Basis::PlainRehash`]).
//!
//! **Failing servers** are walked past the way a worker walks past them once it has counted their failures
//! (`max_fails ≥ 1`: skipped like `down`, each costs a miss), and the way a fresh worker does for
//! `max_fails=0` (tried first, then passed). For the consistent hash both give the same server and the
//! same miss count (a retry re-examines the point it failed on); for the plain hash a `max_fails=0` peer
//! costs an attempt instead of a miss. The answer is the server that finally serves the key; which of its
//! addresses does depends on the worker's round-robin state, so servers are counted by server string.

use crate::failure::{ClientRequest, Decision, Freed, Reply, RetryPolicy, decide};
use crate::peer::{List, Peer};
use crate::plain::step_of;
use crate::ring::Ring;
use crate::server::Server;
use crate::upstream::{Balancer, MAX_HASH_MISSES, Method, Upstream};
use std::num::NonZeroUsize;

/// The number of CRC32 values, 2³²: every share in this module is a count out of it.
pub const HASH_SPACE: u64 = 1 << 32;

/// The number of values of a plain-hash step (15 bits).
pub const PLAIN_VALUES: usize = 1 << 15;

/// CRC32 values per plain-hash step value: 2¹⁷ (bit 31 and bits 0–15 do not enter the step).
pub const CRC_PER_PLAIN_VALUE: u64 = HASH_SPACE / PLAIN_VALUES as u64;

/// Who answers a key.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::{Pick, PickMap};
/// use nginx_ketama::{Method, Peer, Upstream};
///
/// let single = Upstream::builder(Method::Consistent).peer(Peer::new("a:80")).build()?;
/// // One peer: nginx never hashes, its round-robin code answers every key.
/// assert_eq!(PickMap::new(&single).pick(12345), Pick::RoundRobin);
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pick {
    /// The server at this index of the map's [`servers`](PickMap::servers).
    Server(usize),
    /// nginx's round-robin code answers: the hash walk found no usable peer within its budget (or the
    /// upstream is never hashed). Which peer it picks depends on the worker's state.
    RoundRobin,
}

/// How exact a [`PickMap`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// Consistent hash: exact over all 2³² CRC32 values.
    Ring,
    /// Plain hash, every slot usable: exact over the 32,768 values of the first step.
    PlainFirstStep,
    /// Plain hash with unusable slots: exact over the 32,768 values of the first step for keys of
    /// `key_len` bytes (the rehash steps depend on the key's CRC32 and its length).
    PlainRehash {
        /// The key length the rehash steps are computed for.
        key_len: NonZeroUsize,
    },
}

/// The state of one server string's peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerHealth {
    /// Every peer is usable.
    Up,
    /// Some peers are `down` or failing, at least one is usable.
    Partial,
    /// Every peer is `down`.
    Down,
    /// No peer is usable and at least one of them is failing (the others `down`).
    Failing,
}

/// A range of CRC32 values that all go to one server: `len` values from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The first CRC32 value.
    pub start: u32,
    /// How many values (1 to 2³²).
    pub len: u64,
    /// Who answers them.
    pub pick: Pick,
}

/// The range of CRC32 values that land on one ring point: `(previous point, point]`, wrapping past
/// `u32::MAX` for point 0.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::Arc;
/// use nginx_ketama::{Ring, Server};
///
/// let servers: Vec<Server> = (9001..=9005).map(|p| Server::new(format!("127.0.0.1:{p}"))).collect();
/// let ring = Ring::new(servers.iter().map(|s| (s, 1)))?;
/// // docs/nginx-algorithm.md §11: point 0 is 0x006fff97 and the last point 0xffeea1b4.
/// let arc = Arc::of_point(&ring, 0);
/// assert_eq!((arc.start, arc.end), (0xffeea1b5, 0x006fff97));
/// assert_eq!(arc.len, (1 << 32) - 0xffeea1b5 + 0x006fff97 + 1);
/// assert!(arc.contains(0) && arc.contains(0xffffffff) && !arc.contains(0x00700000));
/// # Ok::<(), nginx_ketama::RingError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arc {
    /// The first CRC32 value of the arc (one past the previous point).
    pub start: u32,
    /// The last one: the point's own hash.
    pub end: u32,
    /// How many values, 1 to 2³² (a one-point ring's arc is the whole space).
    pub len: u64,
}

impl Arc {
    /// The arc closed by point `index` (taken modulo the ring's length).
    ///
    /// # Panics
    ///
    /// Panics if the ring is empty.
    pub fn of_point(ring: &Ring, index: usize) -> Arc {
        let n = ring.len();
        let i = index % n;
        let end = ring.point(i).hash;
        let prev = ring.point(i + n - 1).hash;
        let start = prev.wrapping_add(1);
        let len = if n == 1 { HASH_SPACE } else { u64::from(end.wrapping_sub(start)) + 1 };
        Arc { start, end, len }
    }

    /// Whether `crc` lies on the arc.
    pub fn contains(&self, crc: u32) -> bool {
        u64::from(crc.wrapping_sub(self.start)) < self.len
    }
}

/// Which server answers each CRC32 value of a non-empty key, for one upstream under given failures.
///
/// Stored as the ring's arcs (or the plain hash's 65,536 blocks of 2¹⁶ values), adjacent arcs with the same
/// answer merged: linear in the number of points to build, to sum and to merge with another map.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::{Pick, PickMap};
/// use nginx_ketama::{Method, Peer, Route, Upstream};
///
/// let up = Upstream::builder(Method::Consistent)
///     .peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
///     .build()?;
/// let map = PickMap::new(&up);
/// // The map answers like the stateless route, for every key.
/// let Route::Server(s) = up.route(b"k0") else { unreachable!() };
/// assert_eq!(map.pick_key(b"k0"), Pick::Server(map.servers().iter().position(|x| x == s).unwrap()));
///
/// // With 127.0.0.1:9005 refusing, its keys go to the servers after its points.
/// let failing = PickMap::with_failing(&up, |p| p.name() == "127.0.0.1:9005", PickMap::DEFAULT_KEY_LEN);
/// assert_ne!(failing.pick_key(b"k0"), map.pick_key(b"k0"));
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PickMap {
    method: Method,
    basis: Basis,
    servers: Vec<Server>,
    health: Vec<ServerHealth>,
    points: Vec<u64>,
    /// Segment starts, ascending, `starts[0] == 0`.
    starts: Vec<u32>,
    /// Segment answers: a server index, or [`ROUND_ROBIN`].
    picks: Vec<u32>,
    /// For the plain hash: what walking a real key needs.
    plain: Option<PlainWalk>,
    answerable: bool,
}

/// `picks` entry for [`Pick::RoundRobin`].
const ROUND_ROBIN: u32 = u32::MAX;

/// How the analysis treats one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerState {
    /// Answers.
    Usable,
    /// `down`, or failing with `max_fails ≥ 1` (already counted failed): never a candidate.
    Skipped,
    /// Failing with `max_fails=0`: tried once per request, then passed as tried.
    TriedFirst,
}

/// The plain hash's slots and peer states, to walk any key.
#[derive(Debug, Clone)]
struct PlainWalk {
    /// `ends[i]`: end (exclusive) of peer `i`'s slots.
    ends: Vec<u64>,
    states: Vec<PeerState>,
    /// Server index of each primary peer.
    server_of: Vec<u32>,
    /// Straight to round-robin (single peer, or fewer than two from 1.27.3).
    bypass: bool,
}

impl PlainWalk {
    fn owner(&self, sum: u32) -> usize {
        let w = u64::from(sum) % self.ends.last().expect("an upstream has primary peers");
        self.ends.partition_point(|&end| end <= w)
    }

    /// The rehash walk of one request, `step(n)` giving step `n`'s 15 bits (algorithm §4).
    fn walk(&self, mut step: impl FnMut(u64) -> u32) -> Pick {
        if self.bypass {
            return Pick::RoundRobin;
        }
        let mut sum = 0u32;
        let mut misses = 0;
        let mut tried: Vec<usize> = Vec::new();
        for n in 0.. {
            sum = sum.wrapping_add(step(n));
            let p = self.owner(sum);
            match self.states[p] {
                PeerState::Usable => return Pick::Server(self.server_of[p] as usize),
                PeerState::TriedFirst if !tried.contains(&p) => tried.push(p),
                _ => {
                    misses += 1;
                    if misses > MAX_HASH_MISSES {
                        return Pick::RoundRobin;
                    }
                }
            }
        }
        unreachable!("every step either answers, tries a new peer or counts a miss")
    }
}

/// What nginx does after a request's first attempt at a peer of `upstream` that ends as `reply`, under
/// `policy`, for `client`'s request: the budget is the whole of what the peers and `*_next_upstream_tries`
/// allow ([`decide`] with it).
pub fn first_attempt(upstream: &Upstream, reply: Reply, policy: &RetryPolicy, client: &ClientRequest) -> Decision {
    decide(reply, policy, client, policy.budget(upstream.peer_tries()), 0)
}

impl PickMap {
    /// The key length the plain hash's rehash steps are computed for unless told otherwise.
    pub const DEFAULT_KEY_LEN: NonZeroUsize = NonZeroUsize::new(16).expect("16 is not 0");

    /// The map of an upstream whose peers all answer (`down` ones excepted).
    pub fn new(upstream: &Upstream) -> PickMap {
        PickMap::with_failing(upstream, |_| false, PickMap::DEFAULT_KEY_LEN)
    }

    /// The map in the steady state of peers that answer as `reply` says, under `policy`, to `client`'s
    /// requests: a peer whose answer to a request's first attempt frees it as FAILED (an error or a timeout;
    /// a listed status with another try to come: algorithm §5.1) is passed over once `max_fails` such
    /// answers fall within `fail_timeout`, as [`PickMap::with_failing`] has refused peers; a peer whose
    /// answer is passed on to the client (a status not listed, a last try, a sent POST) or retried as NEXT
    /// (a listed 403 or 404) keeps its keys.
    ///
    /// # Example
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use nginx_ketama::analysis::{PickMap, ServerHealth, Share};
    /// use nginx_ketama::failure::{ClientRequest, Condition, NextUpstream, Reply, RetryPolicy};
    /// use nginx_ketama::{Method, Peer, Upstream};
    ///
    /// let up = Upstream::builder(Method::Consistent).peers(["10.0.0.1:80", "10.0.0.2:80"].map(Peer::new)).build()?;
    /// let reply = |p: &Peer| if p.name() == "10.0.0.1:80" { Reply::Status(502) } else { Reply::OK };
    /// let one = NonZeroUsize::MIN;
    /// // nginx's default policy passes a 502 on: 10.0.0.1 keeps its keys.
    /// let map = PickMap::with_replies(&up, reply, &RetryPolicy::default(), &ClientRequest::default(), one);
    /// assert_eq!(Share::of(&map).servers[0].health, ServerHealth::Up);
    /// // Listed, it is a failure: 10.0.0.1 is passed over.
    /// let listed = RetryPolicy { next_upstream: NextUpstream::default().with(Condition::Http502), ..RetryPolicy::default() };
    /// let map = PickMap::with_replies(&up, reply, &listed, &ClientRequest::default(), one);
    /// assert_eq!(Share::of(&map).servers[0].health, ServerHealth::Failing);
    /// # Ok::<(), nginx_ketama::UpstreamError>(())
    /// ```
    pub fn with_replies(
        upstream: &Upstream,
        reply: impl Fn(&Peer) -> Reply,
        policy: &RetryPolicy,
        client: &ClientRequest,
        key_len: NonZeroUsize,
    ) -> PickMap {
        let failed = |p: &Peer| first_attempt(upstream, reply(p), policy, client).freed == Freed::Failed;
        PickMap::with_failing(upstream, failed, key_len)
    }

    /// The map when the peers `failing` accepts refuse connections. `key_len` is the key length the plain
    /// hash's rehash steps are computed for; it matters only for the plain hash with an unusable slot
    /// (see [`Basis::PlainRehash`]).
    pub fn with_failing(upstream: &Upstream, failing: impl Fn(&Peer) -> bool, key_len: NonZeroUsize) -> PickMap {
        let state = |p: &Peer| match (p.is_down(), failing(p)) {
            (true, _) => PeerState::Skipped,
            (false, false) => PeerState::Usable,
            (false, true) if p.max_fails() > 0 => PeerState::Skipped,
            (false, true) => PeerState::TriedFirst,
        };
        let answerable = upstream.primary().iter().chain(upstream.backup()).any(|p| state(p) == PeerState::Usable);
        match upstream.balancer() {
            Balancer::Consistent(chash) => {
                let ring = chash.ring();
                let servers = ring.servers().to_vec();
                let mut peer_states = vec![Vec::new(); servers.len()];
                for (i, p) in upstream.primary().iter().enumerate() {
                    peer_states[chash.ring_server_of(i)].push((p.is_down(), state(p) == PeerState::Usable));
                }
                let health: Vec<ServerHealth> = peer_states.iter().map(|s| health_of(s)).collect();
                let mut points = vec![0u64; servers.len()];
                for i in 0..ring.len() {
                    points[ring.server_index_at(i)] += 1;
                }
                let hashed = !upstream.is_single(List::Primary) && !ring.is_empty();
                let (starts, picks) = if hashed {
                    let usable: Vec<bool> =
                        health.iter().map(|h| matches!(h, ServerHealth::Up | ServerHealth::Partial)).collect();
                    ring_segments(ring, &usable)
                } else {
                    (vec![0], vec![ROUND_ROBIN])
                };
                PickMap {
                    method: Method::Consistent,
                    basis: Basis::Ring,
                    servers,
                    health,
                    points,
                    starts,
                    picks,
                    plain: None,
                    answerable,
                }
            }
            Balancer::Plain(_) => {
                let mut servers: Vec<Server> = Vec::new();
                let mut server_of = Vec::new();
                let mut peer_states: Vec<Vec<(bool, bool)>> = Vec::new();
                let mut points: Vec<u64> = Vec::new();
                for p in upstream.primary() {
                    let s = match servers.iter().position(|s| s == p.server()) {
                        Some(s) => s,
                        None => {
                            servers.push(p.server().clone());
                            peer_states.push(Vec::new());
                            points.push(0);
                            servers.len() - 1
                        }
                    };
                    server_of.push(s as u32);
                    peer_states[s].push((p.is_down(), state(p) == PeerState::Usable));
                    points[s] += u64::from(p.weight());
                }
                let health = peer_states.iter().map(|s| health_of(s)).collect();
                let states: Vec<PeerState> = upstream.primary().iter().map(state).collect();
                let ends = upstream
                    .primary()
                    .iter()
                    .scan(0u64, |end, p| {
                        *end += u64::from(p.weight());
                        Some(*end)
                    })
                    .collect();
                let all_usable = states.iter().all(|&s| s == PeerState::Usable);
                let walk = PlainWalk { ends, states, server_of, bypass: upstream.plain_bypasses(List::Primary) };
                let offsets = if all_usable { Vec::new() } else { rehash_offsets(key_len, walk.max_steps()) };
                let by_value: Vec<Pick> = (0..PLAIN_VALUES as u32)
                    .map(|v| walk.walk(|n| if n == 0 { v } else { v ^ offsets[n as usize] }))
                    .collect();
                let (mut starts, mut picks) = (Vec::new(), Vec::new());
                for block in 0..1u32 << 16 {
                    push_segment(&mut starts, &mut picks, block << 16, encode(by_value[(block & 0x7fff) as usize]));
                }
                PickMap {
                    method: Method::Plain,
                    basis: if all_usable { Basis::PlainFirstStep } else { Basis::PlainRehash { key_len } },
                    servers,
                    health,
                    points,
                    starts,
                    picks,
                    plain: Some(walk),
                    answerable,
                }
            }
        }
    }

    /// Another implementation's answers over `like`'s servers: segments `(start, server index)` in CRC32
    /// order, the first starting at 0.
    pub(crate) fn from_segments(like: &PickMap, segments: Vec<(u32, usize)>) -> PickMap {
        let (mut starts, mut picks) = (Vec::with_capacity(segments.len()), Vec::with_capacity(segments.len()));
        for (start, s) in segments {
            push_segment(&mut starts, &mut picks, start, s as u32);
        }
        debug_assert_eq!(starts.first(), Some(&0));
        PickMap {
            method: Method::Consistent,
            basis: Basis::Ring,
            servers: like.servers.clone(),
            health: like.health.clone(),
            points: like.points.clone(),
            starts,
            picks,
            plain: None,
            answerable: true,
        }
    }

    /// The hash method.
    pub fn method(&self) -> Method {
        self.method
    }

    /// How exact the map is.
    pub fn basis(&self) -> Basis {
        self.basis
    }

    /// The server strings [`Pick::Server`] indexes: the ring's servers (consistent) or the distinct server
    /// strings of the primary list (plain), in order of first appearance.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// Each server's health under the map's failures.
    pub fn health(&self) -> &[ServerHealth] {
        &self.health
    }

    /// Each server's ring points (consistent, after deduplication) or plain-hash slots (its peers' weights).
    pub fn points(&self) -> &[u64] {
        &self.points
    }

    /// Whether any peer (primary or backup) answers at all; if not, every request fails.
    pub fn answerable(&self) -> bool {
        self.answerable
    }

    /// The segments in CRC32 order, covering all 2³² values; adjacent segments answer differently.
    pub fn segments(&self) -> impl ExactSizeIterator<Item = Segment> + '_ {
        (0..self.starts.len()).map(move |i| self.segment(i))
    }

    fn segment(&self, i: usize) -> Segment {
        let start = self.starts[i];
        let end = self.starts.get(i + 1).map_or(HASH_SPACE, |&e| u64::from(e));
        Segment { start, len: end - u64::from(start), pick: decode(self.picks[i]) }
    }

    /// Who answers a non-empty key whose CRC32 is `crc` (for the plain hash with rehashing: a key of the
    /// map's key length).
    pub fn pick(&self, crc: u32) -> Pick {
        let i = self.starts.partition_point(|&s| s <= crc) - 1;
        decode(self.picks[i])
    }

    /// Who answers `key`: the empty key goes to round-robin; the plain hash with unusable slots walks the
    /// key's own rehash steps, so any key length is exact.
    pub fn pick_key(&self, key: &[u8]) -> Pick {
        if key.is_empty() {
            return Pick::RoundRobin;
        }
        match (&self.plain, self.basis) {
            (Some(walk), Basis::PlainRehash { .. }) => {
                let mut seq = crate::plain::RehashSequence::new(key);
                walk.walk(|_| seq.next_step().step)
            }
            _ => self.pick(crc32fast::hash(key)),
        }
    }

    /// Both maps' answers over the hash space: the segments where neither changes, in CRC32 order (a merge
    /// of the two sorted segment lists, linear in their lengths).
    pub fn merge<'a>(&'a self, other: &'a PickMap) -> impl Iterator<Item = Overlap> + 'a {
        let (mut i, mut j) = (0, 0);
        let mut at: u64 = 0;
        std::iter::from_fn(move || {
            if at >= HASH_SPACE {
                return None;
            }
            let a = self.segment(i);
            let b = other.segment(j);
            let end_a = u64::from(a.start) + a.len;
            let end_b = u64::from(b.start) + b.len;
            let end = end_a.min(end_b);
            let overlap = Overlap { start: at as u32, len: end - at, a: a.pick, b: b.pick };
            if end_a == end {
                i += 1;
            }
            if end_b == end {
                j += 1;
            }
            at = end;
            Some(overlap)
        })
    }
}

/// A range of CRC32 values where two maps' answers are both constant (see [`PickMap::merge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap {
    /// The first CRC32 value.
    pub start: u32,
    /// How many values.
    pub len: u64,
    /// The first map's answer.
    pub a: Pick,
    /// The second map's answer.
    pub b: Pick,
}

impl PlainWalk {
    /// The most steps one walk can take: 21 misses plus one attempt per `max_fails=0` failing peer.
    fn max_steps(&self) -> usize {
        MAX_HASH_MISSES as usize + 1 + self.states.iter().filter(|&&s| s == PeerState::TriedFirst).count()
    }
}

/// `k[n] = step_of(crc32(decimal(n) ‖ 0^len) ⊕ crc32(0^len))` for `n` in `0..steps` (`k[0] = 0`): for every
/// key of `len` bytes, rehash step `n` is `step_of(crc32(key)) ⊕ k[n]`.
///
/// Why: CRC32 is affine over GF(2), and two inputs of the same length that differ only in the prefix differ
/// in their CRC by a constant of the prefix and the length: `crc32(P ‖ key) ⊕ crc32(key) = crc32(P ‖ 0^len)
/// ⊕ crc32(0^len)` (both sides are the prefix's contribution shifted past `len` bytes, plus the
/// difference the preset register makes). [`step_of`] picks bits, which commutes with XOR.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::picks::rehash_offsets;
/// use nginx_ketama::plain::{RehashSequence, step_of};
/// use std::num::NonZeroUsize;
///
/// let k = rehash_offsets(NonZeroUsize::new(2).unwrap(), 3);
/// let mut seq = RehashSequence::new(b"k0");
/// let v = step_of(crc32fast::hash(b"k0"));
/// for n in 0..3 {
///     assert_eq!(seq.next_step().step, v ^ k[n]);
/// }
/// ```
pub fn rehash_offsets(len: NonZeroUsize, steps: usize) -> Vec<u32> {
    let zeros = |h: &mut crc32fast::Hasher| {
        let block = [0u8; 4096];
        let mut left = len.get();
        while left > 0 {
            let n = left.min(block.len());
            h.update(&block[..n]);
            left -= n;
        }
    };
    let mut plain = crc32fast::Hasher::new();
    zeros(&mut plain);
    let base = plain.finalize();
    (0..steps)
        .map(|n| {
            if n == 0 {
                return 0;
            }
            let mut h = crc32fast::Hasher::new();
            h.update(n.to_string().as_bytes());
            zeros(&mut h);
            step_of(h.finalize() ^ base)
        })
        .collect()
}

/// Health of a server from its peers' `(down, usable)`.
fn health_of(peers: &[(bool, bool)]) -> ServerHealth {
    let usable = peers.iter().filter(|&&(_, u)| u).count();
    if usable == peers.len() {
        ServerHealth::Up
    } else if usable > 0 {
        ServerHealth::Partial
    } else if peers.iter().all(|&(down, _)| down) {
        ServerHealth::Down
    } else {
        ServerHealth::Failing
    }
}

fn encode(pick: Pick) -> u32 {
    match pick {
        Pick::Server(s) => s as u32,
        Pick::RoundRobin => ROUND_ROBIN,
    }
}

fn decode(pick: u32) -> Pick {
    if pick == ROUND_ROBIN { Pick::RoundRobin } else { Pick::Server(pick as usize) }
}

/// Appends a segment unless it continues the previous one.
fn push_segment(starts: &mut Vec<u32>, picks: &mut Vec<u32>, start: u32, pick: u32) {
    if picks.last() != Some(&pick) {
        starts.push(start);
        picks.push(pick);
    }
}

/// The segments of a consistent ring whose ring servers are `usable` or not.
///
/// `answer[i]`: the owner of the first usable point among `i, i+1, …, i+20` (mod n), or round-robin. A
/// backward pass over the ring, twice round so that the walk past the last point wraps, carries the
/// distance to the next usable point.
fn ring_segments(ring: &Ring, usable: &[bool]) -> (Vec<u32>, Vec<u32>) {
    let n = ring.len();
    let hashes = ring.hashes();
    let mut answer = vec![ROUND_ROBIN; n];
    let mut next: Option<(usize, u32)> = None; // (distance, server) of the next usable point
    for k in (0..2 * n).rev() {
        let i = k % n;
        let s = ring.server_index_at(i);
        next = if usable[s] { Some((0, s as u32)) } else { next.map(|(d, s)| (d + 1, s)) };
        if k < n {
            answer[i] = match next {
                Some((d, s)) if d <= MAX_HASH_MISSES as usize => s,
                _ => ROUND_ROBIN,
            };
        }
    }
    let (mut starts, mut picks) = (Vec::with_capacity(n + 1), Vec::with_capacity(n + 1));
    // [0, hash[0]] lands on point 0, then (hash[i-1], hash[i]] on point i, then (hash[n-1], MAX] on point 0.
    push_segment(&mut starts, &mut picks, 0, answer[0]);
    for i in 1..n {
        push_segment(&mut starts, &mut picks, hashes[i - 1].wrapping_add(1), answer[i]);
    }
    if hashes[n - 1] < u32::MAX {
        push_segment(&mut starts, &mut picks, hashes[n - 1] + 1, answer[0]);
    }
    (starts, picks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::Route;

    fn five(method: Method) -> Upstream {
        Upstream::builder(method).peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}")))).build().unwrap()
    }

    fn route_pick(map: &PickMap, up: &Upstream, key: &[u8]) -> Pick {
        match up.route(key) {
            Route::Server(s) => Pick::Server(map.servers().iter().position(|x| x == s).unwrap()),
            Route::RoundRobin => Pick::RoundRobin,
        }
    }

    #[test]
    fn segments_cover_the_space_and_merge() {
        for method in [Method::Consistent, Method::Plain] {
            let map = PickMap::new(&five(method));
            let segs: Vec<Segment> = map.segments().collect();
            assert_eq!(segs[0].start, 0);
            assert_eq!(segs.iter().map(|s| s.len).sum::<u64>(), HASH_SPACE);
            assert!(segs.windows(2).all(|w| w[0].pick != w[1].pick));
            assert!(segs.windows(2).all(|w| u64::from(w[0].start) + w[0].len == u64::from(w[1].start)));
        }
    }

    #[test]
    fn intact_map_equals_route() {
        for method in [Method::Consistent, Method::Plain] {
            let up = five(method);
            let map = PickMap::new(&up);
            for i in 0..5000 {
                let key = format!("key-{i}");
                assert_eq!(map.pick_key(key.as_bytes()), route_pick(&map, &up, key.as_bytes()), "{key}");
            }
        }
    }

    #[test]
    fn rehash_offsets_make_steps_a_function_of_crc_and_length() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for len in [1usize, 2, 7, 16, 100, 5000] {
            let k = rehash_offsets(NonZeroUsize::new(len).unwrap(), 12);
            for _ in 0..20 {
                let key: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                let v = step_of(crc32fast::hash(&key));
                let mut seq = crate::plain::RehashSequence::new(&key);
                for (n, &kn) in k.iter().enumerate() {
                    assert_eq!(seq.next_step().step, v ^ kn, "len {len} step {n}");
                }
            }
        }
    }

    #[test]
    fn merge_splits_at_both_maps_boundaries() {
        let a = PickMap::new(&five(Method::Consistent));
        let b = PickMap::new(&five(Method::Plain));
        let overlaps: Vec<Overlap> = a.merge(&b).collect();
        assert_eq!(overlaps.iter().map(|o| o.len).sum::<u64>(), HASH_SPACE);
        assert!(overlaps.len() >= a.segments().len().max(b.segments().len()));
        for o in overlaps.iter().step_by(97) {
            for crc in [o.start, (u64::from(o.start) + o.len - 1) as u32] {
                assert_eq!((a.pick(crc), b.pick(crc)), (o.a, o.b));
            }
        }
    }

    #[test]
    fn arcs_partition_the_space() {
        let up = five(Method::Consistent);
        let ring = up.ring().unwrap();
        let total: u64 = (0..ring.len()).map(|i| Arc::of_point(ring, i).len).sum();
        assert_eq!(total, HASH_SPACE);
        for i in (0..ring.len()).step_by(37) {
            let arc = Arc::of_point(ring, i);
            assert_eq!(ring.locate(arc.start), i);
            assert_eq!(ring.locate(arc.end), i);
            assert_ne!(ring.locate(arc.start.wrapping_sub(1)), i);
        }
    }
}
