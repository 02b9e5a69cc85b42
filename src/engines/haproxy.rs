//! HAProxy's `hash-type consistent` and `hash-type map-based` (the `balance hdr()`, `uri`, `url_param`,
//! `hash <expr>` family), release by release.
//!
//! Every rule below is read from haproxy/haproxy (mainline; the stable branches' patch releases are not in
//! that repository, so a rule is cited at the mainline release that first had it, and the patch releases
//! the project runs are proven live, `tests/engines_live.rs`):
//!
//! * **Key hash** (`src/backend.c`, `gen_hash`, v2.2.0 to v3.2.0): `sdbm` (the default), `djb2`, `wt6`,
//!   `crc32` (`src/hash.c`, `hash_sdbm`, `hash_djb2`, `hash_wt6`, `hash_crc32`: the standard reflected
//!   CRC-32, the same as nginx's), and from v3.0 `none` (`read_int64` of the key, kept to 32 bits); the
//!   `avalanche` modifier then applies `full_hash` (`include/haproxy/intops.h`, `__full_hash`: Bob Jenkins'
//!   6-shift integer hash, times 3221225473).
//! * **Nodes** (`src/lb_chash.c`, `chash_init_server_tree`): each usable server gets `uweight ×
//!   BE_WEIGHT_SCALE` (16) nodes, active servers in one tree, backup servers in another.
//! * **Node keys**: up to v2.9, `full_hash(puid × SRV_EWGHT_RANGE + i)` (`SRV_EWGHT_RANGE` = 256 × 16 =
//!   4096, `include/haproxy/server-t.h`). Commit faa8c3e02 (v3.0-dev7) adds `hash-key` and
//!   `chash_compute_server_key`/`chash_compute_node_key`: node `i` is `full_hash(server_key + i)`, with
//!   `server_key` = `full_hash(puid)` for `hash-key id` (the default: every default ring changed),
//!   `full_hash(s_addr)` for `hash-key addr` over IPv4 (`XXH32` of the 16 bytes, seed 0, over IPv6), and
//!   the same seeded with `full_hash(port)` for `addr-port`. Commit 03e9a5a1e ("BUG/MAJOR: lb-chash: fix key
//!   calculation when using default hash-key id", v3.3-dev10, in the 3.2 branch from 3.2.7) makes the `id`
//!   server key `puid × SRV_EWGHT_RANGE` again: the 2.x ring. Debian trixie's 3.0.11 lacks the fix.
//! * **`puid`** (`src/cfgparse.c`, `check_config_validity`): a server's `id`, or the first unused number
//!   ≥ a counter that starts at 1 and steps once per server in list order.
//! * **Lookup** (`src/lb_chash.c`, `chash_get_server_hash`): the node at or above the hash (`eb32_lookup_ge`,
//!   wrapping to the first) and the node before it; the nearer wins and **a tie goes to the node below**
//!   (`if (dp <= dn)`). No active server: the first usable backup takes everything unless `option
//!   allbackups`, which hashes over the backup tree (`recount_servers`, `lbprm.fbck`, `src/backend.c`).
//! * **Map-based** (`src/lb_map.c`, `init_server_map`, `recalc_server_map`, `map_get_server_hash`): weights
//!   divided by their GCD, a table of `Σ weight` slots filled by the weighted interleave that favours the
//!   first declared server, slot `hash % Σ weight`.
//!
//! Only the first pick is modelled: `hash-balance-factor` (bounded loads), `maxconn` queues and redispatch
//! change answers under load and are left out. A key the proxy does not find (an absent or empty header)
//! goes to round-robin there; here it is the caller's concern.

use super::EngineError;
use std::fmt;
use std::net::SocketAddr;

/// `SRV_EWGHT_RANGE`: `SRV_UWGHT_RANGE` (256) × `BE_WEIGHT_SCALE` (16).
const EWGHT_RANGE: u32 = 256 * 16;
/// `BE_WEIGHT_SCALE`: nodes per unit of user weight.
const NODES_PER_WEIGHT: u32 = 16;
/// `SRV_UWGHT_MAX`.
pub const MAX_WEIGHT: u32 = 256;

/// The HAProxy releases the project models (the Debian builds it runs, engines/versions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Release {
    /// 2.2.9 (Debian bullseye): no `hash-key`, no `hash-type … none`.
    V2_2,
    /// 2.6.12 (bookworm): the same ring as 2.2; `balance hash <expr>`.
    V2_6,
    /// 3.0.11 (trixie): `hash-key`, `none`, and the double-hashed default node keys.
    V3_0,
    /// 3.2.7 and later 3.2 releases (sid: 3.2.26): the 2.x default node keys restored.
    V3_2,
}

impl Release {
    /// Every modelled release, oldest first.
    pub const ALL: [Release; 4] = [Release::V2_2, Release::V2_6, Release::V3_0, Release::V3_2];

    /// `hash-key` and `hash-type … none` exist (v3.0-dev7 on).
    pub fn has_hash_key(self) -> bool {
        self >= Release::V3_0
    }

    /// The `hash-key id` server key is `full_hash(puid)` (faa8c3e02 to 03e9a5a1e).
    fn double_hashed_id(self) -> bool {
        self == Release::V3_0
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Release::V2_2 => "2.2.9",
            Release::V2_6 => "2.6.12",
            Release::V3_0 => "3.0.11",
            Release::V3_2 => "3.2.26",
        })
    }
}

impl std::str::FromStr for Release {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<Release, EngineError> {
        Ok(match s {
            "2.2" | "2.2.9" => Release::V2_2,
            "2.6" | "2.6.12" => Release::V2_6,
            "3.0" | "3.0.11" => Release::V3_0,
            "3.2" | "3.2.26" => Release::V3_2,
            _ => {
                return Err(EngineError::Option {
                    engine: "haproxy",
                    option: "release",
                    value: s.to_string(),
                    expected: "2.2.9, 2.6.12, 3.0.11 or 3.2.26",
                });
            }
        })
    }
}

/// `hash-type <method> <function>`'s function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    /// `sdbm`, the default.
    Sdbm,
    /// `djb2`.
    Djb2,
    /// `wt6`.
    Wt6,
    /// `crc32`: the key's CRC-32, as nginx hashes it.
    Crc32,
    /// `none` (3.0 on): the key read as a decimal integer, kept to 32 bits.
    None,
}

impl Function {
    /// Every function.
    pub const ALL: [Function; 5] = [Function::Sdbm, Function::Djb2, Function::Wt6, Function::Crc32, Function::None];

    /// The function's value for `key`.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            Function::Sdbm => {
                key.iter().fold(0u32, |h, &c| u32::from(c).wrapping_add(h << 6).wrapping_add(h << 16).wrapping_sub(h))
            }
            Function::Djb2 => key.iter().fold(5381u32, |h, &c| (h << 5).wrapping_add(h).wrapping_add(u32::from(c))),
            Function::Wt6 => wt6(key),
            Function::Crc32 => crc32fast::hash(key),
            Function::None => read_int64(key) as u32,
        }
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Function::Sdbm => "sdbm",
            Function::Djb2 => "djb2",
            Function::Wt6 => "wt6",
            Function::Crc32 => "crc32",
            Function::None => "none",
        })
    }
}

impl std::str::FromStr for Function {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<Function, EngineError> {
        Function::ALL.into_iter().find(|f| f.to_string() == s).ok_or_else(|| EngineError::Option {
            engine: "haproxy",
            option: "hash function",
            value: s.to_string(),
            expected: "sdbm, djb2, wt6, crc32 or none",
        })
    }
}

/// `hash-key` (3.0 on): what a server's node keys derive from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashKey {
    /// `id`, the default: the server's numeric id.
    Id,
    /// `addr`: the IP address.
    Addr,
    /// `addr-port`: the IP address and the port.
    AddrPort,
}

impl fmt::Display for HashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashKey::Id => "id",
            HashKey::Addr => "addr",
            HashKey::AddrPort => "addr-port",
        })
    }
}

impl std::str::FromStr for HashKey {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<HashKey, EngineError> {
        Ok(match s {
            "id" => HashKey::Id,
            "addr" => HashKey::Addr,
            "addr-port" => HashKey::AddrPort,
            _ => {
                return Err(EngineError::Option {
                    engine: "haproxy",
                    option: "hash-key",
                    value: s.to_string(),
                    expected: "id, addr or addr-port",
                });
            }
        })
    }
}

/// `hash-type`'s method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `consistent`: the tree of nodes.
    Consistent,
    /// `map-based`: `hash % Σ weight` over a weighted table.
    MapBased,
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Consistent => "consistent",
            Method::MapBased => "map-based",
        })
    }
}

/// A backend's hashing settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Options {
    /// The release.
    pub release: Release,
    /// `hash-type`'s method.
    pub method: Method,
    /// `hash-type`'s function.
    pub function: Function,
    /// `hash-type … avalanche`.
    pub avalanche: bool,
    /// `hash-key` on every server (3.0 on).
    pub hash_key: HashKey,
    /// `option allbackups`.
    pub all_backups: bool,
}

impl Options {
    /// `hash-type consistent` with the default function (`sdbm`) and `hash-key id`.
    pub fn consistent(release: Release) -> Options {
        Options {
            release,
            method: Method::Consistent,
            function: Function::Sdbm,
            avalanche: false,
            hash_key: HashKey::Id,
            all_backups: false,
        }
    }

    /// The same with `function`.
    pub fn with_function(self, function: Function) -> Options {
        Options { function, ..self }
    }

    /// The hash `gen_hash` computes for `key`.
    pub fn hash(&self, key: &[u8]) -> u32 {
        let h = self.function.hash(key);
        if self.avalanche { full_hash(h) } else { h }
    }

    /// Whether the pick is a function of `crc32(key)` over intervals (`crc32`, no `avalanche`).
    pub fn keyed_by_crc32(&self) -> bool {
        self.function == Function::Crc32 && !self.avalanche
    }

    fn check(&self) -> Result<(), EngineError> {
        let needs_3_0 = |what: &'static str| EngineError::Unsupported {
            engine: "haproxy",
            release: self.release.to_string(),
            what,
        };
        if !self.release.has_hash_key() && self.hash_key != HashKey::Id {
            return Err(needs_3_0("hash-key (3.0 on)"));
        }
        if !self.release.has_hash_key() && self.function == Function::None {
            return Err(needs_3_0("hash-type … none (3.0 on)"));
        }
        Ok(())
    }
}

impl fmt::Display for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "haproxy {} (hash-type {} {}", self.release, self.method, self.function)?;
        if self.avalanche {
            f.write_str(" avalanche")?;
        }
        if self.release.has_hash_key() {
            write!(f, ", hash-key {}", self.hash_key)?;
        }
        if self.all_backups {
            f.write_str(", allbackups")?;
        }
        f.write_str(")")
    }
}

/// One `server` line of the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Its address.
    pub addr: SocketAddr,
    /// `weight` (0 to 256; 0 takes no traffic).
    pub weight: u32,
    /// `backup`.
    pub backup: bool,
    /// `disabled` (maintenance from the start): never in a tree.
    pub disabled: bool,
    /// `id`, when set.
    pub id: Option<u32>,
}

impl Server {
    /// An active server of weight 1 (HAProxy's default).
    pub fn new(addr: SocketAddr) -> Server {
        Server { addr, weight: 1, backup: false, disabled: false, id: None }
    }
}

/// A node of a tree: its key and the server's index in the list. Sorted by key, then by insertion order
/// (eb32 trees keep duplicates in insertion order: servers in list order, nodes in index order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Node {
    key: u32,
    seq: u32,
    server: u32,
}

/// Where the keys go when no active server is usable.
#[derive(Debug, Clone)]
enum Pool {
    /// The nodes (consistent) or the slots (map-based) of these servers.
    Hashed { nodes: Vec<Node>, map: Vec<u32> },
    /// One server takes every key (the first usable backup, without `allbackups`).
    Single(u32),
    /// No usable server.
    Empty,
}

/// One HAProxy backend's first pick.
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::haproxy::{Backend, Options, Release, Server};
///
/// let servers: Vec<Server> = (1..=3).map(|i| Server::new(format!("127.0.0.1:{}", 9000 + i).parse().unwrap())).collect();
/// let b = Backend::new(Options::consistent(Release::V2_6), &servers)?;
/// assert!(b.pick(b"some key").is_some());
/// # Ok::<(), nginx_ketama::engines::EngineError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Backend {
    options: Options,
    pool: Pool,
}

impl Backend {
    /// The backend of `servers` (in `server` line order) with `options`.
    ///
    /// # Errors
    ///
    /// [`EngineError`]: an option the release lacks, a weight above 256, two servers with one `id`.
    pub fn new(options: Options, servers: &[Server]) -> Result<Backend, EngineError> {
        options.check()?;
        if let Some(s) = servers.iter().find(|s| s.weight > MAX_WEIGHT) {
            return Err(EngineError::Weight {
                engine: "haproxy",
                server: s.addr.to_string(),
                weight: s.weight,
                max: MAX_WEIGHT,
            });
        }
        let puids = puids(servers)?;
        let usable = |s: &Server| !s.disabled && s.weight > 0;
        let actives: Vec<u32> = (0..servers.len() as u32)
            .filter(|&i| usable(&servers[i as usize]) && !servers[i as usize].backup)
            .collect();
        let backups: Vec<u32> =
            (0..servers.len() as u32).filter(|&i| usable(&servers[i as usize]) && servers[i as usize].backup).collect();
        let weight = |i: u32| servers[i as usize].weight;
        let (group, map_total) = if !actives.is_empty() {
            let total = actives.iter().map(|&i| weight(i)).sum::<u32>();
            (actives, total)
        } else if backups.is_empty() {
            return Ok(Backend { options, pool: Pool::Empty });
        } else if !options.all_backups {
            if options.method == Method::Consistent {
                return Ok(Backend { options, pool: Pool::Single(backups[0]) });
            }
            // `update_backend_weight`: one server used (`tot_used` 1), so `get_server_hh` and its
            // siblings skip hashing and look up hash 0; the table is the first backup's weight long, but
            // `recalc_server_map` fills it from every usable backup: slot 0's server takes every key.
            let map = weighted_map(servers, &backups, weight(backups[0]));
            return Ok(Backend { options, pool: Pool::Single(map[0]) });
        } else {
            let total = backups.iter().map(|&i| weight(i)).sum::<u32>();
            (backups, total)
        };
        let pool = match options.method {
            Method::Consistent => {
                let mut nodes = Vec::new();
                for &i in &group {
                    let s = &servers[i as usize];
                    let base = server_key(&options, s, puids[i as usize]);
                    for n in 0..s.weight * NODES_PER_WEIGHT {
                        let seq = nodes.len() as u32;
                        nodes.push(Node { key: full_hash(base.wrapping_add(n)), seq, server: i });
                    }
                }
                nodes.sort_unstable();
                Pool::Hashed { nodes, map: Vec::new() }
            }
            Method::MapBased => Pool::Hashed { nodes: Vec::new(), map: weighted_map(servers, &group, map_total) },
        };
        Ok(Backend { options, pool })
    }

    /// The settings.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The server (index in the list) `key` goes to.
    pub fn pick(&self, key: &[u8]) -> Option<usize> {
        self.pick_hash(self.options.hash(key))
    }

    /// The server a key hashed to `hash` (after `avalanche`) goes to.
    pub fn pick_hash(&self, hash: u32) -> Option<usize> {
        match &self.pool {
            Pool::Empty => None,
            Pool::Single(s) => Some(*s as usize),
            Pool::Hashed { map, .. } if self.options.method == Method::MapBased => {
                Some(map[(hash % map.len() as u32) as usize] as usize)
            }
            Pool::Hashed { nodes, .. } => {
                // eb32_lookup_ge, wrapping to the first node; the node before it, wrapping to the last.
                let ge = nodes.partition_point(|n| n.key < hash);
                let next = if ge == nodes.len() { 0 } else { ge };
                let prev = if next == 0 { nodes.len() - 1 } else { next - 1 };
                let dp = hash.wrapping_sub(nodes[prev].key);
                let dn = nodes[next].key.wrapping_sub(hash);
                let node = if dp <= dn { prev } else { next };
                Some(nodes[node].server as usize)
            }
        }
    }

    /// For `hash-type consistent crc32` without `avalanche`: the answer over all 2³² CRC-32 values, as
    /// `(first value, server)` segments in ascending order, the first at 0. `None` for other functions.
    pub fn crc32_segments(&self) -> Option<Vec<(u32, usize)>> {
        if !self.options.keyed_by_crc32() {
            return None;
        }
        self.hash_segments()
    }

    /// The answer over all 2³² hash values (after `avalanche`), as `(first value, server)` segments in
    /// ascending order, the first at 0 (empty when no server is usable). `None` for `map-based`, whose
    /// `hash % Σ weight` changes owner at every slot.
    pub fn hash_segments(&self) -> Option<Vec<(u32, usize)>> {
        let starts: Vec<u32> = match &self.pool {
            Pool::Empty => return Some(Vec::new()),
            Pool::Single(_) => vec![0],
            Pool::Hashed { .. } if self.options.method == Method::MapBased => return None,
            Pool::Hashed { nodes, .. } => {
                // The answer changes only at a node's key, one past it, or one past the midpoint to the
                // next distinct key (module doc, Lookup).
                let mut starts = vec![0u32];
                for (i, n) in nodes.iter().enumerate() {
                    let next = nodes[(i + 1) % nodes.len()].key;
                    let d = next.wrapping_sub(n.key);
                    starts.extend([n.key, n.key.wrapping_add(1), n.key.wrapping_add(d / 2).wrapping_add(1)]);
                }
                starts.sort_unstable();
                starts.dedup();
                starts
            }
        };
        let mut segments: Vec<(u32, usize)> = Vec::with_capacity(starts.len());
        for s in starts {
            let pick = self.pick_hash(s).expect("a non-empty pool answers");
            if segments.last().is_none_or(|&(_, p)| p != pick) {
                segments.push((s, pick));
            }
        }
        Some(segments)
    }
}

/// Each server's `puid`: its `id`, or the first unused number ≥ a counter that starts at 1 and steps once
/// per server (`check_config_validity`).
fn puids(servers: &[Server]) -> Result<Vec<u32>, EngineError> {
    let mut used: Vec<u32> = Vec::new();
    for s in servers {
        if let Some(id) = s.id {
            if id == 0 {
                return Err(EngineError::Id { engine: "haproxy", server: s.addr.to_string(), id });
            }
            if used.contains(&id) {
                return Err(EngineError::Id { engine: "haproxy", server: s.addr.to_string(), id });
            }
            used.push(id);
        }
    }
    let mut next = 1;
    let mut out = Vec::with_capacity(servers.len());
    for s in servers {
        let id = match s.id {
            Some(id) => id,
            None => {
                while used.contains(&next) {
                    next += 1;
                }
                used.push(next);
                next
            }
        };
        out.push(id);
        next += 1;
    }
    Ok(out)
}

/// The base every node key of `s` adds its index to.
fn server_key(options: &Options, s: &Server, puid: u32) -> u32 {
    let hash_key = if options.release.has_hash_key() { options.hash_key } else { HashKey::Id };
    let seed = if hash_key == HashKey::AddrPort { full_hash(u32::from(s.addr.port())) } else { 0 };
    match (hash_key, s.addr) {
        (HashKey::Id, _) if options.release.double_hashed_id() => full_hash(puid),
        (HashKey::Id, _) => puid.wrapping_mul(EWGHT_RANGE),
        // `s_addr` is in network order, read as a host (little-endian) integer.
        (_, SocketAddr::V4(a)) => full_hash(seed.wrapping_add(u32::from_le_bytes(a.ip().octets()))),
        (_, SocketAddr::V6(a)) => twox_hash::XxHash32::oneshot(seed, &a.ip().octets()),
    }
}

/// `recalc_server_map` over `group`, `total_weight` slots (weights divided by the GCD of every server's
/// non-zero weight, `init_server_map`).
fn weighted_map(servers: &[Server], group: &[u32], total_weight: u32) -> Vec<u32> {
    let gcd = servers.iter().map(|s| s.weight).filter(|&w| w > 0).fold(0, gcd);
    let gcd = gcd.max(1);
    let weight = |i: u32| servers[i as usize].weight.div_ceil(gcd) as i64;
    let tot = i64::from(total_weight.div_ceil(gcd));
    let mut score = vec![0i64; group.len()];
    let mut map = Vec::with_capacity(tot as usize);
    for _ in 0..tot {
        if tot == 1 {
            map.push(group[0]);
            continue;
        }
        let mut best: Option<usize> = None;
        let mut max = 0;
        for (k, &i) in group.iter().enumerate() {
            score[k] += weight(i);
            let v = (score[k] + tot) / tot;
            if best.is_none() || v > max {
                max = v;
                best = Some(k);
            }
        }
        let b = best.expect("a non-empty group");
        score[b] -= tot;
        map.push(group[b]);
    }
    map
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `__full_hash` (`include/haproxy/intops.h`): Bob Jenkins' full-avalanche integer hash, times 3221225473.
pub fn full_hash(mut a: u32) -> u32 {
    a = a.wrapping_add(0x7ed5_5d16).wrapping_add(a << 12);
    a = (a ^ 0xc761_c23c) ^ (a >> 19);
    a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
    a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a_4f09) ^ (a >> 16);
    a.wrapping_mul(3_221_225_473)
}

/// `hash_wt6` (`src/hash.c`).
fn wt6(key: &[u8]) -> u32 {
    let (mut h0, mut h1): (u32, u32) = (0xa53c_965a, 0x5ca6_953a);
    let (mut step0, mut step1) = (6u32, 18u32);
    for &c in key {
        let t = u32::from(c);
        h0 = !(h0 ^ t);
        h1 = !(h1.wrapping_add(t));
        let t = h1.rotate_left(step0);
        h1 = h0.rotate_left(step1);
        h0 = t;
        let t = ((h0 >> 16) ^ h1) & 0xffff;
        step0 = t & 0x1f;
        step1 = t >> 11;
    }
    h0 ^ h1
}

/// `read_int64` (`src/tools.c`): an optional sign, then decimal digits up to the first other byte,
/// saturating.
fn read_int64(key: &[u8]) -> i64 {
    let (neg, digits) = match key.first() {
        Some(b'-') => (true, &key[1..]),
        Some(b'+') => (false, &key[1..]),
        _ => (false, key),
    };
    let mut i: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            break;
        }
        i = match i.checked_mul(10).and_then(|t| t.checked_add(u64::from(c - b'0'))) {
            Some(v) => v,
            None => {
                i = u64::MAX;
                break;
            }
        };
    }
    if neg {
        if i > 0x8000_0000_0000_0000 { i64::MIN } else { (i as i64).wrapping_neg() }
    } else if i > i64::MAX as u64 {
        i64::MAX
    } else {
        i as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_int64_saturates_and_stops_at_a_non_digit() {
        assert_eq!(read_int64(b"123abc"), 123);
        assert_eq!(read_int64(b"-5"), -5);
        assert_eq!(read_int64(b"99999999999999999999"), i64::MAX);
        assert_eq!(read_int64(b""), 0);
    }

    /// Segments agree with the lookup everywhere, sampled at and around every boundary.
    #[test]
    fn crc32_segments_follow_the_lookup() {
        let servers: Vec<Server> = (1..=4).map(|i| Server::new(format!("10.0.0.{i}:80").parse().unwrap())).collect();
        for release in Release::ALL {
            let b = Backend::new(Options::consistent(release).with_function(Function::Crc32), &servers).unwrap();
            let segs = b.crc32_segments().unwrap();
            assert_eq!(segs[0].0, 0);
            for (k, &(start, pick)) in segs.iter().enumerate() {
                let end = segs.get(k + 1).map_or(u32::MAX, |&(s, _)| s - 1);
                for h in [start, end, start + (end - start) / 2] {
                    assert_eq!(b.pick_hash(h), Some(pick), "{release} {h:08x}");
                }
            }
        }
    }
}
