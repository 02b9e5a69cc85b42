//! The plain `hash $key;` method (Cache::Memcached compatible).
//!
//! Each attempt hashes `[rehash] ‖ key` (the decimal rehash counter is omitted the first time), keeps
//! bits 16..31 of the CRC32 (`(crc >> 16) & 0x7fff`), adds it to a running sum, and picks the weighted
//! slot `sum mod total_weight` in list order (`down` peers keep their slots).

/// The rehash sequence of one request: successive running sums for one key.
///
/// # Example
///
/// ```
/// use nginx_ketama::plain::RehashSequence;
///
/// // docs/nginx-algorithm.md §4 and §11 (worked example 5): key "k0" over five peers of weight 1 first
/// // picks slot 1, then slot 4.
/// let mut seq = RehashSequence::new(b"k0");
/// assert_eq!(seq.next_sum(), 24841);
/// assert_eq!(seq.next_sum() % 5, 4);
/// ```
#[derive(Debug, Clone)]
pub struct RehashSequence<'k> {
    key: &'k [u8],
    sum: u32,
    rehash: u64,
}

impl<'k> RehashSequence<'k> {
    /// A fresh sequence for `key` (sum 0, rehash 0).
    pub fn new(key: &'k [u8]) -> Self {
        RehashSequence { key, sum: 0, rehash: 0 }
    }

    /// Hashes the next rehash step and returns the new running sum (wrapping like nginx's `uint32_t`).
    pub fn next_sum(&mut self) -> u32 {
        let mut h = crc32fast::Hasher::new();
        if self.rehash > 0 {
            h.update(self.rehash.to_string().as_bytes());
        }
        h.update(self.key);
        let step = (h.finalize() >> 16) & 0x7fff;
        self.sum = self.sum.wrapping_add(step);
        self.rehash += 1;
        self.sum
    }
}

/// The list index whose weighted slot contains `sum mod total_weight`.
///
/// `weights` are the peers' weights in list order. Returns `None` when `weights` sum to 0.
///
/// # Example
///
/// ```
/// // Weights 2, 1, 3 own slots [0,1], [2], [3,4,5].
/// assert_eq!(nginx_ketama::plain::slot_owner([2u32, 1, 3], 2), Some(1));
/// assert_eq!(nginx_ketama::plain::slot_owner([2u32, 1, 3], 11), Some(2));
/// ```
pub fn slot_owner<I>(weights: I, sum: u32) -> Option<usize>
where
    I: IntoIterator<Item = u32>,
    I::IntoIter: Clone,
{
    let weights = weights.into_iter();
    let total: u64 = weights.clone().map(u64::from).sum();
    slot_in(weights, total, sum)
}

/// [`slot_owner`] with the total weight already known (the upstream keeps it, so the routing paths walk
/// the weights once per rehash step instead of twice).
pub(crate) fn slot_in(weights: impl IntoIterator<Item = u32>, total: u64, sum: u32) -> Option<usize> {
    if total == 0 {
        return None;
    }
    let mut w = u64::from(sum) % total;
    for (i, weight) in weights.into_iter().enumerate() {
        if w < u64::from(weight) {
            return Some(i);
        }
        w -= u64::from(weight);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_vectors() {
        // Algorithm §4: k0 → h0 = 24841 → slot 1; h1 = 31288, so the second sum is 56129 → slot 4.
        let mut s = RehashSequence::new(b"k0");
        assert_eq!(s.next_sum(), 24841);
        assert_eq!(s.next_sum(), 24841 + 31288);
        assert_eq!(RehashSequence::new(b"k1").next_sum(), 5646);
        assert_eq!(slot_owner([1, 1, 1, 1, 1], 24841), Some(1));
    }

    #[test]
    fn rehash_prefix_is_decimal_without_separator() {
        let mut s = RehashSequence::new(b"key");
        let first = s.next_sum();
        let second = s.next_sum();
        assert_eq!(first, (crc32fast::hash(b"key") >> 16) & 0x7fff);
        assert_eq!(second - first, (crc32fast::hash(b"1key") >> 16) & 0x7fff);
        for _ in 2..10 {
            s.next_sum();
        }
        let before = s.sum;
        assert_eq!(s.next_sum() - before, (crc32fast::hash(b"10key") >> 16) & 0x7fff);
    }

    #[test]
    fn slots_follow_weights_in_list_order() {
        let owners: Vec<_> = (0..6).map(|w| slot_owner([2, 1, 3], w).unwrap()).collect();
        assert_eq!(owners, [0, 0, 1, 2, 2, 2]);
        assert_eq!(slot_owner(Vec::<u32>::new(), 3), None);
    }
}
