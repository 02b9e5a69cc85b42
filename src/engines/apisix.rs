//! APISIX's `chash` balancer (apache/apisix, `apisix/balancer/chash.lua`, `_M.new`, 3.18.0): a
//! `resty.chash` ring ([`super::resty_chash`]) whose node ids are the upstream's node keys (`host:port`)
//! with **every** `:` replaced by a NUL byte (`str_gsub(serv, ":", str_null)`), and whose weights are
//! divided by their greatest common divisor first (commit dd7bfa7e8, "reduce memory usage when abnormal
//! weights are given in chash").
//!
//! For an IPv4 `ip:port` node of weight `w`, the id is nginx's `host ‖ 0 ‖ port` and the points are the
//! first `160 × w / gcd` of nginx's `160 × w`: equal weights (or coprime ones) give nginx's ring exactly.
//! An IPv6 node `[::1]:80` becomes `[\0\01]\080`, where nginx hashes `[::1]\080`. The hash key is
//! `crc32(key)` as nginx's; where APISIX's key is absent it hashes `remote_addr` instead
//! (`fetch_chash_hash_key`), where nginx goes round-robin for an empty key.

use super::resty_chash::Ring;

/// The id `_M.new` gives a node key: every `:` replaced by a NUL byte.
pub fn node_id(node: &str) -> Vec<u8> {
    node.bytes().map(|b| if b == b':' { 0 } else { b }).collect()
}

/// The ring of `(node key, weight)` nodes (weights divided by their GCD; a node of weight 0 gets no
/// point).
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::apisix;
///
/// // Weights 2 and 4 become 1 and 2.
/// let ring = apisix::ring(&[("10.0.0.1:80", 2), ("10.0.0.2:80", 4)]);
/// assert_eq!(ring.len(), 480);
/// ```
pub fn ring(nodes: &[(&str, u32)]) -> Ring {
    let gcd = nodes.iter().fold(0, |g, &(_, w)| if g == 0 { w } else { gcd(g, w) });
    let gcd = gcd.max(1);
    Ring::new(nodes.iter().map(|&(n, w)| (node_id(n), w / gcd)))
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}
