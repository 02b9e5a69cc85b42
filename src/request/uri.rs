//! `$uri` and `$args` from the target, as `ngx_http_parse_complex_uri` (src/http/ngx_http_parse.c, same
//! state machine in every modelled release; the empty-path `/` since 1.19.6) builds them, on Unix:
//!
//! * `%XX` is decoded (either case); a `%` not followed by two hex digits, or `%00`, is a 400. A decoded
//!   `%`, `#` or `?` is copied as a plain byte; any other decoded byte is then read as if it had been
//!   sent, so `%2F` is a `/` for slash merging and `%2E%2E` is a `..` segment.
//! * With `merge_slashes on` (the default) a run of `/` becomes one.
//! * `/./` disappears; `/../` removes the segment before it; a `..` above the root is a 400. A final `.` or
//!   `..` segment is resolved the same way.
//! * The first `?` not produced by decoding starts the query; `#` ends the path (and, after `?`, the
//!   query).
//!
//! Algorithm §12.2.

use super::BadRequest;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Usual,
    Slash,
    Dot,
    DotDot,
    Quoted,
    QuotedSecond,
}

/// `(uri, args)` from the target's path and query; `args` is `None` without a `?`.
pub(super) fn parse(
    target: &[u8],
    empty_path: bool,
    merge_slashes: bool,
) -> Result<(Vec<u8>, Option<Vec<u8>>), BadRequest> {
    let mut out: Vec<u8> = Vec::with_capacity(target.len() + 1);
    if empty_path {
        out.push(b'/');
    }
    let mut state = State::Usual;
    let mut quoted_state = State::Usual;
    let mut decoded: u8 = 0;
    let mut p = 0;
    // `pending` is a byte to read again (a decoded one) before the next byte of the target.
    let mut pending: Option<u8> = None;
    loop {
        let ch = match pending.take() {
            Some(c) => c,
            None => match target.get(p) {
                Some(&c) => {
                    p += 1;
                    c
                }
                None => break,
            },
        };
        match state {
            State::Usual | State::Slash | State::Dot | State::DotDot => {
                match (state, ch) {
                    (_, b'%') => {
                        quoted_state = state;
                        state = State::Quoted;
                    }
                    (State::DotDot, b'/' | b'?' | b'#') => {
                        // Back over "/..", then to the slash before the previous segment.
                        up_one(&mut out)?;
                        state = State::Slash;
                        if ch == b'?' {
                            return Ok((out, Some(args(&target[p..]))));
                        }
                        if ch == b'#' {
                            return Ok((out, None));
                        }
                    }
                    (State::Dot, b'/') => {
                        out.pop();
                        state = State::Slash;
                    }
                    (State::Dot, b'?') => {
                        out.pop();
                        return Ok((out, Some(args(&target[p..]))));
                    }
                    (State::Dot, b'#') => {
                        out.pop();
                        return Ok((out, None));
                    }
                    (_, b'?') => return Ok((out, Some(args(&target[p..])))),
                    (_, b'#') => return Ok((out, None)),
                    (State::Slash, b'/') => {
                        if !merge_slashes {
                            out.push(ch);
                        }
                    }
                    (State::Slash, b'.') => {
                        out.push(ch);
                        state = State::Dot;
                    }
                    (State::Dot, b'.') => {
                        out.push(ch);
                        state = State::DotDot;
                    }
                    (_, b'/') => {
                        out.push(ch);
                        state = State::Slash;
                    }
                    (State::Usual, _) => out.push(ch),
                    _ => {
                        out.push(ch);
                        state = State::Usual;
                    }
                }
            }
            State::Quoted => {
                decoded = hex(ch).ok_or(BadRequest::InvalidRequest)?;
                state = State::QuotedSecond;
            }
            State::QuotedSecond => {
                let low = hex(ch).ok_or(BadRequest::InvalidRequest)?;
                let c = (decoded << 4) | low;
                // A second digit 0-9 (`%25`, `%23`, `%00`) or a-f (`%3F`): nginx checks the bytes each
                // branch can produce.
                if ch.is_ascii_digit() {
                    if c == b'%' || c == b'#' {
                        out.push(c);
                        state = State::Usual;
                        continue;
                    }
                    if c == 0 {
                        return Err(BadRequest::InvalidRequest);
                    }
                } else if c == b'?' {
                    out.push(c);
                    state = State::Usual;
                    continue;
                }
                state = quoted_state;
                pending = Some(c);
            }
        }
    }
    match state {
        State::Quoted | State::QuotedSecond => return Err(BadRequest::InvalidRequest),
        State::Dot => {
            out.pop();
        }
        State::DotDot => up_one(&mut out)?,
        _ => {}
    }
    Ok((out, None))
}

/// At the end of a `..` segment (`out` ends with `/..`): removes it and the segment before, keeping
/// that segment's leading `/`; a 400 above the root.
fn up_one(out: &mut Vec<u8>) -> Result<(), BadRequest> {
    let Some(mut u) = out.len().checked_sub(4) else { return Err(BadRequest::InvalidRequest) };
    loop {
        if out[u] == b'/' {
            out.truncate(u + 1);
            return Ok(());
        }
        u = u.checked_sub(1).ok_or(BadRequest::InvalidRequest)?;
    }
}

/// The query: up to the first `#`.
fn args(rest: &[u8]) -> Vec<u8> {
    rest.split(|&c| c == b'#').next().unwrap_or_default().to_vec()
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        _ => match c | 0x20 {
            l @ b'a'..=b'f' => Some(l - b'a' + 10),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(t: &str, merge: bool) -> Result<(String, Option<String>), BadRequest> {
        let (uri, args) = parse(t.as_bytes(), false, merge)?;
        Ok((String::from_utf8_lossy(&uri).into_owned(), args.map(|a| String::from_utf8_lossy(&a).into_owned())))
    }

    fn uri(t: &str) -> String {
        u(t, true).map(|x| x.0).unwrap_or_else(|e| e.to_string())
    }

    /// Expected values recorded from nginx 1.30.6 (the same targets are sent live by tests/keys_live.rs).
    #[test]
    fn complex_uris() {
        assert_eq!(uri("/a//b///c"), "/a/b/c");
        assert_eq!(u("/a//b", false).unwrap().0, "/a//b");
        assert_eq!(uri("/a/./b/../c"), "/a/c");
        assert_eq!(uri("/a/b/.."), "/a/");
        assert_eq!(uri("/a/."), "/a/");
        assert_eq!(uri("/.."), "client sent invalid request (400)");
        assert_eq!(uri("/a/../../b"), "client sent invalid request (400)");
        assert_eq!(uri("/%2e%2E/x"), "client sent invalid request (400)");
        assert_eq!(uri("/a%2Fb%2f%2fc"), "/a/b/c");
        assert_eq!(uri("/a%2Fb%2f%2fc"), "/a/b/c");
        assert_eq!(uri("/%41%3f%23%25"), "/A?#%");
        assert_eq!(uri("/%zz"), "client sent invalid request (400)");
        assert_eq!(uri("/%4"), "client sent invalid request (400)");
        assert_eq!(uri("/a%00"), "client sent invalid request (400)");
        assert_eq!(u("/a?b=/../%zz#f", true).unwrap(), ("/a".into(), Some("b=/../%zz".into())));
        assert_eq!(u("/a#f?x", true).unwrap(), ("/a".into(), None));
        assert_eq!(u("/a/..?x", true).unwrap(), ("/".into(), Some("x".into())));
        assert_eq!(uri("/a.b/c..d/...."), "/a.b/c..d/....");
    }
}
