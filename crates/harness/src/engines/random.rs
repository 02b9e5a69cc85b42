//! The seeded generator of the engine proofs' topologies and keys: splitmix64, small and deterministic, so
//! that a seed and a topology index name one topology (`verify --engine … --seed S --only I`).

/// A tiny deterministic generator (splitmix64).
#[derive(Debug, Clone)]
pub struct Gen(u64);

impl Gen {
    /// The generator of topology `index` under the master `seed`: each topology its own stream, so one can
    /// be run alone.
    pub fn for_topology(seed: u64, index: usize) -> Gen {
        let mut g = Gen(seed ^ (index as u64).wrapping_add(1).wrapping_mul(0xd1b5_4a32_d192_ed03));
        Gen(g.next_u64())
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value below `n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topology_stream_depends_on_the_seed_and_the_index_only() {
        let first = |seed, index| Gen::for_topology(seed, index).next_u64();
        assert_eq!(first(7, 3), first(7, 3));
        assert_ne!(first(7, 3), first(7, 4));
        assert_ne!(first(7, 3), first(8, 3));
    }
}
