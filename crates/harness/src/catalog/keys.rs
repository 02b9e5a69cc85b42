//! Key lists for catalog cases: reproducible samples, keys forged onto (and just past) ring points, and
//! keys on hashes that two server strings share.

use super::CaseKey;
use super::flag::Flag;
use crate::forge::Forger;
use crate::site::topology::Topology;
use nginx_ketama::version::NginxVersion;

/// A key without comment or flags.
pub(super) fn key(k: impl Into<Vec<u8>>) -> CaseKey {
    CaseKey { key: k.into(), ..CaseKey::default() }
}

/// A key with a comment and flags.
pub(super) fn flagged(k: impl Into<Vec<u8>>, comment: impl Into<String>, flags: &[Flag]) -> CaseKey {
    CaseKey { key: k.into(), comment: comment.into(), flags: flags.to_vec(), ..CaseKey::default() }
}

/// `count` reproducible printable keys (`prefix` + a mix of ids, paths and random ASCII), never empty and
/// never with leading or trailing white space (HTTP strips it from header values).
pub fn sample_keys(prefix: &str, seed: u64, count: usize) -> Vec<CaseKey> {
    let mut state = seed ^ 0x243f_6a88_85a3_08d3;
    let mut next = move || {
        // splitmix64: tiny, portable and frozen here, so the catalog never changes with a crate upgrade.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..count)
        .map(|i| {
            let r = next();
            let text = match r % 4 {
                0 => format!("{prefix}{i}"),
                1 => format!("user:{}", next() % 1_000_000),
                2 => format!("/api/v1/items/{}?page={}", next() % 100_000, next() % 50),
                _ => {
                    let len = 1 + (next() % 32) as usize;
                    let s: String = (0..len).map(|_| char::from(0x21 + (next() % 94) as u8)).collect();
                    s
                }
            };
            key(text)
        })
        .collect()
}

/// Keys at the ring's edges and on/past every `stride`-th point of `topology`'s ring (as this library
/// builds it; nginx's answers are recorded, never derived from it).
pub(super) fn ring_keys(topology: &Topology, stride: usize) -> Vec<CaseKey> {
    let forger = Forger::new();
    let up = topology.upstream(NginxVersion::LATEST, nginx_ketama::Libc::Glibc).expect("catalog topologies are valid");
    let ring = up.ring().expect("consistent");
    let mut out = vec![
        flagged(forger.forge(b"edge-", 0), "crc32 0 (below every point: first point)", &[Flag::RingEdge]),
        flagged(forger.forge(b"edge-", u32::MAX), "crc32 0xffffffff (above every point: wraps)", &[Flag::RingEdge]),
    ];
    let last = ring.len() - 1;
    for (i, p) in ring.points().enumerate() {
        if i % stride != 0 && i != last {
            continue;
        }
        let prefix = format!("pt{i}-");
        out.push(flagged(
            forger.forge(prefix.as_bytes(), p.hash),
            format!("exactly on point {i} ({})", p.server),
            &[Flag::OnPoint],
        ));
        if p.hash != u32::MAX {
            out.push(flagged(
                forger.forge(prefix.as_bytes(), p.hash + 1),
                format!("one past point {i} ({}): next point", p.server),
                &[Flag::PastPoint],
            ));
        }
    }
    out
}

/// Keys on, just below and just past the hash two different servers share.
pub(super) fn collision_keys(hash: u32) -> Vec<CaseKey> {
    let f = Forger::new();
    vec![
        flagged(f.forge(b"coll-", hash), format!("on the shared point {hash:08x}"), &[Flag::Collision, Flag::OnPoint]),
        flagged(
            f.forge(b"coll-b-", hash),
            format!("on the shared point {hash:08x}, another key"),
            &[Flag::Collision, Flag::OnPoint],
        ),
        flagged(f.forge(b"coll-", hash - 1), "one below the shared point: same point", &[Flag::Collision]),
        flagged(f.forge(b"coll-", hash + 1), "one past the shared point: next point", &[Flag::PastPoint]),
    ]
}

/// Two `127.0.20.1:PORT` strings whose point chains share one hash, found with [`find_point_collisions`](crate::site::topology::find_point_collisions)
/// over ports 10000–19999: point #104 of port 10064 and point #47 of port 10291.
pub const COLLISION: (&str, &str, u32) = ("127.0.20.1:10064", "127.0.20.1:10291", 0xf5b5_4a41);
/// The pair of algorithm §11 F (ties: §3.2): point #45 of 127.0.0.1:20195 and point #109 of 127.0.0.1:20412.
pub const SPEC_COLLISION: (&str, &str, u32) = ("127.0.0.1:20195", "127.0.0.1:20412", 0x32a8_f0fa);

/// `k0` … `k{n-1}`.
pub(super) fn numbered_keys(n: usize) -> Vec<CaseKey> {
    (0..n).map(|i| key(format!("k{i}"))).collect()
}

/// `n` empty keys (no `X-Key` header).
pub(super) fn empty_keys(n: usize) -> Vec<CaseKey> {
    (0..n).map(|_| flagged("", "empty key", &[Flag::EmptyKey])).collect()
}

/// `keys`, then the same keys again, flagged [`Flag::RepeatedKey`].
pub(super) fn twice(keys: Vec<CaseKey>) -> Vec<CaseKey> {
    let again: Vec<CaseKey> = keys
        .iter()
        .map(|k| CaseKey { comment: "sent again".into(), flags: vec![Flag::RepeatedKey], ..k.clone() })
        .collect();
    keys.into_iter().chain(again).collect()
}
