//! Regular expressions as nginx compiles and runs them (algorithm §12.11): `map` keys `~re`/`~*re`,
//! `location ~`/`~*` and `server_name ~re`, with the captures `$1`…`$9` and named captures
//! `(?<name>…)` a match leaves behind for the values computed after it.
//!
//! nginx compiles with no option but `PCRE2_CASELESS` (`ngx_regex_compile`, src/core/ngx_regex.c; the only
//! other option it knows, multiline, is not used by http): no UTF, no JIT unless `pcre_jit on`, the
//! library's default newline and match limits. This crate does the same through the `pcre2` crate
//! (feature `pcre2`, on by default; without it a configuration that needs a regular expression to route a
//! request is refused by name). nginx links PCRE2 since 1.21.5 and PCRE1 before (Debian's 1.18.0); see
//! algorithm §12.11 for what differs between them for the patterns modelled.

use crate::version::NginxVersion;

/// The release from which nginx prefers PCRE2 (`--with-pcre` finds libpcre2 first; CHANGES 1.21.5) and
/// names its compiler `pcre2_compile()` in errors.
pub const PCRE2_SINCE: NginxVersion = NginxVersion::new(1, 21, 5);

/// One compiled regular expression.
#[derive(Clone)]
pub struct Regex {
    pattern: Vec<u8>,
    caseless: bool,
    /// Named groups: `(name, group number)`.
    names: Vec<(String, usize)>,
    #[cfg(feature = "pcre2")]
    code: pcre2::bytes::Regex,
}

impl std::fmt::Debug for Regex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Regex")
            .field("pattern", &String::from_utf8_lossy(&self.pattern))
            .field("caseless", &self.caseless)
            .finish()
    }
}

/// Why a pattern does not compile: nginx's message, ready to print (`pcre2_compile() failed: … in "…" at
/// "…"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError(pub String);

/// A match could not be attempted or did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatchError {
    /// Built without the `pcre2` feature.
    #[error("regular expression \"{0}\" is not modelled in this build (needs the pcre2 feature)")]
    NoPcre2(String),
    /// PCRE2 gave up (a match limit): nginx logs `pcre2_match() failed` and answers 500.
    #[error("pcre2_match() failed on \"{subject}\" using \"{pattern}\": {message}")]
    Failed {
        /// The subject.
        subject: String,
        /// The pattern.
        pattern: String,
        /// PCRE2's message.
        message: String,
    },
}

impl Regex {
    /// Compiles `pattern` (without its `~`/`~*`) as `ngx_regex_compile` does for `release`.
    ///
    /// # Errors
    ///
    /// [`CompileError`] with nginx's wording: `pcre2_compile() failed: MESSAGE in "PATTERN" at "REST"`
    /// (`pcre_compile()` before [`PCRE2_SINCE`]; PCRE2's message text in both), `at "…"` left out when
    /// the error is at the end of the pattern. A pattern that is not UTF-8 is refused (the `pcre2` crate
    /// takes text).
    pub fn compile(pattern: &[u8], caseless: bool, release: NginxVersion) -> Result<Regex, CompileError> {
        #[cfg(feature = "pcre2")]
        {
            let text = std::str::from_utf8(pattern).map_err(|_| {
                CompileError(format!(
                    "regular expression \"{}\" is not UTF-8 (not modelled)",
                    String::from_utf8_lossy(pattern)
                ))
            })?;
            let code = pcre2::bytes::RegexBuilder::new().caseless(caseless).build(text).map_err(|e| {
                let compiler = if release >= PCRE2_SINCE { "pcre2_compile()" } else { "pcre_compile()" };
                // The crate's Display is "PCRE2: error compiling pattern at offset N: MESSAGE".
                let shown = e.to_string();
                let message = shown.splitn(3, ": ").nth(2).unwrap_or(&shown);
                match e.offset() {
                    Some(at) if at < pattern.len() => CompileError(format!(
                        "{compiler} failed: {message} in \"{text}\" at \"{}\"",
                        String::from_utf8_lossy(&pattern[at..])
                    )),
                    _ => CompileError(format!("{compiler} failed: {message} in \"{text}\"")),
                }
            })?;
            let names = code
                .capture_names()
                .iter()
                .enumerate()
                .filter_map(|(i, n)| n.as_ref().map(|n| (n.clone(), i)))
                .collect();
            Ok(Regex { pattern: pattern.to_vec(), caseless, names, code })
        }
        #[cfg(not(feature = "pcre2"))]
        {
            let _ = release;
            let names = crate::config::named_captures(pattern)
                .into_iter()
                .map(|n| (String::from_utf8_lossy(&n).into_owned(), 0))
                .collect();
            Ok(Regex { pattern: pattern.to_vec(), caseless, names })
        }
    }

    /// The pattern as written (without `~`/`~*`).
    pub fn pattern(&self) -> &[u8] {
        &self.pattern
    }

    /// Whether it matches caselessly.
    pub fn caseless(&self) -> bool {
        self.caseless
    }

    /// Its named groups, `(name, group number)`: the variables a match sets.
    pub fn names(&self) -> &[(String, usize)] {
        &self.names
    }

    /// `ngx_http_regex_exec` (src/http/ngx_http_variables.c, all modelled releases): on a match, `$1`…`$9`
    /// become this match's groups (a group that did not take part, or past the last one that did, is
    /// empty; a pattern without groups leaves them all empty) and each named group's variable its text;
    /// `Ok(false)` leaves `captures` as it was.
    ///
    /// # Errors
    ///
    /// [`MatchError`]: no `pcre2` feature, or PCRE2 gave up.
    pub fn exec(&self, subject: &[u8], captures: &mut Captures) -> Result<bool, MatchError> {
        #[cfg(feature = "pcre2")]
        {
            let mut locs = self.code.capture_locations();
            let found = self.code.captures_read(&mut locs, subject).map_err(|e| MatchError::Failed {
                subject: String::from_utf8_lossy(subject).into_owned(),
                pattern: String::from_utf8_lossy(&self.pattern).into_owned(),
                message: e.to_string().splitn(3, ": ").nth(2).unwrap_or_default().to_string(),
            })?;
            if found.is_none() {
                return Ok(false);
            }
            // pcre2_match returns 1 + the highest group set; r->ncaptures = rc * 2 bounds `$N`.
            let groups: Vec<Option<(usize, usize)>> = (0..locs.len()).map(|i| locs.get(i)).collect();
            let last = groups.iter().rposition(Option::is_some).unwrap_or(0);
            captures.groups =
                groups[..=last].iter().map(|g| g.map_or_else(Vec::new, |(s, e)| subject[s..e].to_vec())).collect();
            captures.named.retain(|(n, _)| !self.names.iter().any(|(m, _)| m == n));
            for (name, i) in &self.names {
                let v = groups.get(*i).copied().flatten().map_or_else(Vec::new, |(s, e)| subject[s..e].to_vec());
                captures.named.push((name.clone(), v));
            }
            Ok(true)
        }
        #[cfg(not(feature = "pcre2"))]
        {
            let _ = (subject, captures);
            Err(MatchError::NoPcre2(String::from_utf8_lossy(&self.pattern).into_owned()))
        }
    }
}

/// What the last match of a request left (`r->captures`, `r->ncaptures` and the named captures'
/// variables).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captures {
    /// Group 0, 1, … up to the last group set; empty before any match.
    groups: Vec<Vec<u8>>,
    /// Named captures set so far, `(name, value)`, the latest value of each.
    named: Vec<(String, Vec<u8>)>,
}

impl Captures {
    /// `$n` (`ngx_http_script_copy_capture_code`: nothing when `2n >= r->ncaptures`).
    pub fn group(&self, n: u8) -> &[u8] {
        self.groups.get(usize::from(n)).map_or(&[], Vec::as_slice)
    }

    /// The value a named capture set, if a match set it.
    pub fn named(&self, name: &str) -> Option<&[u8]> {
        self.named.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }
}

#[cfg(all(test, feature = "pcre2"))]
mod tests {
    use super::*;

    const NEW: NginxVersion = NginxVersion::new(1, 26, 3);

    #[test]
    fn compile_errors_have_nginx_wording() {
        let e = Regex::compile(b"^/(a", false, NEW).unwrap_err();
        assert_eq!(e.0, "pcre2_compile() failed: missing closing parenthesis in \"^/(a\"");
        let e = Regex::compile(b"a)b", false, NEW).unwrap_err();
        assert_eq!(e.0, "pcre2_compile() failed: unmatched closing parenthesis in \"a)b\" at \")b\"");
        let e = Regex::compile(b"a)b", false, NginxVersion::new(1, 18, 0)).unwrap_err();
        assert!(e.0.starts_with("pcre_compile() failed: "), "{}", e.0);
    }

    #[test]
    fn captures_follow_ngx_http_regex_exec() {
        let mut c = Captures::default();
        assert_eq!(c.group(1), b"", "no match yet: $1 is empty");
        let re = Regex::compile(b"^/(?<first>[a-z]+)/(x)?(\\d+)?", false, NEW).unwrap();
        assert!(re.exec(b"/abc/y", &mut c).unwrap());
        assert_eq!((c.group(1), c.group(2), c.group(3)), (&b"abc"[..], &b""[..], &b""[..]));
        assert_eq!(c.named("first"), Some(&b"abc"[..]));
        assert!(!re.exec(b"nope", &mut c).unwrap(), "no match");
        assert_eq!(c.group(1), b"abc", "a failed match leaves the captures");
        let plain = Regex::compile(b"y$", false, NEW).unwrap();
        assert!(plain.exec(b"/abc/y", &mut c).unwrap());
        assert_eq!(c.group(1), b"", "a match without groups empties $1…");
        assert_eq!(c.named("first"), Some(&b"abc"[..]), "named captures stay");
        let caseless = Regex::compile(b"^/ABC", true, NEW).unwrap();
        assert!(caseless.exec(b"/abc", &mut c).unwrap());
        assert!(!Regex::compile(b"^/ABC", false, NEW).unwrap().exec(b"/abc", &mut c).unwrap());
    }
}
