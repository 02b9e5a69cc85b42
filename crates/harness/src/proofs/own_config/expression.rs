//! The key expression run of `verify --config` (issue 21 point 4): the upstream hashes the user's `hash`
//! expression exactly as written — with the `map` blocks it reads copied from the user's files — and the
//! harness sends generated requests that exercise each variable the key reads: targets with percent-escapes
//! (valid and invalid), `.`/`..` segments, doubled slashes and query arguments; cookies and repeated
//! headers; Host variants (case, port, absent, an absolute-form target); methods; and client addresses
//! across `127.0.0.0/8`, so `$remote_addr`, `$binary_remote_addr` and `$remote_port` keys are proven too.
//!
//! This module reads what the key needs from the user's config; the requests and their judgement are
//! [`crate::run::keyed`]'s.

use nginx_ketama::config::Config;
use nginx_ketama::config::expression::Expression;
use std::collections::BTreeSet;

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
}
