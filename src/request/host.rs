//! `ngx_http_validate_host` (src/http/ngx_http_request.c): whether a `Host` value (or a request-line
//! authority) is acceptable, and the host nginx keeps — lower-cased, without the port and one trailing
//! dot. Three generations (algorithm §12.3): before 1.21.1 only `/` and NUL are refused; 1.21.1 also
//! refuses spaces and control characters; 1.29.4 checks RFC 3986's host grammar and the port's digits.

use crate::version::KeyRules;

/// The host nginx keeps, or `None` where nginx answers 400.
pub(super) fn validate(host: &[u8], rules: KeyRules) -> Option<Vec<u8>> {
    let len = if rules.strict_host { strict(host)? } else { lenient(host, rules.strict_request_line)? };
    let (len, dot) = len;
    let mut keep = len;
    if dot == Some(len.wrapping_sub(1)) {
        keep -= 1;
    }
    if keep == 0 {
        return None;
    }
    Some(host[..keep].to_ascii_lowercase())
}

/// 1.29.4+: `(host length, position of the last dot)`.
fn strict(h: &[u8]) -> Option<(usize, Option<usize>)> {
    #[derive(PartialEq)]
    enum S {
        Start,
        Host,
        Literal,
        End,
        Port,
    }
    let mut s = S::Start;
    let mut dot: Option<usize> = None;
    let mut len = h.len();
    let mut port: u32 = 0;
    for (i, &c) in h.iter().enumerate() {
        if s == S::Start {
            if c == b'[' {
                s = S::Literal;
                continue;
            }
            s = S::Host;
        }
        let common = |c: u8| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'-' | b'_' | b'~' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
                )
        };
        match s {
            S::Host => match c {
                b':' => {
                    len = i;
                    s = S::Port;
                }
                b'.' => {
                    if dot.is_some_and(|d| d + 1 == i) {
                        return None;
                    }
                    dot = Some(i);
                }
                b'%' => {}
                c if common(c) => {}
                _ => return None,
            },
            S::Literal => match c {
                b':' => {}
                b']' => {
                    len = i + 1;
                    s = S::End;
                }
                b'.' => {
                    if dot.is_some_and(|d| d + 1 == i) {
                        return None;
                    }
                    dot = Some(i);
                }
                c if common(c) => {}
                _ => return None,
            },
            S::End => {
                if c != b':' {
                    return None;
                }
                s = S::Port;
            }
            S::Port => {
                if !c.is_ascii_digit() {
                    return None;
                }
                port = port * 10 + u32::from(c - b'0');
                if port > 65535 {
                    return None;
                }
            }
            S::Start => unreachable!("handled above"),
        }
    }
    if s == S::Literal {
        return None;
    }
    Some((len, dot))
}

/// Before 1.29.4: `(host length, position of the last dot)`.
fn lenient(h: &[u8], no_controls: bool) -> Option<(usize, Option<usize>)> {
    #[derive(PartialEq)]
    enum S {
        Usual,
        Literal,
        Rest,
    }
    let mut s = S::Usual;
    let mut dot: Option<usize> = None;
    let mut len = h.len();
    for (i, &c) in h.iter().enumerate() {
        match c {
            b'.' => {
                if dot.is_some_and(|d| d + 1 == i) {
                    return None;
                }
                dot = Some(i);
            }
            b':' if s == S::Usual => {
                len = i;
                s = S::Rest;
            }
            b'[' if i == 0 => s = S::Literal,
            b']' if s == S::Literal => {
                len = i + 1;
                s = S::Rest;
            }
            b'/' | 0 => return None,
            c if no_controls && (c <= 0x20 || c == 0x7f) => return None,
            _ => {}
        }
    }
    Some((len, dot))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::NginxVersion;

    fn v(h: &str, r: (u32, u32, u32)) -> Option<String> {
        validate(h.as_bytes(), NginxVersion::new(r.0, r.1, r.2).key_rules()).map(|b| String::from_utf8(b).unwrap())
    }

    /// Expected values recorded from nginx (tests/keys_live.rs sends the same `Host` lines).
    #[test]
    fn hosts() {
        for r in [(1, 18, 0), (1, 26, 3), (1, 30, 6)] {
            assert_eq!(v("Example.COM:8080", r).as_deref(), Some("example.com"));
            assert_eq!(v("example.com.", r).as_deref(), Some("example.com"));
            assert_eq!(v("[::1]:80", r).as_deref(), Some("[::1]"));
            assert_eq!(v("a..b", r), None);
            assert_eq!(v("a/b", r), None);
            assert_eq!(v(":80", r), None);
        }
        assert_eq!(v("a b", (1, 18, 0)).as_deref(), Some("a b"));
        assert_eq!(v("a b", (1, 26, 3)), None);
        assert_eq!(v("a@b", (1, 26, 3)).as_deref(), Some("a@b"));
        assert_eq!(v("a@b", (1, 30, 6)), None);
        assert_eq!(v("a:8x", (1, 26, 3)).as_deref(), Some("a"));
        assert_eq!(v("a:8x", (1, 30, 6)), None);
    }
}
