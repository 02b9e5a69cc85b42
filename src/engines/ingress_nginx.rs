//! ingress-nginx's `upstream-hash-by` (kubernetes/ingress-nginx, controller-v1.15.1, the last release
//! before the project was retired): `rootfs/etc/nginx/lua/balancer/chash.lua` builds a `resty.chash` ring
//! ([`super::resty_chash`]) from `util.get_nodes` (`rootfs/etc/nginx/lua/util.lua`): one node per endpoint,
//! id `address .. ":" .. port` (an IPv6 address without brackets, as Kubernetes lists it), weight always 1.
//! `balance` hashes the evaluated `upstream-hash-by` value with `find`.
//!
//! `upstream-hash-by-subset` (`chashsubset.lua`) hashes to sets (`set1` … `setN`, endpoints in list order,
//! the last set topped up from the first endpoints) and picks a member at random: [`Subsets`].

use super::resty_chash::Ring;
use std::net::SocketAddr;

/// The id `get_nodes` gives an endpoint: `address:port`, the address without brackets.
pub fn node_id(endpoint: &SocketAddr) -> String {
    format!("{}:{}", endpoint.ip(), endpoint.port())
}

/// The `upstream-hash-by` ring of `endpoints` (index order kept).
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::ingress_nginx;
///
/// let eps = ["10.1.0.5:8080".parse()?, "10.1.0.6:8080".parse()?];
/// let ring = ingress_nginx::ring(&eps);
/// assert_eq!(ring.len(), 320);
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
pub fn ring(endpoints: &[SocketAddr]) -> Ring {
    Ring::new(endpoints.iter().map(|e| (node_id(e).into_bytes(), 1)))
}

/// `upstream-hash-by-subset`: the ring over sets and each set's endpoints (indices into the list).
#[derive(Debug, Clone)]
pub struct Subsets {
    /// The ring over `set1` … `setN`.
    pub ring: Ring,
    /// Each set's members (`subset_size` each).
    pub sets: Vec<Vec<usize>>,
}

impl Subsets {
    /// `build_subset_map` for `endpoints` and `subset_size` (≥ 1).
    pub fn new(endpoints: usize, subset_size: usize) -> Subsets {
        let size = subset_size.max(1);
        let count = endpoints.div_ceil(size);
        let members: Vec<usize> = (0..count * size).map(|k| if k < endpoints { k } else { k - endpoints }).collect();
        let sets: Vec<Vec<usize>> = members.chunks(size).map(<[usize]>::to_vec).collect();
        let ring = Ring::new((1..=count).map(|i| (format!("set{i}").into_bytes(), 1)));
        Subsets { ring, sets }
    }

    /// The set `key` goes to; the endpoint is then one of its members at random.
    pub fn set(&self, key: &[u8]) -> &[usize] {
        &self.sets[self.ring.pick(key)]
    }
}
