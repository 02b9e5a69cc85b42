//! Variables read from the query and the header lines: `$arg_NAME` (`ngx_http_arg`, src/http/
//! ngx_http_parse.c), `$cookie_NAME` (`ngx_http_parse_multi_header_lines` / since 1.29.6
//! `ngx_http_parse_cookie_lines`), `$http_NAME` and `$content_type` (`ngx_http_variable_unknown_header`,
//! `ngx_http_variable_header`, `ngx_http_variable_headers_internal`, src/http/ngx_http_variables.c).
//! Algorithm §12.4.

use crate::request::Parsed;
use crate::version::KeyRules;

/// `$arg_NAME`: the first `NAME=` (name compared ignoring ASCII case) at the start of the query or after
/// a `&`; the value runs to the next `&`.
pub(super) fn arg<'a>(args: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    if name.is_empty() || args.is_empty() {
        return None;
    }
    let n = name.len();
    let mut p = 0;
    // nginx searches for the name in all but the last byte (an `=` must follow it).
    while p + n < args.len() {
        if args[p..p + n].eq_ignore_ascii_case(name) && (p == 0 || args[p - 1] == b'&') && args[p + n] == b'=' {
            let v = p + n + 1;
            let end = args[v..].iter().position(|&c| c == b'&').map_or(args.len(), |e| v + e);
            return Some(&args[v..end]);
        }
        p += 1;
    }
    None
}

/// `$cookie_NAME`: the first `NAME [spaces] = [spaces] value` among the `Cookie` lines' pairs.
pub(super) fn cookie(r: &Parsed<'_>, name: &[u8], rules: KeyRules, out: &mut Vec<u8>) {
    let both = !rules.cookie_semicolon_only;
    let is_sep = |c: u8| c == b';' || (both && c == b',');
    for line in r.known_header_values(b"cookie") {
        if name.len() > line.len() {
            continue;
        }
        let end = line.len();
        let mut s = 0;
        while s < end {
            let matched = line.len() - s >= name.len() && line[s..s + name.len()].eq_ignore_ascii_case(name);
            if matched {
                s += name.len();
                while s < end && line[s] == b' ' {
                    s += 1;
                }
                if s < end && line[s] == b'=' {
                    s += 1;
                    while s < end && line[s] == b' ' {
                        s += 1;
                    }
                    let last = line[s..].iter().position(|&c| c == b';').map_or(end, |e| s + e);
                    out.extend_from_slice(&line[s..last]);
                    return;
                }
                if s < end {
                    // The byte that was not `=` is consumed before the skip (even a separator: then the
                    // pair after it is skipped too), as nginx's `*start++ != '='` does.
                    s += 1;
                }
            }
            while s < end {
                let c = line[s];
                s += 1;
                if is_sep(c) {
                    break;
                }
            }
            while s < end && line[s] == b' ' {
                s += 1;
            }
        }
    }
}

/// The joined value of several lines.
fn join<'a>(values: impl Iterator<Item = &'a [u8]>, sep: &[u8], first_only: bool, out: &mut Vec<u8>) {
    for (i, v) in values.enumerate() {
        if i > 0 {
            if first_only {
                return;
            }
            out.extend_from_slice(sep);
        }
        out.extend_from_slice(v);
    }
}

/// `$http_NAME`. Since 1.23.0 every line of the name is joined with `", "` (`$http_cookie` with `"; "`);
/// before, the first line only, except `$http_x_forwarded_for` (`", "`) and `$http_cookie` (`"; "`).
pub(super) fn http(r: &Parsed<'_>, name: &[u8], rules: KeyRules, out: &mut Vec<u8>) {
    match name {
        b"cookie" => join(r.known_header_values(b"cookie"), b"; ", false, out),
        b"x_forwarded_for" => join(r.known_header_values(b"x-forwarded-for"), b", ", false, out),
        // `$http_host` is `headers_in.host`: one line at most (a second is a 400).
        _ => join(r.header_values(name), b", ", !rules.headers_joined, out),
    }
}

/// A known header of `headers_in` read by `ngx_http_variable_header` (`$content_type`).
pub(super) fn known(r: &Parsed<'_>, lower: &[u8], rules: KeyRules, out: &mut Vec<u8>) {
    join(r.known_header_values(lower), b", ", !rules.headers_joined, out);
}
