//! Every way the reader refuses a configuration, as one typed list rendered in one place with nginx's wording.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file and a line in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file, as it was named (after include resolution).
    pub file: Arc<PathBuf>,
    /// 1-based line (for a directive: the line of its terminating `;` or `{`, as nginx reports it).
    pub line: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// Bytes as nginx prints them: valid UTF-8 as is, anything else replaced by U+FFFD.
///
/// NGINX-DIFF: nginx writes the raw bytes; a Rust `String` cannot hold them.
#[derive(Clone, PartialEq, Eq)]
pub struct Text(pub(crate) Vec<u8>);

impl Text {
    pub(crate) fn new(bytes: &[u8]) -> Text {
        Text(bytes.to_vec())
    }

    /// Up to the first NUL, as nginx's `%s` prints a directive name.
    pub(crate) fn c_str(bytes: &[u8]) -> Text {
        Text(bytes.split(|&b| b == 0).next().unwrap_or_default().to_vec())
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

/// What nginx says when it refuses a configuration. [`fmt::Display`] renders nginx's exact wording
/// (without the location, which [`ConfigError`] appends where nginx does).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `unexpected "X"` — a character where nginx's tokenizer does not allow it.
    Unexpected(u8),
    /// `unexpected end of file, expecting ";" or "}"` — the file ends inside a directive.
    EofInDirective,
    /// `unexpected end of file, expecting "}"` — the file ends inside a block.
    EofInBlock,
    /// `too long parameter "…" started` — a token longer than nginx's 4 KiB read buffer.
    TooLongToken(Text),
    /// `too long parameter, probably missing terminating "X" character`.
    TooLongQuoted(u8),
    /// `unknown directive "x"`.
    UnknownDirective(Text),
    /// `"x" directive is not allowed here`.
    NotAllowedHere(Text),
    /// `directive "x" is not terminated by ";"`.
    NotTerminated(Text),
    /// `directive "x" has no opening "{"`.
    NoOpeningBrace(Text),
    /// `invalid number of arguments in "x" directive`.
    ArgumentCount(Text),
    /// `"x" directive is duplicate`.
    Duplicate(Text),
    /// `"x" directive invalid value` (a time value).
    DirectiveInvalidValue(Text),
    /// `"x" directive invalid number`.
    DirectiveInvalidNumber(Text),
    /// `invalid value "v" in "x" directive`.
    InvalidValueIn(Text, Text),
    /// `invalid value "v"` (a word a bit-mask directive such as `proxy_next_upstream` does not know).
    InvalidValue(Text),
    /// `invalid value "v" in "x" directive, it must be "on" or "off"`.
    NotOnOff(Text, Text),
    /// `no "events" section in configuration`.
    NoEvents,
    /// `invalid parameter "p"`.
    InvalidParameter(Text),
    /// `balancing method does not support parameter "p"`.
    BalancerParameter(Text),
    /// `no servers are inside upstream`.
    NoServersInside,
    /// `no servers in upstream "u" in FILE:LINE`.
    NoServersIn(Text, Location),
    /// `duplicate upstream "u"`.
    DuplicateUpstream(Text),
    /// `upstream "u" may not have port N` (with where the other use is, when nginx says so).
    UpstreamPort(Text, u32, Option<Location>),
    /// `<address error> in upstream "s"`, e.g. `invalid port in upstream "a:0"`.
    Address(&'static str, Text),
    /// `host not found in upstream "s"`.
    HostNotFound(Text),
    /// `host not found in upstream "h" in FILE:LINE` (a host named by `proxy_pass` & co., looked up at start).
    ImpliedHostNotFound(Text, Location),
    /// `no port in upstream "s"` (stream).
    NoPort(Text),
    /// `resolving names at run time requires upstream "u" in FILE:LINE to be in shared memory`.
    ResolveNeedsZone(Text, Location),
    /// `no resolver defined to resolve names at run time in upstream "u" in FILE:LINE`.
    NoResolver(Text, Location),
    /// `invalid zone size "v"`.
    InvalidZoneSize(Text),
    /// `zone "z" is too small`.
    ZoneTooSmall(Text),
    /// `zero size shared memory zone "z"`.
    ZeroSizeZone(Text),
    /// `invalid variable name`.
    InvalidVariableName,
    /// `the closing bracket in "v" variable is missing`.
    MissingBracket(Text),
    /// `unknown "v" variable`.
    UnknownVariable(Text),
    /// `include` nesting deeper than the reader follows (nginx: runs out of file descriptors).
    IncludeDepth(usize),
    /// Blocks nested deeper than the reader follows.
    NestingDepth(usize),
    /// The configuration is larger than the reader accepts.
    TooLarge(u64),
    /// `invalid URL prefix` (`proxy_pass` in http without `http://` or `https://`).
    InvalidUrlPrefix,
    /// `invalid number of the map parameters`.
    MapParameters,
    /// `invalid variable name "x"` (a `map` block's second argument without `$`).
    MapVariableName(Text),
    /// `duplicate default map parameter`.
    DuplicateMapDefault,
    /// `pcre2_compile() failed: … in "…" at "…"` (`ngx_regex_compile`, src/core/ngx_regex.c): a regular
    /// expression of a `map`, `location` or `server_name` that does not compile; the message as nginx
    /// prints it.
    Regex(String),
    /// `empty regex in server name "~"` (`ngx_http_core_server_name`).
    EmptyServerNameRegex,
    /// `invalid hostname or wildcard "x"` (a `map` key after `hostnames`).
    InvalidWildcard(Text),
    /// `conflicting parameter "x"` (a `map` key that repeats another).
    ConflictingParameter(Text),
    /// `duplicate location "x" in FILE:LINE`.
    DuplicateLocation(Text, Location),
    /// `getpwnam("x") failed` / `getgrnam("x") failed` (the `user` directive, run as root).
    LookupFailed(&'static str, Text),
    /// `service upstream "s" requires "resolve" parameter`.
    ServiceNeedsResolve(Text),
    /// The model refused the upstream for a reason of its own (e.g. more ring points than it holds).
    Model(String),
}

impl ErrorKind {
    /// Whether nginx appends ` in FILE:LINE` (it does for messages logged while reading a directive).
    pub fn has_location(&self) -> bool {
        !matches!(
            self,
            ErrorKind::NoEvents
                | ErrorKind::NoServersIn(..)
                | ErrorKind::ResolveNeedsZone(..)
                | ErrorKind::NoResolver(..)
                | ErrorKind::ZeroSizeZone(_)
                | ErrorKind::UnknownVariable(_)
                | ErrorKind::UpstreamPort(_, _, Some(_))
                | ErrorKind::DuplicateLocation(..)
                | ErrorKind::ImpliedHostNotFound(..)
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ErrorKind::*;
        match self {
            Unexpected(c) => write!(f, "unexpected \"{}\"", Text(vec![*c])),
            EofInDirective => f.write_str("unexpected end of file, expecting \";\" or \"}\""),
            EofInBlock => f.write_str("unexpected end of file, expecting \"}\""),
            TooLongToken(t) => write!(f, "too long parameter \"{t}...\" started"),
            TooLongQuoted(c) => {
                write!(f, "too long parameter, probably missing terminating \"{}\" character", *c as char)
            }
            UnknownDirective(n) => write!(f, "unknown directive \"{n}\""),
            NotAllowedHere(n) => write!(f, "\"{n}\" directive is not allowed here"),
            NotTerminated(n) => write!(f, "directive \"{n}\" is not terminated by \";\""),
            NoOpeningBrace(n) => write!(f, "directive \"{n}\" has no opening \"{{\""),
            ArgumentCount(n) => write!(f, "invalid number of arguments in \"{n}\" directive"),
            Duplicate(n) => write!(f, "\"{n}\" directive is duplicate"),
            DirectiveInvalidValue(n) => write!(f, "\"{n}\" directive invalid value"),
            DirectiveInvalidNumber(n) => write!(f, "\"{n}\" directive invalid number"),
            InvalidValueIn(v, n) => write!(f, "invalid value \"{v}\" in \"{n}\" directive"),
            InvalidValue(v) => write!(f, "invalid value \"{v}\""),
            NotOnOff(v, n) => write!(f, "invalid value \"{v}\" in \"{n}\" directive, it must be \"on\" or \"off\""),
            NoEvents => f.write_str("no \"events\" section in configuration"),
            InvalidParameter(p) => write!(f, "invalid parameter \"{p}\""),
            BalancerParameter(p) => write!(f, "balancing method does not support parameter \"{p}\""),
            NoServersInside => f.write_str("no servers are inside upstream"),
            NoServersIn(u, at) => write!(f, "no servers in upstream \"{u}\" in {at}"),
            DuplicateUpstream(u) => write!(f, "duplicate upstream \"{u}\""),
            UpstreamPort(u, port, None) => write!(f, "upstream \"{u}\" may not have port {port}"),
            UpstreamPort(u, port, Some(at)) => write!(f, "upstream \"{u}\" may not have port {port} in {at}"),
            Address(why, s) => write!(f, "{why} in upstream \"{s}\""),
            HostNotFound(s) => write!(f, "host not found in upstream \"{s}\""),
            NoPort(s) => write!(f, "no port in upstream \"{s}\""),
            ImpliedHostNotFound(h, at) => write!(f, "host not found in upstream \"{h}\" in {at}"),
            ResolveNeedsZone(u, at) => {
                write!(f, "resolving names at run time requires upstream \"{u}\" in {at} to be in shared memory")
            }
            NoResolver(u, at) => {
                write!(f, "no resolver defined to resolve names at run time in upstream \"{u}\" in {at}")
            }
            InvalidZoneSize(v) => write!(f, "invalid zone size \"{v}\""),
            ZoneTooSmall(z) => write!(f, "zone \"{z}\" is too small"),
            ZeroSizeZone(z) => write!(f, "zero size shared memory zone \"{z}\""),
            InvalidVariableName => f.write_str("invalid variable name"),
            MissingBracket(v) => write!(f, "the closing bracket in \"{v}\" variable is missing"),
            UnknownVariable(v) => write!(f, "unknown \"{v}\" variable"),
            // NGINX-DIFF: nginx follows include cycles until it runs out of file descriptors.
            IncludeDepth(n) => write!(f, "include nesting deeper than {n} (a cycle?)"),
            // NGINX-DIFF: nginx recurses without a limit.
            NestingDepth(n) => write!(f, "blocks nested deeper than {n}"),
            // NGINX-DIFF: nginx reads any size (in 4 KiB buffers); the reader caps its input.
            TooLarge(n) => write!(f, "configuration larger than {n} bytes"),
            Model(why) => f.write_str(why),
            MapParameters => f.write_str("invalid number of the map parameters"),
            MapVariableName(v) => write!(f, "invalid variable name \"{v}\""),
            DuplicateMapDefault => f.write_str("duplicate default map parameter"),
            Regex(message) => f.write_str(message),
            EmptyServerNameRegex => f.write_str("empty regex in server name \"~\""),
            InvalidWildcard(k) => write!(f, "invalid hostname or wildcard \"{k}\""),
            ConflictingParameter(k) => write!(f, "conflicting parameter \"{k}\""),
            InvalidUrlPrefix => f.write_str("invalid URL prefix"),
            DuplicateLocation(n, at) => write!(f, "duplicate location \"{n}\" in {at}"),
            LookupFailed(call, n) => write!(f, "{call}(\"{n}\") failed"),
            ServiceNeedsResolve(s) => write!(f, "service upstream \"{s}\" requires \"resolve\" parameter"),
        }
    }
}

/// Why a configuration could not be used. Messages follow nginx's wording and name the file and line.
///
/// # Example
///
/// ```
/// use nginx_ketama::config::{Config, ConfigError, ErrorKind, LoadOptions};
///
/// let err = Config::parse_str("upstream u {\n  server 10.0.0.1 wieght=2;\n}", "x.conf", &LoadOptions::fragment())
///     .unwrap_err();
/// assert!(matches!(&err, ConfigError::Invalid { location, kind: ErrorKind::InvalidParameter(_) } if location.line == 2));
/// assert_eq!(err.to_string(), "invalid parameter \"wieght=2\" in x.conf:2");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// nginx would refuse to start with this configuration.
    #[error("{kind}{}", if kind.has_location() { format!(" in {location}") } else { String::new() })]
    Invalid {
        /// What nginx says.
        kind: ErrorKind,
        /// Where (nginx prints it when [`ErrorKind::has_location`]).
        location: Location,
    },
    /// A file could not be read: nginx's `open() "FILE" failed (ERRNO: TEXT)`.
    #[error("{}() \"{}\" failed ({}: {}){}", call, path.display(), source.raw_os_error().unwrap_or(0), os_text(source),
        at.as_ref().map(|l| format!(" in {l}")).unwrap_or_default())]
    Io {
        /// The system call nginx names (`open`, `glob`, ...).
        call: &'static str,
        /// The file.
        path: PathBuf,
        /// The `include` that named it, if any.
        at: Option<Location>,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `--upstream NAME` names no upstream in the file.
    #[error("no upstream \"{name}\" in {file} (upstreams: {})", list_or_none(available))]
    UnknownUpstream {
        /// The name asked for.
        name: String,
        /// The top-level file.
        file: String,
        /// The upstreams that exist.
        available: Vec<String>,
    },
    /// No name was given and the file has zero or several upstreams, or a bare name matches an upstream in
    /// both `http` and `stream` (choose with `http:NAME` or `stream:NAME`).
    #[error("{file} has {} upstreams ({}); name one{}", available.len(), list_or_none(available),
        if available.iter().any(|a| a.contains(':')) { " (as http:NAME or stream:NAME)" } else { "" })]
    AmbiguousUpstream {
        /// The top-level file.
        file: String,
        /// The upstreams that exist (or that match), `stream:` ones prefixed when a name is in both.
        available: Vec<String>,
    },
    /// The upstream exists but does not balance with `hash`.
    #[error("upstream \"{name}\" in {location} does not use \"hash\" (its balancer is {balancer})")]
    NotHash {
        /// The upstream.
        name: String,
        /// Where it is declared.
        location: Location,
        /// `round-robin` or the directive that set it (`least_conn`, ...).
        balancer: String,
    },
}

impl ConfigError {
    pub(crate) fn invalid(kind: ErrorKind, location: Location) -> ConfigError {
        ConfigError::Invalid { kind, location }
    }

    pub(crate) fn io(call: &'static str, path: &Path, at: Option<&Location>, source: std::io::Error) -> ConfigError {
        ConfigError::Io { call, path: path.to_path_buf(), at: at.cloned(), source }
    }

    /// nginx's kind of refusal, for [`ConfigError::Invalid`].
    pub fn kind(&self) -> Option<&ErrorKind> {
        match self {
            ConfigError::Invalid { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

/// The OS's text for an error, without Rust's ` (os error N)` suffix.
fn os_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() { "none".to_string() } else { v.join(", ") }
}
