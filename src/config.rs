//! Reads `upstream` blocks from a real `nginx.conf`, with nginx's syntax and nginx's errors.
//!
//! The reader tokenises like nginx (comments, `'`/`"` quotes, backslash escapes, `${var}`), follows
//! `include` (with wildcards), and looks for `upstream` blocks at the top level (a `conf.d` fragment), in
//! `http { }` and in `stream { }`. Inside an upstream it understands `server`, `hash`, the other balancers,
//! and the directives that do not affect routing (`zone`, `keepalive*`, `resolver*`, ...). Anything else is
//! an error, as in nginx. Errors name the file and line and use nginx's wording.
//!
//! # Example
//!
//! ```
//! use nginx_ketama::config::{Config, LoadOptions};
//!
//! let conf = Config::parse_str(
//!     "http { upstream app { hash $request_uri consistent; server 10.0.0.1:80 weight=2; server 10.0.0.2:80; } }",
//!     "inline.conf",
//!     &LoadOptions::default(),
//! )?;
//! let app = conf.hash_upstream(Some("app"))?;
//! assert_eq!(app.key, "$request_uri");
//! assert_eq!(app.upstream.primary().len(), 2);
//!
//! let err = Config::parse_str("upstream u {\n hash $k consistent;\n server a backup;\n}", "x.conf", &LoadOptions::default())
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "balancing method does not support parameter \"backup\" in x.conf:3");
//! # Ok::<(), nginx_ketama::config::ConfigError>(())
//! ```

use crate::resolve::resolve_host;
use crate::server::{Address, Server};
use crate::upstream::{Method, Peer, Upstream, UpstreamError, default_name, ngx_inet_addr};
use crate::version::NginxVersion;
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

/// Why a configuration could not be used. Messages follow nginx's wording and name the file and line.
///
/// # Example
///
/// ```
/// use nginx_ketama::config::{Config, ConfigError, LoadOptions};
///
/// let err = Config::parse_str("upstream u {\n  server 10.0.0.1 wieght=2;\n}", "x.conf", &LoadOptions::default())
///     .unwrap_err();
/// assert!(matches!(&err, ConfigError::Invalid { location, .. } if location.line == 2));
/// assert_eq!(err.to_string(), "invalid parameter \"wieght=2\" in x.conf:2");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// nginx would refuse to start with this configuration.
    #[error("{message} in {location}")]
    Invalid {
        /// nginx's message, e.g. `invalid parameter "weight=0"`.
        message: String,
        /// Where.
        location: Location,
    },
    /// A file could not be read.
    #[error("open() \"{}\" failed ({source}){}", path.display(), at.as_ref().map(|l| format!(" in {l}")).unwrap_or_default())]
    Io {
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
    /// No name was given and the file has zero or several upstreams.
    #[error("{file} has {} upstreams ({}); name one", available.len(), list_or_none(available))]
    AmbiguousUpstream {
        /// The top-level file.
        file: String,
        /// The upstreams that exist.
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

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() { "none".to_string() } else { v.join(", ") }
}

/// How to load a configuration.
///
/// # Example
///
/// ```
/// use nginx_ketama::config::{Config, LoadOptions};
///
/// // Without resolution a hostname line is exactly one peer, and nothing is looked up.
/// let no_dns = LoadOptions { resolve: false, ..LoadOptions::default() };
/// let conf = Config::parse_str("upstream u { hash $k consistent; server cache.internal:80; }", "x.conf", &no_dns)?;
/// assert_eq!(conf.hash_upstream(None)?.upstream.primary().len(), 1);
/// # Ok::<(), nginx_ketama::config::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Resolve hostnames like nginx does at startup (one peer per address). Default `true`.
    /// When `false`, every `server` line is exactly one peer and nothing is looked up.
    pub resolve: bool,
    /// The nginx version whose rules to apply (default [`NginxVersion::LATEST`]).
    pub version: NginxVersion,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { resolve: true, version: NginxVersion::default() }
    }
}

/// `http` or `stream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// `http { upstream ... }` (or an upstream at the top level of a fragment file).
    Http,
    /// `stream { upstream ... }`.
    Stream,
}

/// How an upstream balances.
///
/// # Example
///
/// ```
/// use nginx_ketama::config::{Balancer, Config, Context, LoadOptions};
///
/// let text = "stream { upstream s { least_conn; server 10.0.0.1:53; } }";
/// let conf = Config::parse_str(text, "x.conf", &LoadOptions::default())?;
/// assert_eq!(conf.upstreams[0].context, Context::Stream);
/// assert!(matches!(&conf.upstreams[0].balancer, Balancer::Other(b) if b == "least_conn"));
/// # Ok::<(), nginx_ketama::config::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub enum Balancer {
    /// `hash KEY [consistent]`.
    Hash {
        /// The key expression as written (e.g. `$request_uri`).
        key: String,
        /// The model, ready to route.
        upstream: Box<Upstream>,
    },
    /// Another method (`least_conn`, `ip_hash`, `random`, ...): not modelled.
    Other(String),
    /// No balancer directive: round-robin, not modelled.
    RoundRobin,
}

/// One `upstream` block.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Its name.
    pub name: String,
    /// `http` or `stream`.
    pub context: Context,
    /// Where the block starts.
    pub location: Location,
    /// Its balancer.
    pub balancer: Balancer,
}

/// A hash upstream found by [`Config::hash_upstream`].
#[derive(Debug, Clone, Copy)]
pub struct HashUpstream<'a> {
    /// The block.
    pub config: &'a UpstreamConfig,
    /// The key expression.
    pub key: &'a str,
    /// The model.
    pub upstream: &'a Upstream,
}

/// A warning nginx would log at startup (`[warn]`), e.g. `load balancing method redefined`.
///
/// # Example
///
/// ```
/// use nginx_ketama::config::{Config, LoadOptions};
///
/// let text = "upstream u {\n  ip_hash;\n  hash $k consistent;\n  server 10.0.0.1;\n}";
/// let conf = Config::parse_str(text, "x.conf", &LoadOptions::default())?;
/// assert_eq!(conf.warnings[0].to_string(), "load balancing method redefined in x.conf:3");
/// # Ok::<(), nginx_ketama::config::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// nginx's message.
    pub message: String,
    /// Where.
    pub location: Location,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}", self.message, self.location)
    }
}

/// The upstreams of a configuration.
#[derive(Debug, Clone)]
pub struct Config {
    file: String,
    /// Every upstream block, in order.
    pub upstreams: Vec<UpstreamConfig>,
    /// Warnings nginx would log.
    pub warnings: Vec<Warning>,
}

impl Config {
    /// Reads and parses `path` and everything it includes.
    ///
    /// Relative `include` paths resolve against the directory of `path` (nginx's configuration prefix).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Io`] for unreadable files, [`ConfigError::Invalid`] for anything nginx would reject.
    pub fn load(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let text = read(path, None)?;
        Config::parse_with_prefix(&text, path, options)
    }

    /// Parses configuration text; `file` names it in messages and anchors relative includes.
    ///
    /// # Errors
    ///
    /// As [`Config::load`].
    pub fn parse_str(text: &str, file: impl AsRef<Path>, options: &LoadOptions) -> Result<Config, ConfigError> {
        Config::parse_with_prefix(text, file.as_ref(), options)
    }

    fn parse_with_prefix(text: &str, file: &Path, options: &LoadOptions) -> Result<Config, ConfigError> {
        let prefix = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut reader = Reader { options, prefix, upstreams: Vec::new(), warnings: Vec::new(), depth: 0 };
        let file = Arc::new(file.to_path_buf());
        let directives = parse_tokens(text, &file)?;
        reader.walk(&directives, Scope::Main)?;
        Ok(Config { file: file.display().to_string(), upstreams: reader.upstreams, warnings: reader.warnings })
    }

    /// The upstream named `name` (or the only upstream when `name` is `None`), which must use `hash`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownUpstream`], [`ConfigError::AmbiguousUpstream`] or [`ConfigError::NotHash`].
    pub fn hash_upstream(&self, name: Option<&str>) -> Result<HashUpstream<'_>, ConfigError> {
        let available = || self.upstreams.iter().map(|u| u.name.clone()).collect::<Vec<_>>();
        let found = match name {
            Some(name) => self.upstreams.iter().find(|u| u.name == name).ok_or_else(|| {
                ConfigError::UnknownUpstream { name: name.to_string(), file: self.file.clone(), available: available() }
            })?,
            None if self.upstreams.len() == 1 => &self.upstreams[0],
            None => return Err(ConfigError::AmbiguousUpstream { file: self.file.clone(), available: available() }),
        };
        match &found.balancer {
            Balancer::Hash { key, upstream } => Ok(HashUpstream { config: found, key, upstream }),
            Balancer::Other(b) => Err(not_hash(found, b)),
            Balancer::RoundRobin => Err(not_hash(found, "round-robin")),
        }
    }
}

fn not_hash(u: &UpstreamConfig, balancer: &str) -> ConfigError {
    ConfigError::NotHash { name: u.name.clone(), location: u.location.clone(), balancer: balancer.to_string() }
}

fn read(path: &Path, at: Option<&Location>) -> Result<String, ConfigError> {
    let bytes =
        std::fs::read(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), at: at.cloned(), source })?;
    // NGINX-DIFF: nginx reads configuration bytes as they are; this reader wants UTF-8 text and says so.
    String::from_utf8(bytes).map_err(|e| {
        let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|&&b| b == b'\n').count();
        ConfigError::Invalid {
            message: "this reader needs UTF-8 text; found a byte sequence that is not".to_string(),
            location: Location { file: Arc::new(path.to_path_buf()), line },
        }
    })
}

// ---------------------------------------------------------------------------------------------------------
// Tokens and directives

/// A directive: its arguments (the name first) and, for a block directive, its children.
#[derive(Debug)]
struct Directive {
    args: Vec<String>,
    location: Location,
    block: Option<Vec<Directive>>,
}

impl Directive {
    fn name(&self) -> &str {
        &self.args[0]
    }

    fn invalid(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { message: message.into(), location: self.location.clone() }
    }
}

/// Tokenises like `ngx_conf_read_token` and builds the directive tree.
fn parse_tokens(text: &str, file: &Arc<PathBuf>) -> Result<Vec<Directive>, ConfigError> {
    let bytes = text.as_bytes();
    let mut line = 1usize;
    let mut i = 0usize;
    // Stack of open blocks: (directive args awaiting children, location, children so far).
    let mut stack: Vec<(Vec<String>, Location, Vec<Directive>)> = Vec::new();
    let mut current: Vec<Directive> = Vec::new();
    let mut args: Vec<String> = Vec::new();
    let loc = |line: usize| Location { file: file.clone(), line };
    let invalid = |message: String, line: usize| ConfigError::Invalid { message, location: loc(line) };

    loop {
        // Skip whitespace and comments between tokens.
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => {
                    line += 1;
                    i += 1;
                }
                b' ' | b'\t' | b'\r' => i += 1,
                b'#' => {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                }
                _ => break,
            }
        }
        if i >= bytes.len() {
            if !args.is_empty() || !stack.is_empty() {
                return Err(invalid("unexpected end of file, expecting \";\" or \"}\"".into(), line));
            }
            return Ok(current);
        }
        match bytes[i] {
            b';' => {
                i += 1;
                if args.is_empty() {
                    return Err(invalid("unexpected \";\"".into(), line));
                }
                current.push(Directive { args: std::mem::take(&mut args), location: loc(line), block: None });
            }
            b'{' => {
                i += 1;
                if args.is_empty() {
                    return Err(invalid("unexpected \"{\"".into(), line));
                }
                stack.push((std::mem::take(&mut args), loc(line), std::mem::take(&mut current)));
            }
            b'}' => {
                i += 1;
                if !args.is_empty() {
                    return Err(invalid("unexpected \"}\"".into(), line));
                }
                let Some((block_args, block_loc, parent)) = stack.pop() else {
                    return Err(invalid("unexpected \"}\"".into(), line));
                };
                let children = std::mem::replace(&mut current, parent);
                current.push(Directive { args: block_args, location: block_loc, block: Some(children) });
            }
            q @ (b'"' | b'\'') => {
                let start_line = line;
                i += 1;
                let mut raw = Vec::new();
                loop {
                    if i >= bytes.len() {
                        return Err(invalid("unexpected end of file, expecting \";\" or \"}\"".into(), start_line));
                    }
                    let c = bytes[i];
                    if c == b'\\' && i + 1 < bytes.len() {
                        raw.push(c);
                        raw.push(bytes[i + 1]);
                        if bytes[i + 1] == b'\n' {
                            line += 1;
                        }
                        i += 2;
                        continue;
                    }
                    i += 1;
                    if c == q {
                        break;
                    }
                    if c == b'\n' {
                        line += 1;
                    }
                    raw.push(c);
                }
                if i < bytes.len() && !matches!(bytes[i], b' ' | b'\t' | b'\r' | b'\n' | b';' | b'{' | b'}') {
                    return Err(invalid(format!("unexpected \"{}\"", bytes[i] as char), line));
                }
                args.push(unescape(&raw));
            }
            _ => {
                let mut raw = Vec::new();
                let mut variable = false;
                while i < bytes.len() {
                    let c = bytes[i];
                    if c == b'\\' && i + 1 < bytes.len() {
                        raw.push(c);
                        raw.push(bytes[i + 1]);
                        i += 2;
                        variable = false;
                        continue;
                    }
                    if c == b'{' && variable {
                        raw.push(c);
                        i += 1;
                        variable = false;
                        continue;
                    }
                    if matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b';' | b'{' | b'}') {
                        break;
                    }
                    variable = c == b'$';
                    raw.push(c);
                    i += 1;
                }
                args.push(unescape(&raw));
            }
        }
    }
}

/// nginx's escape processing when it copies a token: `\"`, `\'`, `\\` drop the backslash; `\t`, `\r`, `\n`
/// become control characters; any other backslash stays.
fn unescape(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' && i + 1 < raw.len() {
            match raw[i + 1] {
                b'"' | b'\'' | b'\\' => {
                    out.push(raw[i + 1]);
                    i += 2;
                    continue;
                }
                b't' => {
                    out.push(b'\t');
                    i += 2;
                    continue;
                }
                b'r' => {
                    out.push(b'\r');
                    i += 2;
                    continue;
                }
                b'n' => {
                    out.push(b'\n');
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    // The input was UTF-8 and only ASCII bytes were removed or replaced.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

// ---------------------------------------------------------------------------------------------------------
// Interpretation

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Main,
    Http,
    Stream,
}

/// The deepest `include` nesting accepted.
///
/// NGINX-DIFF: nginx has no limit (an include cycle exhausts file descriptors); we stop with an error.
const MAX_INCLUDE_DEPTH: usize = 32;

struct Reader<'o> {
    options: &'o LoadOptions,
    prefix: PathBuf,
    upstreams: Vec<UpstreamConfig>,
    warnings: Vec<Warning>,
    depth: usize,
}

impl Reader<'_> {
    fn walk(&mut self, directives: &[Directive], scope: Scope) -> Result<(), ConfigError> {
        let resolver_here = directives.iter().any(|d| d.name() == "resolver");
        for d in directives {
            match (d.name(), &d.block) {
                ("include", None) => {
                    let included = self.include(d)?;
                    self.depth += 1;
                    let result = self.walk(&included, scope);
                    self.depth -= 1;
                    result?;
                }
                ("http", Some(children)) if scope == Scope::Main => self.walk(children, Scope::Http)?,
                ("stream", Some(children)) if scope == Scope::Main => self.walk(children, Scope::Stream)?,
                ("upstream", _) => {
                    let context = if scope == Scope::Stream { Context::Stream } else { Context::Http };
                    let u = self.upstream(d, context, resolver_here)?;
                    if self.upstreams.iter().any(|o| o.name == u.name && o.context == u.context) {
                        return Err(d.invalid(format!("duplicate upstream \"{}\"", u.name)));
                    }
                    self.upstreams.push(u);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads the files an `include` names: relative to the configuration prefix, wildcards allowed.
    fn include(&mut self, d: &Directive) -> Result<Vec<Directive>, ConfigError> {
        if d.args.len() != 2 {
            return Err(d.invalid("invalid number of arguments in \"include\" directive"));
        }
        if self.depth >= MAX_INCLUDE_DEPTH {
            return Err(d.invalid(format!("include nesting deeper than {MAX_INCLUDE_DEPTH} (a cycle?)")));
        }
        let name = Path::new(&d.args[1]);
        let mut path = if name.is_absolute() { name.to_path_buf() } else { self.prefix.join(name) };
        // NGINX-DIFF: nginx resolves a relative include only against its configuration prefix (the
        // directory of the main file). When that path does not exist but one relative to the including
        // file does, we use the latter instead of failing, which helps with fragments read on their own.
        if !name.is_absolute()
            && !has_wildcard(&d.args[1])
            && !path.exists()
            && let Some(beside) = d.location.file.parent().map(|dir| dir.join(name))
            && beside.exists()
        {
            path = beside;
        }
        let files = if has_wildcard(&d.args[1]) { glob(&path, &d.location)? } else { vec![path] };
        let mut out = Vec::new();
        for file in files {
            let text = read(&file, Some(&d.location))?;
            out.extend(parse_tokens(&text, &Arc::new(file))?);
        }
        Ok(out)
    }

    fn upstream(
        &mut self,
        d: &Directive,
        context: Context,
        resolver_outside: bool,
    ) -> Result<UpstreamConfig, ConfigError> {
        let Some(children) = &d.block else {
            return Err(d.invalid("directive \"upstream\" has no opening \"{\""));
        };
        if d.args.len() != 2 {
            return Err(d.invalid("invalid number of arguments in \"upstream\" directive"));
        }
        let name = d.args[1].clone();
        let mut block = UpstreamBlock::default();
        self.upstream_body(children, context, &mut block)?;
        if block.servers.is_empty() {
            return Err(d.invalid("no servers are inside upstream"));
        }
        let resolves = block.servers.iter().any(|s| s.resolve);
        if resolves && block.zone.is_none() {
            return Err(ConfigError::Invalid {
                message: format!(
                    "resolving names at run time requires upstream \"{name}\" in {} to be in shared memory",
                    d.location
                ),
                location: block.servers.iter().find(|s| s.resolve).map(|s| s.location.clone()).unwrap(),
            });
        }
        if resolves && !resolver_outside && !block.resolver {
            return Err(ConfigError::Invalid {
                message: format!("no resolver defined to resolve names at run time in upstream \"{name}\""),
                location: d.location.clone(),
            });
        }
        let balancer = match &block.balancer {
            Some(Bal::Hash { key, method }) => {
                Balancer::Hash { key: key.clone(), upstream: Box::new(self.build(&name, *method, &block)?) }
            }
            Some(Bal::Other(b)) => Balancer::Other(b.clone()),
            None => Balancer::RoundRobin,
        };
        Ok(UpstreamConfig { name, context, location: d.location.clone(), balancer })
    }

    fn upstream_body(
        &mut self,
        children: &[Directive],
        context: Context,
        block: &mut UpstreamBlock,
    ) -> Result<(), ConfigError> {
        for d in children {
            if d.block.is_some() {
                return Err(d.invalid(format!("\"{}\" directive is not allowed here", d.name())));
            }
            match d.name() {
                "include" => {
                    let included = self.include(d)?;
                    self.depth += 1;
                    let result = self.upstream_body(&included, context, block);
                    self.depth -= 1;
                    result?;
                }
                "server" => block.servers.push(self.server(d, context, block.balancer.as_ref())?),
                "hash" => {
                    if block.balancer.is_some() {
                        self.warn(d, "load balancing method redefined");
                    }
                    let method = match d.args.len() {
                        2 => Method::Plain,
                        3 if d.args[2] == "consistent" => Method::Consistent,
                        3 => return Err(d.invalid(format!("invalid parameter \"{}\"", d.args[2]))),
                        _ => return Err(d.invalid("invalid number of arguments in \"hash\" directive")),
                    };
                    block.balancer = Some(Bal::Hash { key: d.args[1].clone(), method });
                }
                b @ ("ip_hash" | "least_conn" | "random" | "least_time") => {
                    if context == Context::Stream && b == "ip_hash" {
                        return Err(d.invalid(format!("unknown directive \"{b}\"")));
                    }
                    if block.balancer.is_some() {
                        self.warn(d, "load balancing method redefined");
                    }
                    block.balancer = Some(Bal::Other(b.to_string()));
                }
                "zone" => block.zone = Some(d.args.get(1).cloned().unwrap_or_default()),
                "resolver" => block.resolver = true,
                // Accepted by nginx inside `upstream`; no effect on which peer is chosen.
                "keepalive" | "keepalive_timeout" | "keepalive_requests" | "keepalive_time" | "ntlm"
                | "resolver_timeout" | "sticky" | "queue" | "state" => {}
                other => return Err(d.invalid(format!("unknown directive \"{other}\""))),
            }
        }
        Ok(())
    }

    fn warn(&mut self, d: &Directive, message: &str) {
        self.warnings.push(Warning { message: message.to_string(), location: d.location.clone() });
    }

    /// One `server` line, checked like `ngx_http_upstream_server` / `ngx_stream_upstream_server`.
    fn server(&self, d: &Directive, context: Context, balancer: Option<&Bal>) -> Result<ServerLine, ConfigError> {
        if d.args.len() < 2 {
            return Err(d.invalid("invalid number of arguments in \"server\" directive"));
        }
        // Which parameters the balancer declared so far allows (nginx checks when it reads the line).
        let backup_allowed = match balancer {
            None => true,
            Some(Bal::Other(b)) => b == "least_conn" || b == "least_time",
            Some(Bal::Hash { .. }) => false,
        };
        let version = self.options.version;
        let mut line = ServerLine {
            server: Server::new(d.args[1].clone()),
            weight: 1,
            max_fails: 1,
            fail_timeout: 10,
            max_conns: 0,
            down: false,
            backup: false,
            resolve: false,
            location: d.location.clone(),
        };
        for p in &d.args[2..] {
            let invalid = || d.invalid(format!("invalid parameter \"{p}\""));
            if let Some(v) = p.strip_prefix("weight=") {
                line.weight = ngx_atoi(v).filter(|&w| w > 0).ok_or_else(invalid)?;
            } else if let Some(v) = p.strip_prefix("max_conns=") {
                line.max_conns = ngx_atoi(v).ok_or_else(invalid)?;
            } else if let Some(v) = p.strip_prefix("max_fails=") {
                line.max_fails = ngx_atoi(v).ok_or_else(invalid)?;
            } else if let Some(v) = p.strip_prefix("fail_timeout=") {
                line.fail_timeout = parse_seconds(v).ok_or_else(invalid)?;
            } else if p == "backup" {
                if !backup_allowed {
                    return Err(d.invalid(format!("balancing method does not support parameter \"{p}\"")));
                }
                line.backup = true;
            } else if p == "down" {
                line.down = true;
            } else if p == "drain" && version >= NginxVersion::new(1, 29, 6) {
                // The hash module treats a draining peer exactly like a down one.
                line.down = true;
            } else if p == "resolve" && version >= NginxVersion::new(1, 27, 3) {
                line.resolve = true;
            } else {
                return Err(invalid());
            }
        }
        let address = Address::parse(line.server.as_str())
            .map_err(|e| d.invalid(format!("{e} in upstream \"{}\"", line.server)))?;
        if context == Context::Stream && address.port().is_none() && !matches!(address, Address::Unix { .. }) {
            return Err(d.invalid(format!("no port in upstream \"{}\"", line.server)));
        }
        Ok(line)
    }

    /// Turns the server lines into peers (resolving names) and builds the model.
    fn build(&self, name: &str, method: Method, block: &UpstreamBlock) -> Result<Upstream, ConfigError> {
        let mut builder = Upstream::builder(method).name(name).version(self.options.version);
        let mut resolved_later = Vec::new();
        for line in &block.servers {
            let peers = self.peers_of(line)?;
            if line.resolve {
                // Run-time resolved peers are appended after every static peer, in the order learned.
                // NGINX-DIFF: we resolve once at startup; later DNS changes (which append and unlink
                // peers in nginx) are not followed.
                resolved_later.extend(peers);
            } else if line.backup {
                for p in peers {
                    builder = builder.backup(p);
                }
            } else {
                builder = builder.peers(peers);
            }
        }
        builder = builder.peers(resolved_later);
        builder.build().map_err(|e| match e {
            UpstreamError::NoServers(_) => ConfigError::Invalid {
                message: "no servers in upstream".into(),
                location: block.servers[0].location.clone(),
            },
            other => ConfigError::Invalid { message: other.to_string(), location: block.servers[0].location.clone() },
        })
    }

    fn peers_of(&self, line: &ServerLine) -> Result<Vec<Peer>, ConfigError> {
        let make = |name: String| {
            Peer::new(line.server.clone())
                .with_name(name)
                .with_weight(line.weight)
                .with_max_fails(line.max_fails)
                .with_fail_timeout(line.fail_timeout)
                .with_max_conns(line.max_conns)
                .with_down(line.down)
        };
        let address = Address::parse(line.server.as_str()).expect("checked when the line was read");
        match address {
            Address::Host { host, port } if ngx_inet_addr(&host).is_none() && self.options.resolve => {
                let addrs = resolve_host(&host).map_err(|e| ConfigError::Invalid {
                    message: format!("{e} in upstream \"{}\"", line.server),
                    location: line.location.clone(),
                })?;
                let port = port.unwrap_or(80);
                Ok(addrs.into_iter().map(|ip| make(std::net::SocketAddr::new(ip, port).to_string())).collect())
            }
            _ => Ok(vec![make(default_name(&line.server, 80))]),
        }
    }
}

#[derive(Debug)]
enum Bal {
    Hash { key: String, method: Method },
    Other(String),
}

#[derive(Debug, Default)]
struct UpstreamBlock {
    servers: Vec<ServerLine>,
    balancer: Option<Bal>,
    zone: Option<String>,
    resolver: bool,
}

#[derive(Debug)]
struct ServerLine {
    server: Server,
    weight: u32,
    max_fails: u32,
    fail_timeout: u64,
    max_conns: u32,
    down: bool,
    backup: bool,
    resolve: bool,
    location: Location,
}

/// `ngx_atoi`: ASCII digits only, no sign, no overflow.
///
/// NGINX-DIFF: values above `u32::MAX` (accepted by nginx up to its `ngx_int_t` range) are rejected.
fn ngx_atoi(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok().and_then(|v| u32::try_from(v).ok())
}

/// `ngx_parse_time(s, 1)`: `[Ny][NM][Nw][Nd][Nh][Nm][Ns]` (each unit at most once, in that order), a
/// bare number meaning seconds; `ms` is not allowed for second-resolution values.
fn parse_seconds(s: &str) -> Option<u64> {
    const UNITS: [(&str, u64); 7] =
        [("y", 365 * 86400), ("M", 30 * 86400), ("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1)];
    if s.is_empty() {
        return None;
    }
    let b = s.as_bytes();
    let mut total: u64 = 0;
    let mut i = 0;
    let mut next_unit = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let n: u64 = s[start..i].parse().ok()?;
        let (mult, rest) = if i == b.len() {
            (1, i)
        } else {
            let u = &s[i..i + 1];
            if s[i..].starts_with("ms") {
                return None;
            }
            let pos = UNITS.iter().position(|(name, _)| *name == u)?;
            if pos < next_unit {
                return None;
            }
            next_unit = pos + 1;
            (UNITS[pos].1, i + 1)
        };
        total = total.checked_add(n.checked_mul(mult)?)?;
        i = rest;
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
    }
    Some(total)
}

fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Expands a wildcard in the last path component, sorted bytewise like glob(3) in the C locale. No match is
/// not an error (nginx's include allows that). Hidden files match only a pattern starting with `.`.
///
/// NGINX-DIFF: glob(3) also expands wildcards in directory components; we report those as an error.
fn glob(pattern: &Path, at: &Location) -> Result<Vec<PathBuf>, ConfigError> {
    let dir = pattern.parent().unwrap_or(Path::new("."));
    let file_pattern = pattern.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    if has_wildcard(&dir.to_string_lossy()) {
        return Err(ConfigError::Invalid {
            message: format!("wildcards are supported in the last path component only: \"{}\"", pattern.display()),
            location: at.clone(),
        });
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(ConfigError::Io { path: dir.to_path_buf(), at: Some(at.clone()), source }),
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (!name.starts_with('.') || file_pattern.starts_with('.'))
                && wildcard_match(file_pattern.as_bytes(), name.as_bytes())
        })
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    out.sort_by(|a, b| a.as_os_str().as_encoded_bytes().cmp(b.as_os_str().as_encoded_bytes()));
    Ok(out)
}

/// `*`, `?` and `[...]` (with `!`/`^` negation and ranges) over bytes.
fn wildcard_match(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => wildcard_match(&p[1..], s) || (!s.is_empty() && wildcard_match(p, &s[1..])),
        (Some(b'?'), Some(_)) => wildcard_match(&p[1..], &s[1..]),
        (Some(b'['), Some(&c)) => {
            let Some(end) = p.iter().skip(2).position(|&b| b == b']').map(|e| e + 2) else {
                return c == b'[' && wildcard_match(&p[1..], &s[1..]);
            };
            let mut set = &p[1..end];
            let negate = matches!(set.first(), Some(b'!' | b'^'));
            if negate {
                set = &set[1..];
            }
            let mut hit = false;
            let mut k = 0;
            while k < set.len() {
                if k + 2 < set.len() && set[k + 1] == b'-' {
                    hit |= set[k] <= c && c <= set[k + 2];
                    k += 3;
                } else {
                    hit |= set[k] == c;
                    k += 1;
                }
            }
            hit != negate && wildcard_match(&p[end + 1..], &s[1..])
        }
        (Some(&a), Some(&b)) => a == b && wildcard_match(&p[1..], &s[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse_str(text, "t.conf", &LoadOptions { resolve: false, ..LoadOptions::default() })
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_http_stream_and_fragment_upstreams() {
        let c = parse(
            "# comment\nuser nobody;\nevents {}\nhttp {\n  upstream a { hash $arg_k consistent; server 127.0.0.1:1 weight=3 max_fails=0; }\n}\n\
             stream { upstream s { hash $remote_port; server 127.0.0.1:2; server unix:/x; } }\n",
        )
        .unwrap();
        let a = c.hash_upstream(Some("a")).unwrap();
        assert_eq!(a.upstream.method(), Method::Consistent);
        assert_eq!(a.upstream.primary()[0].weight(), 3);
        assert_eq!(a.upstream.primary()[0].max_fails(), 0);
        assert_eq!(a.config.location.line, 5);
        let s = c.hash_upstream(Some("s")).unwrap();
        assert_eq!(s.config.context, Context::Stream);
        assert_eq!(s.upstream.method(), Method::Plain);
        assert!(matches!(c.hash_upstream(None), Err(ConfigError::AmbiguousUpstream { .. })));
        assert_eq!(
            c.hash_upstream(Some("zz")).unwrap_err().to_string(),
            "no upstream \"zz\" in t.conf (upstreams: a, s)"
        );
    }

    #[test]
    fn quotes_escapes_and_variables() {
        let c =
            parse("upstream u { hash \"${arg_a}x\\\"y\" consistent; server 'odd host:80'; server a\\;b; }").unwrap();
        let u = c.hash_upstream(None).unwrap();
        assert_eq!(u.key, "${arg_a}x\"y");
        assert_eq!(u.upstream.primary()[0].server().as_str(), "odd host:80");
        let e = parse("upstream u { server 'odd host':80; }").unwrap_err().to_string();
        assert_eq!(e, "unexpected \":\" in t.conf:1");
        // `\;` is not one of the escapes nginx rewrites, so the backslash stays.
        assert_eq!(u.upstream.primary()[1].server().as_str(), "a\\;b");
    }

    #[test]
    fn nginx_errors_with_file_and_line() {
        let cases = [
            ("upstream u {\nhash $k;\nserver a weight=0;\n}", "invalid parameter \"weight=0\" in t.conf:3"),
            ("upstream u {\nserver a weight=x;\n}", "invalid parameter \"weight=x\" in t.conf:2"),
            ("upstream u { server a foo; }", "invalid parameter \"foo\" in t.conf:1"),
            (
                "upstream u {\n hash $k consistent;\n server a backup; }",
                "balancing method does not support parameter \"backup\" in t.conf:3",
            ),
            ("upstream u {\n}", "no servers are inside upstream in t.conf:1"),
            ("upstream u { hash $k Consistent; server a; }", "invalid parameter \"Consistent\" in t.conf:1"),
            ("upstream u { hash; server a; }", "invalid number of arguments in \"hash\" directive in t.conf:1"),
            ("upstream u { server a; proxy_pass x; }", "unknown directive \"proxy_pass\" in t.conf:1"),
            ("upstream u { server a:0; }", "invalid port in upstream \"a:0\" in t.conf:1"),
            ("upstream u { server a/b; }", "invalid host in upstream \"a/b\" in t.conf:1"),
            ("stream { upstream u { server a; } }", "no port in upstream \"a\" in t.conf:1"),
            ("upstream u { server a;", "unexpected end of file, expecting \";\" or \"}\" in t.conf:1"),
            ("upstream u { server a; }\nupstream u { server b; }", "duplicate upstream \"u\" in t.conf:2"),
            (
                "upstream u { server a resolve; }",
                "resolving names at run time requires upstream \"u\" in t.conf:1 to be in shared memory in t.conf:1",
            ),
            (
                "upstream u { zone z 64k; server a resolve; }",
                "no resolver defined to resolve names at run time in upstream \"u\" in t.conf:1",
            ),
            (
                "upstream u { least_conn; server a; }",
                "upstream \"u\" in t.conf:1 does not use \"hash\" (its balancer is least_conn)",
            ),
            (
                "upstream u { server a; }",
                "upstream \"u\" in t.conf:1 does not use \"hash\" (its balancer is round-robin)",
            ),
        ];
        for (text, want) in cases {
            let got = match parse(text) {
                Err(e) => e.to_string(),
                Ok(c) => c.hash_upstream(None).map(|_| "ok".to_string()).unwrap_or_else(|e| e.to_string()),
            };
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn routing_neutral_directives_are_accepted() {
        let c = parse(
            "upstream u { zone z 64k; hash $k consistent; keepalive 16; keepalive_timeout 60s; \
             keepalive_requests 100; keepalive_time 1h; ntlm; server a max_conns=5; }",
        )
        .unwrap();
        assert_eq!(c.hash_upstream(None).unwrap().upstream.primary()[0].max_conns(), 5);
        assert!(err("stream { upstream u { ip_hash; server a:1; } }").contains("unknown directive \"ip_hash\""));
        let random = parse("upstream u { random; server a; }").unwrap();
        assert!(random.hash_upstream(None).unwrap_err().to_string().contains("its balancer is random"));
    }

    #[test]
    fn backup_before_hash_is_kept_and_hash_redefinition_warns() {
        let c = parse("upstream u { server a; server b backup; ip_hash; hash $k consistent; server c; }").unwrap();
        let u = c.hash_upstream(None).unwrap();
        assert_eq!(u.upstream.primary().len(), 2);
        assert_eq!(u.upstream.backup().len(), 1);
        assert_eq!(c.warnings.len(), 1);
        assert_eq!(c.warnings[0].to_string(), "load balancing method redefined in t.conf:1");
        assert!(
            err("upstream u { ip_hash; server b backup; hash $k; }").contains("does not support parameter \"backup\"")
        );
    }

    #[test]
    fn resolve_and_drain_depend_on_version() {
        let old = LoadOptions { resolve: false, version: NginxVersion::new(1, 26, 3) };
        let e = Config::parse_str("upstream u { zone z 1m; resolver 127.0.0.1; server a resolve; }", "t.conf", &old);
        assert_eq!(e.unwrap_err().to_string(), "invalid parameter \"resolve\" in t.conf:1");
        let c =
            parse("upstream u { hash $k; zone z 1m; resolver 127.0.0.1; server b resolve; server a drain; }").unwrap();
        let u = c.hash_upstream(None).unwrap();
        // The resolved line goes after the static one; drain is down.
        assert_eq!(u.upstream.primary()[0].server().as_str(), "a");
        assert!(u.upstream.primary()[0].is_down());
        assert_eq!(u.upstream.primary()[1].server().as_str(), "b");
    }

    #[test]
    fn parse_time_units() {
        assert_eq!(parse_seconds("10"), Some(10));
        assert_eq!(parse_seconds("10s"), Some(10));
        assert_eq!(parse_seconds("1m30s"), Some(90));
        assert_eq!(parse_seconds("1h"), Some(3600));
        assert_eq!(parse_seconds("500ms"), None);
        assert_eq!(parse_seconds("1s1m"), None);
        assert_eq!(parse_seconds("x"), None);
        assert_eq!(parse_seconds(""), None);
    }

    #[test]
    fn includes_relative_and_wildcard() {
        let dir = std::env::temp_dir().join(format!("nk-config-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(dir.join("nginx.conf"), "http {\n include conf.d/*.conf;\n}\n").unwrap();
        std::fs::write(dir.join("conf.d/b.conf"), "upstream b { hash $k; server b; }\n").unwrap();
        std::fs::write(dir.join("conf.d/a.conf"), "upstream a {\n include up.inc;\n}\n").unwrap();
        std::fs::write(dir.join("conf.d/up.inc"), "hash $k consistent;\nserver a weight=2;\n").unwrap();
        std::fs::write(dir.join("conf.d/.hidden.conf"), "garbage {").unwrap();
        let c = Config::load(dir.join("nginx.conf"), &LoadOptions { resolve: false, ..Default::default() }).unwrap();
        let names: Vec<&str> = c.upstreams.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(c.hash_upstream(Some("a")).unwrap().upstream.primary()[0].weight(), 2);
        std::fs::write(dir.join("conf.d/c.conf"), "upstream c { server a weight=0; }\n").unwrap();
        let no_dns = LoadOptions { resolve: false, ..Default::default() };
        let e = Config::load(dir.join("nginx.conf"), &no_dns).unwrap_err().to_string();
        assert!(e.ends_with("conf.d/c.conf:1"), "{e}");
        let e = Config::load(dir.join("missing.conf"), &LoadOptions::default()).unwrap_err().to_string();
        assert!(e.starts_with("open() \"") && e.contains("missing.conf"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match(b"*.conf", b"a.conf"));
        assert!(!wildcard_match(b"*.conf", b"a.conf.bak"));
        assert!(wildcard_match(b"a?[0-9]", b"ab7"));
        assert!(!wildcard_match(b"a[!0-9]", b"a7"));
    }

    #[test]
    fn resolution_makes_one_peer_per_address() {
        let c = Config::parse_str(
            "upstream u { hash $k consistent; server localhost:8080; server 127.0.0.1:1; }",
            "t",
            &LoadOptions::default(),
        )
        .unwrap();
        let u = c.hash_upstream(None).unwrap().upstream;
        let want = resolve_host("localhost").unwrap().len();
        assert_eq!(u.primary().len(), want + 1);
        assert!(u.primary()[..want].iter().all(|p| p.server().as_str() == "localhost:8080"));
        assert!(u.primary()[0].name().ends_with(":8080") && u.primary()[0].name() != "localhost:8080");
        let e = Config::parse_str("upstream u { hash $k; server no-such-host.invalid; }", "t", &LoadOptions::default());
        assert_eq!(e.unwrap_err().to_string(), "host not found in upstream \"no-such-host.invalid\" in t:1");
    }
}
