//! The reference ring: nginx's ring written as plainly as possible, the oracle that the fast
//! [`Ring`](super::Ring) and the harness are checked against (docs/nginx-algorithm.md §3.1–3.3).
//!
//! Every peer's whole chain is generated (a duplicate string's too, as nginx does), each point hashing its
//! whole input afresh; the points are sorted by hash as the C library's `qsort` sorts them (stably for glibc;
//! for musl by the model of musl's smoothsort, the one piece shared with the fast ring) and the first of
//! every run of equal hashes is kept. Nothing here is fast or compact, and nothing else is shared with
//! [`Ring::new`](super::Ring::new) except the host/port split ([`Server::ketama_parts`]).
//!
//! Test support, not stable API: built only with the `reference` feature (which the harness, and this
//! package's own tests and benches, enable).
//!
//! # Example
//!
//! ```
//! use nginx_ketama::ring::reference;
//! use nginx_ketama::{Ring, Server};
//!
//! let servers: Vec<Server> = (9001..=9005).map(|p| Server::new(format!("127.0.0.1:{p}"))).collect();
//! let points = reference::points(servers.iter().map(|s| (s, 1)));
//! let ring = Ring::new(servers.iter().map(|s| (s, 1)))?;
//! assert_eq!(points.len(), ring.len());
//! let i = reference::locate(&points, crc32fast::hash(b"k0"));
//! assert_eq!((i, servers[points[i].1].as_str()), (700, "127.0.0.1:9005"));
//! # Ok::<(), nginx_ketama::RingError>(())
//! ```

use super::POINTS_PER_WEIGHT;
use crate::server::Server;
use crate::version::Libc;

/// The first `n` point hashes of `server`'s chain: point `i` is `crc32(host ‖ 0x00 ‖ port ‖ le32(point
/// i-1))`, with 0 before the first point.
pub fn chain(server: &Server, n: usize) -> Vec<u32> {
    let (host, port) = server.ketama_parts();
    let mut prev = 0u32;
    (0..n)
        .map(|_| {
            let mut input = host.to_vec();
            input.push(0);
            input.extend_from_slice(port);
            input.extend_from_slice(&prev.to_le_bytes());
            prev = crc32fast::hash(&input);
            prev
        })
        .collect()
}

/// Every point nginx generates for `peers` (primary peers in list order, `(server, weight)`), as `(hash,
/// index of the peer that generated it)`, sorted stably by hash and **not** deduplicated: equal hashes stay
/// in generation order. This is nginx built with glibc; see [`sorted_points_with`].
pub fn sorted_points<'a>(peers: impl IntoIterator<Item = (&'a Server, u32)>) -> Vec<(u32, usize)> {
    sorted_points_with(Libc::Glibc, peers)
}

/// Every point nginx generates for `peers`, sorted by hash as `libc`'s `qsort` sorts them and **not**
/// deduplicated: with glibc equal hashes stay in generation order (a stable sort); with musl they are where
/// musl's smoothsort leaves them (the same model of musl's sort as the fast ring, since that order cannot
/// be had any simpler way; it is checked against the real musl on its own).
pub fn sorted_points_with<'a>(libc: Libc, peers: impl IntoIterator<Item = (&'a Server, u32)>) -> Vec<(u32, usize)> {
    let mut points = Vec::new();
    for (i, (server, weight)) in peers.into_iter().enumerate() {
        let n = weight as usize * POINTS_PER_WEIGHT as usize;
        points.extend(chain(server, n).into_iter().map(|h| (h, i)));
    }
    match libc {
        Libc::Glibc => points.sort_by_key(|&(h, _)| h), // stable: the earliest generated point first
        Libc::Musl => super::musl_qsort::sort_by(&mut points, |a, b| a.0.cmp(&b.0)),
    }
    points
}

/// The ring nginx (built with glibc) builds for `peers`: [`sorted_points`] with only the first point of
/// every run of equal hashes kept, as `(hash, index of the peer that generated it)`.
pub fn points<'a>(peers: impl IntoIterator<Item = (&'a Server, u32)>) -> Vec<(u32, usize)> {
    points_with(Libc::Glibc, peers)
}

/// The ring nginx built against `libc` builds for `peers`: [`sorted_points_with`], then the first point of
/// every run of equal hashes kept.
pub fn points_with<'a>(libc: Libc, peers: impl IntoIterator<Item = (&'a Server, u32)>) -> Vec<(u32, usize)> {
    let sorted = sorted_points_with(libc, peers);
    let mut kept: Vec<(u32, usize)> = Vec::with_capacity(sorted.len());
    for p in sorted {
        if kept.last().is_none_or(|last| last.0 != p.0) {
            kept.push(p);
        }
    }
    kept
}

/// The index of the first point whose hash is `≥ hash`, or 0 past the last point (and for no points).
pub fn locate<T>(points: &[(u32, T)], hash: u32) -> usize {
    let i = points.partition_point(|&(p, _)| p < hash);
    if i == points.len() { 0 } else { i }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_starts_like_nginx() {
        // The first three chained values of 127.0.0.1:9001, as recorded from nginx (docs/nginx-algorithm.md §3.1).
        assert_eq!(chain(&Server::new("127.0.0.1:9001"), 3), [0x70533e04, 0x10571e62, 0x1f895401]);
    }

    #[test]
    fn equal_hashes_keep_generation_order_and_dedup_keeps_the_first() {
        let (a, b) = (Server::new("127.0.0.1:20195"), Server::new("127.0.0.1:20412"));
        let all = sorted_points([(&a, 1), (&b, 1)]);
        let shared: Vec<usize> = all.iter().filter(|p| p.0 == 0x32a8_f0fa).map(|p| p.1).collect();
        assert_eq!(shared, [0, 1]);
        let ring = points([(&b, 1), (&a, 1)]);
        assert_eq!(ring.len(), 319);
        assert_eq!(ring[locate(&ring, 0x32a8_f0fa)], (0x32a8_f0fa, 0));
    }

    #[test]
    fn locate_wraps() {
        let pts = [(5u32, ()), (9, ())];
        assert_eq!([0, 5, 6, 9, 10].map(|h| locate(&pts, h)), [0, 0, 1, 1, 0]);
        assert_eq!(locate::<()>(&[], 3), 0);
    }
}
