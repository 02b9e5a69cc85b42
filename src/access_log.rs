//! Access log lines read back into the requests they record (algorithm §12.10): a line is matched against
//! its [`LogFormat`] (each variable's value runs to the text that follows it in the format), unescaped as
//! the format's `escape=` wrote it, and the request is rebuilt from the variables that carry one — the
//! request line, `Host`, other headers, cookies, addresses and scheme.
//!
//! # Example
//!
//! ```
//! use nginx_ketama::access_log::LogLine;
//! use nginx_ketama::config::log_format::LogFormat;
//!
//! let combined = LogFormat::combined();
//! let line = br#"10.1.2.3 - - [02/Dec/2026:10:00:00 +0000] "GET /a?x=1 HTTP/1.1" 200 5 "-" "curl/8""#;
//! let parsed = LogLine::parse(&combined, line)?;
//! assert_eq!(parsed.value("request"), Some(&b"GET /a?x=1 HTTP/1.1"[..]));
//! assert_eq!(parsed.value("http_referer"), None, "`-` is a value not found");
//! let request = parsed.request(&Default::default())?;
//! assert_eq!(request.client().ip().to_string(), "10.1.2.3");
//! # Ok::<(), nginx_ketama::access_log::LogLineError>(())
//! ```

use crate::config::expression::Part;
use crate::config::log_format::{Escape, LogFormat};
use crate::request::{Request, Scheme};
use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Why a log line cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogLineError {
    /// The line does not have the format's text where it should.
    #[error("not in log_format \"{format}\": expected {expected:?} at byte {at}")]
    Shape {
        /// The format.
        format: String,
        /// The format's text that was expected.
        expected: String,
        /// Where, counted from 0.
        at: usize,
    },
    /// Two variables follow each other with no text between them: where one ends is unknowable.
    #[error("log_format \"{format}\": ${first} and ${second} have no text between them")]
    Adjacent {
        /// The format.
        format: String,
        /// The first variable.
        first: String,
        /// The second.
        second: String,
    },
    /// A value is not what its variable holds (an address that does not parse, a port out of range).
    #[error("${variable} is {value:?}, not {what}")]
    Value {
        /// The variable.
        variable: String,
        /// Its value as logged.
        value: String,
        /// What it should be.
        what: &'static str,
    },
    /// Nothing in the line gives the request line.
    #[error("the line has no request line ($request, or $request_method and $request_uri)")]
    NoRequestLine,
}

/// One parsed line: each variable of the format and its value (`None`: logged as not found), borrowed from
/// the format and the line where no escape had to be undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine<'a> {
    values: Vec<(&'a str, Option<Cow<'a, [u8]>>)>,
}

/// What a request needs that a log line may not say.
#[derive(Debug, Clone)]
pub struct Defaults {
    /// The client, when the line has no `$remote_addr` (port: `$remote_port`, else 0).
    pub client: SocketAddr,
    /// The address the request arrived on, when the line has no `$server_addr`/`$server_port`.
    pub server: SocketAddr,
    /// The `Host` header, when the line has neither `$http_host` nor `$host`.
    pub host: Option<Vec<u8>>,
}

impl Default for Defaults {
    fn default() -> Defaults {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        Defaults { client: SocketAddr::new(lo, 0), server: SocketAddr::new(lo, 80), host: None }
    }
}

impl<'a> LogLine<'a> {
    /// Reads `line` (without its line end) as `format` wrote it.
    ///
    /// # Errors
    ///
    /// [`LogLineError::Shape`] when the line does not fit the format, [`LogLineError::Adjacent`] for a
    /// format that cannot be read back.
    pub fn parse(format: &'a LogFormat, line: &'a [u8]) -> Result<LogLine<'a>, LogLineError> {
        let parts = format.format.parts();
        let mut values = Vec::new();
        let mut at = 0;
        let name_of = |p: &'a Part| match p {
            Part::Variable(v) => Some(v.as_str()),
            Part::Capture(_) => Some("capture"),
            Part::Literal(_) => None,
        };
        for (i, part) in parts.iter().enumerate() {
            let Some(name) = name_of(part) else {
                let Part::Literal(text) = part else { continue };
                if !line[at..].starts_with(text) {
                    return Err(LogLineError::Shape {
                        format: format.name.clone(),
                        expected: String::from_utf8_lossy(text).into_owned(),
                        at,
                    });
                }
                at += text.len();
                continue;
            };
            let end = match parts.get(i + 1) {
                None => line.len(),
                Some(Part::Literal(next)) => {
                    find(&line[at..], next).map(|p| at + p).ok_or_else(|| LogLineError::Shape {
                        format: format.name.clone(),
                        expected: String::from_utf8_lossy(next).into_owned(),
                        at: line.len(),
                    })?
                }
                Some(other) => {
                    return Err(LogLineError::Adjacent {
                        format: format.name.clone(),
                        first: name.to_string(),
                        second: name_of(other).unwrap_or_default().to_string(),
                    });
                }
            };
            values.push((name, unescape(&line[at..end], format.escape)));
            at = end;
        }
        if at != line.len() {
            return Err(LogLineError::Shape {
                format: format.name.clone(),
                expected: "the end of the line".into(),
                at,
            });
        }
        Ok(LogLine { values })
    }

    /// A variable's value (the first, if the format writes it twice); `None` when it was logged as not
    /// found or the format does not have it.
    pub fn value(&self, name: &str) -> Option<&[u8]> {
        self.values.iter().find(|(n, _)| *n == name).and_then(|(_, v)| v.as_deref())
    }

    /// The request the line records: the request line from `$request` (else `$request_method
    /// $request_uri $server_protocol`), `Host` from `$http_host` (else `$host`), a header for each
    /// `$http_NAME` (`_` read as `-`) and `$content_type`, `Cookie` from `$http_cookie` (else one pair per
    /// `$cookie_NAME`), the client from `$remote_addr`/`$remote_port`, the server from
    /// `$server_addr`/`$server_port`, `$scheme`.
    ///
    /// # Errors
    ///
    /// [`LogLineError::NoRequestLine`], or [`LogLineError::Value`] for an address or port that does not parse.
    pub fn request(&self, defaults: &Defaults) -> Result<Request, LogLineError> {
        let mut head = match (self.value("request"), self.value("request_method"), self.value("request_uri")) {
            (Some(line), ..) => line.to_vec(),
            (None, Some(method), Some(uri)) => {
                let protocol = self.value("server_protocol").unwrap_or(b"HTTP/1.1");
                [method, b" ", uri, b" ", protocol].concat()
            }
            _ => return Err(LogLineError::NoRequestLine),
        };
        let mut header = |name: &[u8], value: &[u8]| {
            head.extend_from_slice(b"\r\n");
            head.extend_from_slice(name);
            head.extend_from_slice(b": ");
            head.extend_from_slice(value);
        };
        if let Some(host) = self.value("http_host").or_else(|| self.value("host")).or(defaults.host.as_deref()) {
            header(b"Host", host);
        }
        for (name, value) in &self.values {
            let Some(value) = value.as_deref() else { continue };
            if let Some(h) = name.strip_prefix("http_")
                && h != "host"
            {
                header(h.replace('_', "-").as_bytes(), value);
            } else if *name == "content_type" && self.value("http_content_type").is_none() {
                header(b"Content-Type", value);
            }
        }
        if self.value("http_cookie").is_none() {
            let pairs: Vec<Vec<u8>> = self
                .values
                .iter()
                .filter_map(|(n, v)| Some([n.strip_prefix("cookie_")?.as_bytes(), b"=", v.as_deref()?].concat()))
                .collect();
            if !pairs.is_empty() {
                header(b"Cookie", &pairs.join(&b"; "[..]));
            }
        }
        let client = SocketAddr::new(
            self.parsed("remote_addr", "an IP address")?.unwrap_or(defaults.client.ip()),
            self.parsed("remote_port", "a port")?.unwrap_or(defaults.client.port()),
        );
        let server = SocketAddr::new(
            self.parsed("server_addr", "an IP address")?.unwrap_or(defaults.server.ip()),
            self.parsed("server_port", "a port")?.unwrap_or(defaults.server.port()),
        );
        let scheme = match self.value("scheme") {
            Some(b"https") => Scheme::Https,
            _ => Scheme::Http,
        };
        Request::from_head(&head, client, server, scheme).map_err(|_| LogLineError::NoRequestLine)
    }

    fn parsed<T: std::str::FromStr>(&self, name: &str, what: &'static str) -> Result<Option<T>, LogLineError> {
        let Some(v) = self.value(name) else { return Ok(None) };
        let text = String::from_utf8_lossy(v);
        text.parse().map(Some).map_err(|_| LogLineError::Value {
            variable: name.into(),
            value: text.into_owned(),
            what,
        })
    }
}

/// The variables of the key (and of the maps and `set` values it reads, `more`) that a log written in
/// `format` cannot give: each named with what would carry it.
pub fn missing(format: &LogFormat, needed: &[String]) -> Vec<String> {
    let has = |v: &str| format.variables().any(|f| f == v);
    let request_line = has("request") || (has("request_method") && has("request_uri"));
    needed
        .iter()
        .filter(|v| {
            let v = v.as_str();
            let carried = match v {
                "request_uri" | "uri" | "document_uri" | "args" | "query_string" | "is_args" | "request" => {
                    request_line
                }
                "request_method" => request_line || has("request_method"),
                "host" => has("host") || has("http_host"),
                "content_type" => has("content_type") || has("http_content_type"),
                "remote_addr" | "binary_remote_addr" => has("remote_addr"),
                "remote_port" => has("remote_port"),
                "scheme" => has("scheme"),
                // From the configuration or this machine, or the address given on the command line.
                "server_name" | "hostname" | "server_addr" | "server_port" => true,
                _ if v.starts_with("arg_") => request_line || has(v),
                _ if v.starts_with("cookie_") => has(v) || has("http_cookie"),
                _ => has(v),
            };
            !carried
        })
        .cloned()
        .collect()
}

/// The first occurrence of `needle` (not empty) in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let mut from = 0;
    while let Some(p) = hay[from..].iter().position(|&c| c == first) {
        let at = from + p;
        if hay[at + 1..].starts_with(rest) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// A value as written back into its bytes; `None` for a value not found: `-` in the default escaping,
/// nothing with `escape=json` and `escape=none`. Both are ambiguous — a header sent as `-`, or sent empty,
/// reads as absent.
fn unescape(v: &[u8], escape: Escape) -> Option<Cow<'_, [u8]>> {
    if v.is_empty() && escape != Escape::Default {
        return None;
    }
    if escape == Escape::Default && v == b"-" {
        return None;
    }
    if escape == Escape::None || !v.contains(&b'\\') {
        return Some(Cow::Borrowed(v));
    }
    Some(Cow::Owned(unescape_owned(v, escape)))
}

/// Undoes the escapes of a value that has a backslash.
fn unescape_owned(v: &[u8], escape: Escape) -> Vec<u8> {
    match escape {
        Escape::None => v.to_vec(),
        Escape::Default => {
            let mut out = Vec::with_capacity(v.len());
            let mut i = 0;
            while i < v.len() {
                if v[i] == b'\\'
                    && v.get(i + 1) == Some(&b'x')
                    && let (Some(h), Some(l)) = (v.get(i + 2).and_then(|&c| hex(c)), v.get(i + 3).and_then(|&c| hex(c)))
                {
                    out.push(h << 4 | l);
                    i += 4;
                    continue;
                }
                out.push(v[i]);
                i += 1;
            }
            out
        }
        Escape::Json => {
            let mut out = Vec::with_capacity(v.len());
            let mut i = 0;
            while i < v.len() {
                if v[i] == b'\\' && i + 1 < v.len() {
                    let c = v[i + 1];
                    let simple = match c {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0c),
                        _ => None,
                    };
                    if let Some(b) = simple {
                        out.push(b);
                        i += 2;
                        continue;
                    }
                    if c == b'u'
                        && v.len() >= i + 6
                        && &v[i + 2..i + 4] == b"00"
                        && let (Some(h), Some(l)) = (hex(v[i + 4]), hex(v[i + 5]))
                    {
                        out.push(h << 4 | l);
                        i += 6;
                        continue;
                    }
                }
                out.push(v[i]);
                i += 1;
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_escaping_and_not_found() {
        let f =
            LogFormat::from_text("t", Escape::Default, b"$remote_addr \"$request\" \"$http_x_a\" $cookie_s").unwrap();
        let l = LogLine::parse(&f, b"::1 \"GET /\\x22q HTTP/1.1\" \"-\" abc").unwrap();
        assert_eq!(l.value("request"), Some(&b"GET /\"q HTTP/1.1"[..]));
        assert_eq!(l.value("http_x_a"), None);
        let r = l.request(&Defaults::default()).unwrap();
        assert_eq!(r.client().ip().to_string(), "::1");
        assert_eq!(r.headers().iter().map(|h| h.name.as_slice()).collect::<Vec<_>>(), [&b"Cookie"[..]]);
    }

    #[test]
    fn shapes() {
        let f = LogFormat::combined();
        let err = LogLine::parse(&f, b"10.0.0.1 x").unwrap_err();
        assert_eq!(err.to_string(), "not in log_format \"combined\": expected \" - \" at byte 10");
        let adj = LogFormat::from_text("t", Escape::Default, b"$request$status").unwrap();
        assert_eq!(
            LogLine::parse(&adj, b"x").unwrap_err().to_string(),
            "log_format \"t\": $request and $status have no text between them"
        );
        let json = LogFormat::from_text("j", Escape::Json, b"{\"u\":\"$http_user_agent\"}").unwrap();
        assert_eq!(
            LogLine::parse(&json, b"{\"u\":\"a\\\"b\\u0001\"}").unwrap().value("http_user_agent"),
            Some(&b"a\"b\x01"[..])
        );
    }

    #[test]
    fn what_a_log_cannot_give() {
        let f = LogFormat::combined();
        let need = vec!["request_uri".to_string(), "host".into(), "remote_addr".into(), "cookie_s".into()];
        assert_eq!(missing(&f, &need), ["host", "cookie_s"]);
    }
}
