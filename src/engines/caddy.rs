//! Caddy's hashing selection policies (`reverse_proxy`'s `lb_policy uri_hash`, `header`, `ip_hash`, and from
//! 2.7 `query` and `client_ip_hash`): rendezvous (highest random weight) hashing over the pool.
//!
//! Read from caddyserver/caddy, `modules/caddyhttp/reverseproxy/selectionpolicies.go`, `hostByHashing` and
//! `hash`, and `hosts.go`, `Upstream.String` (the upstream's `Dial` address, `host:port`):
//!
//! * **v2.6.2**: each available upstream in pool order scores `hash(key + up.String())`, `hash` being
//!   FNV-1a 32 (`fnv.New32a`); the highest score wins, compared with a strict `>` from 0, so the first
//!   upstream in pool order wins a tie (and a pool whose scores are all 0 picks none). Rendezvous replaced
//!   `hash(key) % len(pool)` in commit 40b193fb7 (first in v2.5.1).
//! * **v2.8.0 on** (commit 74949fb09, "reverseproxy: Use xxhash instead of fnv32 for LB", first in
//!   v2.8.0-beta.1), as in v2.11.4: the score is xxHash64 (seed 0) of `up.String() + key`: upstream first.
//!
//! The key each policy hashes: `uri_hash` the request URI (path and query as sent), `header` the first
//! value of the field (`Host` from the request line's host), `query` (2.7 on) every value of the parameter
//! joined with `,`, `ip_hash` the peer address without its port, `client_ip_hash` the client IP after
//! `trusted_proxies` ([`Policy`], [`query_key`], [`ip_key`]). An absent header or query parameter falls
//! back to `random` (2.6.2) or the policy's `fallback` (2.7 on): the caller's concern here. The `cookie`
//! policy hashes no key (it compares the cookie with an HMAC-SHA256 of each upstream's address and
//! otherwise picks through its fallback, setting the cookie): not modelled.

use std::fmt;
use std::hash::Hasher as _;

/// The Caddy releases the project models (the Debian builds it runs, engines/versions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Release {
    /// 2.6.2 (Debian bookworm and trixie): FNV-1a 32 of key + upstream.
    V2_6,
    /// 2.8.0 and later, as 2.11.4 (sid): xxHash64 of upstream + key.
    V2_11,
}

impl Release {
    /// Every modelled release, oldest first.
    pub const ALL: [Release; 2] = [Release::V2_6, Release::V2_11];
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Release::V2_6 => "2.6.2",
            Release::V2_11 => "2.11.4",
        })
    }
}

impl std::str::FromStr for Release {
    type Err = super::EngineError;

    fn from_str(s: &str) -> Result<Release, super::EngineError> {
        Ok(match s {
            "2.6" | "2.6.2" => Release::V2_6,
            "2.11" | "2.11.4" | "2.8" => Release::V2_11,
            _ => {
                return Err(super::EngineError::Option {
                    engine: "caddy",
                    option: "release",
                    value: s.to_string(),
                    expected: "2.6.2 or 2.11.4",
                });
            }
        })
    }
}

/// A pool of upstreams, by their dial addresses (`host:port`), in order.
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::caddy::{Pool, Release};
///
/// let pool = Pool::new(Release::V2_6, ["10.0.0.1:80", "10.0.0.2:80"]);
/// assert!(pool.pick(b"/index.html").is_some());
/// ```
#[derive(Debug, Clone)]
pub struct Pool {
    release: Release,
    upstreams: Vec<String>,
}

impl Pool {
    /// The pool of `upstreams` (dial addresses, `host:port`) under `release`.
    pub fn new(release: Release, upstreams: impl IntoIterator<Item = impl Into<String>>) -> Pool {
        Pool { release, upstreams: upstreams.into_iter().map(Into::into).collect() }
    }

    /// The release.
    pub fn release(&self) -> Release {
        self.release
    }

    /// One upstream's score for `key`.
    pub fn score(&self, upstream: usize, key: &[u8]) -> u64 {
        let up = self.upstreams[upstream].as_bytes();
        match self.release {
            Release::V2_6 => u64::from(fnv1a32(&[key, up])),
            Release::V2_11 => {
                let mut h = twox_hash::XxHash64::with_seed(0);
                h.write(up);
                h.write(key);
                h.finish()
            }
        }
    }

    /// The upstream (index in the pool) `key` goes to: the highest score, the first on a tie; `None` if
    /// every score is 0 (or the pool is empty).
    pub fn pick(&self, key: &[u8]) -> Option<usize> {
        let mut best: (u64, Option<usize>) = (0, None);
        for i in 0..self.upstreams.len() {
            let h = self.score(i, key);
            if h > best.0 {
                best = (h, Some(i));
            }
        }
        best.1
    }
}

/// A Caddy `lb_policy` that hashes a request's key with [`Pool::pick`] (the `cookie` policy does not: it
/// matches the cookie's value against an HMAC-SHA256 of each upstream's dial address and picks through its
/// `fallback` otherwise, so it is no hash of a key and not modelled here).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Policy {
    /// `uri_hash`: the request URI as sent (Go's `Request.RequestURI`: path and query, undecoded).
    UriHash,
    /// `header FIELD`: the field's first value (`Host`: the request's host).
    Header(String),
    /// `query PARAM` (2.7 on): every value of the parameter, decoded, joined with `,` ([`query_key`]).
    Query(String),
    /// `ip_hash`: the peer's address without its port ([`ip_key`]).
    IpHash,
    /// `client_ip_hash` (2.7 on): the client's address after `trusted_proxies`, without its port.
    ClientIpHash,
}

impl Policy {
    /// Whether `release` has the policy (`query` and `client_ip_hash` came in 2.7).
    pub fn in_release(&self, release: Release) -> bool {
        !matches!((self, release), (Policy::Query(_) | Policy::ClientIpHash, Release::V2_6))
    }
}

impl fmt::Display for Policy {
    /// As the `Caddyfile` writes it after `lb_policy`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::UriHash => f.write_str("uri_hash"),
            Policy::Header(field) => write!(f, "header {field}"),
            Policy::Query(param) => write!(f, "query {param}"),
            Policy::IpHash => f.write_str("ip_hash"),
            Policy::ClientIpHash => f.write_str("client_ip_hash"),
        }
    }
}

/// The key `lb_policy query PARAM` hashes from a raw query string (without its `?`): Go's
/// `url.ParseQuery` — pairs split on `&`, a pair holding `;` or an undecodable escape skipped, name and
/// value decoded (`%XX`, `+` as a space) — then every value of `param` in order joined with `,`
/// (`QueryHashSelection.Select`, `strings.Join(req.URL.Query()[s.Key], ",")`). `None` when that is empty
/// (Caddy then uses the policy's `fallback`).
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::caddy::query_key;
///
/// assert_eq!(query_key(b"k=a&x=1&%6B=b+c", "k").as_deref(), Some(&b"a,b c"[..]));
/// assert_eq!(query_key(b"x=1", "k"), None);
/// ```
pub fn query_key(raw_query: &[u8], param: &str) -> Option<Vec<u8>> {
    let joined = query_values(raw_query, param).join(&b","[..]);
    (!joined.is_empty()).then_some(joined)
}

/// Every value of `param` in a raw query string, decoded, in order, as Go's `url.ParseQuery` reads them
/// (see [`query_key`]).
pub fn query_values(raw_query: &[u8], param: &str) -> Vec<Vec<u8>> {
    let mut values: Vec<Vec<u8>> = Vec::new();
    for pair in raw_query.split(|&b| b == b'&') {
        if pair.is_empty() || pair.contains(&b';') {
            continue;
        }
        let (name, value) = match pair.iter().position(|&b| b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        let (Some(name), Some(value)) = (query_unescape(name), query_unescape(value)) else { continue };
        if name == param.as_bytes() {
            values.push(value);
        }
    }
    values
}

/// Go's `url.QueryUnescape`: `%XX` decoded, `+` a space; `None` for a `%` without two hex digits.
fn query_unescape(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let hex = |b: u8| char::from(b).to_digit(16);
                let (hi, lo) = (hex(*s.get(i + 1)?)?, hex(*s.get(i + 2)?)?);
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

/// The key `ip_hash` (and `client_ip_hash`, given the client's address) hashes: the address as Go
/// prints it, without the port (`net.SplitHostPort(req.RemoteAddr)`), `127.3.4.5` or `::1`.
pub fn ip_key(addr: std::net::IpAddr) -> Vec<u8> {
    addr.to_string().into_bytes()
}

/// FNV-1a 32 over the concatenation of `parts` (Go's `hash/fnv`, `New32a`).
fn fnv1a32(parts: &[&[u8]]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a 32's published test values (Fowler, Noll and Vo's `test_fnv.c`: "" and "a").
    #[test]
    fn query_keys_decode_and_join_as_go_parses_queries() {
        assert_eq!(query_key(b"k=1&k=2&k=%2C", "k").as_deref(), Some(&b"1,2,,"[..]));
        // A bad escape or a semicolon skips its pair only; a pair without `=` is an empty value.
        assert_eq!(query_key(b"k=%zz&k=a;b&k=c&k", "k").as_deref(), Some(&b"c,"[..]));
        assert_eq!(query_key(b"k=%ff", "k").as_deref(), Some(&[0xff][..]));
        assert_eq!(query_key(b"k=&k=", "k"), Some(b",".to_vec()));
        assert_eq!(query_key(b"k=", "k"), None);
        assert_eq!(query_key(b"K=1", "k"), None);
    }

    #[test]
    fn policies_exist_from_their_release() {
        assert!(Policy::IpHash.in_release(Release::V2_6) && Policy::UriHash.in_release(Release::V2_6));
        assert!(
            !Policy::Query("k".into()).in_release(Release::V2_6) && !Policy::ClientIpHash.in_release(Release::V2_6)
        );
        assert!(Policy::ClientIpHash.in_release(Release::V2_11));
        assert_eq!(Policy::Query("k".into()).to_string(), "query k");
    }

    #[test]
    fn fnv1a32_matches_published_values() {
        assert_eq!(fnv1a32(&[b""]), 0x811c_9dc5);
        assert_eq!(fnv1a32(&[b"a"]), 0xe40c_292c);
        assert_eq!(fnv1a32(&[b"foo"]), 0xa9f3_7ed7);
    }

    /// xxHash64's published values (the reference implementation's sanity check, seed 0: "" is
    /// 0xEF46DB3751D8E999, "a" 0xD24EC4F1A98C6E5B).
    #[test]
    fn xxhash64_matches_published_values() {
        assert_eq!(twox_hash::XxHash64::oneshot(0, b""), 0xef46_db37_51d8_e999);
        assert_eq!(twox_hash::XxHash64::oneshot(0, b"a"), 0xd24e_c4f1_a98c_6e5b);
    }
}
