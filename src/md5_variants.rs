//! MD5 rings that are **not** what nginx does, kept here so their answers can be compared with nginx's.
//!
//! Popular answers to "which backend does nginx pick for `hash $key consistent`?" describe one of these.
//! Both disagree with nginx on most keys; `tests/md5_disagreement.rs` measures by how much. Use them only to
//! talk to systems that really implement them (memcached clients built on libketama, for example).
//!
//! NGINX-DIFF: this whole module is deliberately different from nginx.

use crate::server::Server;
use md5::{Digest, Md5};

/// A sorted ring of (point, owner) pairs with "first point ≥ hash, wrap to 0" lookup.
#[derive(Debug, Clone)]
struct SortedRing {
    points: Vec<(u32, u32)>,
    servers: Vec<Server>,
}

impl SortedRing {
    /// The servers, and how many of the 2³² hash values land on each one's points (a key hashing above
    /// the last point wraps to the first).
    fn space(&self) -> (&[Server], Vec<u64>) {
        let mut space = vec![0u64; self.servers.len()];
        let mut prev: Option<u32> = None;
        for &(p, owner) in &self.points {
            space[owner as usize] += match prev {
                None => u64::from(p) + 1,
                Some(q) => u64::from(p - q),
            };
            prev = Some(p);
        }
        if let (Some(&(_, first)), Some(last)) = (self.points.first(), prev) {
            space[first as usize] += u64::from(u32::MAX - last);
        }
        (&self.servers, space)
    }

    fn owner(&self, hash: u32) -> Option<&Server> {
        if self.points.is_empty() {
            return None;
        }
        let i = self.points.partition_point(|&(p, _)| p < hash);
        let (_, owner) = self.points[if i == self.points.len() { 0 } else { i }];
        Some(&self.servers[owner as usize])
    }
}

/// The first four bytes of an MD5 digest as a little-endian `u32` (libketama's `ketama_hashi`).
fn md5_le32(bytes: &[u8]) -> u32 {
    let d = Md5::digest(bytes);
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

/// libketama's ring (Richard Jones, last.fm, 2007), the original "ketama".
///
/// Each server gets `floor(weight / total_weight × 40 × servers)` MD5 digests of `"<server>-<k>"`, and
/// every digest yields four little-endian points. A key's hash is the first four bytes of `md5(key)`.
///
/// NGINX-DIFF: nginx uses CRC32 over `host ‖ 0 ‖ port ‖ previous point`, not MD5 of `server-k`.
///
/// # Example
///
/// ```
/// use nginx_ketama::{md5_variants::LibketamaRing, Server};
///
/// let servers = [Server::new("10.0.1.1:11211"), Server::new("10.0.1.2:11211")];
/// let ring = LibketamaRing::new(servers.iter().map(|s| (s, 1)));
/// assert_eq!(ring.len(), 320);
/// assert!(ring.owner(b"some key").is_some());
/// ```
#[derive(Debug, Clone)]
pub struct LibketamaRing(SortedRing);

impl LibketamaRing {
    /// The servers in list order, and how many of the 2³² values of the key's hash land on each one's
    /// points (duplicate points counted once, for the owner the sort left first).
    pub fn space(&self) -> (&[Server], Vec<u64>) {
        self.0.space()
    }

    /// Builds the ring from `(server, weight)` pairs.
    pub fn new<'a>(servers: impl IntoIterator<Item = (&'a Server, u32)>) -> LibketamaRing {
        let list: Vec<(&Server, u32)> = servers.into_iter().collect();
        let total: f64 = list.iter().map(|&(_, w)| f64::from(w)).sum();
        let n = list.len() as f64;
        let mut points = Vec::new();
        for (owner, &(server, weight)) in list.iter().enumerate() {
            let pct = f64::from(weight) / total;
            let ks = (pct * 40.0 * n).floor() as u32;
            for k in 0..ks {
                let d = Md5::digest(format!("{server}-{k}").as_bytes());
                for h in 0..4 {
                    let p = u32::from_le_bytes([d[h * 4], d[h * 4 + 1], d[h * 4 + 2], d[h * 4 + 3]]);
                    points.push((p, owner as u32));
                }
            }
        }
        points.sort_by_key(|&(p, _)| p);
        LibketamaRing(SortedRing { points, servers: list.iter().map(|&(s, _)| s.clone()).collect() })
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.0.points.len()
    }

    /// `true` without points.
    pub fn is_empty(&self) -> bool {
        self.0.points.is_empty()
    }

    /// The server libketama maps `key` to.
    pub fn owner(&self, key: &[u8]) -> Option<&Server> {
        self.0.owner(md5_le32(key))
    }
}

/// The widely copied "MD5 of `server:i`, first 4 bytes, 160 virtual nodes" ring.
///
/// Each server gets `160 × weight` points `md5_le32("<server>:<i>")`; a key hashes to `md5_le32(key)`.
/// This is what many blog posts and answers present as nginx's algorithm.
///
/// NGINX-DIFF: nginx uses CRC32, hashes `host ‖ 0 ‖ port` chained through the previous point, and never
/// formats `server:i`.
///
/// # Example
///
/// ```
/// use nginx_ketama::{md5_variants::Md5VnodeRing, Server};
///
/// let servers = [Server::new("a:80"), Server::new("b:80")];
/// let ring = Md5VnodeRing::new(servers.iter().map(|s| (s, 2)));
/// assert_eq!(ring.len(), 640);
/// ```
#[derive(Debug, Clone)]
pub struct Md5VnodeRing(SortedRing);

impl Md5VnodeRing {
    /// The servers in list order, and how many of the 2³² values of the key's hash land on each one's
    /// points (duplicate points counted once, for the owner the sort left first).
    pub fn space(&self) -> (&[Server], Vec<u64>) {
        self.0.space()
    }

    /// Builds the ring from `(server, weight)` pairs.
    pub fn new<'a>(servers: impl IntoIterator<Item = (&'a Server, u32)>) -> Md5VnodeRing {
        let list: Vec<(&Server, u32)> = servers.into_iter().collect();
        let mut points = Vec::new();
        for (owner, &(server, weight)) in list.iter().enumerate() {
            for i in 0..160 * weight {
                points.push((md5_le32(format!("{server}:{i}").as_bytes()), owner as u32));
            }
        }
        points.sort_by_key(|&(p, _)| p);
        Md5VnodeRing(SortedRing { points, servers: list.iter().map(|&(s, _)| s.clone()).collect() })
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.0.points.len()
    }

    /// `true` without points.
    pub fn is_empty(&self) -> bool {
        self.0.points.is_empty()
    }

    /// The server this ring maps `key` to.
    pub fn owner(&self, key: &[u8]) -> Option<&Server> {
        self.0.owner(md5_le32(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_le32_known_answer() {
        // md5("") = d41d8cd98f00b204e9800998ecf8427e
        assert_eq!(md5_le32(b""), 0xd98c1dd4);
    }

    #[test]
    fn space_sums_to_the_whole_hash() {
        let s = [Server::new("a"), Server::new("b"), Server::new("c")];
        let (_, space) = Md5VnodeRing::new([(&s[0], 1), (&s[1], 2), (&s[2], 1)]).space();
        assert_eq!(space.iter().sum::<u64>(), 1 << 32);
        // Brute force on a sample of hashes: the owner of each hash is the server whose space holds it.
        let ring = LibketamaRing::new([(&s[0], 1), (&s[1], 1)]);
        let (_, space) = ring.space();
        assert_eq!(space.iter().sum::<u64>(), 1 << 32);
        let mut counts = [0u64; 2];
        for h in (0..u32::MAX).step_by(65_537) {
            counts[usize::from(ring.0.owner(h).unwrap() == &s[1])] += 1;
        }
        for i in 0..2 {
            let expected = space[i] as f64 / 65_537.0;
            assert!((counts[i] as f64 - expected).abs() <= ring.len() as f64, "{counts:?} {space:?}");
        }
    }

    #[test]
    fn libketama_point_count_follows_weights() {
        let s = [Server::new("a"), Server::new("b"), Server::new("c")];
        let r = LibketamaRing::new([(&s[0], 1), (&s[1], 1), (&s[2], 2)]);
        // floor(1/4*40*3)=30 digests → 120 points; weight 2 → 60 digests → 240 points.
        assert_eq!(r.len(), 120 + 120 + 240);
    }
}
