//! Server strings: the text of a `server` line, as nginx hashes and validates it.
//!
//! nginx identifies a peer on the consistent-hash ring by the *configured* first argument of its `server`
//! line, byte for byte (`127.0.0.1:80`, `127.0.0.1:080` and `localhost:80` are three different strings).
//! This module holds that string ([`Server`]), the host/port split the ring hashes ([`Server::ketama_parts`]),
//! and the address syntax check nginx applies when it reads the config ([`Address::parse`]).

use std::fmt;

/// The configured server string of one `server` line, e.g. `10.0.0.1:8080`, `[::1]`, `unix:/run/a.sock`.
///
/// Two peers with equal server strings share their ring points (a hostname with several addresses, or a
/// duplicated line). No normalisation ever happens: the bytes are the identity.
///
/// # Example
///
/// ```
/// use nginx_ketama::Server;
///
/// let s = Server::new("127.0.0.1:9001");
/// assert_eq!(s.ketama_parts(), (&b"127.0.0.1"[..], &b"9001"[..]));
/// // `unix:` (any case) is stripped from the hashed host; IPv6 brackets stay.
/// assert_eq!(Server::new("UNIX:/tmp/b.sock").ketama_parts().0, b"/tmp/b.sock");
/// assert_eq!(Server::new("[::1]:80").ketama_parts(), (&b"[::1]"[..], &b"80"[..]));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Server(String);

impl Server {
    /// Wraps a configured server string. Any string is accepted: the ring hashes whatever nginx was given.
    /// Use [`Address::parse`] to check that nginx would accept it in a `server` line.
    pub fn new(text: impl Into<String>) -> Server {
        Server(text.into())
    }

    /// The string as configured.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The (host, port) pair the consistent-hash ring hashes, split by nginx's rule:
    ///
    /// * `unix:` (compared case-insensitively) → host is the rest, port is empty;
    /// * otherwise, walk back over trailing ASCII digits; if a `:` precedes them, the host is what comes
    ///   before that colon and the port is the digits (possibly empty); else the whole string is the host.
    ///
    /// The ring then hashes `host ‖ 0x00 ‖ port` (see [`crate::Ring`]).
    pub fn ketama_parts(&self) -> (&[u8], &[u8]) {
        ketama_parts(self.0.as_bytes())
    }
}

/// The host/port split of a server string, as described on [`Server::ketama_parts`].
pub(crate) fn ketama_parts(s: &[u8]) -> (&[u8], &[u8]) {
    if s.len() >= 5 && s[..5].eq_ignore_ascii_case(b"unix:") {
        return (&s[5..], b"");
    }
    let digits = s.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    if digits < s.len() && s[s.len() - digits - 1] == b':' {
        (&s[..s.len() - digits - 1], &s[s.len() - digits..])
    } else {
        (s, b"")
    }
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Server {
    fn from(s: &str) -> Server {
        Server::new(s)
    }
}

impl From<String> for Server {
    fn from(s: String) -> Server {
        Server(s)
    }
}

impl AsRef<str> for Server {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// What a `server` argument names, after nginx's syntax check.
///
/// # Example
///
/// ```
/// use nginx_ketama::server::{Address, AddressError};
///
/// assert_eq!(
///     Address::parse("backend:080").unwrap(),
///     Address::Host { host: "backend".into(), port: Some(80) }
/// );
/// assert_eq!(Address::parse("10.0.0.1:0"), Err(AddressError::InvalidPort));
/// assert_eq!(AddressError::InvalidPort.to_string(), "invalid port");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// An IPv4 literal, a hostname, or a bracketed IPv6 literal, with its port if one was written.
    Host {
        /// The host as written (IPv6 literals without their brackets).
        host: String,
        /// The port, if the string has one (nginx then uses the context's default port, 80 for HTTP).
        port: Option<u16>,
    },
    /// An IPv6 literal in brackets.
    Ipv6 {
        /// The address inside the brackets.
        addr: std::net::Ipv6Addr,
        /// The port, if written.
        port: Option<u16>,
    },
    /// A unix-domain socket path (`unix:/path`, prefix in any case).
    Unix {
        /// The socket path.
        path: String,
    },
}

/// Why nginx would reject a `server` argument. The `Display` text is nginx's own wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressError {
    /// `unix:` with nothing after it.
    #[error("no path in the unix domain socket")]
    NoUnixPath,
    /// A unix socket path longer than `sun_path`.
    #[error("too long path in the unix domain socket")]
    UnixPathTooLong,
    /// A `/` or `?` in the argument, a missing `]`, or junk after `]`.
    #[error("invalid host")]
    InvalidHost,
    /// A port that is not a number in 1..=65535.
    #[error("invalid port")]
    InvalidPort,
    /// An empty host.
    #[error("no host")]
    NoHost,
    /// A bracketed literal that is not an IPv6 address.
    #[error("invalid IPv6 address")]
    InvalidIpv6,
    /// A port is mandatory (stream context).
    #[error("no port")]
    NoPort,
}

/// `sizeof(struct sockaddr_un.sun_path)` on Linux; the path plus its NUL must fit.
const SUN_PATH_LEN: usize = 108;

impl Address {
    /// Checks a `server` argument the way nginx's URL parser does for an upstream server.
    ///
    /// # Errors
    ///
    /// Returns the [`AddressError`] nginx would report (`invalid host`, `invalid port`, ...).
    pub fn parse(s: &str) -> Result<Address, AddressError> {
        let b = s.as_bytes();
        if b.len() >= 5 && b[..5].eq_ignore_ascii_case(b"unix:") {
            let path = &s[5..];
            if path.is_empty() {
                return Err(AddressError::NoUnixPath);
            }
            if path.len() + 1 > SUN_PATH_LEN {
                return Err(AddressError::UnixPathTooLong);
            }
            return Ok(Address::Unix { path: path.to_string() });
        }
        if let Some(rest) = s.strip_prefix('[') {
            let close = rest.find(']').ok_or(AddressError::InvalidHost)?;
            let inner = &rest[..close];
            let after = &rest[close + 1..];
            if after.contains('/') {
                return Err(AddressError::InvalidHost);
            }
            let port = match after {
                "" => None,
                p => Some(parse_port(p.strip_prefix(':').ok_or(AddressError::InvalidHost)?)?),
            };
            if inner.is_empty() {
                return Err(AddressError::NoHost);
            }
            let addr = parse_ipv6(inner.as_bytes()).ok_or(AddressError::InvalidIpv6)?;
            return Ok(Address::Ipv6 { addr, port });
        }
        if s.contains(['/', '?']) {
            return Err(AddressError::InvalidHost);
        }
        let (host, port) = match s.find(':') {
            Some(i) => (&s[..i], Some(parse_port(&s[i + 1..])?)),
            None => (s, None),
        };
        if host.is_empty() {
            return Err(AddressError::NoHost);
        }
        Ok(Address::Host { host: host.to_string(), port })
    }

    /// The port written in the string, if any.
    pub fn port(&self) -> Option<u16> {
        match self {
            Address::Host { port, .. } | Address::Ipv6 { port, .. } => *port,
            Address::Unix { .. } => None,
        }
    }
}

/// An IPv6 literal with nginx's acceptance rules (which differ from RFC 4291 parsers at the edges): one
/// leading `:` is skipped, then groups of 1–4 hex digits separated by `:`, at most one empty group (`::`),
/// and a dotted IPv4 tail when at least two groups remain. So `:1::`, `:1:2:3:4:5:6:7:8` and
/// `::1.2.3.04` are addresses, and `1:2:3:4:5:6:7::` (a `::` standing for no group) is not.
fn parse_ipv6(text: &[u8]) -> Option<std::net::Ipv6Addr> {
    let text = text.strip_prefix(b":").unwrap_or(text);
    if text.is_empty() {
        return None;
    }
    let mut groups: Vec<u16> = Vec::with_capacity(8);
    let mut gap: Option<usize> = None;
    let mut parts = text.split(|&c| c == b':').peekable();
    let mut first = true;
    while let Some(part) = parts.next() {
        let last = parts.peek().is_none();
        if part.is_empty() {
            // An empty part is the `::` gap; a trailing `:` after a gap ends with a zero group.
            if last && gap.is_some() && !first {
                groups.push(0);
                continue;
            }
            if gap.is_some() || last {
                return None;
            }
            gap = Some(groups.len());
            first = false;
            continue;
        }
        first = false;
        if last && part.contains(&b'.') && part[0].is_ascii_digit() {
            if groups.len() > 6 {
                return None;
            }
            let v4 = dotted_quad(part)?;
            let o = v4.octets();
            groups.push(u16::from_be_bytes([o[0], o[1]]));
            groups.push(u16::from_be_bytes([o[2], o[3]]));
            break;
        }
        if part.len() > 4 || groups.len() >= 8 {
            return None;
        }
        let s = std::str::from_utf8(part).ok()?;
        groups.push(u16::from_str_radix(s, 16).ok().filter(|_| part.iter().all(u8::is_ascii_hexdigit))?);
    }
    let mut out = [0u16; 8];
    match gap {
        None if groups.len() == 8 => out.copy_from_slice(&groups),
        Some(at) if groups.len() < 8 => {
            out[..at].copy_from_slice(&groups[..at]);
            let tail = &groups[at..];
            out[8 - tail.len()..].copy_from_slice(tail);
        }
        _ => return None,
    }
    Some(std::net::Ipv6Addr::from(out))
}

/// A dotted IPv4 tail as nginx reads it: decimal octets up to 255, exactly three dots (empty octets are 0).
fn dotted_quad(s: &[u8]) -> Option<std::net::Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut n = 0;
    let mut value: u32 = 0;
    for &c in s {
        match c {
            b'0'..=b'9' => {
                value = value * 10 + u32::from(c - b'0');
                if value > 255 {
                    return None;
                }
            }
            b'.' if n < 3 => {
                octets[n] = value as u8;
                n += 1;
                value = 0;
            }
            _ => return None,
        }
    }
    if n != 3 {
        return None;
    }
    octets[3] = value as u8;
    Some(std::net::Ipv4Addr::from(octets))
}

/// nginx's `ngx_atoi` plus the 1..=65535 range check: digits only, leading zeros allowed.
fn parse_port(p: &str) -> Result<u16, AddressError> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddressError::InvalidPort);
    }
    let digits = p.trim_start_matches('0');
    if digits.len() > 5 {
        return Err(AddressError::InvalidPort);
    }
    match digits.parse::<u32>().unwrap_or(0) {
        n @ 1..=65535 => Ok(n as u16),
        _ => Err(AddressError::InvalidPort),
    }
}

/// nginx's IPv4 literal rule (`ngx_inet_addr`): exactly four dot-separated decimal octets ≤ 255; leading
/// zeros and even empty octets are accepted (`1..2.3` is 1.0.2.3). Anything else is a hostname.
pub(crate) fn ngx_inet_addr(text: &str) -> Option<std::net::Ipv4Addr> {
    let mut addr: u32 = 0;
    let mut octet: u32 = 0;
    let mut dots = 0;
    for c in text.bytes() {
        match c {
            b'0'..=b'9' => {
                octet = octet * 10 + u32::from(c - b'0');
                if octet > 255 {
                    return None;
                }
            }
            b'.' => {
                addr = (addr << 8) + octet;
                octet = 0;
                dots += 1;
                if dots > 3 {
                    return None;
                }
            }
            _ => return None,
        }
    }
    (dots == 3).then(|| std::net::Ipv4Addr::from((addr << 8) + octet))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(s: &str) -> (String, String) {
        let server = Server::new(s);
        let (h, p) = server.ketama_parts();
        (String::from_utf8(h.to_vec()).unwrap(), String::from_utf8(p.to_vec()).unwrap())
    }

    #[test]
    fn ketama_split_follows_the_trailing_digit_rule() {
        let cases = [
            ("127.0.0.1:9001", "127.0.0.1", "9001"),
            ("127.0.0.1", "127.0.0.1", ""),
            ("127.0.0.1:080", "127.0.0.1", "080"),
            ("[::1]:9101", "[::1]", "9101"),
            ("[::1]", "[::1]", ""),
            ("unix:/tmp/s", "/tmp/s", ""),
            ("UNIX:/tmp/s", "/tmp/s", ""),
            ("uNiX:/tmp/s:80", "/tmp/s:80", ""),
            ("host123", "host123", ""),
            ("backend:", "backend", ""),
            ("12345", "12345", ""),
            (":80", "", "80"),
            ("", "", ""),
            ("unix", "unix", ""),
        ];
        for (s, h, p) in cases {
            assert_eq!(parts(s), (h.to_string(), p.to_string()), "{s}");
        }
    }

    #[test]
    fn address_parse_matches_nginx_wording() {
        use AddressError::*;
        let bad = [
            ("unix:", NoUnixPath),
            ("10.0.0.1:0", InvalidPort),
            ("10.0.0.1:65536", InvalidPort),
            ("10.0.0.1:x", InvalidPort),
            ("10.0.0.1:", InvalidPort),
            ("10.0.0.1/x", InvalidHost),
            ("10.0.0.1:80?a", InvalidHost),
            (":80", NoHost),
            ("[::1", InvalidHost),
            ("[::1]x", InvalidHost),
            ("[]:80", NoHost),
            ("[zz]:80", InvalidIpv6),
            // nginx checks the port (after the first colon) before the empty host.
            ("::1:80", InvalidPort),
        ];
        for (s, e) in bad {
            assert_eq!(Address::parse(s), Err(e), "{s}");
        }
        for ok in
            ["[:1::]:80", "[:1:2:3:4:5:6:7:8]:80", "[::1.2.3.04]:80", "[::1]", "[1::]", "[::]", "[1:2:3:4:5:6:7:8]"]
        {
            assert!(Address::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["[1:2:3:4:5:6:7::]:80", "[1:2:3:4:5:6:7:8:9]", "[1::2::3]", "[12345::]", "[::1.2.3]", "[1.2.3.4]"] {
            assert_eq!(Address::parse(bad), Err(InvalidIpv6), "{bad}");
        }
        let long = format!("unix:/{}", "a".repeat(107));
        assert_eq!(Address::parse(&long), Err(UnixPathTooLong));
        assert!(Address::parse(&format!("unix:/{}", "a".repeat(106))).is_ok());
        assert_eq!(Address::parse("h:00080").unwrap().port(), Some(80));
        assert_eq!(Address::parse("[::1]").unwrap().port(), None);
        assert_eq!(Address::parse("UNIX:/x").unwrap(), Address::Unix { path: "/x".into() });
    }
}
