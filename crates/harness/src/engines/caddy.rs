//! Caddy's random topologies: `reverse_proxy` with `lb_policy header X-Key` over a pool of 2–7 upstreams
//! in an order other than the backends' (the order breaks ties), the `Caddyfile` that holds one, and random
//! keys (rendezvous over xxHash64 or FNV-1a has no boundary computable from the key).

use super::random::Gen;
use nginx_ketama::engines::caddy::{Pool, Release};
use std::net::SocketAddr;

/// Random keys per topology unless asked otherwise.
pub const DEFAULT_KEYS: usize = 300;
/// Topologies per release unless asked otherwise.
pub const DEFAULT_TOPOLOGIES: usize = 4;

/// Topology `index`'s pool: 2 to all of `backends`, rotated by the index.
pub fn pool(index: usize, backends: &[SocketAddr], rng: &mut Gen) -> Vec<SocketAddr> {
    let n = 2 + rng.below(backends.len() as u64 - 1) as usize;
    let mut pool: Vec<SocketAddr> = backends[..n].to_vec();
    pool.rotate_left(index % n);
    pool
}

/// The model of `pool` under `release`.
pub fn model(release: Release, pool: &[SocketAddr]) -> Pool {
    Pool::new(release, pool.iter().map(SocketAddr::to_string))
}

/// The deliberately wrong model of `verify --engine caddy --wrong-model`: the other release's rule (2.6.2's
/// FNV-1a 32 of key + upstream for 2.8 on, xxHash64 of upstream + key for 2.6.2).
pub fn wrong_model(release: Release, pool: &[SocketAddr]) -> Pool {
    let other = if release == Release::V2_6 { Release::V2_11 } else { Release::V2_6 };
    model(other, pool)
}

/// The `Caddyfile` of `pool` with its front on 127.0.0.1:`port`: no admin endpoint, no HTTPS, HTTP/1.1.
pub fn config(pool: &[SocketAddr], port: u16) -> String {
    let to: Vec<String> = pool.iter().map(SocketAddr::to_string).collect();
    format!(
        "{{\n\tadmin off\n\tauto_https off\n\tskip_install_trust\n\tservers {{\n\t\tprotocols h1\n\t}}\n}}\n\n\
         http://:{port} {{\n\tbind 127.0.0.1\n\treverse_proxy {{\n\t\tto {}\n\t\tlb_policy header X-Key\n\t}}\n}}\n",
        to.join(" ")
    )
}
