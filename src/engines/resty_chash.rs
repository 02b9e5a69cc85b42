//! `resty.chash` (openresty/lua-resty-balancer, `lib/resty/chash.lua` and `chash.c`, v0.05 and master
//! 1cd4363): the ring under ingress-nginx's `upstream-hash-by` and APISIX's `chash`.
//!
//! * `_precompute`: for each node id (a string) and weight, `160 × weight` points (`CONSISTENT_POINTS`);
//!   `base_hash = crc32(id) ^ 0xffffffff` (`ngx.crc32_short`), then `chash_point_init_crc` chains point
//!   `i` as the CRC-32 of `id ‖ le32(point i-1)` (point -1 = 0): nginx's chain, over the id instead of
//!   `host ‖ 0 ‖ port`.
//! * `chash_point_sort` orders the points by hash.
//! * `_find_id`, from `find(key)`: `crc32(tostring(key))`, the first point with a hash ≥ it, wrapping to
//!   point 0: nginx's lookup.
//!
//! So the first pick is a function of the key's CRC-32 alone, and agreement with nginx is exact over the
//! 2³² values. Not modelled: the order of two points with one hash from different ids (the nodes come from
//! a Lua table's `pairs`, whose order is not specified; here, the order given); retries (`next`).

/// Points per unit of weight (`CONSISTENT_POINTS`).
pub const POINTS_PER_WEIGHT: u32 = 160;

/// A `resty.chash` ring.
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::resty_chash::Ring;
///
/// let ring = Ring::new([(b"10.0.0.1:80".to_vec(), 1), (b"10.0.0.2:80".to_vec(), 2)]);
/// assert_eq!(ring.len(), 480);
/// assert!(ring.pick(b"key") < 2);
/// ```
#[derive(Debug, Clone)]
pub struct Ring {
    /// `(hash, node index)`, by hash.
    points: Vec<(u32, u32)>,
    nodes: usize,
}

impl Ring {
    /// The ring of `(id, weight)` nodes, in this order.
    pub fn new(nodes: impl IntoIterator<Item = (Vec<u8>, u32)>) -> Ring {
        let mut points = Vec::new();
        let mut count = 0;
        for (index, (id, weight)) in nodes.into_iter().enumerate() {
            count += 1;
            let mut base = crc32fast::Hasher::new();
            base.update(&id);
            let mut prev: u32 = 0;
            for _ in 0..weight * POINTS_PER_WEIGHT {
                let mut h = base.clone();
                h.update(&prev.to_le_bytes());
                prev = h.finalize();
                points.push((prev, index as u32));
            }
        }
        // Stable: equal hashes keep the nodes' order.
        points.sort_by_key(|&(h, _)| h);
        Ring { points, nodes: count }
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// `true` without points.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The node (index) a CRC-32 value goes to.
    ///
    /// # Panics
    ///
    /// Panics on an empty ring.
    pub fn pick_crc(&self, crc: u32) -> usize {
        let i = self.points.partition_point(|&(h, _)| h < crc);
        self.points[if i == self.points.len() { 0 } else { i }].1 as usize
    }

    /// The node (index) `key` goes to.
    ///
    /// # Panics
    ///
    /// Panics on an empty ring.
    pub fn pick(&self, key: &[u8]) -> usize {
        self.pick_crc(crc32fast::hash(key))
    }

    /// The answer over all 2³² CRC-32 values: `(first value, node)` segments, ascending, the first at 0.
    pub fn crc32_segments(&self) -> Vec<(u32, usize)> {
        let mut out: Vec<(u32, usize)> = Vec::new();
        let Some(&(_, first)) = self.points.first() else { return out };
        let mut push = |start: u32, node: usize| {
            if out.last().is_none_or(|&(_, n)| n != node) {
                out.push((start, node));
            }
        };
        push(0, first as usize);
        let mut prev: Option<u32> = None;
        for &(h, n) in &self.points {
            // Only the first of equal hashes is ever found.
            if prev == Some(h) {
                continue;
            }
            if let Some(p) = prev {
                push(p + 1, n as usize);
            }
            prev = Some(h);
        }
        let last = prev.expect("a non-empty ring");
        if last < u32::MAX {
            push(last + 1, first as usize);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// openresty/lua-resty-balancer `t/chash.t`, TEST 1 ("find"): nodes `server1` = 10, `server2` = 2,
    /// `server3` = 1, keys `1` … `100000`: 77075, 14743 and 8182 keys, 2080 points. The engine's own
    /// expected output, not ours.
    #[test]
    fn matches_the_libraries_own_test() {
        let ring = Ring::new([(b"server1".to_vec(), 10), (b"server2".to_vec(), 2), (b"server3".to_vec(), 1)]);
        assert_eq!(ring.len(), 2080);
        let mut counts = [0u32; 3];
        for i in 1..=100_000 {
            counts[ring.pick(i.to_string().as_bytes())] += 1;
        }
        assert_eq!(counts, [77075, 14743, 8182]);
    }

    #[test]
    fn segments_follow_the_lookup() {
        let ring = Ring::new([(b"a:1".to_vec(), 1), (b"b:2".to_vec(), 3)]);
        let segs = ring.crc32_segments();
        for (k, &(start, node)) in segs.iter().enumerate() {
            let end = segs.get(k + 1).map_or(u32::MAX, |&(s, _)| s - 1);
            assert_eq!((ring.pick_crc(start), ring.pick_crc(end)), (node, node));
        }
    }
}
