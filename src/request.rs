//! A request as a client sends it (request line, header lines in order, the connection's addresses and
//! scheme), and what nginx makes of it ([`Parsed`]): method, version, `$request_uri`, the decoded and
//! normalised `$uri`, `$args`, the validated host, the header lines it keeps — or the 400 it answers
//! instead ([`BadRequest`]). Algorithm §12.2–§12.4.
//!
//! # Example
//!
//! ```
//! use nginx_ketama::request::Request;
//! use nginx_ketama::NginxVersion;
//!
//! let req = Request::builder("GET", "/a//b/../c%20d?x=1").header("Host", "Example.COM:8080").build();
//! let parsed = req.parse_as(NginxVersion::LATEST.key_rules(), true)?;
//! assert_eq!(parsed.uri(), b"/a/c d");
//! assert_eq!(parsed.request_uri(), b"/a//b/../c%20d?x=1");
//! assert_eq!(parsed.args(), b"x=1");
//! assert_eq!(parsed.host(), Some(&b"example.com"[..]));
//!
//! let bad = Request::builder("GET", "/../x").header("Host", "a").build();
//! assert_eq!(bad.parse_as(NginxVersion::LATEST.key_rules(), true).unwrap_err().to_string(), "client sent invalid request (400)");
//! # Ok::<(), nginx_ketama::request::BadRequest>(())
//! ```

mod headers;
mod host;
mod line;
mod uri;

use crate::version::KeyRules;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

pub use line::HttpVersion;

/// `http` or `https`: what `$scheme` says (the listening socket's `ssl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheme {
    /// Plain HTTP.
    #[default]
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// One header line as sent: its name and value (without the `:` and the spaces around the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The name, as sent.
    pub name: Vec<u8>,
    /// The value, as sent.
    pub value: Vec<u8>,
}

/// A request as it arrives: the request line, the header lines in order, the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    line: Vec<u8>,
    headers: Vec<Header>,
    client: SocketAddr,
    server: SocketAddr,
    scheme: Scheme,
}

/// Builds a [`Request`]; see [`Request::builder`].
#[derive(Debug, Clone)]
pub struct RequestBuilder {
    method: Vec<u8>,
    target: Vec<u8>,
    version: Vec<u8>,
    request: Request,
}

impl RequestBuilder {
    /// The protocol written in the request line (default `HTTP/1.1`).
    pub fn version(mut self, version: impl AsRef<[u8]>) -> Self {
        self.version = version.as_ref().to_vec();
        self
    }

    /// Appends a header line.
    pub fn header(mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Self {
        self.request.headers.push(Header { name: name.as_ref().to_vec(), value: value.as_ref().to_vec() });
        self
    }

    /// The client's address and port (default `127.0.0.1:40000`).
    pub fn client(mut self, addr: SocketAddr) -> Self {
        self.request.client = addr;
        self
    }

    /// The address and port the request arrived on (default `127.0.0.1:80`).
    pub fn server(mut self, addr: SocketAddr) -> Self {
        self.request.server = addr;
        self
    }

    /// The scheme (default [`Scheme::Http`]).
    pub fn scheme(mut self, scheme: Scheme) -> Self {
        self.request.scheme = scheme;
        self
    }

    /// The request: its line is `METHOD SP TARGET SP VERSION`.
    pub fn build(self) -> Request {
        let mut request = self.request;
        let mut line = self.method;
        line.push(b' ');
        line.extend_from_slice(&self.target);
        line.push(b' ');
        line.extend_from_slice(&self.version);
        request.line = line;
        request
    }
}

/// A request head that is not even a sequence of lines (no request line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no request line")]
pub struct NoRequestLine;

impl Request {
    /// A request `METHOD TARGET HTTP/1.1` with no headers, from `127.0.0.1:40000` to `127.0.0.1:80` over
    /// plain HTTP; change any of it with the builder's methods.
    pub fn builder(method: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> RequestBuilder {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        RequestBuilder {
            method: method.as_ref().to_vec(),
            target: target.as_ref().to_vec(),
            version: b"HTTP/1.1".to_vec(),
            request: Request {
                line: Vec::new(),
                headers: Vec::new(),
                client: SocketAddr::new(lo, 40000),
                server: SocketAddr::new(lo, 80),
                scheme: Scheme::Http,
            },
        }
    }

    /// A request from the bytes of its head as sent on the wire: the request line, then header lines,
    /// each ended by CRLF or LF, up to an empty line or the end. Leading empty lines are skipped, as
    /// nginx skips them. A header line without `:` is kept as a name with an empty value (nginx ignores or
    /// refuses it when it parses, see [`Request::parse_as`]).
    ///
    /// # Errors
    ///
    /// [`NoRequestLine`] when `head` holds no line.
    pub fn from_head(
        head: &[u8],
        client: SocketAddr,
        server: SocketAddr,
        scheme: Scheme,
    ) -> Result<Request, NoRequestLine> {
        let mut lines = head.split(|&c| c == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
        let line = loop {
            match lines.next() {
                Some([]) => continue,
                Some(l) => break l.to_vec(),
                None => return Err(NoRequestLine),
            }
        };
        let mut headers = Vec::new();
        for l in lines {
            if l.is_empty() {
                break;
            }
            let (name, value) = match l.iter().position(|&c| c == b':') {
                Some(i) => (&l[..i], &l[i + 1..]),
                None => (l, &[][..]),
            };
            headers.push(Header { name: name.to_vec(), value: headers::trim_value(value).to_vec() });
        }
        Ok(Request { line, headers, client, server, scheme })
    }

    /// The request line as sent (without its line end): `$request`.
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// The header lines, in order.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }

    /// The client's address and port.
    pub fn client(&self) -> SocketAddr {
        self.client
    }

    /// The address and port the request arrived on.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// What nginx makes of the request under `rules` (a release's [`KeyRules`]) with `merge_slashes` as
    /// set in the default server of the address the request arrived on (nginx decodes the URI before it
    /// chooses a server by name).
    ///
    /// # Errors
    ///
    /// [`BadRequest`]: what nginx answers instead, with the message it logs.
    pub fn parse_as(&self, rules: KeyRules, merge_slashes: bool) -> Result<Parsed<'_>, BadRequest> {
        let line = line::parse(&self.line, rules)?;
        let (uri, args) = uri::parse(line.path_and_query(&self.line), line.empty_path, merge_slashes)?;
        let mut server = match line.host.clone() {
            Some(range) => Some(host::validate(&self.line[range], rules).ok_or(BadRequest::InvalidHostInRequestLine)?),
            None => None,
        };
        let headers = headers::keep(&self.headers, rules)?;
        let mut host_header = None;
        for h in &headers {
            if h.lower == b"host" {
                if host_header.is_some() {
                    return Err(BadRequest::DuplicateHost);
                }
                host_header = Some(h.value);
                let valid = host::validate(h.value, rules).ok_or(BadRequest::InvalidHostHeader)?;
                if server.is_none() {
                    server = Some(valid);
                }
            }
        }
        if host_header.is_none() && line.version >= HttpVersion::HTTP_11 {
            return Err(BadRequest::NoHost);
        }
        Ok(Parsed {
            request: self,
            method: line.method.clone(),
            version: line.version,
            request_uri: line.unparsed(&self.line).to_vec(),
            uri,
            args,
            host: server,
            headers,
        })
    }
}

/// What nginx makes of a [`Request`]: see [`Request::parse_as`].
#[derive(Debug, Clone)]
pub struct Parsed<'r> {
    request: &'r Request,
    method: std::ops::Range<usize>,
    version: HttpVersion,
    request_uri: Vec<u8>,
    uri: Vec<u8>,
    args: Option<Vec<u8>>,
    host: Option<Vec<u8>>,
    headers: Vec<headers::Kept<'r>>,
}

impl<'r> Parsed<'r> {
    /// The request as sent.
    pub fn request(&self) -> &'r Request {
        self.request
    }

    /// `$request_method`.
    pub fn method(&self) -> &'r [u8] {
        &self.request.line[self.method.clone()]
    }

    /// The protocol version.
    pub fn version(&self) -> HttpVersion {
        self.version
    }

    /// `$request_uri`: the target as sent (for an absolute target, from its path on).
    pub fn request_uri(&self) -> &[u8] {
        &self.request_uri
    }

    /// `$uri`: the path, percent-decoded, `.` and `..` resolved, slashes merged when `merge_slashes` is on.
    pub fn uri(&self) -> &[u8] {
        &self.uri
    }

    /// `$args`: the query (empty when there is none).
    pub fn args(&self) -> &[u8] {
        self.args.as_deref().unwrap_or_default()
    }

    /// The host the request names (request-line authority, else `Host`), lower-cased, without port and
    /// trailing dot; `None` without either.
    pub fn host(&self) -> Option<&[u8]> {
        self.host.as_deref()
    }

    /// The values of the header lines nginx keeps whose name is `lower` (lower-case, `-` or `_` between
    /// words as in `$http_x_forwarded_for`), in order.
    pub fn header_values<'a>(&'a self, lower: &'a [u8]) -> impl Iterator<Item = &'r [u8]> + 'a {
        self.headers.iter().filter(move |h| h.variable_name_is(lower)).map(|h| h.value)
    }

    /// The values of the header lines whose name is exactly `lower` ignoring case (a known header of
    /// nginx's `headers_in` table), in order.
    pub fn known_header_values<'a>(&'a self, lower: &'a [u8]) -> impl Iterator<Item = &'r [u8]> + 'a {
        self.headers.iter().filter(move |h| h.lower == lower).map(|h| h.value)
    }
}

/// Why nginx refuses a request before any location runs: the message it logs at `info` level and the
/// status it answers ([`BadRequest::status`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadRequest {
    /// The request line or target is malformed (`ngx_http_parse_request_line`,
    /// `ngx_http_parse_complex_uri`).
    #[error("client sent invalid request (400)")]
    InvalidRequest,
    /// The method has a character other than `A`–`Z`, `_`, `-`.
    #[error("client sent invalid method (400)")]
    InvalidMethod,
    /// A major version above 1.
    #[error("client sent invalid version (505)")]
    InvalidVersion,
    /// The request-line authority is not a valid host.
    #[error("client sent invalid host in request line (400)")]
    InvalidHostInRequestLine,
    /// `Host` is not a valid host.
    #[error("client sent invalid host header (400)")]
    InvalidHostHeader,
    /// Two `Host` lines.
    #[error("client sent duplicate host header (400)")]
    DuplicateHost,
    /// HTTP/1.1 without `Host`.
    #[error("client sent HTTP/1.1 request without \"Host\" header (400)")]
    NoHost,
    /// Two lines of a header nginx allows once (`Content-Length`, `If-Match`, …).
    #[error("client sent duplicate header line: \"{0}\" (400)")]
    DuplicateHeader(String),
    /// A header line nginx cannot parse (a NUL, or since 1.21.1 a space or control character in the name).
    #[error("client sent invalid header line (400)")]
    InvalidHeader,
    /// A request line without a version (HTTP/0.9): nginx answers it without headers; not modelled.
    #[error("an HTTP/0.9 request (no version in the request line) is not modelled")]
    Http09,
}

impl BadRequest {
    /// The status nginx answers with (400, or 505 for [`BadRequest::InvalidVersion`]); `None` for what is
    /// not modelled.
    pub fn status(&self) -> Option<u16> {
        match self {
            BadRequest::InvalidVersion => Some(505),
            BadRequest::Http09 => None,
            _ => Some(400),
        }
    }
}
