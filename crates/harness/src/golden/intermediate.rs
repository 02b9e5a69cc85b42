//! `vectors/intermediate.json`: the values a port computes on its way to an answer, for a few recorded
//! groups, so that a port can be debugged step by step (algorithm §3–§4): each server's host/port split and
//! the first points of its chain, the ring after sorting and deduplication, and a few lookups with the
//! point they land on; for plain `hash`, the rehash steps of a few keys.
//!
//! Derived, not recorded: the values come from the reference ring ([`nginx_ketama::ring::reference`]) and
//! the plain rehash sequence over the peers nginx ran. What nginx observed anchors them: every lookup names
//! a key of the same group, and `tests/vectors_lint.rs` checks that the server the lookup lands on is the
//! server of nginx's recorded first attempt.

use super::groups::glibc_group;
use super::record_file::{Record, RecordKey, Run, to_hex};
use nginx_ketama::plain::slot_owner;
use nginx_ketama::ring::reference;
use nginx_ketama::server::Server;
use nginx_ketama::upstream::Method;
use serde::Serialize;

/// The consistent groups shown, and why each: weights, odd spellings (the host/port split), a collision
/// (deduplication).
const CONSISTENT: &[&str] = &["weights-mixed", "spellings", "unix-prefix-case", "collision-order-ab"];
/// The plain groups shown.
const PLAIN: &[&str] = &["plain-weights-equal"];
/// Chain points shown per server.
const CHAIN_POINTS: usize = 3;
/// Ring points shown from the start and from the end of the ring.
const RING_HEAD: usize = 6;
const RING_TAIL: usize = 2;
/// Lookups (or plain keys) shown per group.
const LOOKUPS: usize = 4;
/// Dropped duplicates shown per group.
const DROPPED: usize = 3;
/// Rehash steps shown per plain key.
const REHASH_STEPS: usize = 3;

/// The header of the file.
const HEADER: &[&str] = &[
    "Intermediate values for port authors; DO NOT EDIT (scripts/record-vectors regenerates them).",
    "Derived, not recorded: computed by the reference ring (src/ring/reference.rs) and the plain rehash over the",
    "peers of the named recorded groups (v1/consistent.json, v1/plain.json). Each lookup's key belongs to that group,",
    "and tests/vectors_lint.rs checks that its server is the server of nginx's recorded first attempt.",
    "Ring ties follow glibc's rule (the point generated first survives); groups are the ones recorded on glibc builds.",
    "Hashes are CRC32 in lowercase hex (8 digits); bytes are lowercase hex.",
    "See vectors/README.md, section 'Intermediate values'.",
];

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct File {
    algorithm: &'static str,
    header: &'static [&'static str],
    consistent: Vec<ConsistentGroup>,
    plain: Vec<PlainGroup>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConsistentGroup {
    group: String,
    servers: Vec<ChainStart>,
    /// Points generated (160 × weight per primary peer, duplicates included).
    generated_points: usize,
    /// Points kept after deduplication: the ring's size.
    ring_size: usize,
    /// How many points had the hash of an earlier point and were dropped.
    dropped_count: usize,
    /// The first few of them: (hash, the kept point's server, the dropped one's).
    dropped: Vec<Dropped>,
    ring_head: Vec<RingPoint>,
    ring_tail: Vec<RingPoint>,
    lookups: Vec<Lookup>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChainStart {
    server: String,
    /// The host part as text (lossy for non-UTF-8) and as hashed bytes.
    host: String,
    host_hex: String,
    /// The port part (may be empty).
    port: String,
    weight: u32,
    /// Bytes hashed for the first point: host ‖ 00 ‖ port ‖ le32(0).
    first_input_hex: String,
    first_points: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Dropped {
    hash: String,
    kept: String,
    dropped: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RingPoint {
    index: usize,
    hash: String,
    server: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Lookup {
    key: Option<String>,
    key_hex: String,
    crc32: String,
    /// The first point with hash ≥ crc32 (0 past the last point).
    point_index: usize,
    point_hash: String,
    server: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlainGroup {
    group: String,
    /// Primary peers in list order with their weights (`down` peers keep their slots).
    slots: Vec<Slot>,
    total_weight: u32,
    keys: Vec<PlainKey>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Slot {
    server: String,
    address: String,
    weight: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlainKey {
    key: Option<String>,
    key_hex: String,
    /// The first pick (step 0) is nginx's first attempt when that peer is usable; later steps are what a
    /// retry would hash.
    steps: Vec<RehashStep>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RehashStep {
    rehash: u64,
    /// Bytes hashed: the decimal rehash counter (omitted at 0) followed by the key.
    input_hex: String,
    crc32: String,
    /// (crc32 >> 16) & 0x7fff
    value: u32,
    /// The running sum (wrapping at 2^32).
    sum: u32,
    /// sum mod total_weight.
    slot: u32,
    address: String,
}

fn hex32(h: u32) -> String {
    format!("{h:08x}")
}

/// The keys a group's lookups show: its first non-empty keys.
fn sample_keys(record: &Record) -> impl Iterator<Item = &RecordKey> {
    record.keys.iter().filter(|k| !k.key_hex.is_empty()).take(LOOKUPS)
}

/// The values follow glibc's tie rule (the reference ring's stable sort), so they are shown for the group
/// recorded on glibc builds; with musl, points two servers share may keep the other server.
fn consistent_group((group, run): (String, &Run), record: &Record) -> ConsistentGroup {
    let peers: Vec<_> = run.peers.iter().filter(|p| !p.backup).collect();
    let servers: Vec<Server> = peers.iter().map(|p| Server::new(p.server.clone())).collect();
    let weighted = || servers.iter().zip(&peers).map(|(s, p)| (s, p.weight));
    let sorted = reference::sorted_points(weighted());
    let ring = reference::points(weighted());
    let mut dropped = Vec::new();
    for w in sorted.windows(2) {
        if w[0].0 == w[1].0 {
            dropped.push(Dropped {
                hash: hex32(w[0].0),
                kept: servers[w[0].1].as_str().to_string(),
                dropped: servers[w[1].1].as_str().to_string(),
            });
        }
    }
    let point = |index: usize| RingPoint {
        index,
        hash: hex32(ring[index].0),
        server: servers[ring[index].1].as_str().to_string(),
    };
    ConsistentGroup {
        group,
        servers: servers
            .iter()
            .zip(&peers)
            .map(|(s, p)| {
                let (host, port) = s.ketama_parts();
                let mut first = host.to_vec();
                first.push(0);
                first.extend_from_slice(port);
                first.extend_from_slice(&0u32.to_le_bytes());
                ChainStart {
                    server: s.as_str().to_string(),
                    host: String::from_utf8_lossy(host).into_owned(),
                    host_hex: to_hex(host),
                    port: String::from_utf8_lossy(port).into_owned(),
                    weight: p.weight,
                    first_input_hex: to_hex(&first),
                    first_points: reference::chain(s, CHAIN_POINTS).into_iter().map(hex32).collect(),
                }
            })
            .collect(),
        generated_points: sorted.len(),
        ring_size: ring.len(),
        dropped_count: dropped.len(),
        dropped: dropped.into_iter().take(DROPPED).collect(),
        ring_head: (0..RING_HEAD.min(ring.len())).map(point).collect(),
        ring_tail: (ring.len().saturating_sub(RING_TAIL)..ring.len()).map(point).collect(),
        lookups: sample_keys(record)
            .map(|k| {
                let crc = crc32fast::hash(&k.bytes());
                let i = reference::locate(&ring, crc);
                Lookup {
                    key: k.key.clone(),
                    key_hex: k.key_hex.clone(),
                    crc32: hex32(crc),
                    point_index: i,
                    point_hash: hex32(ring[i].0),
                    server: servers[ring[i].1].as_str().to_string(),
                }
            })
            .collect(),
    }
}

fn plain_group((group, run): (String, &Run), record: &Record) -> PlainGroup {
    let peers: Vec<_> = run.peers.iter().filter(|p| !p.backup).collect();
    let weights: Vec<u32> = peers.iter().map(|p| p.weight).collect();
    let total: u32 = weights.iter().sum();
    PlainGroup {
        group,
        slots: peers
            .iter()
            .map(|p| Slot { server: p.server.clone(), address: p.address.clone(), weight: p.weight })
            .collect(),
        total_weight: total,
        keys: sample_keys(record)
            .map(|k| {
                let bytes = k.bytes();
                let mut sum = 0u32;
                let steps = (0..REHASH_STEPS as u64)
                    .map(|rehash| {
                        let mut input = if rehash == 0 { Vec::new() } else { rehash.to_string().into_bytes() };
                        input.extend_from_slice(&bytes);
                        let crc = crc32fast::hash(&input);
                        let value = (crc >> 16) & 0x7fff;
                        sum = sum.wrapping_add(value);
                        let owner = slot_owner(weights.iter().copied(), sum).unwrap_or(0);
                        RehashStep {
                            rehash,
                            input_hex: to_hex(&input),
                            crc32: hex32(crc),
                            value,
                            sum,
                            slot: sum % total.max(1),
                            address: peers[owner].address.clone(),
                        }
                    })
                    .collect();
                PlainKey { key: k.key.clone(), key_hex: k.key_hex.clone(), steps }
            })
            .collect(),
    }
}

/// Generates `intermediate.json` from the records (the groups named above that exist and have a run).
pub fn generate_intermediate(records: &[Record]) -> String {
    let find = |name: &str, method: Method| {
        records.iter().find(|r| r.case == name && r.method == method && !r.runs.is_empty())
    };
    let file = File {
        algorithm: "nginx-upstream-hash",
        header: HEADER,
        consistent: CONSISTENT
            .iter()
            .filter_map(|n| find(n, Method::Consistent))
            .filter_map(|r| Some(consistent_group(glibc_group(r)?, r)))
            .collect(),
        plain: PLAIN
            .iter()
            .filter_map(|n| find(n, Method::Plain))
            .filter_map(|r| Some(plain_group(glibc_group(r)?, r)))
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&file).expect("intermediate values serialize");
    text.push('\n');
    text
}
