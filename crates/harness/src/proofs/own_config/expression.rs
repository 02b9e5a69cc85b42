//! The key expression run of `verify --config` (issue 21 point 4): the upstream hashes the user's `hash`
//! expression exactly as written — with the `map` blocks it reads copied from the user's files — and the
//! harness sends generated requests that exercise each variable the key reads: targets with percent-escapes
//! (valid and invalid), `.`/`..` segments, doubled slashes and query arguments; cookies and repeated
//! headers; Host variants (case, port, absent, an absolute-form target); methods; and client addresses
//! across `127.0.0.0/8`, so `$remote_addr`, `$binary_remote_addr` and `$remote_port` keys are proven too.
//!
//! The model reads the nginx.conf the harness rendered with the library's config reader and dispatches each
//! request as nginx would ([`nginx_ketama::dispatch`]): the key bytes, then the route. Nothing here computes
//! a key itself.

use nginx_ketama::config::Config;
use nginx_ketama::config::expression::Expression;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// What the key expression reads, and the `map` blocks that define its map variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needs {
    /// Every variable the key reads, directly or through maps (lower-case names, without `$`), sorted.
    pub variables: Vec<String>,
    /// The text of each `map` block it needs, as written in the user's files, in dependency order.
    pub maps: Vec<String>,
}

/// Why an upstream's key expression is not proven.
pub type NotProven = String;

/// What `expression` (as written after `hash`) reads in `config`.
///
/// # Errors
///
/// Why it cannot be proven: the expression does not parse, or a map block cannot be read back.
pub fn needs(config: &Config, expression: &str) -> Result<Needs, NotProven> {
    let expr = Expression::parse(expression.as_bytes()).map_err(|e| format!("the key expression: {e}"))?;
    let mut variables: BTreeSet<String> = BTreeSet::new();
    let mut pending: Vec<String> = expr.variables().map(str::to_string).collect();
    let mut maps: Vec<String> = Vec::new();
    while let Some(name) = pending.pop() {
        if !variables.insert(name.clone()) {
            continue;
        }
        if let Some(map) = config.maps().iter().find(|m| m.variable == name) {
            let text = block_text(&map.at.file, map.at.line)
                .ok_or_else(|| format!("the map block of ${name} at {} could not be read back", map.at))?;
            maps.insert(0, text);
            pending.extend(map.source.variables().map(str::to_string));
            for value in map.keys.iter().map(|(_, v)| v).chain(map.regexes.iter().map(|(_, v)| v)).chain(&map.default) {
                pending.extend(value.variables().map(str::to_string));
            }
        }
    }
    // A `set` variable, or a capture of a location's or server name's regular expression, has its value
    // where the user's location runs, which the run does not have (only the maps are copied).
    let defined = nginx_ketama::dispatch::defined_variables(config);
    for v in &variables {
        let captured_by_a_map =
            maps.iter().any(|m| m.contains(&format!("(?<{v}>")) || m.contains(&format!("(?P<{v}>")));
        if defined.contains(v) && !config.maps().iter().any(|m| &m.variable == v) && !captured_by_a_map {
            return Err(format!(
                "the key reads ${v}, which `set` or a location's regular expression defines: the run hashes request \
                 variables and maps only"
            ));
        }
    }
    Ok(Needs { variables: variables.into_iter().collect(), maps })
}

/// The text of the block whose `{` is on line `line` of `file`, from the start of the directive to its
/// closing brace (quotes and comments respected).
fn block_text(file: &std::path::Path, line: usize) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let line_start: usize = text.split_inclusive('\n').take(line.checked_sub(1)?).map(str::len).sum();
    let open = line_start + text[line_start..].find('{')?;
    // The directive starts after the previous `;`, `{` or `}` (or the file's start).
    let start = text[..open].rfind(['{', '}', ';']).map_or(0, |i| i + 1);
    let bytes = text.as_bytes();
    let (mut depth, mut i, mut quote) = (0usize, open, None::<u8>);
    while i < bytes.len() {
        let c = bytes[i];
        match (quote, c) {
            (Some(q), b'\\') if q != 0 => i += 1,
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(c),
            // `#` starts a comment where a token could start.
            (None, b'#') if i == 0 || b" \t\r\n;{}".contains(&bytes[i - 1]) => {
                i += text[i..].find('\n').unwrap_or(text.len() - i);
            }
            (None, b'{') => depth += 1,
            (None, b'}') => {
                depth -= 1;
                if depth == 0 {
                    let block = text[start..=i].trim_start();
                    // Leading comment lines are not part of it.
                    let block: Vec<&str> = block.lines().skip_while(|l| l.trim_start().starts_with('#')).collect();
                    return Some(block.join("\n").trim_start().to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// One generated request: the client address it comes from and its head (request line and header lines,
/// each ended by CRLF, without the final empty line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The source address (a port is chosen when connecting).
    pub client: Ipv4Addr,
    /// Request line and headers.
    pub head: Vec<u8>,
}

/// `n` requests exercising `needs`, reproducible from `seed`.
pub fn requests(needs: &Needs, seed: u64, n: usize) -> Vec<Generated> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x006b_6579_6578_7072);
    let args: Vec<&str> = needs.variables.iter().filter_map(|v| v.strip_prefix("arg_")).collect();
    let cookies: Vec<&str> = needs.variables.iter().filter_map(|v| v.strip_prefix("cookie_")).collect();
    let headers: Vec<String> = needs
        .variables
        .iter()
        .filter_map(|v| v.strip_prefix("http_"))
        .filter(|h| !matches!(*h, "host" | "cookie"))
        .map(|h| h.replace('_', "-"))
        .collect();
    (0..n).map(|_| one(&mut rng, &args, &cookies, &headers)).collect()
}

/// Path segments: ordinary ones, and (one in ten) those nginx normalises or refuses.
const SEGMENTS: &[&str] = &["a", "b", "img", "API", "x.png", "%41", "caf%C3%A9", "a+b", "~u", "%20", "v1"];
const ODD_SEGMENTS: &[&str] = &["%2F", "%2e%2e", "%zz", "%4", "..", ".", "", "%00"];
const VALUES: &[&str] = &["1", "42", "abc", "alpha", "north-eu", "ALPHA", "A%20B", "x+y", "", "%zz", "ü", "a=b", "7,8"];

fn pick<'a>(rng: &mut ChaCha8Rng, from: &[&'a str]) -> &'a str {
    from[rng.random_range(0..from.len())]
}

fn one(rng: &mut ChaCha8Rng, args: &[&str], cookies: &[&str], headers: &[String]) -> Generated {
    let mut path = String::new();
    for _ in 0..rng.random_range(1..=4) {
        path.push('/');
        if rng.random_range(0..8) == 0 {
            path.push('/');
        }
        let segment = if rng.random_range(0..10) == 0 { pick(rng, ODD_SEGMENTS) } else { pick(rng, SEGMENTS) };
        path.push_str(segment);
    }
    if rng.random_range(0..6) == 0 {
        path.push('/');
    }
    let mut query: Vec<String> = Vec::new();
    for name in args.iter().copied().chain(["q", "id"]) {
        match rng.random_range(0..6) {
            0 => {}
            1 => query.push(format!("{}={}", name.to_ascii_uppercase(), pick(rng, VALUES))),
            2 => query.push(name.to_string()),
            3 => {
                query.push(format!("{name}={}", pick(rng, VALUES)));
                query.push(format!("{name}={}", pick(rng, VALUES)));
            }
            _ => query.push(format!("{name}={}", pick(rng, VALUES))),
        }
    }
    let mut target = path;
    if !query.is_empty() || rng.random_range(0..8) == 0 {
        target.push('?');
        target.push_str(&query.join("&"));
    }
    let method = ["GET", "GET", "GET", "POST", "PUT", "DELETE", "OPTIONS"][rng.random_range(0..7)];
    let host = ["shop.example", "Shop.Example", "shop.example:8080", "SHOP.example.", "127.0.0.1", "a.b.test"]
        [rng.random_range(0..6)];
    let (line, host_header) = match rng.random_range(0..12) {
        0 => (format!("{method} http://{host}{target} HTTP/1.1"), Some("ignored.example")),
        1 => (format!("{method} {target} HTTP/1.0"), None),
        _ => (format!("{method} {target} HTTP/1.1"), Some(host)),
    };
    let mut head = format!("{line}\r\n");
    if let Some(h) = host_header {
        let _ = write!(head, "Host: {h}\r\n");
    }
    if method != "GET" {
        head.push_str("Content-Length: 0\r\n");
    }
    for name in headers {
        for _ in 0..rng.random_range(0..=2) {
            let _ = write!(head, "{name}: {}\r\n", pick(rng, VALUES));
        }
    }
    if !cookies.is_empty() || rng.random_range(0..4) == 0 {
        for _ in 0..rng.random_range(0..=2) {
            let mut pairs: Vec<String> = Vec::new();
            for name in cookies.iter().copied().chain(["sid"]) {
                if rng.random_range(0..4) != 0 {
                    pairs.push(format!("{name}={}", pick(rng, VALUES)));
                }
            }
            let _ = write!(head, "Cookie: {}\r\n", pairs.join("; "));
        }
    }
    let client = Ipv4Addr::new(127, rng.random_range(0..=255), rng.random_range(0..=255), rng.random_range(1..=254));
    Generated { client, head: head.into_bytes() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("n.conf");
        std::fs::write(
            &file,
            "http {\n  # the tenant\n  map $http_x_t $t {\n    default \"}\";\n    ~^a # {\n    b 2; }\n  upstream u {}\n}\n",
        )
        .unwrap();
        assert_eq!(
            block_text(&file, 3).as_deref(),
            Some("map $http_x_t $t {\n    default \"}\";\n    ~^a # {\n    b 2; }")
        );
        assert_eq!(block_text(&file, 99), None);
    }

    #[test]
    fn requests_carry_what_the_key_reads() {
        let needs = Needs {
            variables: vec!["arg_user".into(), "cookie_session".into(), "http_x_tenant".into()],
            maps: Vec::new(),
        };
        let got = requests(&needs, 1, 200);
        let text: Vec<String> = got.iter().map(|g| String::from_utf8_lossy(&g.head).into_owned()).collect();
        assert!(text.iter().any(|t| t.contains("user=")));
        assert!(text.iter().any(|t| t.contains("Cookie: ") && t.contains("session=")));
        assert!(text.iter().any(|t| t.matches("x-tenant: ").count() == 2), "repeated headers");
        assert!(text.iter().any(|t| t.contains("HTTP/1.0\r\n") && !t.contains("Host:")), "no Host");
        assert!(got.iter().map(|g| g.client).collect::<BTreeSet<_>>().len() > 100, "many client addresses");
        assert_eq!(got, requests(&needs, 1, 200), "reproducible");
    }
}
