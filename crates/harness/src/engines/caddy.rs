//! Caddy's random topologies: `reverse_proxy` over a pool of 2–7 upstreams in an order other than the
//! backends' (the order breaks ties), with one hashing `lb_policy` each — `header X-Key`, `uri_hash`, and
//! from 2.7 `query k` and `client_ip_hash` ([`policies`]); `ip_hash` on every release — the `Caddyfile`
//! that holds one, and the requests with the key each policy hashes (rendezvous over xxHash64 or FNV-1a
//! has no boundary computable from the key, so the keys are random). Every request carries its key: the
//! fallback of an absent key is not proven.

use super::backends::Request;
use super::random::Gen;
use nginx_ketama::analysis::compare::sample_key;
use nginx_ketama::engines::caddy::{Policy, Pool, Release, ip_key, query_key, query_values};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Random requests per topology unless asked otherwise.
pub const DEFAULT_KEYS: usize = 300;
/// Topologies per policy by default (each its own pool).
pub const POOLS_PER_POLICY: usize = 2;
/// The query parameter of the `query` topologies.
pub const QUERY_PARAM: &str = "k";
/// The `trusted_proxies` of the `client_ip_hash` topologies, 127.0.0.0/9: a request from there has its
/// client address from `X-Forwarded-For`, one from the rest of 127.0.0.0/8 its peer address.
pub const TRUSTED: (Ipv4Addr, u8) = (Ipv4Addr::new(127, 0, 0, 0), 9);

/// The hashing policies `release` is proven on, in the order the topologies take them (2.6.2 has no
/// `query` nor `client_ip_hash`: they came in 2.7). `cookie` hashes no key (an HMAC of the upstream's
/// address is its value): not proven.
pub fn policies(release: Release) -> Vec<Policy> {
    [
        Policy::Header("X-Key".into()),
        Policy::UriHash,
        Policy::Query(QUERY_PARAM.into()),
        Policy::IpHash,
        Policy::ClientIpHash,
    ]
    .into_iter()
    .filter(|p| p.in_release(release))
    .collect()
}

/// Topologies per release by default: [`POOLS_PER_POLICY`] of each policy.
pub fn default_topologies(release: Release) -> usize {
    POOLS_PER_POLICY * policies(release).len()
}

/// Topology `index`'s policy.
pub fn policy(release: Release, index: usize) -> Policy {
    let all = policies(release);
    all[index % all.len()].clone()
}

/// Topology `index`'s pool: 2 to all of `backends`, rotated by the index.
pub fn pool(index: usize, backends: &[SocketAddr], rng: &mut Gen) -> Vec<SocketAddr> {
    let n = 2 + rng.below(backends.len() as u64 - 1) as usize;
    let mut pool: Vec<SocketAddr> = backends[..n].to_vec();
    pool.rotate_left(index % n);
    pool
}

/// A policy's kind of topology, as the reports name it: `uri_hash`, `client_ip_hash (trusted_proxies
/// 127.0.0.0/9)`.
pub fn kind(policy: &Policy) -> String {
    match policy {
        Policy::ClientIpHash => format!("{policy} (trusted_proxies {}/{})", TRUSTED.0, TRUSTED.1),
        _ => policy.to_string(),
    }
}

/// What a topology sets, as the reports name it: `uri_hash, pool of 4`.
pub fn label(policy: &Policy, pool: &[SocketAddr]) -> String {
    format!("{}, pool of {}", kind(policy), pool.len())
}

/// The model of `pool` under `release`.
pub fn model(release: Release, pool: &[SocketAddr]) -> Pool {
    Pool::new(release, pool.iter().map(SocketAddr::to_string))
}

/// The deliberately wrong model of `verify --engine caddy --wrong-model`, with [`Asked::wrong_key`]: for
/// `header`, the other release's rule (2.6.2's FNV-1a 32 of key + upstream for 2.8 on, xxHash64 of
/// upstream + key for 2.6.2); for the other policies the right rule over a wrong key.
pub fn wrong_model(release: Release, policy: &Policy, pool: &[SocketAddr]) -> Pool {
    match policy {
        Policy::Header(_) => model(if release == Release::V2_6 { Release::V2_11 } else { Release::V2_6 }, pool),
        _ => model(release, pool),
    }
}

/// One request and the key the model hashes for it.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The request.
    pub request: Request,
    /// What the policy hashes (the library's rule: [`nginx_ketama::engines::caddy::Policy`]).
    pub key: Vec<u8>,
    /// What `--wrong-model` hashes instead: `uri_hash` the path without its query, `query` the first value
    /// only (Go's `Query().Get`), `ip_hash` the address's four bytes rather than its text,
    /// `client_ip_hash` the peer's address (`trusted_proxies` ignored); `header` the right key (its
    /// mutation is the hash: [`wrong_model`]).
    pub wrong_key: Vec<u8>,
}

/// `n` random requests for `policy`, each with its key.
pub fn requests(policy: &Policy, rng: &mut Gen, n: usize) -> Vec<Asked> {
    let mut key = Vec::new();
    (0..n)
        .map(|i| match policy {
            Policy::Header(_) => {
                sample_key(rng.next_u64(), i as u64, &mut key);
                Asked { request: Request::keyed(&key), key: key.clone(), wrong_key: key.clone() }
            }
            Policy::UriHash => {
                let target = uri(rng);
                let path = target.split(|&b| b == b'?').next().unwrap_or_default().to_vec();
                Asked { request: plain(target.clone(), None), key: target, wrong_key: path }
            }
            Policy::Query(param) => {
                let query = query(rng, param);
                let key = query_key(&query, param).expect("a generated query has a value");
                let wrong_key = query_values(&query, param).swap_remove(0);
                let mut target = b"/q?".to_vec();
                target.extend_from_slice(&query);
                Asked { request: plain(target, None), key, wrong_key }
            }
            Policy::IpHash => {
                let from = source(rng);
                let request = plain(b"/".to_vec(), Some(from));
                Asked { request, key: ip_key(IpAddr::V4(from)), wrong_key: from.octets().to_vec() }
            }
            Policy::ClientIpHash => {
                let from = source(rng);
                let forwarded = Ipv4Addr::from(rng.next_u64() as u32);
                let mut request = plain(b"/".to_vec(), Some(from));
                request.headers.push(("X-Forwarded-For", forwarded.to_string().into_bytes()));
                let trusted = u32::from(from) >> (32 - TRUSTED.1) == u32::from(TRUSTED.0) >> (32 - TRUSTED.1);
                let client = if trusted { forwarded } else { from };
                Asked { request, key: ip_key(IpAddr::V4(client)), wrong_key: ip_key(IpAddr::V4(from)) }
            }
        })
        .collect()
}

/// `GET target` from `from`, no other field.
fn plain(target: Vec<u8>, from: Option<Ipv4Addr>) -> Request {
    Request { target, headers: Vec::new(), from }
}

/// A random source address in 127.0.0.0/8 (all of it is local on `lo`), never a network or broadcast
/// address of a /24.
fn source(rng: &mut Gen) -> Ipv4Addr {
    let v = rng.next_u64();
    Ipv4Addr::new(127, v as u8, (v >> 8) as u8, 1 + ((v >> 16) % 254) as u8)
}

/// `len` random bytes from `alphabet`, now and then a `%XX` escape (valid: Go refuses a path with a bad
/// one) of any byte.
fn text(rng: &mut Gen, alphabet: &[u8], len: usize, out: &mut Vec<u8>) {
    for _ in 0..len {
        let v = rng.next_u64();
        if v.is_multiple_of(8) {
            out.extend_from_slice(format!("%{:02X}", (v >> 8) as u8).as_bytes());
        } else {
            out.push(alphabet[((v >> 8) % alphabet.len() as u64) as usize]);
        }
    }
}

/// Path characters as sent, undecoded (RFC 3986 `pchar` less `%`).
const PATH: &[u8] = b"abcxyzABCXYZ0189-._~!$&'()*+,;=:@";
/// Query characters besides the separators `&` and `=` (`;` makes Go skip the pair).
const QUERY: &[u8] = b"abcxyzKZ019-._~!$'()*+,:@/?";

/// A random origin-form target: 1–4 segments, three times in four a query (bad escapes and `;` included:
/// `uri_hash` hashes the query as sent).
fn uri(rng: &mut Gen) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..1 + rng.below(4) {
        out.push(b'/');
        let len = rng.below(9) as usize;
        text(rng, PATH, len, &mut out);
    }
    if rng.below(4) != 0 {
        out.push(b'?');
        for i in 0..1 + rng.below(4) {
            if i > 0 {
                out.push(if rng.below(8) == 0 { b';' } else { b'&' });
            }
            let len = 1 + rng.below(4) as usize;
            text(rng, QUERY, len, &mut out);
            if rng.below(4) != 0 {
                out.push(b'=');
                let len = rng.below(8) as usize;
                text(rng, QUERY, len, &mut out);
            }
            if rng.below(16) == 0 {
                out.extend_from_slice(b"%zz");
            }
        }
    }
    out
}

/// A random raw query with `param` set at least once to a non-empty value, half the time more than once
/// (Caddy joins the values with `,`), names that decode to `param` (`%6B`), other parameters and pairs Go
/// skips (a bad escape, a `;`), shuffled.
fn query(rng: &mut Gen, param: &str) -> Vec<u8> {
    let encoded: String = param.bytes().map(|b| format!("%{b:02X}")).collect();
    let others = ["x", "kk", "K", "k+", "k%20"];
    let mut pairs: Vec<Vec<u8>> = Vec::new();
    let value = |rng: &mut Gen, min: usize| {
        let mut v = Vec::new();
        let len = min + rng.below(8) as usize;
        text(rng, QUERY, len, &mut v);
        v
    };
    let first = [param.as_bytes(), b"=", &value(rng, 1)].concat();
    pairs.push(first);
    let repeats = if rng.below(2) == 0 { 1 + rng.below(3) } else { 0 };
    for _ in 0..repeats {
        let name = if rng.below(3) == 0 { encoded.as_bytes() } else { param.as_bytes() };
        pairs.push([name, b"=", &value(rng, 0)].concat());
    }
    for _ in 0..rng.below(4) {
        let name = others[rng.below(others.len() as u64) as usize];
        pairs.push([name.as_bytes(), b"=", &value(rng, 0)].concat());
    }
    match rng.below(8) {
        0 => pairs.push([param.as_bytes(), b"=%zz"].concat()),
        1 => pairs.push([param.as_bytes(), b"=a;b"].concat()),
        _ => {}
    }
    for i in (1..pairs.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        pairs.swap(i, j);
    }
    pairs.join(&b"&"[..])
}

/// The `Caddyfile` of `pool` hashing with `policy`, its front on 127.0.0.1:`port`: no admin endpoint, no
/// HTTPS, HTTP/1.1; `client_ip_hash` trusts [`TRUSTED`].
pub fn config(policy: &Policy, pool: &[SocketAddr], port: u16) -> String {
    let to: Vec<String> = pool.iter().map(SocketAddr::to_string).collect();
    let trusted = if *policy == Policy::ClientIpHash {
        format!("\t\ttrusted_proxies static {}/{}\n", TRUSTED.0, TRUSTED.1)
    } else {
        String::new()
    };
    format!(
        "{{\n\tadmin off\n\tauto_https off\n\tskip_install_trust\n\tservers {{\n\t\tprotocols h1\n{trusted}\t}}\n}}\n\n\
         http://:{port} {{\n\tbind 127.0.0.1\n\treverse_proxy {{\n\t\tto {}\n\t\tlb_policy {policy}\n\t}}\n}}\n",
        to.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_queries_set_the_parameter() {
        for i in 0..2000 {
            let q = query(&mut Gen::for_topology(7, i), "k");
            assert!(query_values(&q, "k").iter().any(|v| !v.is_empty()), "{}", String::from_utf8_lossy(&q));
        }
    }

    #[test]
    fn trusted_sources_are_127_0_to_127_127() {
        let mut rng = Gen::for_topology(1, 0);
        let asked = requests(&Policy::ClientIpHash, &mut rng, 200);
        let trusted = asked.iter().filter(|a| a.key != a.wrong_key).count();
        assert!(trusted > 50 && trusted < 150, "{trusted}");
        for a in &asked {
            let from = a.request.from.unwrap();
            if from.octets()[1] < 128 {
                assert_eq!(a.key, a.request.headers[0].1);
            } else {
                assert_eq!(a.key, from.to_string().into_bytes());
            }
        }
    }
}
