//! The plain `hash $key;` method (Cache::Memcached compatible).
//!
//! Each attempt hashes `[rehash] ‖ key` (the decimal rehash counter is omitted the first time), keeps
//! bits 16..31 of the CRC32 (`(crc >> 16) & 0x7fff`), adds it to a running sum, and picks the weighted
//! slot `sum mod total_weight` in list order (`down` peers keep their slots).

use crate::peer::List;

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
    /// A fresh CRC32 state, cloned for every step: `Hasher::new` detects the CPU's features on every call
    /// (as the ring's lookup does, hash with a prepared state).
    crc: crc32fast::Hasher,
}

impl<'k> RehashSequence<'k> {
    /// A fresh sequence for `key` (sum 0, rehash 0).
    pub fn new(key: &'k [u8]) -> Self {
        Self::with_crc(key, crc32fast::Hasher::new())
    }

    /// A fresh sequence hashing with `crc`, a prepared (never updated) CRC32 state.
    pub(crate) fn with_crc(key: &'k [u8], crc: crc32fast::Hasher) -> Self {
        RehashSequence { key, sum: 0, rehash: 0, crc }
    }

    /// Hashes the next rehash step and returns the new running sum (wrapping like nginx's `uint32_t`).
    ///
    /// Allocation-free: the decimal counter is written into a stack buffer.
    pub fn next_sum(&mut self) -> u32 {
        self.next_step().sum
    }

    /// Hashes the next rehash step and returns all of it: the counter, the CRC32 of `[rehash] ‖ key`, the
    /// 15 bits taken from it and the new running sum.
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::plain::{RehashSequence, RehashStep};
    ///
    /// // docs/nginx-algorithm.md §4: the second step of "k0" hashes "1k0".
    /// let mut seq = RehashSequence::new(b"k0");
    /// seq.next_step();
    /// assert_eq!(seq.next_step(), RehashStep { rehash: 1, crc: 0x7a38d475, step: 31288, sum: 56129 });
    /// ```
    pub fn next_step(&mut self) -> RehashStep {
        let mut h = self.crc.clone();
        if self.rehash > 0 {
            let mut digits = [0u8; 20]; // u64::MAX has 20 decimal digits
            h.update(decimal(self.rehash, &mut digits));
        }
        h.update(self.key);
        let crc = h.finalize();
        let step = step_of(crc);
        self.sum = self.sum.wrapping_add(step);
        let done = RehashStep { rehash: self.rehash, crc, step, sum: self.sum };
        self.rehash += 1;
        done
    }
}

/// The 15 bits of a CRC32 that one plain-hash step adds to the running sum: `(crc >> 16) & 0x7fff`
/// (algorithm §4).
///
/// # Example
///
/// ```
/// assert_eq!(nginx_ketama::plain::step_of(0xe109903f), 24841);
/// ```
#[inline]
pub fn step_of(crc: u32) -> u32 {
    (crc >> 16) & 0x7fff
}

/// One step of a [`RehashSequence`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RehashStep {
    /// The rehash counter (0 for the first step, which hashes the key alone).
    pub rehash: u64,
    /// `crc32(decimal(rehash) ‖ key)` (the counter is omitted when 0).
    pub crc: u32,
    /// [`step_of`]`(crc)`.
    pub step: u32,
    /// The running sum after this step.
    pub sum: u32,
}

/// `n` in decimal ASCII without leading zeros, written at the end of `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
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
    if total == 0 {
        return None;
    }
    let mut w = u64::from(sum) % total;
    for (i, weight) in weights.enumerate() {
        if w < u64::from(weight) {
            return Some(i);
        }
        w -= u64::from(weight);
    }
    None
}

/// What an upstream using plain hash keeps: the weighted slots of its primary and backup lists, and a
/// prepared CRC32 state for the rehash steps.
#[derive(Debug, Clone)]
pub(crate) struct Slots {
    /// Per list (primary, backup): `ends[i]` is the end (exclusive) of peer `i`'s slots, the sum of the weights
    /// of peers `0..=i`, so the last entry is the list's `total_weight` (`down` peers included, as in nginx).
    ends: [Box<[u64]>; 2],
    /// A fresh CRC32 state, never updated (see [`RehashSequence`]).
    crc: crc32fast::Hasher,
}

impl Slots {
    /// The slots of both lists, from their peers' weights in list order.
    pub(crate) fn new(primary: impl IntoIterator<Item = u32>, backup: impl IntoIterator<Item = u32>) -> Slots {
        let ends = |weights: &mut dyn Iterator<Item = u32>| -> Box<[u64]> {
            weights
                .scan(0u64, |end, w| {
                    *end += u64::from(w);
                    Some(*end)
                })
                .collect()
        };
        Slots { ends: [ends(&mut primary.into_iter()), ends(&mut backup.into_iter())], crc: crc32fast::Hasher::new() }
    }

    /// The peer of `list` whose weighted slot holds `sum mod total_weight`: [`slot_owner`], by binary search
    /// over the slot ends.
    ///
    /// # Panics
    ///
    /// Panics if the list is empty (nginx never hashes over an empty list).
    pub(crate) fn owner(&self, list: List, sum: u32) -> usize {
        let ends = match list {
            List::Primary => &self.ends[0],
            List::Backup => &self.ends[1],
        };
        let total = *ends.last().expect("lists used for hashing are not empty");
        let w = u64::from(sum) % total;
        ends.partition_point(|&end| end <= w)
    }

    /// The slot `sum mod total_weight` of `list` (the number [`Slots::owner`] looks up).
    ///
    /// # Panics
    ///
    /// Panics if the list is empty.
    pub(crate) fn slot(&self, list: List, sum: u32) -> u64 {
        u64::from(sum) % self.total(list)
    }

    /// `total_weight` of `list` (`down` peers included); 0 for an empty list.
    pub(crate) fn total(&self, list: List) -> u64 {
        self.ends(list).last().copied().unwrap_or(0)
    }

    fn ends(&self, list: List) -> &[u64] {
        match list {
            List::Primary => &self.ends[0],
            List::Backup => &self.ends[1],
        }
    }

    /// The rehash sequence of one request for `key`, hashing with the prepared CRC32 state.
    pub(crate) fn sequence<'k>(&self, key: &'k [u8]) -> RehashSequence<'k> {
        RehashSequence::with_crc(key, self.crc.clone())
    }
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
    fn decimal_matches_to_string() {
        let mut buf = [0u8; 20];
        for n in [0, 1, 9, 10, 11, 99, 100, 12345, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes(), "{n}");
        }
    }

    #[test]
    fn slots_follow_weights_in_list_order() {
        let owners: Vec<_> = (0..6).map(|w| slot_owner([2, 1, 3], w).unwrap()).collect();
        assert_eq!(owners, [0, 0, 1, 2, 2, 2]);
        assert_eq!(slot_owner(Vec::<u32>::new(), 3), None);
    }

    #[test]
    fn rehash_steps_equal_the_allocating_definition() {
        let key = b"/some/key";
        let mut s = RehashSequence::new(key);
        let mut sum = 0u32;
        for rehash in 0..250u32 {
            let mut input = if rehash == 0 { Vec::new() } else { rehash.to_string().into_bytes() };
            input.extend_from_slice(key);
            sum = sum.wrapping_add((crc32fast::hash(&input) >> 16) & 0x7fff);
            assert_eq!(s.next_sum(), sum, "rehash {rehash}");
        }
    }

    proptest::proptest! {
        #[test]
        fn slots_equal_slot_owner(
            primary in proptest::collection::vec(1..=100u32, 1..20),
            backup in proptest::collection::vec(1..=100u32, 0..5),
            sums in proptest::collection::vec(proptest::prelude::any::<u32>(), 1..50),
        ) {
            let slots = Slots::new(primary.iter().copied(), backup.iter().copied());
            for sum in sums {
                let want = slot_owner(primary.iter().copied(), sum);
                proptest::prop_assert_eq!(Some(slots.owner(List::Primary, sum)), want);
                if !backup.is_empty() {
                    let want = slot_owner(backup.iter().copied(), sum);
                    proptest::prop_assert_eq!(Some(slots.owner(List::Backup, sum)), want);
                }
            }
        }
    }
}
