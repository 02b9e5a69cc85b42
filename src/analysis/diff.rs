//! What changes between two upstreams: the exact part of the hash space whose answer moves, from which
//! server to which, and who gains and loses. The two [`PickMap`]s are merged in one linear walk
//! ([`PickMap::merge`]); servers are matched by their server string, so a respelled server (`9001` →
//! `09001`) is a different server.

use super::picks::{HASH_SPACE, Pick, PickMap};
use super::share::Unit;
use crate::server::Server;
use std::collections::HashMap;

/// Where some keys go before and after (indices into [`Diff::servers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Move {
    /// Who answered before.
    pub from: Pick,
    /// Who answers after.
    pub to: Pick,
}

/// One server's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerChange {
    /// The server string.
    pub server: Server,
    /// What it answered before.
    pub before: u64,
    /// What it answers after.
    pub after: u64,
    /// What moved to it from others (or from round-robin).
    pub gained: u64,
    /// What moved from it to others (or to round-robin).
    pub lost: u64,
}

/// The difference between two maps: an exact from→to matrix of moved shares.
///
/// Round-robin counts as one more owner: keys that fall to round-robin on both sides do not move (though
/// round-robin may send them elsewhere).
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::{Diff, PickMap};
/// use nginx_ketama::{Method, Peer, Upstream};
///
/// let servers = |n: u16| (9001..9001 + n).map(|p| Peer::new(format!("127.0.0.1:{p}")));
/// let four = Upstream::builder(Method::Consistent).peers(servers(4)).build()?;
/// let five = Upstream::builder(Method::Consistent).peers(servers(5)).build()?;
/// let diff = Diff::of(&PickMap::new(&four), &PickMap::new(&five));
/// // Adding a server moves keys only to it.
/// assert!(diff.moves.iter().all(|(m, _)| diff.server_of(m.to).unwrap().as_str() == "127.0.0.1:9005"));
/// assert_eq!(diff.moved, diff.changes[4].gained);
/// assert_eq!(Diff::of(&PickMap::new(&five), &PickMap::new(&five)).moved, 0);
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diff {
    /// What the counts count.
    pub unit: Unit,
    /// The unit of the second map, when it differs (e.g. a plain hash against a consistent one).
    pub to_unit: Unit,
    /// Every server of either side: the first map's in its order, then the second's new ones.
    pub servers: Vec<Server>,
    /// The moved parts, largest first: only `from != to`.
    pub moves: Vec<(Move, u64)>,
    /// The total that moved.
    pub moved: u64,
    /// The whole (2³² or the number of keys).
    pub total: u64,
    /// Per server (in [`Diff::servers`] order): before, after, gained, lost.
    pub changes: Vec<ServerChange>,
    /// Round-robin's part before and after.
    pub round_robin: (u64, u64),
}

impl Diff {
    /// The exact difference over the hash space, in one merge of the two maps' segments.
    pub fn of(from: &PickMap, to: &PickMap) -> Diff {
        let mut acc = Accumulator::new(from, to);
        for o in from.merge(to) {
            acc.add(o.a, o.b, o.len);
        }
        acc.finish(Unit::HashSpace(from.basis()), Unit::HashSpace(to.basis()), HASH_SPACE)
    }

    /// The difference over a list of keys, each routed through both maps ([`PickMap::pick_key`]). The keys
    /// may be borrowed or owned (streamed from a file, one at a time).
    pub fn of_keys(from: &PickMap, to: &PickMap, keys: impl IntoIterator<Item = impl AsRef<[u8]>>) -> Diff {
        let mut acc = Accumulator::new(from, to);
        let mut total = 0;
        for key in keys {
            let key = key.as_ref();
            acc.add(from.pick_key(key), to.pick_key(key), 1);
            total += 1;
        }
        acc.finish(Unit::Keys, Unit::Keys, total)
    }

    /// As [`Diff::of_keys`] where the change changes the key too (a new `hash` expression): each request's
    /// key before and after.
    pub fn of_key_pairs<K: AsRef<[u8]>>(from: &PickMap, to: &PickMap, pairs: impl IntoIterator<Item = (K, K)>) -> Diff {
        let mut acc = Accumulator::new(from, to);
        let mut total = 0;
        for (a, b) in pairs {
            acc.add(from.pick_key(a.as_ref()), to.pick_key(b.as_ref()), 1);
            total += 1;
        }
        acc.finish(Unit::Keys, Unit::Keys, total)
    }

    /// The server a [`Pick`] of this diff names (`None` for round-robin).
    pub fn server_of(&self, pick: Pick) -> Option<&Server> {
        match pick {
            Pick::Server(s) => Some(&self.servers[s]),
            Pick::RoundRobin => None,
        }
    }

    /// `count / total`.
    pub fn fraction(&self, count: u64) -> f64 {
        if self.total == 0 { 0.0 } else { count as f64 / self.total as f64 }
    }
}

/// Sums moved shares: in a dense matrix when it has no more cells than the maps have segments (so that
/// clearing and reading it stays linear in the ring's size), in a hash map otherwise.
struct Accumulator {
    servers: Vec<Server>,
    /// Union index of each server of the first and of the second map.
    from_index: Vec<usize>,
    to_index: Vec<usize>,
    before: Vec<u64>,
    after: Vec<u64>,
    /// `(servers + 1)²` cells (the last row and column are round-robin), or empty.
    dense: Vec<u64>,
    sparse: HashMap<(usize, usize), u64>,
}

impl Accumulator {
    fn new(from: &PickMap, to: &PickMap) -> Accumulator {
        let mut servers: Vec<Server> = from.servers().to_vec();
        let mut index: HashMap<&Server, usize> = from.servers().iter().enumerate().map(|(i, s)| (s, i)).collect();
        let from_index: Vec<usize> = (0..servers.len()).collect();
        let mut to_index = Vec::with_capacity(to.servers().len());
        for s in to.servers() {
            let i = *index.entry(s).or_insert_with(|| {
                servers.push(s.clone());
                servers.len() - 1
            });
            to_index.push(i);
        }
        let k = servers.len() + 1;
        let segments = from.segments().len() + to.segments().len();
        let dense = if k * k <= segments { vec![0; k * k] } else { Vec::new() };
        Accumulator {
            before: vec![0; k],
            after: vec![0; k],
            servers,
            from_index,
            to_index,
            dense,
            sparse: HashMap::new(),
        }
    }

    /// Union index; round-robin is the last one.
    fn union(&self, pick: Pick, side: &[usize]) -> usize {
        match pick {
            Pick::Server(s) => side[s],
            Pick::RoundRobin => self.servers.len(),
        }
    }

    fn add(&mut self, a: Pick, b: Pick, n: u64) {
        let (a, b) = (self.union(a, &self.from_index), self.union(b, &self.to_index));
        self.before[a] += n;
        self.after[b] += n;
        if a != b {
            if self.dense.is_empty() {
                *self.sparse.entry((a, b)).or_insert(0) += n;
            } else {
                self.dense[a * (self.servers.len() + 1) + b] += n;
            }
        }
    }

    fn finish(self, unit: Unit, to_unit: Unit, total: u64) -> Diff {
        let k = self.servers.len() + 1;
        let mut cells: Vec<((usize, usize), u64)> = if self.dense.is_empty() {
            self.sparse.into_iter().collect()
        } else {
            self.dense.iter().enumerate().filter(|&(_, &n)| n > 0).map(|(c, &n)| ((c / k, c % k), n)).collect()
        };
        cells.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        let rr = self.servers.len();
        let pick = |i: usize| if i == rr { Pick::RoundRobin } else { Pick::Server(i) };
        let mut gained = vec![0u64; k];
        let mut lost = vec![0u64; k];
        for &((a, b), n) in &cells {
            lost[a] += n;
            gained[b] += n;
        }
        let changes = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| ServerChange {
                server: s.clone(),
                before: self.before[i],
                after: self.after[i],
                gained: gained[i],
                lost: lost[i],
            })
            .collect();
        let moved = cells.iter().map(|c| c.1).sum();
        Diff {
            unit,
            to_unit,
            moves: cells.into_iter().map(|((a, b), n)| (Move { from: pick(a), to: pick(b) }, n)).collect(),
            moved,
            total,
            changes,
            round_robin: (self.before[rr], self.after[rr]),
            servers: self.servers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::Peer;
    use crate::upstream::{Method, Upstream};

    fn up(method: Method, spec: &[(&str, u32)]) -> Upstream {
        Upstream::builder(method).peers(spec.iter().map(|&(s, w)| Peer::new(s).with_weight(w))).build().unwrap()
    }

    #[test]
    fn respelling_moves_exactly_the_respelled_servers_arcs_and_their_neighbours() {
        let a = up(Method::Consistent, &[("127.0.0.1:9001", 1), ("127.0.0.1:9002", 1), ("127.0.0.1:9003", 1)]);
        let b = up(Method::Consistent, &[("127.0.0.1:09001", 1), ("127.0.0.1:9002", 1), ("127.0.0.1:9003", 1)]);
        let d = Diff::of(&PickMap::new(&a), &PickMap::new(&b));
        // 9001 loses everything; 09001 gains its own arcs, taken from everyone.
        assert_eq!(d.changes[0].after, 0);
        assert_eq!(d.changes[0].lost, d.changes[0].before);
        assert_eq!(d.changes[3].server.as_str(), "127.0.0.1:09001");
        assert_eq!(d.changes[3].gained, d.changes[3].after);
        assert_eq!(d.moved, d.changes.iter().map(|c| c.gained).sum::<u64>());
        let before: u64 = d.changes.iter().map(|c| c.before).sum();
        assert_eq!(before + d.round_robin.0, HASH_SPACE);
    }

    #[test]
    fn sparse_and_dense_agree() {
        let a = up(Method::Consistent, &[("a:1", 1), ("b:1", 2), ("c:1", 1)]);
        let b = up(Method::Consistent, &[("a:1", 1), ("b:1", 1), ("d:1", 3)]);
        let (ma, mb) = (PickMap::new(&a), PickMap::new(&b));
        let dense = Diff::of(&ma, &mb);
        let mut acc = Accumulator::new(&ma, &mb);
        assert!(!acc.dense.is_empty(), "few servers: Diff::of used the dense matrix");
        acc.dense.clear();
        for o in ma.merge(&mb) {
            acc.add(o.a, o.b, o.len);
        }
        let sparse = acc.finish(dense.unit, dense.to_unit, HASH_SPACE);
        assert_eq!(dense, sparse);
        assert!(dense.moved > 0);
    }
}
