//! musl's `qsort`, modelled step by step, so that the order in which it leaves *equal* elements (and with
//! it the survivor of a ring-point collision, algorithm §3.2) is computed rather than guessed.
//!
//! musl's `qsort` (`src/stdlib/qsort.c`: identical in musl 1.2.3 and 1.2.5, the releases Debian bookworm
//! and trixie package, and with the same steps in 1.2.2; Debian patches nothing there; since 1.2.3 `qsort`
//! is a thin wrapper over `__qsort_r`) is a smoothsort. It is not stable, but it is deterministic: the final order depends only on the
//! input order and on the comparator's answers. This module repeats every comparison, every three-way
//! choice and every rotation musl makes, on the same positions, so it leaves equal elements exactly where
//! musl leaves them. `tests::golden_from_musl` checks that against the real musl (test data recorded by
//! `scripts/musl-qsort-golden`).
//!
//! How the algorithm works (in our words):
//!
//! * The array is kept as a row of *Leonardo heaps*: trees of `L(k)` elements, where `L(0) = L(1) = 1`
//!   and `L(k) = L(k-1) + L(k-2) + 1`. A tree of order `k ≥ 2` is stored as its left subtree (order
//!   `k-1`), then its right subtree (order `k-2`), then its root, so the root is the tree's last element,
//!   the right child sits just before it and the left child `L(k-2)` further back. The trees are laid
//!   out from the largest (leftmost) to the smallest; a bit set records which orders are present (bit `i`
//!   for order `shift + i`, where `shift` is the order of the rightmost tree).
//! * **Growing.** The first element is a tree of order 1. For each further element, the current
//!   rightmost root is settled first: if the two rightmost trees have adjacent orders they are about to be
//!   merged, so the root is only *sifted* down its own tree (swapped, through one rotation of the path,
//!   with its larger child while a child is larger; the left child is taken when it is at least the right
//!   one). Otherwise, when no tree of the next-smaller order still fits to its right, the tree keeps this
//!   size for good, and the root is *trinkled*: moved left along the row of roots while the root of the
//!   tree to its left (its "stepson") is larger than it and, if it has children, larger than both of
//!   them; then sifted down in the tree where it stopped. Then the new element joins: as the root of the
//!   merge of the two rightmost trees (order + 2) when their orders are adjacent, as a tree of order 0 if
//!   the rightmost tree has order 1, else as a tree of order 1.
//! * **Shrinking.** The last root is trinkled; from then on the rightmost root is the largest element
//!   left, so it stays where it is and the heap shrinks by one: a one-element tree simply leaves; a larger
//!   tree leaves its two subtrees behind as trees of their own, and each of their roots is trinkled into
//!   place (left subtree first), in the variant that skips the children check on the first step.
//!
//! Comparisons go through the caller's comparator, which for nginx's points compares the hashes only
//! (`ngx_http_upstream_chash_cmp_points`). musl tests `cmp(a, b) >= 0` or `<= 0` at each step; equal
//! elements therefore never make it move an element, and that is what decides the order of a tie.
//!
//! Positions here are element indices; musl works on byte offsets scaled by the element size, which
//! gives the same decisions for every size (nginx's points are 16 bytes on 64-bit hosts).

use std::cmp::Ordering;

/// The longest path one sift or trinkle can rotate: one element per tree order, which is below 128 for
/// any array that fits in memory (musl sizes its path buffers the same way, for `size_t` lengths).
const MAX_PATH: usize = 128;

/// Sorts `v` exactly as musl's `qsort` sorts it with comparator `cmp`, equal elements included.
pub(crate) fn sort_by<T: Copy, F: FnMut(&T, &T) -> Ordering>(v: &mut [T], cmp: F) {
    let n = v.len();
    if n < 2 {
        // musl returns at once for an empty array, and one element leaves every loop below untouched.
        return;
    }
    let mut heap = Heap { v, cmp, leo: leonardo_numbers() };
    let last = n - 1;
    let mut head = 0;
    // The orders present (bit i: order `order + i`) and the order of the rightmost tree.
    let mut trees: u128 = 1;
    let mut order: usize = 1;

    while head < last {
        if trees & 3 == 3 {
            // The two rightmost trees will be merged under the next element: only sift this root.
            heap.sift(head, order);
            trees >>= 2;
            order += 2;
        } else {
            if heap.leo[order - 1] >= last - head {
                // No tree of the next-smaller order fits after this one: its size is final.
                heap.trinkle(head, trees, order, false);
            } else {
                heap.sift(head, order);
            }
            if order == 1 {
                trees <<= 1;
                order = 0;
            } else {
                trees <<= order - 1;
                order = 1;
            }
        }
        trees |= 1;
        head += 1;
    }
    heap.trinkle(head, trees, order, false);

    while order != 1 || trees != 1 {
        if order <= 1 {
            // A one-element tree leaves; the next tree to the left becomes the rightmost.
            let trail = next_tree(trees);
            trees >>= trail;
            order += trail;
        } else {
            // The root leaves; its subtrees (orders `order - 1` and `order - 2`) become trees of their own.
            trees <<= 2;
            order -= 2;
            trees ^= 7;
            trees >>= 1;
            heap.trinkle(head - heap.leo[order] - 1, trees, order + 1, true);
            trees <<= 1;
            trees |= 1;
            heap.trinkle(head - 1, trees, order, true);
        }
        head -= 1;
    }
}

/// How far the order bit set must shift to bring the next tree's bit to bit 0 (musl's `pntz`). The set is
/// odd whenever musl asks, and not 1 (one tree left) except in a state the sort never reaches, where
/// musl's answer is 0 too.
fn next_tree(trees: u128) -> usize {
    debug_assert!(trees & 1 == 1, "the rightmost tree's bit is always set");
    match (trees - 1).trailing_zeros() {
        128 => 0,
        t => t as usize,
    }
}

/// Every Leonardo number below `usize::MAX`. musl computes them only up to the first one not below the
/// array's length, which is all it ever reads; the rest are never read here either.
fn leonardo_numbers() -> Vec<usize> {
    let mut leo = vec![1usize, 1];
    while let Some(next) = leo[leo.len() - 2].checked_add(leo[leo.len() - 1]).and_then(|s| s.checked_add(1)) {
        leo.push(next);
    }
    leo
}

/// The array being sorted, its comparator and the tree sizes.
struct Heap<'a, T, F> {
    v: &'a mut [T],
    cmp: F,
    /// `leo[k]`: the number of elements in a tree of order `k`.
    leo: Vec<usize>,
}

/// Positions whose elements one step rotates, the first being the element that moves.
struct Path {
    at: [usize; MAX_PATH],
    len: usize,
}

impl Path {
    fn new(first: usize) -> Path {
        let mut at = [0; MAX_PATH];
        at[0] = first;
        Path { at, len: 1 }
    }

    fn push(&mut self, position: usize) {
        self.at[self.len] = position;
        self.len += 1;
    }

    fn first(&self) -> usize {
        self.at[0]
    }
}

impl<T: Copy, F: FnMut(&T, &T) -> Ordering> Heap<'_, T, F> {
    /// `v[a] >= v[b]` by the comparator (musl's `cmp(a, b) >= 0`).
    fn at_least(&mut self, a: usize, b: usize) -> bool {
        (self.cmp)(&self.v[a], &self.v[b]) != Ordering::Less
    }

    /// `v[a] <= v[b]` by the comparator (musl's `cmp(a, b) <= 0`).
    fn at_most(&mut self, a: usize, b: usize) -> bool {
        (self.cmp)(&self.v[a], &self.v[b]) != Ordering::Greater
    }

    /// Moves the element at the path's first position to its last one and every other element one place
    /// back along the path (musl's `cycle`: one rotation instead of a chain of swaps).
    fn rotate(&mut self, path: &Path) {
        let at = &path.at[..path.len];
        if at.len() < 2 {
            return;
        }
        let moving = self.v[at[0]];
        for step in at.windows(2) {
            self.v[step[0]] = self.v[step[1]];
        }
        self.v[at[at.len() - 1]] = moving;
    }

    /// Sifts the root at `root` of a tree of order `order` down to where it is at least both children.
    fn sift(&mut self, mut root: usize, mut order: usize) {
        let mut path = Path::new(root);
        while order > 1 {
            let right = root - 1;
            let left = right - self.leo[order - 2];
            // Compared with the moving element, which stays at the path's first position until the end.
            if self.at_least(path.first(), left) && self.at_least(path.first(), right) {
                break;
            }
            if self.at_least(left, right) {
                path.push(left);
                root = left;
                order -= 1;
            } else {
                path.push(right);
                root = right;
                order -= 2;
            }
        }
        self.rotate(&path);
    }

    /// Moves the root at `root` (of the rightmost tree considered, of order `order`, with the orders to its
    /// left in `trees`) left along the roots while the next root is larger than it and, unless `trusty`
    /// (the first step only), than its children; then sifts it down where it stopped.
    fn trinkle(&mut self, mut root: usize, mut trees: u128, mut order: usize, mut trusty: bool) {
        let mut path = Path::new(root);
        while trees != 1 {
            let stepson = root - self.leo[order];
            if self.at_most(stepson, path.first()) {
                break;
            }
            if !trusty && order > 1 {
                let right = root - 1;
                let left = right - self.leo[order - 2];
                if self.at_least(right, stepson) || self.at_least(left, stepson) {
                    break;
                }
            }
            path.push(stepson);
            root = stepson;
            let trail = next_tree(trees);
            trees >>= trail;
            order += trail;
            trusty = false;
        }
        if !trusty {
            self.rotate(&path);
            self.sift(root, order);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Sorts `(key, id)` pairs by key with the model and returns the ids in the order it leaves them.
    fn model_order(keys: &[u32]) -> Vec<u32> {
        let mut v: Vec<(u32, u32)> = keys.iter().enumerate().map(|(i, &k)| (k, i as u32)).collect();
        sort_by(&mut v, |a, b| a.0.cmp(&b.0));
        v.into_iter().map(|(_, id)| id).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The model sorts: the result is a permutation of the input, ordered by key as the standard
        /// library orders it (any array, many ties, long runs).
        #[test]
        fn sorts_like_the_standard_library(keys in prop::collection::vec(prop_oneof![any::<u32>(), 0..4u32, 0..40u32], 0..2000)) {
            let order = model_order(&keys);
            let mut ids = order.clone();
            ids.sort_unstable();
            prop_assert_eq!(ids, (0..keys.len() as u32).collect::<Vec<_>>());
            let sorted: Vec<u32> = order.iter().map(|&i| keys[i as usize]).collect();
            let mut want = keys.clone();
            want.sort_unstable();
            prop_assert_eq!(sorted, want);
        }
    }

    #[test]
    fn sorted_reversed_and_constant_inputs() {
        for n in [0usize, 1, 2, 3, 5, 9, 15, 100, 1000, 4097] {
            for keys in [
                (0..n as u32).collect::<Vec<_>>(),
                (0..n as u32).rev().collect(),
                vec![7; n],
                (0..n as u32).map(|i| i % 3).collect(),
            ] {
                let sorted: Vec<u32> = model_order(&keys).iter().map(|&i| keys[i as usize]).collect();
                assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "n={n}");
            }
        }
    }

    #[test]
    fn leonardo_numbers_and_next_tree() {
        assert_eq!(leonardo_numbers()[..8], [1, 1, 3, 5, 9, 15, 25, 41]);
        assert!(leonardo_numbers().len() < MAX_PATH);
        assert_eq!(next_tree(0b1011), 1);
        assert_eq!(next_tree(0b1001), 3);
        assert_eq!(next_tree(1 | 1 << 70), 70);
        assert_eq!(next_tree(1), 0);
    }

    /// It is not stable (the reason for this module): some ties come out in a different order than given.
    #[test]
    fn not_stable() {
        let keys = [1, 1, 0, 1, 0, 0, 1, 1];
        let order = model_order(&keys);
        let mut stable: Vec<u32> = (0..keys.len() as u32).collect();
        stable.sort_by_key(|&i| keys[i as usize]);
        assert_ne!(order, stable);
    }

    /// One case recorded from musl: keys in input order and the ids (input positions) in the order musl's
    /// `qsort` left them.
    struct GoldenCase {
        name: String,
        keys: Vec<u32>,
        order: Vec<u32>,
    }

    /// Parses `tests/data/musl-qsort/golden.txt` (format in its header).
    fn golden() -> Vec<GoldenCase> {
        let text = include_str!("../../tests/data/musl-qsort/golden.txt");
        let mut cases = Vec::new();
        let mut lines = text.lines().filter(|l| !l.starts_with('#') && !l.is_empty());
        while let Some(head) = lines.next() {
            let name = head.strip_prefix("case ").unwrap_or_else(|| panic!("expected 'case NAME', got {head:?}"));
            let numbers = |line: Option<&str>, tag: &str, radix: u32| -> Vec<u32> {
                let line = line.unwrap_or_else(|| panic!("{name}: missing '{tag}' line"));
                let rest = line.strip_prefix(tag).unwrap_or_else(|| panic!("{name}: expected '{tag}', got {line:?}"));
                rest.split_ascii_whitespace().map(|x| u32::from_str_radix(x, radix).unwrap()).collect()
            };
            let keys = numbers(lines.next(), "in", 16);
            let order = numbers(lines.next(), "out", 10);
            assert_eq!(keys.len(), order.len(), "{name}");
            cases.push(GoldenCase { name: name.to_string(), keys, order });
        }
        cases
    }

    /// The golden rule: on every array recorded from the real musl (`scripts/musl-qsort-golden`), the model
    /// leaves every element, ties included, exactly where musl left it.
    #[test]
    fn golden_from_musl() {
        let cases = golden();
        assert!(cases.len() >= 100, "only {} cases", cases.len());
        let mut ties_reordered = 0;
        for case in &cases {
            let order = model_order(&case.keys);
            assert_eq!(order, case.order, "case {}", case.name);
            let mut stable: Vec<u32> = (0..case.keys.len() as u32).collect();
            stable.sort_by_key(|&i| case.keys[i as usize]);
            ties_reordered += usize::from(order != stable);
        }
        // The data is worth something only if musl reordered ties in many cases.
        assert!(ties_reordered * 2 > cases.len(), "{ties_reordered} of {} cases reorder ties", cases.len());
    }
}
