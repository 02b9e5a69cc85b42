//! Reads `upstream` blocks from a real `nginx.conf`, with nginx's syntax, nginx's checks and nginx's errors.
//!
//! The reader works on bytes like nginx (any encoding in comments and strings), tokenises with nginx's
//! rules ([`tokens`](self) — quotes, escapes, `${var}`, the 4 KiB token limit), walks every directive in
//! file order checking it against the directives the chosen nginx release knows in that context (a table
//! probed from the real binaries), follows `include` (with wildcards), and reads `upstream` blocks in
//! `http { }` and `stream { }` with nginx's rules for that release. Errors use nginx's wording and name the
//! file and line as nginx does; [`ErrorKind`] lists them all.
//!
//! Two inputs ([`Input`]):
//!
//! * [`Input::Config`] (the default): a whole `nginx.conf`. What `nginx -t` refuses is refused (no
//!   `events {}`, unknown directives, `upstream` in the wrong place, `stream {}` without `load_module` of
//!   the stream module, …).
//! * [`Input::Fragment`] / [`Input::StreamFragment`]: a file read as if it sat inside `http { }` (or
//!   `stream { }`), like a `conf.d/*.conf` include holding `upstream` blocks. This reads less than nginx:
//!   whatever the surrounding file would add or forbid is not seen.
//!
//! Outside `upstream { }` the reader checks names, contexts, blocks, how many arguments each directive has
//! and whether it may repeat, but not the arguments' values; the acceptance suite (`tests/config_acceptance_live.rs`) measures what
//! remains.
//!
//! # Example
//!
//! ```
//! use nginx_ketama::config::{Config, LoadOptions};
//!
//! let conf = Config::parse_str(
//!     "events {}\nhttp { upstream app { hash $request_uri consistent; server 10.0.0.1:80 weight=2; server 10.0.0.2:80; } }",
//!     "inline.conf",
//!     &LoadOptions::default(),
//! )?;
//! let app = conf.hash_upstream(Some("app"))?;
//! assert_eq!(app.key, "$request_uri");
//! assert_eq!(app.upstream.primary().len(), 2);
//!
//! let err = Config::parse_str("upstream u {\n hash $arg_k consistent;\n server a backup;\n}", "x.conf", &LoadOptions::fragment())
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "balancing method does not support parameter \"backup\" in x.conf:3");
//! # Ok::<(), nginx_ketama::config::ConfigError>(())
//! ```

mod block;
mod directives;
mod error;
pub mod expression;
pub mod hostnames;
mod includes;
pub mod log_format;
pub mod maps;
pub mod sites;
mod tokens;
mod values;
mod variables;
mod walk;

pub use error::{ConfigError, ErrorKind, Location, Text};
pub use includes::MAX_CONFIG_BYTES;
#[cfg(not(feature = "pcre2"))]
pub(crate) use values::named_captures;
pub use walk::{MAX_INCLUDE_DEPTH, MAX_NESTING};

use crate::failure::{Proxying, RetryPolicy, StreamPolicy};
use crate::upstream::Upstream;
use crate::version::{Libc, NginxVersion};
use std::fmt;
use std::path::{Path, PathBuf};

/// What kind of file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Input {
    /// A whole `nginx.conf`, checked as `nginx -t` checks it.
    #[default]
    Config,
    /// Directives as they would sit inside `http { }` (a `conf.d` include): reads less than nginx.
    Fragment,
    /// Directives as they would sit inside `stream { }`: reads less than nginx.
    StreamFragment,
}

/// How to load a configuration.
///
/// # Example
///
/// ```
/// use nginx_ketama::config::{Config, LoadOptions};
///
/// // Without resolution a hostname line is exactly one peer, and nothing is looked up.
/// let no_dns = LoadOptions { resolve: false, ..LoadOptions::fragment() };
/// let conf = Config::parse_str("upstream u { hash $arg_k consistent; server cache.internal:80; }", "x.conf", &no_dns)?;
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
    /// The C library nginx was built against (default [`Libc::Glibc`]); it decides ring collisions.
    pub libc: Libc,
    /// A whole configuration (default) or a fragment.
    pub input: Input,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { resolve: true, version: NginxVersion::default(), libc: Libc::default(), input: Input::Config }
    }
}

impl LoadOptions {
    /// The defaults, reading an `http` fragment ([`Input::Fragment`]).
    pub fn fragment() -> LoadOptions {
        LoadOptions { input: Input::Fragment, ..LoadOptions::default() }
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
/// let text = "upstream s { least_conn; server 10.0.0.1:53; }";
/// let options = LoadOptions { input: nginx_ketama::config::Input::StreamFragment, ..LoadOptions::default() };
/// let conf = Config::parse_str(text, "x.conf", &options)?;
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
    /// Where each `server` line is, in the order the model takes their peers: primary lines (those
    /// resolved at run time last), then backup lines. Read with `resolve: false`, each line is one peer,
    /// so `servers[i]` is where the i-th peer of [`Upstream::primary`] then [`Upstream::backup`] is written.
    pub servers: Vec<Location>,
    /// Its balancer.
    pub balancer: Balancer,
    /// Whether it caches connections.
    pub keepalive: Keepalive,
}

/// Whether an `upstream` block keeps connections to its servers (`ngx_http_upstream_keepalive_module`), which
/// decides whether attempts can meet stale cached connections (algorithm §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keepalive {
    /// No connections are cached (no `keepalive` before 1.29.7, `keepalive 0`, or a `stream` upstream).
    Off,
    /// Up to this many idle connections per worker: `keepalive N`, or 32 by default since 1.29.7. Before
    /// 1.29.7 they are reused only with `proxy_http_version 1.1` and an empty `Connection` header.
    Cached(u32),
    /// `keepalive` came before a balancing method, which replaced it (before 1.29.7, with the warning
    /// `load balancing method redefined`): nothing is cached.
    Replaced,
}

/// The retry rules of one place that proxies to an upstream (algorithm §5.1, §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// An http location: `*_next_upstream`, `_tries`, `_timeout` of its module, as inherited.
    Http(RetryPolicy),
    /// A stream server: `proxy_next_upstream on|off`, `_tries`, `_timeout`.
    Stream(StreamPolicy),
}

/// One `*_pass` that names an `upstream` block, with the retry rules in force there.
///
/// # Example
///
/// ```
/// use nginx_ketama::config::{Config, LoadOptions, Retry};
/// use nginx_ketama::failure::Condition;
///
/// let text = "upstream u { hash $uri consistent; server 10.0.0.1; server 10.0.0.2; }\n\
///             proxy_next_upstream error http_502;\n\
///             server { location / { proxy_pass http://u; proxy_next_upstream_tries 2; } }";
/// let conf = Config::parse_str(text, "x.conf", &LoadOptions::fragment())?;
/// let Retry::Http(policy) = conf.proxied[0].retry else { unreachable!() };
/// assert!(policy.next_upstream.contains(Condition::Http502));
/// assert_eq!((conf.proxied[0].upstream.as_str(), policy.tries), ("u", 2));
/// # Ok::<(), nginx_ketama::config::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Proxied {
    /// The upstream's name as written in the `*_pass` URL.
    pub upstream: String,
    /// The module (`proxy_pass`, `memcached_pass`, …; stream: `proxy_pass`).
    pub module: Proxying,
    /// Where the `*_pass` directive is.
    pub location: Location,
    /// The rules in force there.
    pub retry: Retry,
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
/// let text = "upstream u {\n  ip_hash;\n  hash $arg_k consistent;\n  server 10.0.0.1;\n}";
/// let conf = Config::parse_str(text, "x.conf", &LoadOptions::fragment())?;
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
    files: Vec<PathBuf>,
    /// Every upstream block, in order.
    pub upstreams: Vec<UpstreamConfig>,
    /// Warnings nginx would log.
    pub warnings: Vec<Warning>,
    /// Every `*_pass` naming an `upstream` block, in file order, with its retry rules.
    pub proxied: Vec<Proxied>,
    sites: Vec<sites::Site>,
    maps: Vec<maps::Map>,
    log_formats: Vec<log_format::LogFormat>,
    version: NginxVersion,
}

impl Config {
    /// Reads and parses `path` and everything it includes.
    ///
    /// Relative `include` paths resolve against the directory of `path` (nginx's configuration prefix).
    /// Like nginx, only as many bytes as the file's size are read (a device such as `/dev/zero` reads as
    /// empty), and at most [`MAX_CONFIG_BYTES`] in all.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Io`] for unreadable files, [`ConfigError::Invalid`] for anything nginx would reject.
    pub fn load(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let prefix = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut walk = walk::Walk::new(options, prefix);
        let text = walk.read_main(path)?;
        Config::run(walk, &text, path)
    }

    /// Parses configuration text; `file` names it in messages and anchors relative includes.
    ///
    /// # Errors
    ///
    /// As [`Config::load`].
    pub fn parse_str(text: &str, file: impl AsRef<Path>, options: &LoadOptions) -> Result<Config, ConfigError> {
        Config::parse_bytes(text.as_bytes(), file, options)
    }

    /// Parses configuration bytes (any encoding, as nginx reads them).
    ///
    /// # Errors
    ///
    /// As [`Config::load`].
    pub fn parse_bytes(text: &[u8], file: impl AsRef<Path>, options: &LoadOptions) -> Result<Config, ConfigError> {
        let file = file.as_ref();
        let prefix = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut walk = walk::Walk::new(options, prefix);
        walk.take_budget(text.len())?;
        Config::run(walk, text, file)
    }

    fn run(mut walk: walk::Walk<'_>, text: &[u8], file: &Path) -> Result<Config, ConfigError> {
        walk.main(text, file)?;
        let version = walk.version();
        Ok(Config {
            file: file.display().to_string(),
            files: walk.files,
            upstreams: walk.upstreams,
            warnings: walk.warnings,
            proxied: walk.proxied,
            sites: walk.sites.sites,
            maps: walk.maps.maps,
            log_formats: walk.log_formats,
            version,
        })
    }

    /// The files read from disk, in the order read: the main file ([`Config::load`] only) and every file
    /// it includes (a file included twice is listed twice). A command that writes files refuses to write
    /// over these.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The `server { }` blocks of `http { }`, in order (algorithm §12.7).
    pub fn sites(&self) -> &[sites::Site] {
        &self.sites
    }

    /// The `map` blocks of `http { }`, in order (algorithm §12.8).
    pub fn maps(&self) -> &[maps::Map] {
        &self.maps
    }

    /// The `log_format` named `name`: one of `http { }`, else the predefined `combined`.
    pub fn log_format(&self, name: &str) -> Option<log_format::LogFormat> {
        match self.log_formats.iter().find(|f| f.name == name) {
            Some(f) => Some(f.clone()),
            None => (name == "combined").then(log_format::LogFormat::combined),
        }
    }

    /// The nginx release whose rules the configuration was read with.
    pub fn version(&self) -> NginxVersion {
        self.version
    }

    /// The upstream named `name` (or the only upstream when `name` is `None`), which must use `hash`.
    ///
    /// Names compare ignoring ASCII case, as nginx compares them. When a name is used in both `http { }`
    /// and `stream { }`, choose with `http:NAME` or `stream:NAME`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownUpstream`], [`ConfigError::AmbiguousUpstream`] or [`ConfigError::NotHash`].
    pub fn hash_upstream(&self, name: Option<&str>) -> Result<HashUpstream<'_>, ConfigError> {
        let label = |u: &UpstreamConfig| match u.context {
            Context::Http => u.name.clone(),
            Context::Stream => format!("stream:{}", u.name),
        };
        let available = || self.upstreams.iter().map(label).collect::<Vec<_>>();
        let found = match name {
            Some(name) => {
                let (context, bare) = match name.split_once(':') {
                    Some(("http", n)) => (Some(Context::Http), n),
                    Some(("stream", n)) => (Some(Context::Stream), n),
                    _ => (None, name),
                };
                let matches: Vec<&UpstreamConfig> = self
                    .upstreams
                    .iter()
                    .filter(|u| u.name.eq_ignore_ascii_case(bare) && context.is_none_or(|c| c == u.context))
                    .collect();
                match matches.as_slice() {
                    [one] => *one,
                    [] => {
                        return Err(ConfigError::UnknownUpstream {
                            name: name.to_string(),
                            file: self.file.clone(),
                            available: available(),
                        });
                    }
                    several => {
                        return Err(ConfigError::AmbiguousUpstream {
                            file: self.file.clone(),
                            available: several
                                .iter()
                                .map(|u| match u.context {
                                    Context::Http => format!("http:{}", u.name),
                                    Context::Stream => format!("stream:{}", u.name),
                                })
                                .collect(),
                        });
                    }
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::resolve_host;
    use crate::upstream::Method;

    fn opts(input: Input) -> LoadOptions {
        LoadOptions { resolve: false, input, ..LoadOptions::default() }
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse_str(text, "t.conf", &opts(Input::Fragment))
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    const STREAM: &str = "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n";

    /// Each server line's `file:line`, in the order the model takes the lines' peers: primary lines, then
    /// backup lines (written before them or not).
    #[test]
    fn server_lines_keep_where_they_are_written() {
        let c = parse(
            "upstream u {\n  server 10.0.0.1 backup;\n  server 10.0.0.2;\n\n  server 10.0.0.3\n    weight=2;\n  \
             hash $uri;\n}\n",
        )
        .unwrap();
        let lines: Vec<usize> = c.upstreams[0].servers.iter().map(|l| l.line).collect();
        assert_eq!(lines, [3, 6, 2]);
        assert_eq!(c.upstreams[0].servers[1].to_string(), "t.conf:6");
    }

    #[test]
    fn reads_http_and_stream_upstreams() {
        let text = format!(
            "{STREAM}# comment\nuser root;\nevents {{}}\nhttp {{\n  upstream a {{ hash $arg_k consistent; server 127.0.0.1:1 weight=3 max_fails=0; }}\n}}\n\
             stream {{ upstream s {{ hash $remote_port; server 127.0.0.1:2; server unix:/x; }} }}\n"
        );
        let c = Config::parse_str(&text, "t.conf", &opts(Input::Config)).unwrap();
        let a = c.hash_upstream(Some("a")).unwrap();
        assert_eq!(a.upstream.method(), Method::Consistent);
        assert_eq!(a.upstream.primary()[0].weight(), 3);
        assert_eq!(a.upstream.primary()[0].max_fails(), 0);
        assert_eq!(a.config.location.line, 6);
        let s = c.hash_upstream(Some("S")).unwrap();
        assert_eq!(s.config.context, Context::Stream);
        assert_eq!(s.upstream.method(), Method::Plain);
        assert!(matches!(c.hash_upstream(None), Err(ConfigError::AmbiguousUpstream { .. })));
        assert_eq!(
            c.hash_upstream(Some("zz")).unwrap_err().to_string(),
            "no upstream \"zz\" in t.conf (upstreams: a, stream:s)"
        );
    }

    #[test]
    fn same_name_in_http_and_stream_needs_a_selector() {
        let text = format!(
            "{STREAM}events {{}}\nhttp {{ upstream u {{ hash $uri; server 127.0.0.1:1; }} }}\n\
             stream {{ upstream U {{ hash $remote_addr consistent; server 127.0.0.1:2; }} }}\n"
        );
        let c = Config::parse_str(&text, "t.conf", &opts(Input::Config)).unwrap();
        let e = c.hash_upstream(Some("u")).unwrap_err().to_string();
        assert_eq!(e, "t.conf has 2 upstreams (http:u, stream:U); name one (as http:NAME or stream:NAME)");
        assert_eq!(c.hash_upstream(Some("stream:u")).unwrap().upstream.method(), Method::Consistent);
        assert_eq!(c.hash_upstream(Some("http:U")).unwrap().upstream.method(), Method::Plain);
    }

    #[test]
    fn whole_config_rules() {
        let full = |t: &str| {
            Config::parse_str(t, "t.conf", &opts(Input::Config))
                .map(|_| "ok".to_string())
                .unwrap_or_else(|e| e.to_string())
        };
        assert_eq!(full("http {}"), "no \"events\" section in configuration");
        assert_eq!(full("events {}\nfoo;"), "unknown directive \"foo\" in t.conf:2");
        assert_eq!(full("events {} http {} http {}"), "\"http\" directive is duplicate in t.conf:1");
        assert_eq!(full("events {} stream {}"), "unknown directive \"stream\" in t.conf:1");
        assert_eq!(
            full("events {} upstream u { server a; }"),
            "\"upstream\" directive is not allowed here in t.conf:1"
        );
        assert_eq!(
            full("events {} http { server { upstream u { server a; } } }"),
            "\"upstream\" directive is not allowed here in t.conf:1"
        );
        assert_eq!(full("\u{feff}events {}"), "unknown directive \"\u{feff}events\" in t.conf:1");
        assert_eq!(
            full("events {} http { upstream u { server a; } server { location / { proxy_pass http://u:8080; } } }"),
            "upstream \"u\" may not have port 8080 in t.conf:1"
        );
        assert_eq!(
            full("events {} http { upstream u { server a; } upstream U { server b; } }"),
            "duplicate upstream \"U\" in t.conf:1"
        );
        assert_eq!(
            full(
                "events {} http { server { if ($request_method = \"POST\") { return 405; } return 301 https://${host}$request_uri; } }"
            ),
            "ok"
        );
        assert_eq!(full("events {}\n# caf\u{e9}\n"), "ok");
        let latin1 = Config::parse_bytes(b"events {}\n# caf\xe9\n", "t.conf", &opts(Input::Config));
        assert!(latin1.is_ok());
        assert_eq!(full("events {} http { upstream u { hash $nope; server a; } }"), "unknown \"nope\" variable");
        assert_eq!(full("events {} http { upstream u {\n\n}\n}"), "no servers are inside upstream in t.conf:3");
        assert_eq!(
            full("events {} http { upstream u { server a; }"),
            "unexpected end of file, expecting \"}\" in t.conf:1"
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
        assert_eq!(parse("upstream u { hash ${request_uri} consistent; server a; }").unwrap().upstreams.len(), 1);
    }

    #[test]
    fn nginx_errors_with_file_and_line() {
        let cases = [
            ("upstream u {\nhash $arg_k;\nserver a weight=0;\n}", "invalid parameter \"weight=0\" in t.conf:3"),
            ("upstream u {\nserver a weight=x;\n}", "invalid parameter \"weight=x\" in t.conf:2"),
            ("upstream u { server a foo; }", "invalid parameter \"foo\" in t.conf:1"),
            (
                "upstream u { server 127.0.0.1:1 fail_timeout=1\u{e9}; }",
                "invalid parameter \"fail_timeout=1\u{e9}\" in t.conf:1",
            ),
            (
                "upstream u {\n hash $arg_k consistent;\n server a backup; }",
                "balancing method does not support parameter \"backup\" in t.conf:3",
            ),
            ("upstream u {\n}", "no servers are inside upstream in t.conf:2"),
            ("upstream u { hash $arg_k Consistent; server a; }", "invalid parameter \"Consistent\" in t.conf:1"),
            ("upstream u { hash; server a; }", "invalid number of arguments in \"hash\" directive in t.conf:1"),
            ("upstream u { server a; proxy_pass x; }", "\"proxy_pass\" directive is not allowed here in t.conf:1"),
            ("upstream u { server a; bogus x; }", "unknown directive \"bogus\" in t.conf:1"),
            ("upstream u { server a:0; }", "invalid port in upstream \"a:0\" in t.conf:1"),
            ("upstream u { server a/b; }", "invalid host in upstream \"a/b\" in t.conf:1"),
            ("upstream u { server a;", "unexpected end of file, expecting \"}\" in t.conf:1"),
            ("upstream u { server a; }\nupstream u { server b; }", "duplicate upstream \"u\" in t.conf:2"),
            (
                "upstream u { server a resolve; }",
                "resolving names at run time requires upstream \"u\" in t.conf:1 to be in shared memory",
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
            ("upstream u { zone z abc; server a; }", "invalid zone size \"abc\" in t.conf:1"),
            ("upstream u { zone z 1; server a; }", "zone \"z\" is too small in t.conf:1"),
            ("upstream u { zone z; server a; }", "zero size shared memory zone \"z\""),
            ("upstream u { keepalive abc; server a; }", "invalid value \"abc\" in \"keepalive\" directive in t.conf:1"),
            ("upstream u { keepalive 1; keepalive 2; server a; }", "\"keepalive\" directive is duplicate in t.conf:1"),
            (
                "upstream u { keepalive_timeout bad; server a; }",
                "\"keepalive_timeout\" directive invalid value in t.conf:1",
            ),
            (
                "upstream u { keepalive_requests x; server a; }",
                "\"keepalive_requests\" directive invalid number in t.conf:1",
            ),
            ("upstream u { hash $ consistent; server a; }", "invalid variable name in t.conf:1"),
            (
                "upstream u { hash ${request_uri consistent; server a; }",
                "the closing bracket in \"request_uri\" variable is missing in t.conf:1",
            ),
            ("upstream u { random three; server a; }", "invalid parameter \"three\" in t.conf:1"),
            ("upstream u { ip_hash x; server a; }", "invalid number of arguments in \"ip_hash\" directive in t.conf:1"),
            ("upstream u { ntlm; server a; }", "unknown directive \"ntlm\" in t.conf:1"),
            (
                "upstream u { server [1:2:3:4:5:6:7::]:80; }",
                "invalid IPv6 address in upstream \"[1:2:3:4:5:6:7::]:80\" in t.conf:1",
            ),
        ];
        for (text, want) in cases {
            let got = match parse(text) {
                Err(e) => e.to_string(),
                Ok(c) => c.hash_upstream(None).map(|_| "ok".to_string()).unwrap_or_else(|e| e.to_string()),
            };
            assert_eq!(got, want, "{text}");
        }
        let stream = Config::parse_str("upstream u { server a; }", "t.conf", &opts(Input::StreamFragment));
        assert_eq!(stream.unwrap_err().to_string(), "no port in upstream \"a\" in t.conf:1");
    }

    #[test]
    fn routing_neutral_directives_are_accepted() {
        let c = parse(
            "upstream u { zone z 64k; hash $arg_k consistent; keepalive 16; keepalive_timeout 60s; \
             keepalive_requests 100; keepalive_time 1h; server a max_conns=5; }",
        )
        .unwrap();
        assert_eq!(c.hash_upstream(None).unwrap().upstream.primary()[0].max_conns(), 5);
        let s = Config::parse_str("upstream u { ip_hash; server a:1; }", "t.conf", &opts(Input::StreamFragment));
        assert_eq!(s.unwrap_err().to_string(), "\"ip_hash\" directive is not allowed here in t.conf:1");
        let random = parse("upstream u { random two least_conn; server a; }").unwrap();
        assert!(random.hash_upstream(None).unwrap_err().to_string().contains("its balancer is random"));
    }

    #[test]
    fn backup_before_hash_is_kept_and_hash_redefinition_warns() {
        let c = parse("upstream u { server a; server b backup; ip_hash; hash $arg_k consistent; server c; }").unwrap();
        let u = c.hash_upstream(None).unwrap();
        assert_eq!(u.upstream.primary().len(), 2);
        assert_eq!(u.upstream.backup().len(), 1);
        assert_eq!(c.warnings.len(), 1);
        assert_eq!(c.warnings[0].to_string(), "load balancing method redefined in t.conf:1");
        assert!(
            err("upstream u { ip_hash; server b backup; hash $arg_k; }")
                .contains("does not support parameter \"backup\"")
        );
    }

    #[test]
    fn version_rules() {
        let at = |v: (u32, u32, u32), text: &str| {
            let o = LoadOptions { version: NginxVersion::new(v.0, v.1, v.2), ..opts(Input::Fragment) };
            Config::parse_str(text, "t.conf", &o).map(|_| "ok".to_string()).unwrap_or_else(|e| e.to_string())
        };
        let text = "upstream u { zone z 1m; resolver 127.0.0.1; server a resolve; }";
        assert_eq!(at((1, 26, 3), text), "\"resolver\" directive is not allowed here in t.conf:1");
        assert_eq!(at((1, 30, 6), text), "ok");
        let ip = "upstream u { server 127.0.0.1:9001 resolve; }";
        assert_eq!(at((1, 26, 3), ip), "invalid parameter \"resolve\" in t.conf:1");
        assert_eq!(at((1, 30, 6), ip), "ok");
        assert_eq!(
            at((1, 22, 1), "upstream u { keepalive 0; server a; }"),
            "invalid value \"0\" in \"keepalive\" directive in t.conf:1"
        );
        assert_eq!(at((1, 30, 6), "upstream u { keepalive 0; server a; }"), "ok");
        // Releases between the probed ones follow the version rules inside `upstream`.
        assert_eq!(at((1, 28, 0), text), "ok");
        assert_eq!(at((1, 27, 2), text), "\"resolver\" directive is not allowed here in t.conf:1");
        assert_eq!(at((1, 29, 6), "upstream u { sticky cookie s; server a; }"), "ok");
        assert_eq!(
            at((1, 29, 5), "upstream u { sticky cookie s; server a; }"),
            "unknown directive \"sticky\" in t.conf:1"
        );
        assert_eq!(
            at((1, 26, 3), "upstream u { sticky cookie s; server a; }"),
            "unknown directive \"sticky\" in t.conf:1"
        );
        assert_eq!(at((1, 30, 6), "upstream u { sticky cookie s; server a route=x; server b drain; }"), "ok");
        assert_eq!(
            at((1, 30, 6), "upstream u { zone z 64k; resolver 127.0.0.1; server a service=http resolve; }"),
            "ok"
        );
        let c = parse("upstream u { hash $arg_k; zone z 1m; resolver 127.0.0.1; server b resolve; server 127.0.0.2 resolve; server a drain; }").unwrap();
        let u = c.hash_upstream(None).unwrap();
        // The run-time resolved name goes after the static lines; an IP literal keeps its place; drain is down.
        let order: Vec<&str> = u.upstream.primary().iter().map(|p| p.server().as_str()).collect();
        assert_eq!(order, ["127.0.0.2", "a", "b"]);
        assert!(u.upstream.primary()[1].is_down());
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].message.contains("does not read /etc/hosts"));
    }

    #[test]
    fn run_time_names_are_never_a_silent_different_answer() {
        // nginx 1.30.6 resolves `localhost:19009 resolve` with its own DNS resolver (no /etc/hosts); the reader
        // uses the system resolver, puts the peers after the static ones and says so in a warning.
        let text = "upstream u { hash $uri; zone z 64k; resolver 127.0.0.1; server localhost:19009 resolve; \
                    server 127.0.0.1:1; }";
        let c = Config::parse_str(text, "t", &LoadOptions::fragment()).unwrap();
        let u = c.hash_upstream(None).unwrap().upstream;
        assert_eq!(u.primary()[0].server().as_str(), "127.0.0.1:1");
        assert!(u.primary()[1..].iter().all(|p| p.server().as_str() == "localhost:19009"));
        assert_eq!(c.warnings.len(), 1);
        let w = c.warnings[0].to_string();
        assert!(
            w.contains("server \"localhost:19009\"") && w.contains("does not read /etc/hosts") && w.ends_with("in t:1"),
            "{w}"
        );
    }

    #[test]
    fn includes_relative_and_wildcard() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(dir.join("nginx.conf"), "events {}\nhttp {\n include conf.d/*.conf;\n}\n").unwrap();
        std::fs::write(dir.join("conf.d/b.conf"), "upstream b { hash $uri; server b; }\n").unwrap();
        std::fs::write(dir.join("conf.d/a.conf"), "upstream a {\n include conf.d/up.inc;\n}\n").unwrap();
        std::fs::write(dir.join("conf.d/up.inc"), "hash $uri consistent;\nserver a weight=2;\n").unwrap();
        std::fs::write(dir.join("conf.d/.hidden.conf"), "garbage {").unwrap();
        let no_dns = opts(Input::Config);
        let c = Config::load(dir.join("nginx.conf"), &no_dns).unwrap();
        let names: Vec<&str> = c.upstreams.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(c.hash_upstream(Some("a")).unwrap().upstream.primary()[0].weight(), 2);
        let read: Vec<PathBuf> =
            ["nginx.conf", "conf.d/a.conf", "conf.d/up.inc", "conf.d/b.conf"].iter().map(|f| dir.join(f)).collect();
        assert_eq!(c.files(), read, "every file read, in order");
        std::fs::write(dir.join("conf.d/c.conf"), "upstream c { server a weight=0; }\n").unwrap();
        let e = Config::load(dir.join("nginx.conf"), &no_dns).unwrap_err().to_string();
        assert!(e.ends_with("conf.d/c.conf:1"), "{e}");
        let e = Config::load(dir.join("missing.conf"), &no_dns).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("open() \"{}\" failed (2: No such file or directory)", dir.join("missing.conf").display())
        );
    }

    #[test]
    fn resolution_makes_one_peer_per_address() {
        let o = LoadOptions::fragment();
        let c = Config::parse_str(
            "upstream u { hash $arg_k consistent; server localhost:8080; server 127.0.0.1:1; }",
            "t",
            &o,
        )
        .unwrap();
        let u = c.hash_upstream(None).unwrap().upstream;
        let want = resolve_host("localhost").unwrap().len();
        assert_eq!(u.primary().len(), want + 1);
        assert!(u.primary()[..want].iter().all(|p| p.server().as_str() == "localhost:8080"));
        assert!(u.primary()[0].name().ends_with(":8080") && u.primary()[0].name() != "localhost:8080");
        let e = Config::parse_str("upstream u { hash $arg_k; server no-such-host.invalid; }", "t", &o);
        assert_eq!(e.unwrap_err().to_string(), "host not found in upstream \"no-such-host.invalid\" in t:1");
    }

    #[test]
    fn hostile_inputs_end_quickly() {
        let deep = "a { ".repeat(300_000);
        let e = Config::parse_str(&deep, "t", &opts(Input::Config)).unwrap_err().to_string();
        assert_eq!(e, "unknown directive \"a\" in t:1");
        let deep = format!("events {{}} http {{ server {{ {} }} }}", "location / { ".repeat(300_000));
        let e = Config::parse_str(&deep, "t", &opts(Input::Config)).unwrap_err().to_string();
        assert_eq!(e, format!("blocks nested deeper than {MAX_NESTING} in t:1"));
        // The deepest nesting accepted fits the 2 MiB stack of a spawned thread, even unoptimised.
        let ok = format!(
            "events {{}} http {{ server {{ {}{} }} }}",
            "location / { ".repeat(MAX_NESTING - 3),
            "} ".repeat(MAX_NESTING - 3)
        );
        let small = std::thread::Builder::new().stack_size(2 << 20);
        let r =
            small.spawn(move || Config::parse_str(&ok, "t", &opts(Input::Config)).map(|_| ())).unwrap().join().unwrap();
        assert!(r.is_ok(), "{r:?}");
        let e = Config::load("/dev/zero", &opts(Input::Config)).unwrap_err().to_string();
        assert_eq!(e, "no \"events\" section in configuration");
    }
}
