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
            let addr = inner.parse().map_err(|_| AddressError::InvalidIpv6)?;
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
        let long = format!("unix:/{}", "a".repeat(107));
        assert_eq!(Address::parse(&long), Err(UnixPathTooLong));
        assert!(Address::parse(&format!("unix:/{}", "a".repeat(106))).is_ok());
        assert_eq!(Address::parse("h:00080").unwrap().port(), Some(80));
        assert_eq!(Address::parse("[::1]").unwrap().port(), None);
        assert_eq!(Address::parse("UNIX:/x").unwrap(), Address::Unix { path: "/x".into() });
    }
}
