//! Which header lines nginx keeps (`ngx_http_parse_header_line` in src/http/ngx_http_parse.c with the
//! default `ignore_invalid_headers on; underscores_in_headers off;`, and `ngx_http_process_request_headers`
//! in src/http/ngx_http_request.c): a name of letters, digits and `-` is kept; a name with `_` or any other
//! byte is ignored; a NUL (and, since 1.21.1, a space or control character) in the name, or a NUL in the
//! value, is a 400. Headers nginx allows once (`ngx_http_headers_in`, handler
//! `ngx_http_process_unique_header_line`) are a 400 when repeated. Algorithm §12.4.

use super::{BadRequest, Header};
use crate::version::KeyRules;

/// A kept header line.
#[derive(Debug, Clone)]
pub(super) struct Kept<'r> {
    /// The name, lower-cased.
    pub(super) lower: Vec<u8>,
    pub(super) value: &'r [u8],
}

impl Kept<'_> {
    /// Whether `$http_<var>` names this header: lower-cased, `-` read as `_`
    /// (`ngx_http_variable_unknown_header`).
    pub(super) fn variable_name_is(&self, var: &[u8]) -> bool {
        self.lower.len() == var.len()
            && self.lower.iter().zip(var).all(|(&h, &v)| if h == b'-' { v == b'_' } else { h == v })
    }
}

/// The headers nginx refuses to see twice (every modelled release).
const UNIQUE: &[&[u8]] = &[
    b"if-modified-since",
    b"if-unmodified-since",
    b"if-match",
    b"if-none-match",
    b"content-length",
    b"content-range",
    b"if-range",
    b"transfer-encoding",
    b"expect",
    b"authorization",
];

/// Leading and trailing spaces off a value, as nginx's header parser drops them.
pub(super) fn trim_value(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|&c| c != b' ').unwrap_or(v.len());
    let end = v.iter().rposition(|&c| c != b' ').map_or(start, |e| e + 1);
    &v[start..end]
}

/// The lines nginx keeps, in order.
pub(super) fn keep(headers: &[Header], rules: KeyRules) -> Result<Vec<Kept<'_>>, BadRequest> {
    let mut out: Vec<Kept<'_>> = Vec::with_capacity(headers.len());
    for h in headers {
        if h.value.contains(&0) {
            return Err(BadRequest::InvalidHeader);
        }
        let mut valid = !h.name.is_empty();
        for &c in &h.name {
            if c == 0 || (rules.strict_request_line && (c <= 0x20 || c == 0x7f)) {
                return Err(BadRequest::InvalidHeader);
            }
            if !(c.is_ascii_alphanumeric() || c == b'-') {
                valid = false;
            }
        }
        if !valid {
            continue;
        }
        let lower = h.name.to_ascii_lowercase();
        if UNIQUE.contains(&lower.as_slice()) && out.iter().any(|k| k.lower == lower) {
            return Err(BadRequest::DuplicateHeader(String::from_utf8_lossy(&h.name).into_owned()));
        }
        out.push(Kept { lower, value: &h.value });
    }
    Ok(out)
}
