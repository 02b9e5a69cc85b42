//! The hottest keys of a stream of any length in bounded memory: the Space-Saving algorithm of Metwally,
//! Agrawal and El Abbadi ("Efficient Computation of Frequent and Top-k Elements in Data Streams", ICDT 2005).
//!
//! [`SpaceSaving`] keeps at most `capacity` counters. A key that has one adds one to it. A new key takes a
//! free counter (count 1, error 0); when every counter is taken it takes over the one with the smallest
//! count `c`, with count `c + 1` and error `c` (the evicted keys may have been this one). So for every key
//! with a counter `count − error ≤ true count ≤ count`; a key whose true count is larger than the smallest
//! count has a counter; and while there are no more distinct keys than counters, every count is exact.
//! Memory is bounded by the capacity (each key is held twice: in its counter and in the index), never by
//! the stream's length.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::num::NonZeroUsize;

/// One counter.
#[derive(Debug, Clone)]
struct Slot<K> {
    key: K,
    count: u64,
    error: u64,
}

/// A key and its estimated count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted<'a, K> {
    /// The key.
    pub key: &'a K,
    /// An upper bound of how many times it was seen (the count itself when [`Top::exact`]).
    pub count: u64,
    /// How far `count` may be over the true count: the true count is at least `count − error`.
    pub error: u64,
}

impl<K> Counted<'_, K> {
    /// A lower bound of how many times the key was seen.
    pub fn at_least(&self) -> u64 {
        self.count - self.error
    }
}

/// The `n` keys with the largest counts, and how far they can be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Top<'a, K> {
    /// Largest count first; equal counts by smaller error, then by key.
    pub keys: Vec<Counted<'a, K>>,
    /// Every distinct key had a counter of its own: each count is exact (every error 0).
    pub exact: bool,
    /// No key left out can have been seen more often than any key shown: each shown key's lower bound is at
    /// least the largest count a key left out can have (the next counter's, or the smallest counter's for
    /// a key without one).
    pub certain: bool,
}

/// The Space-Saving counter (see the module's documentation).
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::hot::SpaceSaving;
/// use std::num::NonZeroUsize;
///
/// let mut hot = SpaceSaving::new(NonZeroUsize::new(4).unwrap());
/// for key in ["a", "b", "a", "c", "a", "b"] {
///     hot.insert(key);
/// }
/// let top = hot.top(2);
/// assert!(top.exact && top.certain);
/// assert_eq!(top.keys.iter().map(|c| (c.key.as_str(), c.count)).collect::<Vec<_>>(), [("a", 3), ("b", 2)]);
/// ```
#[derive(Debug, Clone)]
pub struct SpaceSaving<K> {
    capacity: usize,
    slots: Vec<Slot<K>>,
    index: HashMap<K, usize>,
    /// `(count, slot)` of every counter: the smallest first.
    order: BTreeSet<(u64, usize)>,
    total: u64,
    evictions: u64,
}

impl<K: Hash + Eq + Clone + Ord> SpaceSaving<K> {
    /// No keys yet; at most `capacity` counters.
    pub fn new(capacity: NonZeroUsize) -> SpaceSaving<K> {
        SpaceSaving {
            capacity: capacity.get(),
            slots: Vec::new(),
            index: HashMap::new(),
            order: BTreeSet::new(),
            total: 0,
            evictions: 0,
        }
    }

    /// Counts one occurrence of `key` (cloned only when it takes a counter).
    pub fn insert<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.total += 1;
        if let Some(&i) = self.index.get(key) {
            let slot = &mut self.slots[i];
            self.order.remove(&(slot.count, i));
            slot.count += 1;
            self.order.insert((slot.count, i));
            return;
        }
        let key = key.to_owned();
        if self.slots.len() < self.capacity {
            let i = self.slots.len();
            self.index.insert(key.clone(), i);
            self.slots.push(Slot { key, count: 1, error: 0 });
            self.order.insert((1, i));
            return;
        }
        let (min, i) = self.order.pop_first().expect("capacity is at least 1 and every counter is taken");
        self.evictions += 1;
        let slot = &mut self.slots[i];
        self.index.remove::<K>(&slot.key);
        self.index.insert(key.clone(), i);
        *slot = Slot { key, count: min + 1, error: min };
        self.order.insert((min + 1, i));
    }

    /// How many keys were counted (with repeats).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// How many counters at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many counters are taken: the number of distinct keys while it is at most the capacity.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Nothing counted yet.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Every distinct key had a counter of its own (no counter was ever taken over): counts are exact.
    pub fn exact(&self) -> bool {
        self.evictions == 0
    }

    /// The `n` keys with the largest counts (fewer if fewer were seen).
    pub fn top(&self, n: usize) -> Top<'_, K> {
        let mut all: Vec<&Slot<K>> = self.slots.iter().collect();
        all.sort_by(|a, b| b.count.cmp(&a.count).then(a.error.cmp(&b.error)).then_with(|| a.key.cmp(&b.key)));
        let next = all.get(n).map_or(0, |s| s.count);
        let without_counter = if self.exact() { 0 } else { self.order.first().map_or(0, |&(c, _)| c) };
        let left_out = next.max(without_counter);
        let keys: Vec<Counted<'_, K>> =
            all.iter().take(n).map(|s| Counted { key: &s.key, count: s.count, error: s.error }).collect();
        let certain = keys.iter().all(|c| c.at_least() >= left_out);
        Top { keys, exact: self.exact(), certain }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(capacity: usize) -> SpaceSaving<Vec<u8>> {
        SpaceSaving::new(NonZeroUsize::new(capacity).unwrap())
    }

    fn true_counts(stream: &[Vec<u8>]) -> HashMap<Vec<u8>, u64> {
        let mut counts = HashMap::new();
        for k in stream {
            *counts.entry(k.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// A small stream (fewer distinct keys than counters) is counted exactly, largest first, ties by key.
    #[test]
    fn counts_are_exact_while_the_keys_fit() {
        let mut hot = counter(8);
        let stream = "b a c a b a d e a c b".split(' ');
        for k in stream {
            hot.insert(k.as_bytes());
        }
        let top = hot.top(3);
        assert!(top.exact && top.certain);
        let got: Vec<(&[u8], u64, u64)> = top.keys.iter().map(|c| (c.key.as_slice(), c.count, c.error)).collect();
        assert_eq!(got, [(&b"a"[..], 4, 0), (b"b", 3, 0), (b"c", 2, 0)]);
        assert_eq!((hot.total(), hot.len()), (11, 5));
        assert_eq!(hot.top(10).keys.len(), 5);
    }

    /// When keys are evicted the counts are estimates: each true count lies in `[count − error, count]`,
    /// and a key seen more often than the smallest count keeps its counter.
    #[test]
    fn estimates_bound_the_true_counts() {
        // 3 counters; "h" is hot, many cold keys pass through.
        let mut stream = Vec::new();
        for i in 0..60u32 {
            stream.push(b"h".to_vec());
            stream.push(format!("cold{}", i % 20).into_bytes());
            if i % 3 == 0 {
                stream.push(b"w".to_vec());
            }
        }
        let mut hot = counter(3);
        for k in &stream {
            hot.insert(k);
        }
        let truth = true_counts(&stream);
        let top = hot.top(3);
        assert!(!top.exact);
        for c in &top.keys {
            let t = truth[c.key];
            assert!(c.at_least() <= t && t <= c.count, "{:?}: {} ≤ {t} ≤ {}", c.key, c.at_least(), c.count);
        }
        assert_eq!(top.keys[0].key, b"h");
        assert_eq!(top.keys.iter().map(|c| c.count).sum::<u64>(), hot.total(), "the counts sum to the stream");
        // Here the bound matters: some estimate is over its key's true count.
        assert!(top.keys.iter().any(|c| c.error > 0 && c.count > truth[c.key]));
        // The second key's lower bound is below what a key left out may have: not certain.
        assert!(!top.certain);
        assert!(
            hot.top(1).certain,
            "h: at least {} against at most {}",
            hot.top(1).keys[0].at_least(),
            hot.top(2).keys[1].count
        );
    }

    /// Adversarial order: the hot key arrives last, after a long run of distinct keys; its count is then an
    /// over-estimate by exactly the smallest count it took over, and the error says so.
    #[test]
    fn a_late_key_inherits_the_smallest_count_as_its_error() {
        let mut hot = counter(2);
        for k in ["x", "x", "y", "z"] {
            hot.insert(k.as_bytes());
        }
        // "z" took over "y" (count 1): count 2, error 1.
        let top = hot.top(2);
        let got: Vec<(&[u8], u64, u64)> = top.keys.iter().map(|c| (c.key.as_slice(), c.count, c.error)).collect();
        assert_eq!(got, [(&b"x"[..], 2, 0), (b"z", 2, 1)]);
        assert!(!top.exact);
    }

    /// Against exact counting on random Zipf-like streams: every bound holds, and every key seen more often
    /// than the smallest count has a counter.
    #[test]
    fn bounds_hold_on_random_streams() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..20 {
            let keys = 5 + round * 7;
            let stream: Vec<Vec<u8>> = (0..2_000)
                .map(|_| {
                    let r = next() % 1_000_000;
                    // Skewed: key i with weight about 1 / (i + 1).
                    let i = (keys as f64).powf(r as f64 / 1_000_000.0) as u64 - 1;
                    format!("k{i}").into_bytes()
                })
                .collect();
            let mut hot = counter(16);
            for k in &stream {
                hot.insert(k);
            }
            let truth = true_counts(&stream);
            let all = hot.top(usize::MAX);
            for c in &all.keys {
                assert!(c.at_least() <= truth[c.key] && truth[c.key] <= c.count);
            }
            let smallest = all.keys.last().map_or(0, |c| c.count);
            for (k, &t) in &truth {
                if t > smallest {
                    assert!(all.keys.iter().any(|c| c.key == k), "{k:?} seen {t} times has no counter");
                }
            }
            assert_eq!(all.exact, truth.len() <= 16);
        }
    }

    /// A million distinct keys through 100 counters: never more than 100 counters, and the index does not
    /// grow with the stream.
    #[test]
    fn memory_is_bounded_by_the_capacity() {
        let mut hot = counter(100);
        for i in 0..1_000_000u32 {
            hot.insert(&i.to_le_bytes()[..]);
            assert!(hot.len() <= 100);
        }
        assert_eq!(hot.total(), 1_000_000);
        assert_eq!(hot.len(), 100);
        assert!(hot.slots.capacity() <= 128, "{}", hot.slots.capacity());
        assert!(hot.index.capacity() <= 256, "{}", hot.index.capacity());
        assert_eq!(hot.order.len(), 100);
    }
}
