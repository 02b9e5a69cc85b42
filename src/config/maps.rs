//! `map` blocks of `http { }` (`ngx_http_map_module`, algorithm §12.8): a source value, the variable it
//! defines, and the value each key gives it.
//!
//! Read as `ngx_http_map_block` and `ngx_http_map` read them (src/http/modules/ngx_http_map_module.c, all
//! modelled releases): `default`, `hostnames`, `volatile` and `include` are parameters; any other line is a
//! key and a value; a key starting with `~` is a regular expression (`~*` caseless), `\` escapes a key's
//! first character; keys are lower-cased and may be wildcards after `hostnames`. A value is a complex
//! value (variables allowed).

use super::error::{ErrorKind, Location, Text};
use super::expression::Expression;
use super::hostnames::{self, NamePattern};
use crate::regex::Regex;
use crate::version::NginxVersion;

/// One `map` block.
#[derive(Debug, Clone)]
pub struct Map {
    /// The variable it defines, lower-cased, without `$`.
    pub variable: String,
    /// The source value (the block's first argument).
    pub source: Expression,
    /// `hostnames` appears in the block: one trailing dot of the source value is ignored.
    pub hostnames: bool,
    /// `volatile`: computed afresh for each value that reads it instead of once per request.
    pub volatile: bool,
    /// `default` (nginx: an empty value without one).
    pub default: Option<Expression>,
    /// Exact and wildcard keys, in order, with their values.
    pub keys: Vec<(NamePattern, Expression)>,
    /// Regular-expression keys (`~re`, `~*re` caseless), in order, with their values.
    pub regexes: Vec<(Regex, Expression)>,
    /// Where the block is.
    pub at: Location,
}

/// What a map's exact and wildcard keys give for a source value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'m> {
    /// A key matched (or none did and this is the default, or the empty value).
    Value(&'m Expression),
    /// No key matched and the block has no `default`: the empty value.
    Empty,
    /// No exact or wildcard key matched: the regular expressions are tried in order on this value (the
    /// source, not lower-cased, without the trailing dot `hostnames` drops), and the default after them.
    Regexes(&'m [u8]),
}

impl Map {
    /// `ngx_http_map_variable` (src/http/modules/ngx_http_map_module.c) and `ngx_http_map_find`
    /// (src/http/ngx_http_variables.c), all modelled releases: one trailing dot dropped with `hostnames`,
    /// the value lower-cased and looked up in the combined hash, then the regular expressions (only for a
    /// non-empty value, on the value as it is), then the default ([`Map::fallback`]).
    pub fn lookup<'v>(&'v self, value: &'v [u8]) -> Lookup<'v> {
        let value = match value.strip_suffix(b".") {
            Some(v) if self.hostnames => v,
            _ => value,
        };
        let low = value.to_ascii_lowercase();
        if let Some(v) = hostnames::find(self.keys.iter().map(|(p, v)| (p, v)), &low) {
            return Lookup::Value(v);
        }
        if !self.regexes.is_empty() && !value.is_empty() {
            return Lookup::Regexes(value);
        }
        self.fallback()
    }

    /// The default when no key matched: `default`, else the empty value.
    pub fn fallback(&self) -> Lookup<'_> {
        self.default.as_ref().map_or(Lookup::Empty, Lookup::Value)
    }
}

/// Builds the maps while the walk reads them.
#[derive(Debug)]
pub(crate) struct Builder {
    pub(crate) maps: Vec<Map>,
    open: Option<Map>,
    /// The release read for (the regular-expression compiler's name in errors).
    release: NginxVersion,
}

impl Builder {
    pub(crate) fn new(release: NginxVersion) -> Builder {
        Builder { maps: Vec::new(), open: None, release }
    }

    /// `map SOURCE $VARIABLE {`.
    pub(crate) fn open(&mut self, source: &[u8], variable: &[u8], at: &Location) -> Result<(), ErrorKind> {
        let source = Expression::parse(source)?;
        let Some(name) = variable.strip_prefix(b"$") else {
            return Err(ErrorKind::MapVariableName(Text::new(variable)));
        };
        self.open = Some(Map {
            variable: String::from_utf8_lossy(name).to_ascii_lowercase(),
            source,
            hostnames: false,
            volatile: false,
            default: None,
            keys: Vec::new(),
            regexes: Vec::new(),
            at: at.clone(),
        });
        Ok(())
    }

    /// One line inside the block (`include` is followed by the walk, whose lines come here in turn).
    pub(crate) fn line(&mut self, args: &[Vec<u8>]) -> Result<(), ErrorKind> {
        let Some(map) = &mut self.open else { return Ok(()) };
        match args {
            [one] if one == b"hostnames" => map.hostnames = true,
            [one] if one == b"volatile" => map.volatile = true,
            [key, _] if key == b"include" => {}
            [key, value] => {
                let value = Expression::parse(value)?;
                if key == b"default" {
                    if map.default.is_some() {
                        return Err(ErrorKind::DuplicateMapDefault);
                    }
                    map.default = Some(value);
                } else if let Some(re) = key.strip_prefix(b"~") {
                    // ngx_http_map: `~*` is caseless; the value is compiled as any other.
                    let (re, caseless) = re.strip_prefix(b"*").map_or((re, false), |r| (r, true));
                    let re = Regex::compile(re, caseless, self.release).map_err(|e| ErrorKind::Regex(e.0))?;
                    map.regexes.push((re, value));
                } else {
                    let bare = key.strip_prefix(b"\\").unwrap_or(key);
                    let pattern = if map.hostnames {
                        NamePattern::wildcard(bare).map_err(|_| ErrorKind::InvalidWildcard(Text::new(bare)))?
                    } else {
                        NamePattern::exact(bare)
                    };
                    if map.keys.iter().any(|(p, _)| p.clashes_with(&pattern)) {
                        // ngx_hash_add_key lower-cases the key in place before nginx prints it.
                        return Err(ErrorKind::ConflictingParameter(Text::new(&bare.to_ascii_lowercase())));
                    }
                    map.keys.push((pattern, value));
                }
            }
            _ => return Err(ErrorKind::MapParameters),
        }
        Ok(())
    }

    /// `}`.
    pub(crate) fn close(&mut self) {
        if let Some(m) = self.open.take() {
            self.maps.push(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn map(lines: &[&[&str]]) -> Result<Map, ErrorKind> {
        let mut b = Builder::new(NginxVersion::LATEST);
        let at = Location { file: Arc::default(), line: 1 };
        b.open(b"$http_host", b"$m", &at)?;
        for l in lines {
            b.line(&l.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>())?;
        }
        b.close();
        Ok(b.maps.remove(0))
    }

    fn text(l: Lookup<'_>) -> String {
        match l {
            Lookup::Value(e) => format!("{:?}", e.parts()),
            Lookup::Empty => "empty".into(),
            Lookup::Regexes(v) => format!("regexes on {}", String::from_utf8_lossy(v)),
        }
    }

    #[test]
    fn keys_are_caseless_and_wildcards_need_hostnames() {
        let m = map(&[&["A.Example", "x"], &["*.b.example", "y"]]).unwrap();
        assert_eq!(text(m.lookup(b"a.EXAMPLE")), text(Lookup::Value(&Expression::parse(b"x").unwrap())));
        assert_eq!(m.lookup(b"c.b.example"), Lookup::Empty, "without hostnames `*.` is a literal key");
        let h = map(&[&["hostnames"], &["*.b.example", "y"], &["default", "d"]]).unwrap();
        assert_eq!(text(h.lookup(b"c.b.example.")), text(Lookup::Value(&Expression::parse(b"y").unwrap())));
        assert_eq!(text(h.lookup(b"b.example")), text(Lookup::Value(&Expression::parse(b"d").unwrap())));
    }

    #[test]
    fn regexes_come_after_keys_and_only_for_a_value() {
        let m = map(&[&["~^a", "r"], &["b", "x"]]).unwrap();
        assert_eq!(text(m.lookup(b"b")), text(Lookup::Value(&Expression::parse(b"x").unwrap())));
        assert_eq!(m.lookup(b"C"), Lookup::Regexes(b"C"), "on the value as it is");
        assert_eq!(m.lookup(b""), Lookup::Empty);
    }

    #[test]
    fn nginx_refusals() {
        assert_eq!(
            map(&[&["default", "a"], &["default", "b"]]).unwrap_err().to_string(),
            "duplicate default map parameter"
        );
        assert_eq!(map(&[&["a", "1"], &["A", "2"]]).unwrap_err().to_string(), "conflicting parameter \"a\"");
        assert_eq!(
            map(&[&["hostnames"], &["example.com", "1"], &[".example.com", "2"]]).unwrap_err().to_string(),
            "conflicting parameter \".example.com\""
        );
        assert_eq!(
            map(&[&["hostnames"], &["a.*.com", "1"]]).unwrap_err().to_string(),
            "invalid hostname or wildcard \"a.*.com\""
        );
        assert_eq!(map(&[&["a", "b", "c"]]).unwrap_err().to_string(), "invalid number of the map parameters");
        assert!(map(&[&["\\default", "1"], &["default", "2"]]).is_ok(), "an escaped key is not the parameter");
        #[cfg(feature = "pcre2")]
        assert_eq!(
            map(&[&["~^(a", "1"]]).unwrap_err().to_string(),
            "pcre2_compile() failed: missing closing parenthesis in \"^(a\""
        );
    }
}
