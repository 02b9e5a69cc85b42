//! The request line as `ngx_http_parse_request_line` (src/http/ngx_http_parse.c) reads it: method,
//! target (origin form or absolute form), version. Algorithm §12.2.
//!
//! The URI flags nginx sets on the way (`complex_uri`, `quoted_uri`) only decide whether
//! `ngx_http_parse_complex_uri` runs; on a target without `/.`, `//`, `%` and `#` it returns the same bytes
//! as nginx's fast path, so [`super::uri::parse`] always runs it.

use super::BadRequest;
use crate::version::KeyRules;
use std::fmt;
use std::ops::Range;

/// An HTTP version from the request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HttpVersion {
    /// Major (1).
    pub major: u16,
    /// Minor (0 or 1; nginx accepts up to 999).
    pub minor: u16,
}

impl HttpVersion {
    /// HTTP/1.0.
    pub const HTTP_10: HttpVersion = HttpVersion { major: 1, minor: 0 };
    /// HTTP/1.1.
    pub const HTTP_11: HttpVersion = HttpVersion { major: 1, minor: 1 };
}

impl fmt::Display for HttpVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP/{}.{}", self.major, self.minor)
    }
}

/// Where the pieces of a request line are.
#[derive(Debug, Clone)]
pub(super) struct Line {
    pub(super) method: Range<usize>,
    /// The authority's host of an absolute target.
    pub(super) host: Option<Range<usize>>,
    /// From the path's `/` (or the `?` of an empty path) to the end of the target.
    uri: Range<usize>,
    /// `http://h?a`: the path is empty (nginx adds the `/`).
    pub(super) empty_path: bool,
    /// `http://h HTTP/1.1`: no path; nginx uses `/`.
    no_path: bool,
    pub(super) version: HttpVersion,
}

impl Line {
    /// `$request_uri`.
    pub(super) fn unparsed<'a>(&self, line: &'a [u8]) -> &'a [u8] {
        if self.no_path { b"/" } else { &line[self.uri.clone()] }
    }

    /// What `ngx_http_parse_complex_uri` reads.
    pub(super) fn path_and_query<'a>(&self, line: &'a [u8]) -> &'a [u8] {
        self.unparsed(line)
    }
}

fn is_scheme_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')
}

fn is_sub_delim_or_unreserved(c: u8) -> bool {
    matches!(c, b'-' | b'.' | b'_' | b'~' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=')
}

/// Parses a request line (without its CRLF).
pub(super) fn parse(line: &[u8], rules: KeyRules) -> Result<Line, BadRequest> {
    let at = |i: usize| line.get(i).copied();
    let mut i = 0;
    // Method: `A`–`Z`, `_`, `-`, up to a space.
    while let Some(c) = at(i) {
        if c == b' ' {
            break;
        }
        if !(c.is_ascii_uppercase() || c == b'_' || c == b'-') {
            return Err(BadRequest::InvalidMethod);
        }
        i += 1;
    }
    if i == 0 || at(i).is_none() {
        return Err(BadRequest::InvalidMethod);
    }
    let method = 0..i;
    while at(i) == Some(b' ') {
        i += 1;
    }
    let mut host = None;
    let mut empty_path = false;
    let mut no_path = false;
    let uri_start;
    match at(i) {
        Some(b'/') => uri_start = i,
        Some(c) if c.is_ascii_alphabetic() => {
            // Absolute form: scheme "://" host [":" port] then "/", "?" (1.19.6+) or " ".
            while at(i).is_some_and(is_scheme_char) {
                i += 1;
            }
            if line.get(i..i + 3) != Some(b"://") {
                return Err(BadRequest::InvalidRequest);
            }
            i += 3;
            let h = i;
            if at(i) == Some(b'[') {
                i += 1;
                loop {
                    match at(i) {
                        Some(b']') => {
                            i += 1;
                            break;
                        }
                        Some(c) if c.is_ascii_alphanumeric() || c == b':' || is_sub_delim_or_unreserved(c) => i += 1,
                        _ => return Err(BadRequest::InvalidRequest),
                    }
                }
            } else {
                while at(i).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-') {
                    i += 1;
                }
            }
            host = Some(h..i);
            if at(i) == Some(b':') {
                i += 1;
                while at(i).is_some_and(|c| c.is_ascii_digit()) {
                    i += 1;
                }
            }
            match at(i) {
                Some(b'/') => uri_start = i,
                Some(b'?') if rules.empty_path_query => {
                    uri_start = i;
                    empty_path = true;
                }
                Some(b' ') => {
                    uri_start = i;
                    no_path = true;
                }
                None => return Err(BadRequest::Http09),
                _ => return Err(BadRequest::InvalidRequest),
            }
        }
        _ => return Err(BadRequest::InvalidRequest),
    }
    // The target: up to a space (before 1.21.1, a space not followed by the protocol stays in the URI).
    let mut uri_end = if no_path { uri_start } else { line.len() };
    if !no_path {
        let mut j = uri_start;
        loop {
            match at(j) {
                None => return Err(BadRequest::Http09),
                Some(b' ') => {
                    let mut k = j;
                    while at(k) == Some(b' ') {
                        k += 1;
                    }
                    match at(k) {
                        None => return Err(BadRequest::Http09),
                        Some(b'H') => {
                            uri_end = j;
                            i = k;
                            break;
                        }
                        Some(_) if !rules.strict_request_line => j = k,
                        Some(_) => return Err(BadRequest::InvalidRequest),
                    }
                }
                Some(0) => return Err(BadRequest::InvalidRequest),
                Some(c) if rules.strict_request_line && (c < 0x20 || c == 0x7f) => {
                    return Err(BadRequest::InvalidRequest);
                }
                Some(_) => j += 1,
            }
        }
    } else {
        while at(i) == Some(b' ') {
            i += 1;
        }
        if at(i).is_none() {
            return Err(BadRequest::Http09);
        }
        if at(i) != Some(b'H') {
            return Err(BadRequest::InvalidRequest);
        }
    }
    // "HTTP/" major "." minor, then optional spaces.
    if line.get(i..i + 5) != Some(b"HTTP/") {
        return Err(BadRequest::InvalidRequest);
    }
    i += 5;
    let mut major: u16 = match at(i) {
        Some(c @ b'1'..=b'9') => u16::from(c - b'0'),
        _ => return Err(BadRequest::InvalidRequest),
    };
    if major > 1 {
        return Err(BadRequest::InvalidVersion);
    }
    i += 1;
    loop {
        match at(i) {
            Some(b'.') => break,
            Some(c @ b'0'..=b'9') => {
                major = major * 10 + u16::from(c - b'0');
                if major > 1 {
                    return Err(BadRequest::InvalidVersion);
                }
                i += 1;
            }
            _ => return Err(BadRequest::InvalidRequest),
        }
    }
    i += 1;
    let mut minor: u16 = match at(i) {
        Some(c @ b'0'..=b'9') => u16::from(c - b'0'),
        _ => return Err(BadRequest::InvalidRequest),
    };
    i += 1;
    loop {
        match at(i) {
            None => break,
            Some(b' ') => {
                while at(i) == Some(b' ') {
                    i += 1;
                }
                if at(i).is_some() {
                    return Err(BadRequest::InvalidRequest);
                }
                break;
            }
            Some(c @ b'0'..=b'9') => {
                if minor > 99 {
                    return Err(BadRequest::InvalidRequest);
                }
                minor = minor * 10 + u16::from(c - b'0');
                i += 1;
            }
            _ => return Err(BadRequest::InvalidRequest),
        }
    }
    Ok(Line { method, host, uri: uri_start..uri_end, empty_path, no_path, version: HttpVersion { major, minor } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::NginxVersion;

    fn p(line: &str, v: (u32, u32, u32)) -> Result<(String, String), BadRequest> {
        let l = parse(line.as_bytes(), NginxVersion::new(v.0, v.1, v.2).key_rules())?;
        let host = l.host.clone().map(|h| line[h].to_string()).unwrap_or_default();
        Ok((String::from_utf8_lossy(l.unparsed(line.as_bytes())).into_owned(), host))
    }

    /// Expected values recorded from nginx 1.18.0 and 1.30.6 (tests/keys_live.rs sends the same lines).
    #[test]
    fn request_lines() {
        let new = (1, 30, 6);
        let old = (1, 18, 0);
        assert_eq!(p("GET /a b HTTP/1.1", new), Err(BadRequest::InvalidRequest));
        assert_eq!(p("GET /a b HTTP/1.1", old).unwrap().0, "/a b");
        assert_eq!(p("GET http://Ex.com:81/p?q HTTP/1.1", new).unwrap(), ("/p?q".into(), "Ex.com".into()));
        assert_eq!(p("GET http://ex.com?q HTTP/1.1", new).unwrap().0, "?q");
        assert_eq!(p("GET http://ex.com?q HTTP/1.1", old), Err(BadRequest::InvalidRequest));
        assert_eq!(p("GET http://ex.com HTTP/1.1", new).unwrap().0, "/");
        assert_eq!(p("get / HTTP/1.1", new), Err(BadRequest::InvalidMethod));
        assert_eq!(p("GET / HTTP/2.0", new), Err(BadRequest::InvalidVersion));
        assert_eq!(p("GET a HTTP/1.1", new), Err(BadRequest::InvalidRequest));
        assert_eq!(p("GET /", new), Err(BadRequest::Http09));
        assert_eq!(p("GET /\tx HTTP/1.1", new), Err(BadRequest::InvalidRequest));
        assert_eq!(p("GET /\tx HTTP/1.1", old).unwrap().0, "/\tx");
    }
}
