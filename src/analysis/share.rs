//! Each server's exact share of the hash space: the sum of the arcs it answers, out of 2³²; or its share of a
//! list of real keys.

use super::picks::{Basis, HASH_SPACE, Pick, PickMap, ServerHealth};
use crate::server::Server;
use crate::upstream::Method;

/// What a count counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// CRC32 values, out of 2³² (every non-empty key hashes to one of them): the uniform figure, exact.
    HashSpace(Basis),
    /// Keys of a list (each key counted once per line it appears on).
    Keys,
}

/// One server's share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerShare {
    /// The server string.
    pub server: Server,
    /// Its ring points (consistent) or slots (plain: its peers' weights).
    pub points: u64,
    /// How many separate arcs of the hash space it answers (adjacent arcs merged, the wrap included); 0
    /// when counting keys.
    pub arcs: usize,
    /// How many CRC32 values (or keys) it answers.
    pub count: u64,
    /// Its peers' state.
    pub health: ServerHealth,
}

/// Every server's share of first picks (with failing servers walked past), and the part that nginx's
/// round-robin code answers; they sum to [`Share::total`] exactly.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::{PickMap, Share};
/// use nginx_ketama::{Method, Peer, Upstream};
///
/// let up = Upstream::builder(Method::Plain)
///     .peer(Peer::new("a:80").with_weight(2))
///     .peer(Peer::new("b:80"))
///     .build()?;
/// let share = Share::of(&PickMap::new(&up));
/// // 32,768 first-step values over 3 slots: 10,923 + 10,923 values to a:80, 10,922 to b:80, each value
/// // standing for 2^17 CRC32 values.
/// assert_eq!(share.servers[0].count, (10_923 + 10_923) << 17);
/// assert_eq!(share.servers[1].count, 10_922 << 17);
/// assert_eq!((share.round_robin, share.total), (0, 1 << 32));
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// The hash method.
    pub method: Method,
    /// What the counts count.
    pub unit: Unit,
    /// Every server, in the map's order (ring or list order).
    pub servers: Vec<ServerShare>,
    /// What nginx's round-robin code answers (more than 20 empty points or slots, an upstream that is never
    /// hashed, or empty keys): which server gets it depends on the worker's state.
    pub round_robin: u64,
    /// The whole: 2³² CRC32 values, or the number of keys.
    pub total: u64,
    /// Whether any peer answers at all (if not, every request fails whatever the shares say).
    pub answerable: bool,
}

impl Share {
    /// The exact shares of the hash space: one pass over the map's segments.
    pub fn of(map: &PickMap) -> Share {
        let n = map.servers().len();
        let mut count = vec![0u64; n];
        let mut arcs = vec![0usize; n];
        let mut round_robin = 0;
        let mut first: Option<Pick> = None;
        let mut last: Option<Pick> = None;
        let mut segments = 0;
        for seg in map.segments() {
            segments += 1;
            first.get_or_insert(seg.pick);
            last = Some(seg.pick);
            match seg.pick {
                Pick::Server(s) => {
                    count[s] += seg.len;
                    arcs[s] += 1;
                }
                Pick::RoundRobin => round_robin += seg.len,
            }
        }
        // The first and the last segment are one arc across 0 when they answer alike.
        if let (Some(Pick::Server(s)), true) = (first, segments > 1 && first == last) {
            arcs[s] -= 1;
        }
        Share::build(map, Unit::HashSpace(map.basis()), count, arcs, round_robin, HASH_SPACE)
    }

    /// The shares of a list of keys: each key routed through the map ([`PickMap::pick_key`]); empty keys
    /// count as round-robin. The keys may be borrowed or owned (streamed from a file, one at a time).
    pub fn of_keys(map: &PickMap, keys: impl IntoIterator<Item = impl AsRef<[u8]>>) -> Share {
        let n = map.servers().len();
        let mut count = vec![0u64; n];
        let (mut round_robin, mut total) = (0, 0);
        for key in keys {
            total += 1;
            match map.pick_key(key.as_ref()) {
                Pick::Server(s) => count[s] += 1,
                Pick::RoundRobin => round_robin += 1,
            }
        }
        Share::build(map, Unit::Keys, count, vec![0; n], round_robin, total)
    }

    fn build(map: &PickMap, unit: Unit, count: Vec<u64>, arcs: Vec<usize>, round_robin: u64, total: u64) -> Share {
        let servers = (0..map.servers().len())
            .map(|s| ServerShare {
                server: map.servers()[s].clone(),
                points: map.points()[s],
                arcs: arcs[s],
                count: count[s],
                health: map.health()[s],
            })
            .collect();
        Share { method: map.method(), unit, servers, round_robin, total, answerable: map.answerable() }
    }

    /// `count / total` (0 when the total is 0).
    pub fn fraction(&self, count: u64) -> f64 {
        if self.total == 0 { 0.0 } else { count as f64 / self.total as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::Peer;
    use crate::upstream::Upstream;

    #[test]
    fn five_servers_sum_to_the_space() {
        for method in [Method::Consistent, Method::Plain] {
            let up = Upstream::builder(method)
                .peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
                .build()
                .unwrap();
            let share = Share::of(&PickMap::new(&up));
            assert_eq!(share.servers.iter().map(|s| s.count).sum::<u64>(), HASH_SPACE);
            assert_eq!(share.round_robin, 0);
            assert!(share.servers.iter().all(|s| s.count > 0 && s.arcs > 0));
        }
    }

    #[test]
    fn a_down_server_hands_its_arcs_on() {
        let up = Upstream::builder(Method::Consistent)
            .peer(Peer::new("a:80"))
            .peer(Peer::new("b:80").with_down(true))
            .build()
            .unwrap();
        let share = Share::of(&PickMap::new(&up));
        // No run of 21 b:80 points on this ring, so a:80 answers everything, in one arc.
        assert_eq!(share.servers[0].count, HASH_SPACE);
        assert_eq!(share.servers[0].arcs, 1);
        assert_eq!((share.servers[1].count, share.servers[1].health), (0, ServerHealth::Down));
    }

    #[test]
    fn keys_are_counted_once_each() {
        let up = Upstream::builder(Method::Consistent).peers(["a:80", "b:80"].map(Peer::new)).build().unwrap();
        let map = PickMap::new(&up);
        let keys: Vec<&[u8]> = vec![b"x", b"y", b"", b"x"];
        let share = Share::of_keys(&map, keys);
        assert_eq!((share.total, share.round_robin, share.unit), (4, 1, Unit::Keys));
        assert_eq!(share.servers.iter().map(|s| s.count).sum::<u64>(), 3);
    }
}
