//! Traefik's `hrw` load-balancing strategy (highest random weight, rendezvous hashing; traefik/traefik
//! v3.7.9, `pkg/server/service/loadbalancer/hrw/hrw.go`, added in v3.6.0 by 02443545e; the ingress-nginx
//! `upstream-hash-by` key from v3.7.0).
//!
//! * **Score** (`getNodeScore`): `h = FNV-1a 64(key + name)` (`hash/fnv`, `New64a`: key first, then the
//!   server's name), `score = float64(h) / 2⁶⁴`, `1 / −ln(score) × weight`.
//! * **Pick** (`nextServer`): over the healthy, unfenced servers in the balancer's order, the first with
//!   a score strictly above the best so far, from 0.0 (a server whose hash is 0 scores −0 and is never
//!   picked).
//! * **Names** (`pkg/server/service/service.go`, `getLoadBalancerServiceHandler`): each server is added
//!   under its URL (`lb.AddServer(server.URL, …)`): `http://10.0.0.1:80` for a Kubernetes endpoint. The
//!   servers are shuffled first (`shuffle(service.Servers, m.rand)`), which only matters for exact ties.
//! * **Key** (`ServeHTTP`): the client IP (`ip.RemoteAddrStrategy`), or the evaluated
//!   `nginxUpstreamHashBy` template when set. [`Pool::pick`] takes the key raw.
//! * **Weights** (`Add`): default 1; a server of weight ≤ 0 is not added.
//!
//! Go's `math.Log` and Rust's `ln` may differ in the last bit; two servers' scores that close are the
//! only place this model could pick differently. Nothing of Traefik runs here, and its `hrw_test.go` has
//! no exact vector (random client IPs from Go's `math/rand` seed 12345, ±10 of 100 requests).

/// A pool of named, weighted servers, in the balancer's order.
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::traefik::Pool;
///
/// let pool = Pool::new([("http://10.0.0.1:80", 1), ("http://10.0.0.2:80", 1)]);
/// assert!(pool.pick(b"203.0.113.9").is_some());
/// ```
#[derive(Debug, Clone)]
pub struct Pool {
    servers: Vec<(String, f64)>,
}

impl Pool {
    /// The pool of `(name, weight)` servers; servers of weight 0 are left out, as `Add` does (their
    /// indices are kept: [`Pool::pick`] never returns them).
    pub fn new(servers: impl IntoIterator<Item = (impl Into<String>, u32)>) -> Pool {
        Pool { servers: servers.into_iter().map(|(n, w)| (n.into(), f64::from(w))).collect() }
    }

    /// The name Traefik gives an endpoint `addr` of a Kubernetes service: `http://addr`.
    pub fn url(addr: &std::net::SocketAddr) -> String {
        format!("http://{addr}")
    }

    /// `getNodeScore` of server `i` for `key`.
    pub fn score(&self, i: usize, key: &[u8]) -> f64 {
        let (name, weight) = &self.servers[i];
        let h = fnv1a64(&[key, name.as_bytes()]);
        let score = h as f64 / 2f64.powi(64);
        (1.0 / -score.ln()) * weight
    }

    /// `nextServer`: the server (index) `key` goes to; `None` when no server scores above 0.
    pub fn pick(&self, key: &[u8]) -> Option<usize> {
        let mut best: (f64, Option<usize>) = (0.0, None);
        for (i, (_, w)) in self.servers.iter().enumerate() {
            if *w <= 0.0 {
                continue;
            }
            let s = self.score(i, key);
            if s > best.0 {
                best = (s, Some(i));
            }
        }
        best.1
    }
}

/// FNV-1a 64 over the concatenation of `parts` (Go's `hash/fnv`, `New64a`).
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a 64's published test values (Fowler, Noll and Vo's `test_fnv.c`): "", "a", "foobar".
    #[test]
    fn fnv1a64_matches_published_values() {
        assert_eq!(fnv1a64(&[b""]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(&[b"foobar"]), 0x8594_4171_f739_67e8);
        assert_eq!(fnv1a64(&[b"foo", b"bar"]), fnv1a64(&[b"foobar"]));
    }

    /// `TestBalancer`'s claim (weights 4 and 1 share requests 80/20), over 20,000 keys instead of 100
    /// random IPs: rendezvous with `1 / −ln(score) × weight` gives each server its weight's share.
    /// `TestBalancerOneServerZeroWeight` and `TestBalancerAllServersZeroWeight`: weight 0 is never picked.
    #[test]
    fn weights_share_requests_as_traefiks_tests_expect() {
        let pool = Pool::new([("first", 4), ("second", 1)]);
        let mut counts = [0u32; 2];
        for i in 0..20_000u32 {
            counts[pool.pick(format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255).as_bytes()).unwrap()] += 1;
        }
        assert!((15_400..16_600).contains(&counts[0]), "{counts:?}");
        let zero = Pool::new([("first", 1), ("second", 0)]);
        assert!((0..100).all(|i: u32| zero.pick(i.to_string().as_bytes()) == Some(0)));
        assert_eq!(Pool::new([("test", 0), ("test2", 0)]).pick(b"k"), None);
    }
}
