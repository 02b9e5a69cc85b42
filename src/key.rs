//! The bytes nginx hashes: a key expression ([`Expression`]) evaluated for a request ([`Parsed`]) the way
//! nginx's complex values concatenate variables (a variable that is not found adds nothing). Every
//! variable modelled is listed in [`HTTP_VARIABLES`] and [`STREAM_VARIABLES`], besides those the
//! configuration's `map` blocks define ([`Context::maps`], algorithm §12.8); any other is refused by
//! name ([`KeyError::Unmodelled`]), never guessed. Algorithm §12.5.
//!
//! # Example
//!
//! ```
//! use nginx_ketama::config::expression::Expression;
//! use nginx_ketama::key::{self, Context};
//! use nginx_ketama::request::Request;
//! use nginx_ketama::NginxVersion;
//!
//! let rules = NginxVersion::LATEST.key_rules();
//! let req = Request::builder("GET", "/a/../b?id=7").header("Host", "Shop.example:8080").build();
//! let parsed = req.parse_as(rules, true)?;
//! let ctx = Context::new(rules, b"_", b"web1");
//! let key = key::evaluate(&Expression::parse(b"$host$uri:$arg_id").map_err(|e| e.to_string())?, &parsed, &ctx)?;
//! assert_eq!(key, b"shop.example/b:7");
//! let err = key::evaluate(&Expression::parse(b"$request_id").map_err(|e| e.to_string())?, &parsed, &ctx).unwrap_err();
//! assert!(err.to_string().starts_with("variable \"$request_id\" is not modelled"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod address;
mod lines;

use crate::config::expression::{Expression, Part};
use crate::config::maps::{Lookup, Map};
use crate::regex::{Captures, MatchError, Regex};
use crate::request::Parsed;
use crate::version::KeyRules;
use std::net::SocketAddr;

/// The http variables modelled (a name ending in `_` stands for the prefix: `arg_NAME`, …).
pub const HTTP_VARIABLES: &[&str] = &[
    "args",
    "arg_",
    "binary_remote_addr",
    "content_type",
    "cookie_",
    "document_uri",
    "host",
    "hostname",
    "http_",
    "is_args",
    "query_string",
    "remote_addr",
    "remote_port",
    "request",
    "request_method",
    "request_uri",
    "scheme",
    "server_addr",
    "server_name",
    "server_port",
    "uri",
];

/// The stream variables modelled.
pub const STREAM_VARIABLES: &[&str] =
    &["binary_remote_addr", "hostname", "remote_addr", "remote_port", "server_addr", "server_port"];

/// `http { }` or `stream { }`: which variables exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Module {
    /// The http module.
    Http,
    /// The stream module.
    Stream,
}

/// Why a key cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A variable this crate does not model.
    #[error("variable \"${name}\" is not modelled (modelled {}: {})", module_name(*.module), modelled(*.module))]
    Unmodelled {
        /// Its name.
        name: String,
        /// Where it was used.
        module: Module,
    },
    /// `$1`…`$9` in a stream key (the stream module's regular expressions are not modelled).
    #[error("capture \"${0}\" is not set here (no regular expression with captures matched)")]
    NoCapture(u8),
    /// A regular expression could not be run (no `pcre2` feature, or PCRE2 gave up).
    #[error(transparent)]
    Regex(#[from] MatchError),
    /// A value reads `$N` before a variable whose `map` ran a regular expression that changed `$N`'s
    /// length: nginx computes the length and the bytes of a value in two passes
    /// (`ngx_http_complex_value`) and would copy the new capture into a buffer sized for the old one.
    #[error(
        "capture \"${0}\" changes while the value is computed (a map's regular expression after it): nginx's result is undefined"
    )]
    CaptureChanged(u8),
}

/// How deep variable reads may nest while a value is computed (`ngx_http_variable_depth`,
/// src/http/ngx_http_variables.c, since 1.11.8): a map's source and value count. A read deeper than this
/// (a `map` that reads itself, say) logs `cycle while evaluating variable "…"` and gives nothing.
pub const MAX_VARIABLE_DEPTH: u32 = 100;

/// The http variables nginx computes afresh for each complex value that reads them
/// (`NGX_HTTP_VAR_NOCACHEABLE`, src/http/ngx_http_variables.c); `arg_` stands for every `$arg_NAME`.
const NOT_CACHED: &[&str] = &["uri", "document_uri", "args", "query_string", "is_args", "request_method", "arg_"];

fn module_name(m: Module) -> &'static str {
    match m {
        Module::Http => "http variables",
        Module::Stream => "stream variables",
    }
}

fn modelled(m: Module) -> String {
    let list = match m {
        Module::Http => HTTP_VARIABLES,
        Module::Stream => STREAM_VARIABLES,
    };
    list.iter()
        .map(|v| if v.ends_with('_') { format!("${v}NAME") } else { format!("${v}") })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A variable of the http module that is modelled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Variable {
    /// `$request_uri`.
    RequestUri,
    /// `$uri` (and `$document_uri`).
    Uri,
    /// `$args` (and `$query_string`).
    Args,
    /// `$is_args`.
    IsArgs,
    /// `$arg_NAME`.
    Arg(Vec<u8>),
    /// `$cookie_NAME`.
    Cookie(Vec<u8>),
    /// `$http_NAME`.
    Http(Vec<u8>),
    /// `$content_type`.
    ContentType,
    /// `$host`.
    Host,
    /// `$hostname`.
    Hostname,
    /// `$remote_addr`.
    RemoteAddr,
    /// `$binary_remote_addr`.
    BinaryRemoteAddr,
    /// `$remote_port`.
    RemotePort,
    /// `$server_addr`.
    ServerAddr,
    /// `$server_port`.
    ServerPort,
    /// `$server_name`.
    ServerName,
    /// `$scheme`.
    Scheme,
    /// `$request_method`.
    RequestMethod,
    /// `$request`.
    Request,
}

impl Variable {
    /// The http variable `name` (lower-case, without `$`).
    ///
    /// # Errors
    ///
    /// [`KeyError::Unmodelled`] naming it.
    pub fn http(name: &str) -> Result<Variable, KeyError> {
        let prefixed = |p: &str| name.strip_prefix(p).map(|rest| rest.as_bytes().to_vec());
        Ok(match name {
            "request_uri" => Variable::RequestUri,
            "uri" | "document_uri" => Variable::Uri,
            "args" | "query_string" => Variable::Args,
            "is_args" => Variable::IsArgs,
            "content_type" => Variable::ContentType,
            "host" => Variable::Host,
            "hostname" => Variable::Hostname,
            "remote_addr" => Variable::RemoteAddr,
            "binary_remote_addr" => Variable::BinaryRemoteAddr,
            "remote_port" => Variable::RemotePort,
            "server_addr" => Variable::ServerAddr,
            "server_port" => Variable::ServerPort,
            "server_name" => Variable::ServerName,
            "scheme" => Variable::Scheme,
            "request_method" => Variable::RequestMethod,
            "request" => Variable::Request,
            _ => {
                if let Some(n) = prefixed("arg_") {
                    Variable::Arg(n)
                } else if let Some(n) = prefixed("cookie_") {
                    Variable::Cookie(n)
                } else if let Some(n) = prefixed("http_") {
                    Variable::Http(n)
                } else {
                    return Err(KeyError::Unmodelled { name: name.to_string(), module: Module::Http });
                }
            }
        })
    }
}

/// What a key needs besides the request: the release's rules, the chosen server's first `server_name`
/// (`$server_name`, and `$host` without a host in the request), the machine's host name (`$hostname`),
/// the captures of the last regular expression that matched, and the values of variables the
/// configuration defines (`set`, `map`).
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// The release's rules.
    pub rules: KeyRules,
    /// The chosen server's first `server_name` (empty if it has none).
    pub server_name: &'a [u8],
    /// The machine's host name, lower-cased as nginx keeps it.
    pub hostname: &'a [u8],
    /// What the last regular expression that matched left (none: `$1`… are empty).
    pub captures: Captures,
    /// Values of configuration-defined variables, already computed: `(name, value)`.
    pub defined: Vec<(String, Vec<u8>)>,
    /// The configuration's `map` blocks ([`crate::config::Config::maps`]); the last one defining a
    /// variable is the one nginx uses.
    pub maps: &'a [Map],
    /// Variables the configuration's `set` directives define: empty until a `set` on the request's path
    /// gives them a value (`ngx_http_rewrite_var`: "using uninitialized variable").
    pub set_variables: &'a [String],
}

impl<'a> Context<'a> {
    /// A context with no captures and no defined variables.
    pub fn new(rules: KeyRules, server_name: &'a [u8], hostname: &'a [u8]) -> Context<'a> {
        Context {
            rules,
            server_name,
            hostname,
            captures: Captures::default(),
            defined: Vec::new(),
            maps: &[],
            set_variables: &[],
        }
    }
}

/// The bytes of `expr` for `request`.
///
/// # Errors
///
/// [`KeyError`]: a variable not modelled, a regular expression that cannot run (no `pcre2` feature, a
/// match limit), or a capture that changes while the value is computed.
pub fn evaluate(expr: &Expression, request: &Parsed<'_>, ctx: &Context<'_>) -> Result<Vec<u8>, KeyError> {
    Evaluation::new(request, ctx).evaluate(expr)
}

/// One request's variables as nginx keeps them (`r->variables`): a value, once computed (or `set`), is
/// reused by later reads unless the variable is not cacheable. [`evaluate`] is one expression on a fresh
/// request; the rewrite directives of a request's server and location ([`Evaluation::set`]) and then its
/// key share one.
#[derive(Debug)]
pub struct Evaluation<'e, 'r> {
    request: &'e Parsed<'r>,
    ctx: &'e Context<'e>,
    cache: Vec<(String, Vec<u8>)>,
    captures: Captures,
}

impl<'e, 'r> Evaluation<'e, 'r> {
    /// A request with nothing computed yet.
    pub fn new(request: &'e Parsed<'r>, ctx: &'e Context<'e>) -> Evaluation<'e, 'r> {
        Evaluation { request, ctx, cache: Vec::new(), captures: ctx.captures.clone() }
    }

    /// `ngx_http_regex_exec` (src/http/ngx_http_variables.c): runs `re` on `subject`; on a match the
    /// captures `$1`… become its groups and each named group's variable its text.
    ///
    /// # Errors
    ///
    /// [`KeyError::Regex`] when the expression cannot be run.
    pub fn exec(&mut self, re: &Regex, subject: &[u8]) -> Result<bool, KeyError> {
        if !re.exec(subject, &mut self.captures)? {
            return Ok(false);
        }
        for (name, _) in re.names() {
            let v = self.captures.named(name).unwrap_or_default().to_vec();
            self.set(&name.to_ascii_lowercase(), v);
        }
        Ok(true)
    }

    /// The bytes of `expr` (`ngx_http_complex_value`).
    ///
    /// # Errors
    ///
    /// As [`evaluate`].
    pub fn evaluate(&mut self, expr: &Expression) -> Result<Vec<u8>, KeyError> {
        let mut out = Vec::new();
        self.complex(expr, MAX_VARIABLE_DEPTH, &mut out)?;
        Ok(out)
    }

    /// As [`Evaluation::evaluate`], each part of `expr` with the bytes it adds (their concatenation is
    /// the value): how a key was built.
    ///
    /// # Errors
    ///
    /// As [`evaluate`].
    pub fn evaluate_parts(&mut self, expr: &Expression) -> Result<Vec<(Part, Vec<u8>)>, KeyError> {
        let values = self.parts(expr, MAX_VARIABLE_DEPTH)?;
        Ok(expr.parts().iter().cloned().zip(values).collect())
    }

    /// `set $name value` (`ngx_http_script_set_var_code`): later reads of `name` give `value`.
    pub fn set(&mut self, name: &str, value: Vec<u8>) {
        self.cache.retain(|(n, _)| n != name);
        self.cache.push((name.to_string(), value));
    }
}

impl<'e> Evaluation<'e, '_> {
    /// `ngx_http_complex_value` (src/http/ngx_http_script.c): the expression's non-cacheable variables
    /// are flushed, then each part appended; `depth` is how many variable reads may still nest.
    fn complex(&mut self, expr: &Expression, depth: u32, out: &mut Vec<u8>) -> Result<(), KeyError> {
        for v in self.parts(expr, depth)? {
            out.extend_from_slice(&v);
        }
        Ok(())
    }

    /// Each part's bytes. As `ngx_http_complex_value` does: the length pass reads every variable in
    /// order (computing and caching it: a `map` may run a regular expression and change the captures),
    /// then the value pass copies the cached values and the captures as they are at its end.
    fn parts(&mut self, expr: &Expression, depth: u32) -> Result<Vec<Vec<u8>>, KeyError> {
        self.flush(expr);
        let mut out = Vec::with_capacity(expr.parts().len());
        let mut lengths = Vec::new();
        for part in expr.parts() {
            match part {
                Part::Literal(b) => out.push(b.clone()),
                Part::Capture(n) => {
                    lengths.push(self.captures.group(*n).len());
                    out.push(Vec::new());
                }
                Part::Variable(name) => out.push(self.read(name, depth)?),
            }
        }
        let mut lengths = lengths.into_iter();
        for (part, v) in expr.parts().iter().zip(&mut out) {
            if let Part::Capture(n) = part {
                let now = self.captures.group(*n);
                if Some(now.len()) != lengths.next() {
                    return Err(KeyError::CaptureChanged(*n));
                }
                v.extend_from_slice(now);
            }
        }
        Ok(out)
    }

    /// `ngx_http_script_flush_complex_value`: the expression's non-cacheable variables are forgotten.
    fn flush(&mut self, expr: &Expression) {
        for name in expr.variables() {
            if !self.cacheable(name) {
                self.cache.retain(|(n, _)| n != name);
            }
        }
    }

    fn map(&self, name: &str) -> Option<&'e Map> {
        let maps: &'e [Map] = self.ctx.maps;
        maps.iter().rev().find(|m| m.variable == name)
    }

    fn cacheable(&self, name: &str) -> bool {
        match self.map(name) {
            Some(m) => !m.volatile,
            None => !NOT_CACHED.iter().any(|n| name == *n || (n.ends_with('_') && name.starts_with(n))),
        }
    }

    /// `ngx_http_get_indexed_variable`: the cached value, else nothing at the depth limit, else computed.
    fn read(&mut self, name: &str, depth: u32) -> Result<Vec<u8>, KeyError> {
        if let Some((_, v)) = self.ctx.defined.iter().find(|(n, _)| n == name) {
            return Ok(v.clone());
        }
        if let Some((_, v)) = self.cache.iter().find(|(n, _)| n == name) {
            return Ok(v.clone());
        }
        let builtin = match self.map(name) {
            Some(_) => None,
            None if self.ctx.set_variables.iter().any(|v| v == name) => return Ok(Vec::new()),
            // A named capture no match has set yet (`ngx_http_variable_not_found`).
            None if self.ctx.maps.iter().any(|m| {
                m.regexes.iter().any(|(r, _)| r.names().iter().any(|(n, _)| n.eq_ignore_ascii_case(name)))
            }) =>
            {
                return Ok(Vec::new());
            }
            None => Some(Variable::http(name)?),
        };
        if depth == 0 {
            return Ok(Vec::new());
        }
        let mut v = Vec::new();
        match (builtin, self.map(name)) {
            (Some(var), _) => value(&var, self.request, self.ctx, &mut v),
            (None, Some(map)) => self.map_value(map, depth - 1, &mut v)?,
            (None, None) => unreachable!("a variable is a map's or a built-in one"),
        }
        self.cache.retain(|(n, _)| n != name);
        self.cache.push((name.to_string(), v.clone()));
        Ok(v)
    }

    /// `ngx_http_map_variable` (src/http/modules/ngx_http_map_module.c): the source computed, looked up,
    /// the value found computed in turn.
    fn map_value(&mut self, map: &Map, depth: u32, out: &mut Vec<u8>) -> Result<(), KeyError> {
        let mut source = Vec::new();
        self.complex(&map.source, depth, &mut source)?;
        let found = match map.lookup(&source) {
            Lookup::Regexes(value) => {
                // ngx_http_map_find: the regular expressions in order, the first match's value.
                let value = value.to_vec();
                let mut found = None;
                for (re, v) in &map.regexes {
                    if self.exec(re, &value)? {
                        found = Some(Lookup::Value(v));
                        break;
                    }
                }
                found.unwrap_or_else(|| map.fallback())
            }
            other => other,
        };
        match found {
            Lookup::Value(v) => self.complex(v, depth, out),
            _ => Ok(()),
        }
    }
}

/// Appends the value of one modelled variable (nothing when nginx finds none).
pub fn value(var: &Variable, r: &Parsed<'_>, ctx: &Context<'_>, out: &mut Vec<u8>) {
    let req = r.request();
    match var {
        Variable::RequestUri => out.extend_from_slice(r.request_uri()),
        Variable::Uri => out.extend_from_slice(r.uri()),
        Variable::Args => out.extend_from_slice(r.args()),
        Variable::IsArgs => {
            if !r.args().is_empty() {
                out.push(b'?');
            }
        }
        Variable::Arg(name) => {
            if let Some(v) = lines::arg(r.args(), name) {
                out.extend_from_slice(v);
            }
        }
        Variable::Cookie(name) => lines::cookie(r, name, ctx.rules, out),
        Variable::Http(name) => lines::http(r, name, ctx.rules, out),
        Variable::ContentType => lines::known(r, b"content-type", ctx.rules, out),
        Variable::Host => out.extend_from_slice(r.host().unwrap_or(ctx.server_name)),
        Variable::Hostname => out.extend_from_slice(ctx.hostname),
        Variable::RemoteAddr => out.extend_from_slice(address::text(req.client().ip()).as_bytes()),
        Variable::BinaryRemoteAddr => address::binary(req.client().ip(), out),
        Variable::RemotePort => out.extend_from_slice(req.client().port().to_string().as_bytes()),
        Variable::ServerAddr => out.extend_from_slice(address::text(req.server().ip()).as_bytes()),
        Variable::ServerPort => out.extend_from_slice(req.server().port().to_string().as_bytes()),
        Variable::ServerName => out.extend_from_slice(ctx.server_name),
        Variable::Scheme => out.extend_from_slice(req.scheme().as_str().as_bytes()),
        Variable::RequestMethod => out.extend_from_slice(r.method()),
        Variable::Request => out.extend_from_slice(req.line()),
    }
}

/// A stream connection: the client's and the server's address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// The client.
    pub client: SocketAddr,
    /// The address the connection arrived on.
    pub server: SocketAddr,
}

/// The bytes of `expr` for a stream connection (`src/stream/ngx_stream_variables.c`, same handlers as
/// http's for these variables); `hostname` is the machine's host name.
///
/// # Errors
///
/// [`KeyError::Unmodelled`] for any variable but [`STREAM_VARIABLES`]; [`KeyError::NoCapture`].
pub fn evaluate_stream(expr: &Expression, conn: &Connection, hostname: &[u8]) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::new();
    for part in expr.parts() {
        match part {
            Part::Literal(b) => out.extend_from_slice(b),
            Part::Capture(n) => return Err(KeyError::NoCapture(*n)),
            Part::Variable(name) => match name.as_str() {
                "remote_addr" => out.extend_from_slice(address::text(conn.client.ip()).as_bytes()),
                "binary_remote_addr" => address::binary(conn.client.ip(), &mut out),
                "remote_port" => out.extend_from_slice(conn.client.port().to_string().as_bytes()),
                "server_addr" => out.extend_from_slice(address::text(conn.server.ip()).as_bytes()),
                "server_port" => out.extend_from_slice(conn.server.port().to_string().as_bytes()),
                "hostname" => out.extend_from_slice(hostname),
                _ => return Err(KeyError::Unmodelled { name: name.clone(), module: Module::Stream }),
            },
        }
    }
    Ok(out)
}

/// The machine's host name as nginx keeps it (`gethostname`, lower-cased: `ngx_init_cycle` in
/// src/core/ngx_cycle.c).
pub fn local_hostname() -> Vec<u8> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is passed.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Vec::new();
    }
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    buf[..end].to_ascii_lowercase()
}
