//! A peer: one address of one `server` line, with its parameters and the address nginx prints for it in
//! `$upstream_addr`; which list it is in ([`List`]) and its place there ([`PeerId`]).

use crate::server::{Address, Server, ngx_inet_addr};
use std::net::{IpAddr, SocketAddr};

/// One peer: one address of one `server` line.
///
/// A `server` line whose host resolves to several addresses gives several peers with the same
/// [`server`](Peer::server) string and different [`name`](Peer::name)s.
///
/// # Example
///
/// ```
/// use nginx_ketama::Peer;
///
/// let p = Peer::new("127.0.0.1").with_weight(3).with_max_fails(0);
/// assert_eq!(p.server().as_str(), "127.0.0.1");
/// assert_eq!(p.name(), "127.0.0.1:80"); // as nginx prints it in $upstream_addr
/// assert_eq!(p.weight(), 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    server: Server,
    name: String,
    weight: u32,
    max_fails: u32,
    fail_timeout: u64,
    max_conns: u32,
    down: bool,
}

impl Peer {
    /// A peer with nginx's defaults (`weight=1 max_fails=1 fail_timeout=10s max_conns=0`, not down).
    ///
    /// Its [`name`](Peer::name) is the address nginx would print for an IP literal or `unix:` path
    /// (`127.0.0.1` → `127.0.0.1:80`); for a hostname it is the server string itself until
    /// [`Peer::with_name`] sets the resolved address.
    pub fn new(server: impl Into<Server>) -> Peer {
        let server = server.into();
        let name = default_name(&server, 80);
        Peer { server, name, weight: 1, max_fails: 1, fail_timeout: 10, max_conns: 0, down: false }
    }

    /// Sets the address as printed in `$upstream_addr` (e.g. `10.0.0.7:8080`, `[::1]:80`).
    pub fn with_name(mut self, name: impl Into<String>) -> Peer {
        self.name = name.into();
        self
    }

    /// Sets `weight=` (0 is rejected when the upstream is built).
    pub fn with_weight(mut self, weight: u32) -> Peer {
        self.weight = weight;
        self
    }

    /// Sets `max_fails=` (0 disables failure accounting).
    pub fn with_max_fails(mut self, max_fails: u32) -> Peer {
        self.max_fails = max_fails;
        self
    }

    /// Sets `fail_timeout=` in seconds.
    pub fn with_fail_timeout(mut self, seconds: u64) -> Peer {
        self.fail_timeout = seconds;
        self
    }

    /// Sets `max_conns=` (0 = unlimited).
    pub fn with_max_conns(mut self, max_conns: u32) -> Peer {
        self.max_conns = max_conns;
        self
    }

    /// Marks the peer `down` (or sets it back up).
    pub fn with_down(mut self, down: bool) -> Peer {
        self.down = down;
        self
    }

    /// The configured server string (what the ring hashes and compares).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The address as nginx prints it in `$upstream_addr`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The weight.
    pub fn weight(&self) -> u32 {
        self.weight
    }

    /// `max_fails`.
    pub fn max_fails(&self) -> u32 {
        self.max_fails
    }

    /// `fail_timeout` in seconds.
    pub fn fail_timeout(&self) -> u64 {
        self.fail_timeout
    }

    /// `max_conns` (0 = unlimited).
    pub fn max_conns(&self) -> u32 {
        self.max_conns
    }

    /// Whether the peer is `down`.
    pub fn is_down(&self) -> bool {
        self.down
    }
}

/// The `$upstream_addr` text nginx prints for a peer of this `server` line when it is a literal address
/// (`127.0.0.1:80` for `127.0.0.1`), or the server string itself (for a hostname, which resolution names).
///
/// # Example
///
/// ```
/// use nginx_ketama::{Server, upstream::default_name};
///
/// assert_eq!(default_name(&Server::new("127.0.0.1"), 80), "127.0.0.1:80");
/// assert_eq!(default_name(&Server::new("[::1]:9001"), 80), "[::1]:9001");
/// assert_eq!(default_name(&Server::new("cache.internal:81"), 80), "cache.internal:81");
/// ```
pub fn default_name(server: &Server, default_port: u16) -> String {
    match Address::parse(server.as_str()) {
        Ok(Address::Unix { .. }) => server.as_str().to_string(),
        Ok(Address::Ipv6 { addr, port }) => {
            socket_name(SocketAddr::new(IpAddr::V6(addr), port.unwrap_or(default_port)))
        }
        Ok(Address::Host { host, port }) => match ngx_inet_addr(&host) {
            Some(ip) => socket_name(SocketAddr::new(IpAddr::V4(ip), port.unwrap_or(default_port))),
            None => server.as_str().to_string(),
        },
        Err(_) => server.as_str().to_string(),
    }
}

/// A socket address as nginx prints it (`ngx_sock_ntop()`, `src/core/ngx_inet.c`): `10.0.0.1:80`, or
/// `[ADDR]:PORT` with the IPv6 address as `ngx_inet6_ntop()` writes it. That is RFC 5952's text (lower-case
/// hex, the first longest run of two or more zero groups as `::`) except for the last 32 bits, which are
/// written as a dotted quad after a leading run of zeros: six zero groups (`[::10.0.0.1]`, an
/// IPv4-compatible address, where Rust writes `[::a00:1]`), five and `ffff` (`[::ffff:10.0.0.1]`), or seven
/// unless the last group's bytes are `0` and anything, or anything and `1` (`[::0.0.1.2]`, but `[::1]`,
/// `[::2]` and `[::201]`).
///
/// # Example
///
/// ```
/// use nginx_ketama::upstream::socket_name;
///
/// assert_eq!(socket_name("[::10.0.0.1]:80".parse().unwrap()), "[::10.0.0.1]:80");
/// assert_eq!(socket_name("[2001:db8::7]:8080".parse().unwrap()), "[2001:db8::7]:8080");
/// assert_eq!(socket_name("10.0.0.1:80".parse().unwrap()), "10.0.0.1:80");
/// ```
pub fn socket_name(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => a.to_string(),
        SocketAddr::V6(a) => format!("[{}]:{}", ipv6_text(&a.ip().octets()), a.port()),
    }
}

/// `ngx_inet6_ntop()`: see [`socket_name`].
fn ipv6_text(p: &[u8; 16]) -> String {
    use std::fmt::Write as _;
    // The first longest run of zero groups (a single zero group is not a run).
    let (mut zero, mut max, mut run, mut start) = (usize::MAX, 1, 0, 0);
    for i in (0..16).step_by(2) {
        if p[i] != 0 || p[i + 1] != 0 {
            if max < run {
                (zero, max) = (start, run);
            }
            run = 0;
            continue;
        }
        if run == 0 {
            start = i;
        }
        run += 1;
    }
    if max < run {
        (zero, max) = (start, run);
    }
    let mut out = String::new();
    let mut end = 16;
    if zero == 0 {
        if (max == 5 && p[10] == 0xff && p[11] == 0xff) || max == 6 || (max == 7 && p[14] != 0 && p[15] != 1) {
            end = 12;
        }
        out.push(':');
    }
    let mut i = 0;
    while i < end {
        if i == zero {
            out.push(':');
            i += 2 * max;
            continue;
        }
        let _ = write!(out, "{:x}", u16::from_be_bytes([p[i], p[i + 1]]));
        if i < 14 {
            out.push(':');
        }
        i += 2;
    }
    if end == 12 {
        let _ = write!(out, "{}.{}.{}.{}", p[12], p[13], p[14], p[15]);
    }
    out
}

/// Which list a peer is in.
///
/// # Example
///
/// ```
/// use nginx_ketama::{List, Method, Peer, Upstream};
///
/// let up = Upstream::builder(Method::Consistent).peer(Peer::new("a:80")).backup(Peer::new("b:80")).build()?;
/// assert_eq!(up.list(List::Backup)[0].server().as_str(), "b:80");
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum List {
    /// The primary servers (the only ones on the ring).
    Primary,
    /// `backup` servers (declared before `hash`), reachable only through the round-robin fallback.
    Backup,
}

/// A peer's position: its list and its index in that list.
///
/// # Example
///
/// ```
/// use nginx_ketama::{List, Method, Peer, PeerId, Upstream};
///
/// let up = Upstream::builder(Method::Consistent).peer(Peer::new("a:80")).peer(Peer::new("b:80")).build()?;
/// let id = PeerId { list: List::Primary, index: 1 };
/// assert_eq!(up.peer(id).server().as_str(), "b:80");
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId {
    /// The list.
    pub list: List,
    /// Index in list order.
    pub index: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IPv6 addresses as nginx prints them: RFC 5952 but for the dotted last 32 bits after a leading zero
    /// run (`ngx_inet6_ntop()`); the dotted forms below are what nginx 1.30.6 reported in `$upstream_addr`
    /// for these `server` literals (crates/cli/tests/own_config_live.rs proves them on every build).
    #[test]
    fn ipv6_names_follow_ngx_inet6_ntop() {
        for (server, name) in [
            ("[::10.0.0.1]:80", "[::10.0.0.1]:80"),
            ("[::ffff:10.0.0.1]:80", "[::ffff:10.0.0.1]:80"),
            ("[::102]:80", "[::0.0.1.2]:80"),
            ("[::201]:80", "[::201]:80"),
            ("[::2]:80", "[::2]:80"),
            ("[::1]:80", "[::1]:80"),
            ("[::1:0:0]:80", "[::1:0:0]:80"),
            ("[::]:80", "[::]:80"),
            ("[1::]:80", "[1::]:80"),
            ("[1:0:0:2:0:0:0:3]:80", "[1:0:0:2::3]:80"),
            ("[1:0:0:2:0:0:3:4]:80", "[1::2:0:0:3:4]:80"),
            ("[2001:db8:0:0:0:0:0:7]:8080", "[2001:db8::7]:8080"),
            ("[64:ff9b::10.0.0.1]:80", "[64:ff9b::a00:1]:80"),
            ("[0:0:0:0:0:1:0:1]:80", "[::1:0:1]:80"),
        ] {
            assert_eq!(Peer::new(server).name(), name, "{server}");
        }
    }

    #[test]
    fn names_follow_nginx_printing() {
        assert_eq!(Peer::new("127.0.0.1:080").name(), "127.0.0.1:80");
        assert_eq!(Peer::new("[::1]").name(), "[::1]:80");
        assert_eq!(Peer::new("[0:0::1]:9101").name(), "[::1]:9101");
        assert_eq!(Peer::new("UNIX:/tmp/a.sock").name(), "UNIX:/tmp/a.sock");
        assert_eq!(Peer::new("backend:80").name(), "backend:80");
        assert_eq!(Peer::new("127.1").name(), "127.1");
        assert_eq!(Peer::new("127.000.0.01:9").name(), "127.0.0.1:9");
        assert_eq!(Peer::new("1..2.3").name(), "1.0.2.3:80");
        assert_eq!(Peer::new("1.2.3.256").name(), "1.2.3.256");
    }
}
