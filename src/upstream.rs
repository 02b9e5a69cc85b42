//! An upstream as nginx sees it at startup: the balancing method, the primary and backup lists of
//! [`Peer`]s, and (for `consistent`) the ring. Also the stateless answer to "which server gets this key?",
//! and how many points or slots without a usable peer nginx passes before it gives up hashing
//! ([`MAX_HASH_MISSES`]).

pub use crate::peer::{List, Peer, PeerId, default_name, socket_name};
use crate::plain::Slots;
use crate::ring::{Ring, RingError};
use crate::server::Server;
use crate::version::{Libc, NginxVersion};

/// Consecutive ring points (or plain-hash slots) without a usable peer that one request may pass before
/// nginx gives up hashing and uses round-robin for the rest of the request.
///
/// One limit for both methods: nginx's consistent and plain getters count misses in the same per-request
/// field and compare it with the same 20 (docs/nginx-algorithm.md §3.4 and §4). The count accumulates
/// across the retries of one request; a fresh request starts at 0.
pub const MAX_HASH_MISSES: u32 = 20;

/// Which `hash` flavour the upstream uses.
///
/// # Example
///
/// ```
/// use nginx_ketama::{Method, Peer, Upstream};
///
/// let plain = Upstream::builder(Method::Plain).peer(Peer::new("a:80")).peer(Peer::new("b:80")).build()?;
/// assert!(plain.ring().is_none(), "only `consistent` builds a ring");
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `hash $key consistent;` (ketama ring).
    Consistent,
    /// `hash $key;` (Cache::Memcached rehashing over weighted slots).
    Plain,
}

impl Method {
    /// The method's one-word name, as reports, the golden vectors and the shim protocol spell it.
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::Method;
    ///
    /// assert_eq!(Method::Consistent.as_str(), "consistent");
    /// assert_eq!(Method::Plain.as_str(), "plain");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Consistent => "consistent",
            Method::Plain => "plain",
        }
    }
}

/// Why an upstream could not be built.
///
/// # Example
///
/// ```
/// use nginx_ketama::{Method, Peer, Upstream, UpstreamError};
///
/// let err = Upstream::builder(Method::Consistent).peer(Peer::new("a:80").with_weight(0)).build().unwrap_err();
/// assert!(matches!(err, UpstreamError::ZeroWeight(_)));
/// assert_eq!(err.to_string(), "invalid weight 0 for server \"a:80\"");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// No primary peers (nginx: `no servers in upstream`).
    #[error("no servers in upstream \"{0}\"")]
    NoServers(String),
    /// A peer with weight 0.
    #[error("invalid weight 0 for server \"{0}\"")]
    ZeroWeight(Server),
    /// The ring would be too large.
    #[error(transparent)]
    Ring(#[from] RingError),
}

/// An nginx upstream using `hash`: method, peers, and the ring built once at startup.
///
/// # Example
///
/// ```
/// use nginx_ketama::{Method, Peer, Route, Upstream};
///
/// let up = Upstream::builder(Method::Consistent)
///     .peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
///     .build()?;
/// // Recorded from nginx (docs/nginx-algorithm.md §11 A).
/// assert_eq!(up.route(b"k0"), Route::Server(up.primary()[4].server()));
/// assert_eq!(up.route(b""), Route::RoundRobin); // the empty key is never hashed
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Upstream {
    name: String,
    primary: Vec<Peer>,
    backup: Vec<Peer>,
    version: NginxVersion,
    libc: Libc,
    balancer: Balancer,
}

/// What the method needs besides the peer lists, built once with the upstream. One variant per
/// [`Method`], so an upstream cannot hold a ring without being consistent, or be consistent without one.
#[derive(Debug, Clone)]
pub(crate) enum Balancer {
    /// `hash $key consistent;`.
    Consistent(Chash),
    /// `hash $key;`.
    Plain(Slots),
}

/// The consistent method's data: the ring over the primary peers, and how peers map onto its servers.
#[derive(Debug, Clone)]
pub(crate) struct Chash {
    ring: Ring,
    /// For each primary peer, its server's index in `ring.servers()`.
    ring_server: Box<[u32]>,
    /// For each ring server, whether any primary peer with that string is not `down`.
    ring_server_up: Box<[bool]>,
}

impl Chash {
    fn new(primary: &[Peer], libc: Libc) -> Result<Chash, RingError> {
        let ring = Ring::with_libc(libc, primary.iter().map(|p| (p.server(), p.weight())))?;
        let by_name: std::collections::HashMap<&Server, u32> =
            ring.servers().iter().enumerate().map(|(i, s)| (s, i as u32)).collect();
        let ring_server: Box<[u32]> = primary.iter().map(|p| by_name[p.server()]).collect();
        let mut up = vec![false; ring.servers().len()];
        for (p, &s) in primary.iter().zip(&ring_server) {
            up[s as usize] |= !p.is_down();
        }
        Ok(Chash { ring, ring_server, ring_server_up: up.into_boxed_slice() })
    }

    /// The ring.
    pub(crate) fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Index into `ring().servers()` of a primary peer's server string.
    pub(crate) fn ring_server_of(&self, primary_index: usize) -> usize {
        self.ring_server[primary_index] as usize
    }
}

/// Builds an [`Upstream`]; see [`Upstream::builder`].
///
/// # Example
///
/// ```
/// use nginx_ketama::{Method, NginxVersion, Peer, Upstream};
///
/// let up = Upstream::builder(Method::Plain)
///     .name("cache")
///     .version(NginxVersion::new(1, 26, 3))
///     .peers(["10.0.0.1:80", "10.0.0.2:80"].map(Peer::new))
///     .backup(Peer::new("10.0.0.9:80"))
///     .build()?;
/// assert_eq!((up.name(), up.primary().len(), up.backup().len()), ("cache", 2, 1));
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone)]
pub struct UpstreamBuilder {
    name: String,
    method: Method,
    primary: Vec<Peer>,
    backup: Vec<Peer>,
    version: NginxVersion,
    libc: Libc,
}

impl UpstreamBuilder {
    /// The upstream's name (used in messages and by nginx in `$upstream_addr` when nothing is live).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Appends a primary peer.
    pub fn peer(mut self, peer: Peer) -> Self {
        self.primary.push(peer);
        self
    }

    /// Appends primary peers.
    pub fn peers(mut self, peers: impl IntoIterator<Item = Peer>) -> Self {
        self.primary.extend(peers);
        self
    }

    /// Appends a backup peer (only reachable through the round-robin fallback).
    pub fn backup(mut self, peer: Peer) -> Self {
        self.backup.push(peer);
        self
    }

    /// The nginx version whose rules to follow (default [`NginxVersion::LATEST`]).
    pub fn version(mut self, version: NginxVersion) -> Self {
        self.version = version;
        self
    }

    /// The C library nginx was built against (default [`Libc::Glibc`]): it decides which of two colliding
    /// ring points survives (algorithm §3.2). A build property, independent of the version.
    pub fn libc(mut self, libc: Libc) -> Self {
        self.libc = libc;
        self
    }

    /// Builds the upstream (and its ring, for [`Method::Consistent`]).
    ///
    /// # Errors
    ///
    /// [`UpstreamError::NoServers`] without primary peers, [`UpstreamError::ZeroWeight`] for a weight of 0,
    /// [`UpstreamError::Ring`] for a ring above [`crate::ring::MAX_POINTS`].
    pub fn build(self) -> Result<Upstream, UpstreamError> {
        if self.primary.is_empty() {
            return Err(UpstreamError::NoServers(self.name));
        }
        if let Some(p) = self.primary.iter().chain(&self.backup).find(|p| p.weight() == 0) {
            return Err(UpstreamError::ZeroWeight(p.server().clone()));
        }
        let balancer = match self.method {
            Method::Consistent => Balancer::Consistent(Chash::new(&self.primary, self.libc)?),
            Method::Plain => {
                Balancer::Plain(Slots::new(self.primary.iter().map(Peer::weight), self.backup.iter().map(Peer::weight)))
            }
        };
        Ok(Upstream {
            name: self.name,
            primary: self.primary,
            backup: self.backup,
            version: self.version,
            libc: self.libc,
            balancer,
        })
    }
}

/// The stateless answer for a fresh worker with healthy peers: see [`Upstream::route`].
///
/// # Example
///
/// ```
/// use nginx_ketama::{Method, Peer, Route, Upstream};
///
/// let single = Upstream::builder(Method::Consistent).peer(Peer::new("a:80")).build()?;
/// // With one peer nginx never hashes: it goes straight to round-robin.
/// assert_eq!(single.route(b"any key"), Route::RoundRobin);
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// nginx hashes the key to this server string.
    Server(&'a Server),
    /// nginx does not hash this key: it uses round-robin (empty key, a single peer, or more than
    /// [`MAX_HASH_MISSES`] consecutive points/slots without a usable peer). The pick then depends on the
    /// worker's history; use a [`crate::Worker`] to follow it.
    RoundRobin,
}

impl Upstream {
    /// Starts building an upstream.
    pub fn builder(method: Method) -> UpstreamBuilder {
        UpstreamBuilder {
            name: "upstream".to_string(),
            method,
            primary: Vec::new(),
            backup: Vec::new(),
            version: NginxVersion::default(),
            libc: Libc::default(),
        }
    }

    /// The upstream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The balancing method.
    pub fn method(&self) -> Method {
        match self.balancer {
            Balancer::Consistent(_) => Method::Consistent,
            Balancer::Plain(_) => Method::Plain,
        }
    }

    /// The nginx version whose rules apply.
    pub fn version(&self) -> NginxVersion {
        self.version
    }

    /// The C library whose `qsort` built the ring.
    pub fn libc(&self) -> Libc {
        self.libc
    }

    /// Primary peers in list order.
    pub fn primary(&self) -> &[Peer] {
        &self.primary
    }

    /// Backup peers in list order.
    pub fn backup(&self) -> &[Peer] {
        &self.backup
    }

    /// The peer at `id`.
    ///
    /// # Panics
    ///
    /// Panics if `id` does not belong to this upstream.
    pub fn peer(&self, id: PeerId) -> &Peer {
        &self.list(id.list)[id.index]
    }

    /// The peers of one list.
    pub fn list(&self, list: List) -> &[Peer] {
        match list {
            List::Primary => &self.primary,
            List::Backup => &self.backup,
        }
    }

    /// The ring (for [`Method::Consistent`]; `None` for [`Method::Plain`]).
    pub fn ring(&self) -> Option<&Ring> {
        match &self.balancer {
            Balancer::Consistent(chash) => Some(chash.ring()),
            Balancer::Plain(_) => None,
        }
    }

    /// The method's data (ring or slots).
    pub(crate) fn balancer(&self) -> &Balancer {
        &self.balancer
    }

    /// nginx's `single`: exactly one primary peer and no backups.
    /// The attempts its peers allow a request before `*_next_upstream_tries` caps them (`u->peer.tries`:
    /// every peer of both lists, `down` ones too before 1.19.6; algorithm §5).
    pub(crate) fn peer_tries(&self) -> u32 {
        let counts = |p: &&Peer| !p.is_down() || !self.version().rules().retry_budget_skips_down;
        self.primary().iter().chain(self.backup()).filter(counts).count() as u32
    }

    pub(crate) fn is_single(&self, list: List) -> bool {
        list == List::Primary && self.primary.len() == 1 && self.backup.is_empty()
    }

    /// Which server a freshly started worker picks first for `key`, all peers healthy (only `down` counts).
    ///
    /// This is the hot-path question ("who owns this key?"), answered without any per-request state. It
    /// equals the first attempt of [`crate::Worker::request`] on a fresh worker whenever it returns
    /// [`Route::Server`].
    pub fn route(&self, key: &[u8]) -> Route<'_> {
        if key.is_empty() {
            return Route::RoundRobin;
        }
        match &self.balancer {
            Balancer::Consistent(chash) => {
                let ring = chash.ring();
                if self.is_single(List::Primary) || ring.is_empty() {
                    return Route::RoundRobin;
                }
                let start = ring.locate_key(key);
                // A fresh worker passes only points whose server string has every peer `down`: the key's own
                // point, then at most MAX_HASH_MISSES more.
                for step in 0..=MAX_HASH_MISSES as usize {
                    let s = ring.server_index_at(start + step);
                    if chash.ring_server_up[s] {
                        return Route::Server(&ring.servers()[s]);
                    }
                }
                Route::RoundRobin
            }
            Balancer::Plain(slots) => {
                if self.plain_bypasses(List::Primary) {
                    return Route::RoundRobin;
                }
                let mut seq = slots.sequence(key);
                for _ in 0..=MAX_HASH_MISSES {
                    let p = slots.owner(List::Primary, seq.next_sum());
                    if !self.primary[p].is_down() {
                        return Route::Server(self.primary[p].server());
                    }
                }
                Route::RoundRobin
            }
        }
    }

    /// Whether plain hash goes straight to round-robin on this list (version dependent).
    pub(crate) fn plain_bypasses(&self, list: List) -> bool {
        if self.version.plain_hash_guards_on_number() { self.list(list).len() < 2 } else { self.is_single(list) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn five(method: Method) -> Upstream {
        Upstream::builder(method).peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}")))).build().unwrap()
    }

    fn port(r: Route<'_>) -> String {
        match r {
            Route::Server(s) => s.as_str().rsplit(':').next().unwrap().to_string(),
            Route::RoundRobin => "rr".into(),
        }
    }

    /// Algorithm §11 A and B, recorded from nginx.
    #[test]
    fn spec_vectors_a_and_b() {
        let a = five(Method::Consistent);
        let want_a = ["9005", "9003", "9002", "9003", "9004", "9001", "9001", "9003", "9002", "9005", "9004", "9002"];
        let b = five(Method::Plain);
        let want_b = ["9002", "9002", "9003", "9001", "9003", "9002", "9005", "9002", "9002", "9003", "9003", "9004"];
        for i in 0..12 {
            let key = format!("k{i}");
            assert_eq!(port(a.route(key.as_bytes())), want_a[i], "consistent {key}");
            assert_eq!(port(b.route(key.as_bytes())), want_b[i], "plain {key}");
        }
    }

    /// Algorithm §11 E: weights, IPv6 and `UNIX:` spellings, recorded from nginx.
    #[test]
    fn spec_vector_e_weights_and_spellings() {
        let up = Upstream::builder(Method::Consistent)
            .peer(Peer::new("127.0.0.1:9001").with_weight(3))
            .peer(Peer::new("127.0.0.1:9002"))
            .peer(Peer::new("[::1]:9101").with_weight(2))
            .peer(Peer::new("UNIX:/tmp/ngxrun/b.sock"))
            .build()
            .unwrap();
        let want = [
            ("k0", "[::1]:9101"),
            ("k1", "127.0.0.1:9001"),
            ("k2", "127.0.0.1:9002"),
            ("k3", "[::1]:9101"),
            ("k9", "UNIX:/tmp/ngxrun/b.sock"),
        ];
        for (key, server) in want {
            assert_eq!(up.route(key.as_bytes()), Route::Server(&Server::new(server)), "{key}");
        }
    }

    #[test]
    fn build_errors() {
        let e = Upstream::builder(Method::Plain).name("u").build().unwrap_err();
        assert_eq!(e.to_string(), "no servers in upstream \"u\"");
        let e = Upstream::builder(Method::Plain).peer(Peer::new("a").with_weight(0)).build().unwrap_err();
        assert_eq!(e, UpstreamError::ZeroWeight(Server::new("a")));
    }

    #[test]
    fn single_peer_and_down_owner() {
        let one = Upstream::builder(Method::Consistent).peer(Peer::new("a:1")).build().unwrap();
        assert_eq!(one.route(b"x"), Route::RoundRobin);
        // A down server's keys move to the next point's server; nothing else moves.
        let up = five(Method::Consistent);
        let down = Upstream::builder(Method::Consistent)
            .peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}")).with_down(p == 9003)))
            .build()
            .unwrap();
        for i in 0..2000 {
            let key = format!("key-{i}");
            let before = port(up.route(key.as_bytes()));
            let after = port(down.route(key.as_bytes()));
            if before != "9003" {
                assert_eq!(before, after);
            } else {
                assert_ne!(after, "9003");
            }
        }
    }
}
