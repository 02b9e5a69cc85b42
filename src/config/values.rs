//! Value parsers with nginx's acceptance rules: numbers, times, sizes, variable references. All work on
//! bytes, so no input can split a UTF-8 character.

use super::error::{ErrorKind, Text};

/// The largest value nginx's `ngx_int_t` holds on 64-bit Linux.
const MAX_INT: u64 = i64::MAX as u64;

/// `ngx_atoi`: ASCII digits only, no sign, at most `ngx_int_t`'s maximum.
pub(crate) fn atoi(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        if v > MAX_INT {
            return None;
        }
    }
    Some(v)
}

/// `ngx_parse_time`: `[Ny][NM][Nw][Nd][Nh][Nm][Ns]` each unit at most once and in that order, a bare number
/// meaning seconds. With `seconds == false` (milliseconds) `ms` is allowed and `y`/`M` are not. Returns
/// seconds or milliseconds.
pub(crate) fn parse_time(s: &[u8], seconds: bool) -> Option<u64> {
    // Steps in the order units must appear; a unit must come after every unit seen so far.
    const YEAR: u64 = 365 * 86400;
    let mut step = if seconds { 0 } else { 2 };
    let mut valid = false;
    let mut value: u64 = 0;
    let mut total: u64 = 0;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c.is_ascii_digit() {
            value = value.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            if value > MAX_INT {
                return None;
            }
            valid = true;
            i += 1;
            continue;
        }
        let (at, scale_s, is_ms) = match c {
            b'y' => (1, YEAR, false),
            b'M' => (2, 30 * 86400, false),
            b'w' => (3, 7 * 86400, false),
            b'd' => (4, 86400, false),
            b'h' => (5, 3600, false),
            b'm' if s.get(i + 1) == Some(&b's') => {
                if seconds {
                    return None;
                }
                i += 1;
                (8, 1, true)
            }
            b'm' => (6, 60, false),
            b's' => (7, 1, false),
            b' ' => {
                if step >= 7 {
                    return None;
                }
                i += 1;
                continue;
            }
            _ => return None,
        };
        if step >= at {
            return None;
        }
        step = at;
        let scale = if is_ms || seconds { scale_s } else { scale_s.checked_mul(1000)? };
        total = total.checked_add(value.checked_mul(scale)?)?;
        if total > MAX_INT {
            return None;
        }
        value = 0;
        i += 1;
    }
    if !valid {
        return None;
    }
    let last = if seconds { value } else { value.checked_mul(1000)? };
    let t = total.checked_add(last)?;
    (t <= MAX_INT).then_some(t)
}

/// `ngx_parse_size`: digits with an optional `k`/`K`, `m`/`M` or `g`/`G` suffix.
pub(crate) fn parse_size(s: &[u8]) -> Option<u64> {
    let (digits, scale) = match s.last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let v = atoi(digits)?.checked_mul(scale)?;
    (v <= MAX_INT).then_some(v)
}

/// The variables a value refers to, checked like nginx's script compiler: `$name`, `${name}`, `$1`…`$9`
/// captures (skipped). Names are lower-cased, as nginx looks them up.
pub(crate) fn variables(value: &[u8]) -> Result<Vec<Vec<u8>>, ErrorKind> {
    let is_name = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < value.len() {
        if value[i] != b'$' {
            i += 1;
            continue;
        }
        i += 1;
        if i == value.len() {
            return Err(ErrorKind::InvalidVariableName);
        }
        if (b'1'..=b'9').contains(&value[i]) {
            i += 1;
            continue;
        }
        let bracket = value[i] == b'{';
        if bracket {
            i += 1;
        }
        let start = i;
        while i < value.len() && is_name(value[i]) {
            i += 1;
        }
        let name = &value[start..i];
        if bracket {
            if value.get(i) != Some(&b'}') {
                let end = value[start..].iter().position(|&c| c == b'}').map_or(value.len(), |p| start + p);
                return Err(ErrorKind::MissingBracket(Text::new(&value[start..end])));
            }
            i += 1;
        }
        if name.is_empty() {
            return Err(ErrorKind::InvalidVariableName);
        }
        out.push(name.to_ascii_lowercase());
    }
    Ok(out)
}

/// The names a regular expression's named captures define (`(?<n>…)`, `(?P<n>…)`, `(?'n'…)`).
pub(crate) fn named_captures(re: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < re.len() {
        if &re[i..i + 2] == b"(?" {
            let (skip, close) = match re[i + 2] {
                b'<' if !matches!(re.get(i + 3), Some(b'=' | b'!')) => (3, b'>'),
                b'P' if re.get(i + 3) == Some(&b'<') => (4, b'>'),
                b'\'' => (3, b'\''),
                _ => (0, 0),
            };
            if skip > 0 {
                let start = i + skip;
                if let Some(len) = re[start..].iter().position(|&c| c == close) {
                    out.push(re[start..start + len].to_ascii_lowercase());
                }
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time(b"10", true), Some(10));
        assert_eq!(parse_time(b"10s", true), Some(10));
        assert_eq!(parse_time(b"1m30s", true), Some(90));
        assert_eq!(parse_time(b"1h", true), Some(3600));
        assert_eq!(parse_time(b"500ms", true), None);
        assert_eq!(parse_time(b"500ms", false), Some(500));
        assert_eq!(parse_time(b"60", false), Some(60_000));
        assert_eq!(parse_time(b"1s1m", true), None);
        assert_eq!(parse_time(b"x", true), None);
        assert_eq!(parse_time(b"", true), None);
        assert_eq!(parse_time("1é".as_bytes(), true), None);
        assert_eq!(parse_time(b"99999999999999999999", true), None);
    }

    #[test]
    fn sizes_and_numbers() {
        assert_eq!(parse_size(b"64k"), Some(65536));
        assert_eq!(parse_size(b"1M"), Some(1 << 20));
        assert_eq!(parse_size(b"abc"), None);
        assert_eq!(atoi(b"007"), Some(7));
        assert_eq!(atoi(b"-1"), None);
        assert_eq!(atoi(b""), None);
    }

    #[test]
    fn variable_references() {
        assert_eq!(variables(b"${Host}x$uri$1").unwrap(), [b"host".to_vec(), b"uri".to_vec()]);
        assert_eq!(variables(b"$"), Err(ErrorKind::InvalidVariableName));
        assert_eq!(variables(b"${request_uri"), Err(ErrorKind::MissingBracket(Text::new(b"request_uri"))));
        assert_eq!(variables(b"$-"), Err(ErrorKind::InvalidVariableName));
        assert_eq!(named_captures(b"^/(?<id>\\d+)/(?P<Name>x)"), [b"id".to_vec(), b"name".to_vec()]);
    }
}
