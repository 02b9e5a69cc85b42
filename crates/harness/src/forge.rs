//! Forging printable keys with a chosen CRC32, to hit exact positions on the ring.
//!
//! CRC32 is affine over GF(2): for a fixed length, `crc(P ‖ S ⊕ δ) = crc(P ‖ S) ⊕ L(δ)` where `L` is linear
//! and depends only on the length of the suffix. We append an 8-character suffix over the 32-character
//! alphabet `@A–Z[\]^_` (`0x40 | five free bits`), whose 40 free bits span all 32 CRC bits, and solve for
//! the bits by Gaussian elimination (see "Reversing CRC – Theory and Practice", Stigge et al., 2006).

/// Characters in the forged suffix.
const SUFFIX_LEN: usize = 8;
/// Free bits per suffix character.
const FREE_BITS: usize = 5;
const VARS: usize = SUFFIX_LEN * FREE_BITS;

/// Solves `crc32(prefix ‖ suffix) = target` for printable suffixes.
#[derive(Debug, Clone)]
pub struct Forger {
    /// Row-reduced system: for each CRC output bit that has a pivot, (pivot variable, row over variables
    /// as a bitmask, and the combination of output bits that row stands for).
    rows: Vec<(usize, u64, u32)>,
}

impl Default for Forger {
    fn default() -> Self {
        Forger::new()
    }
}

impl Forger {
    /// Precomputes the linear map for 8-character suffixes.
    pub fn new() -> Forger {
        let base = [b'@'; SUFFIX_LEN];
        let c0 = crc32fast::hash(&base);
        // Column j: how flipping free bit j changes the CRC (independent of any prefix).
        let cols: Vec<u32> = (0..VARS)
            .map(|j| {
                let mut s = base;
                s[j / FREE_BITS] ^= 1 << (j % FREE_BITS);
                crc32fast::hash(&s) ^ c0
            })
            .collect();
        // Equations: for output bit b, sum_j cols[j].bit(b) * x_j = delta.bit(b). Track which delta bits
        // each reduced row combines (the `rhs` mask) so solving is a parity per row.
        let mut eqs: Vec<(u64, u32)> = (0..32)
            .map(|b| {
                let mut row = 0u64;
                for (j, c) in cols.iter().enumerate() {
                    if c >> b & 1 == 1 {
                        row |= 1 << j;
                    }
                }
                (row, 1u32 << b)
            })
            .collect();
        let mut rows = Vec::new();
        for var in 0..VARS {
            let Some(p) = eqs.iter().position(|&(r, _)| r >> var & 1 == 1) else { continue };
            let (prow, prhs) = eqs.swap_remove(p);
            for e in eqs.iter_mut() {
                if e.0 >> var & 1 == 1 {
                    e.0 ^= prow;
                    e.1 ^= prhs;
                }
            }
            for (_, row, rhs) in rows.iter_mut() {
                if *row >> var & 1 == 1 {
                    *row ^= prow;
                    *rhs ^= prhs;
                }
            }
            rows.push((var, prow, prhs));
        }
        assert_eq!(rows.len(), 32, "the suffix alphabet must span every CRC bit");
        Forger { rows }
    }

    /// A printable key `prefix ‖ suffix` (suffix over `@A–Z[\]^_`) whose CRC32 is `target`.
    pub fn forge(&self, prefix: &[u8], target: u32) -> Vec<u8> {
        let mut key = prefix.to_vec();
        key.extend_from_slice(&[b'@'; SUFFIX_LEN]);
        let delta = crc32fast::hash(&key) ^ target;
        let mut x = 0u64;
        for &(var, _, rhs) in &self.rows {
            if (delta & rhs).count_ones() % 2 == 1 {
                x |= 1 << var;
            }
        }
        let n = prefix.len();
        for j in 0..VARS {
            if x >> j & 1 == 1 {
                key[n + j / FREE_BITS] ^= 1 << (j % FREE_BITS);
            }
        }
        debug_assert_eq!(crc32fast::hash(&key), target);
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forged_keys_hit_their_targets_and_stay_printable() {
        let f = Forger::new();
        let mut t = 0x1234_5678u32;
        for i in 0..5000u32 {
            t = t.wrapping_mul(2_654_435_761).wrapping_add(i);
            for target in [t, 0, u32::MAX, 1, 0x8000_0000] {
                let key = f.forge(format!("arc{i}-").as_bytes(), target);
                assert_eq!(crc32fast::hash(&key), target);
                assert!(key.iter().all(|b| (0x21..0x7f).contains(b)), "{key:?}");
            }
        }
    }
}
