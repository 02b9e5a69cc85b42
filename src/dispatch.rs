//! Which upstream a request reaches, and the key it is hashed by — or where it goes instead (algorithm
//! §12.7): the server block chosen by address and name (`ngx_http_find_virtual_server`,
//! src/http/ngx_http_request.c), the location chosen by `ngx_http_core_find_location`
//! (src/http/ngx_http_core_module.c), the location's `proxy_pass` upstream and its `hash` expression
//! evaluated with [`key::evaluate`].
//!
//! # Example
//!
//! ```
//! use nginx_ketama::config::{Config, LoadOptions};
//! use nginx_ketama::dispatch::{dispatch, Dispatch};
//! use nginx_ketama::request::Request;
//!
//! let conf = Config::parse_str(
//!     "upstream app { hash $host$uri consistent; server 10.0.0.1; }
//!      server { listen 80; server_name shop.example;
//!               location / { proxy_pass http://app; }
//!               location = /health { return 204; } }",
//!     "x.conf",
//!     &LoadOptions { resolve: false, ..LoadOptions::fragment() },
//! )?;
//! let req = Request::builder("GET", "/a/../cart").header("Host", "Shop.Example").build();
//! let Dispatch::Hash { upstream, key, .. } = dispatch(&conf, &req)? else { panic!("not hashed") };
//! assert_eq!((upstream.as_str(), key.as_slice()), ("app", &b"shop.example/cart"[..]));
//! let health = Request::builder("GET", "/health").header("Host", "x").build();
//! assert_eq!(dispatch(&conf, &health)?, Dispatch::Return { status: 204 });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::config::Location;
use crate::config::expression::{Expression, Part};
use crate::config::hostnames::{self, NamePattern};
use crate::config::sites::{Handler, LocationBlock, Match, Rewrite, Site};
use crate::config::{Balancer, Config, Context as UpstreamContext, Retry};
use crate::failure::RetryPolicy;
use crate::key::{self, KeyError};
use crate::regex::Regex;
use crate::request::{BadRequest, Request};
use std::net::SocketAddr;

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dispatch {
    /// To a `hash` upstream, hashed by `key`, under the retry rules of the `proxy_pass` that sends it.
    Hash {
        /// The upstream's name.
        upstream: String,
        /// The bytes nginx hashes.
        key: Vec<u8>,
        /// The location's `proxy_next_upstream`, `_tries` and `_timeout`, as inherited (algorithm §5.1): the
        /// same rules [`Config::proxied`] lists for that `proxy_pass`.
        retry: RetryPolicy,
    },
    /// nginx refuses the request before any location runs.
    BadRequest(BadRequest),
    /// No `server` listens on the address the request arrived on.
    NoServer(SocketAddr),
    /// A `return` answers it.
    Return {
        /// The status.
        status: u16,
    },
    /// To an upstream that does not use `hash`.
    NotHash {
        /// The upstream's name.
        upstream: String,
    },
    /// `proxy_pass` to an address that is not an upstream block.
    Proxy {
        /// The URL as written.
        url: String,
    },
    /// No location matches (nginx answers 404).
    NoLocation,
    /// The location serves it itself (files or another content handler): no upstream.
    NoProxy,
}

/// Why a request's destination cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DispatchError {
    /// Something on the request's path that this crate does not model, named.
    #[error("not modelled: {0}")]
    Unmodelled(String),
    /// The key cannot be computed.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// Where `request` goes under `config` (read for the release it names).
///
/// # Errors
///
/// [`DispatchError::Unmodelled`] naming what is not modelled on the way (`if`, `rewrite`, `proxy_pass` with
/// variables); [`DispatchError::Key`] for a key variable not modelled, or a regular expression that cannot
/// run (without the `pcre2` feature, or past PCRE2's match limit).
pub fn dispatch(config: &Config, request: &Request) -> Result<Dispatch, DispatchError> {
    Dispatcher::new(config).dispatch(request)
}

/// How a request was dispatched: the server block and location chosen, and for a hash upstream each part
/// of its key expression with the bytes it added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// The `server` block chosen (where it is written), once one is.
    pub server: Option<Location>,
    /// The `location` chosen, once one is.
    pub location: Option<Location>,
    /// The key expression's parts and the bytes each added, for [`Dispatch::Hash`].
    pub key_parts: Vec<(Part, Vec<u8>)>,
    /// For [`Dispatch::Return`] of `return CODE TEXT`: the text nginx sends, computed as the key would be
    /// (the key vectors record keys as such texts).
    pub return_text: Option<Vec<u8>>,
}

/// As [`dispatch`], with the [`Trace`] of how the request got there.
///
/// # Errors
///
/// As [`dispatch`].
pub fn trace(config: &Config, request: &Request) -> Result<(Dispatch, Trace), DispatchError> {
    Dispatcher::new(config).trace(request)
}

/// [`dispatch`] for many requests under one configuration: what does not depend on the request (the
/// machine's host name, the variables `set` defines, each upstream's parsed key) is worked out once.
#[derive(Debug)]
pub struct Dispatcher<'c> {
    config: &'c Config,
    hostname: Vec<u8>,
    set_variables: Vec<String>,
    /// Each upstream's key expression, parsed (`None` for other balancers), in `config.upstreams` order.
    keys: Vec<Option<Result<Expression, String>>>,
    wrong: Option<WrongRule>,
}

/// A rule of nginx's routing deliberately modelled wrong, for the tests that show the key vectors catch
/// such a change. Not API.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrongRule {
    /// Regular-expression locations tried before the exact and prefix locations.
    RegexLocationsFirst,
    /// Regular-expression server names tried before the exact and wildcard names.
    RegexNamesFirst,
    /// `location ~*` matched case-sensitively.
    CaselessIgnored,
}

impl<'c> Dispatcher<'c> {
    /// Prepares to dispatch requests under `config`.
    pub fn new(config: &'c Config) -> Dispatcher<'c> {
        let keys = config
            .upstreams
            .iter()
            .map(|u| match &u.balancer {
                Balancer::Hash { key, .. } => Some(Expression::parse(key.as_bytes()).map_err(|e| e.to_string())),
                _ => None,
            })
            .collect();
        Dispatcher {
            config,
            hostname: key::local_hostname(),
            wrong: None,
            set_variables: defined_variables(config),
            keys,
        }
    }

    /// The same dispatcher with one rule modelled wrong (for tests). Not API.
    #[doc(hidden)]
    pub fn with_wrong_rule(mut self, rule: WrongRule) -> Dispatcher<'c> {
        self.wrong = Some(rule);
        self
    }

    /// Where `request` goes.
    ///
    /// # Errors
    ///
    /// As [`dispatch`].
    pub fn dispatch(&self, request: &Request) -> Result<Dispatch, DispatchError> {
        dispatch_into(self, request, None)
    }

    /// Where `request` goes, and how.
    ///
    /// # Errors
    ///
    /// As [`dispatch`].
    pub fn trace(&self, request: &Request) -> Result<(Dispatch, Trace), DispatchError> {
        let mut trace = Trace::default();
        let d = dispatch_into(self, request, Some(&mut trace))?;
        Ok((d, trace))
    }
}

/// Where `request` goes; with `trace`, how (the key built part by part).
fn dispatch_into(
    d: &Dispatcher<'_>,
    request: &Request,
    mut trace: Option<&mut Trace>,
) -> Result<Dispatch, DispatchError> {
    let config = d.config;
    let rules = config.version().key_rules();
    let candidates = listeners(config.sites(), request.server());
    let Some(default) = default_site(&candidates) else { return Ok(Dispatch::NoServer(request.server())) };
    let parsed = match request.parse_as(rules, default.merge_slashes) {
        Ok(p) => p,
        Err(bad) => return Ok(Dispatch::BadRequest(bad)),
    };
    let (site, by_regex) = match parsed.host() {
        Some(host) => by_name(&candidates, host, d.wrong == Some(WrongRule::RegexNamesFirst))?
            .map_or((default, None), |(s, re)| (s, re.map(|r| (r, host)))),
        None => (default, None),
    };
    if let Some(t) = trace.as_deref_mut() {
        t.server = Some(site.at.clone());
    }
    let ctx = key::Context {
        maps: config.maps(),
        set_variables: &d.set_variables,
        ..key::Context::new(rules, site.server_name(), &d.hostname)
    };
    let mut eval = key::Evaluation::new(&parsed, &ctx);
    // The server_name regular expression that chose the server leaves its captures
    // (ngx_http_find_virtual_server runs ngx_http_regex_exec on the request).
    if let Some((re, host)) = by_regex {
        eval.exec(re, host)?;
    }
    // NGX_HTTP_SERVER_REWRITE_PHASE, then the location's NGX_HTTP_REWRITE_PHASE.
    if let Some((status, text)) = rewrite(&site.rewrites, &mut eval)? {
        return returned(status, text, &mut eval, trace);
    }
    let location = match find_location(&site.locations, parsed.uri(), &mut eval, d.wrong)? {
        Found::Final(l) | Found::Prefix(l) => l,
        Found::None => return Ok(Dispatch::NoLocation),
    };
    if let Some(t) = trace.as_deref_mut() {
        t.location = Some(location.at.clone());
    }
    if let Some((status, text)) = rewrite(&location.rewrites, &mut eval)? {
        return returned(status, text, &mut eval, trace);
    }
    let (url, pass) = match &location.handler {
        Handler::Other => return Ok(Dispatch::NoProxy),
        Handler::ProxyPass { url, at } => (url, at),
    };
    if url.contains(&b'$') {
        return Err(DispatchError::Unmodelled(format!(
            "proxy_pass with variables (\"{}\")",
            String::from_utf8_lossy(url)
        )));
    }
    let rest = strip_scheme(url);
    let host_end = rest.iter().position(|&c| c == b'/').unwrap_or(rest.len());
    let name = &rest[..host_end];
    let up = config
        .upstreams
        .iter()
        .position(|u| u.context == UpstreamContext::Http && u.name.as_bytes().eq_ignore_ascii_case(name));
    let Some(i) = up else { return Ok(Dispatch::Proxy { url: String::from_utf8_lossy(url).into_owned() }) };
    let up = &config.upstreams[i];
    let Some(expr) = &d.keys[i] else {
        return Ok(Dispatch::NotHash { upstream: up.name.clone() });
    };
    let expr = expr.as_ref().map_err(|e| DispatchError::Unmodelled(e.clone()))?;
    let key = match trace {
        Some(t) => {
            t.key_parts = eval.evaluate_parts(expr)?;
            t.key_parts.iter().flat_map(|(_, v)| v.iter().copied()).collect()
        }
        None => eval.evaluate(expr)?,
    };
    // Every proxy_pass to a hash upstream has its rules in `proxied` (the walk that read them also read
    // this location); the default is only reached by a configuration built by hand.
    let retry =
        config.proxied.iter().find(|p| p.location == *pass).map_or_else(RetryPolicy::default, |p| match p.retry {
            Retry::Http(policy) => policy,
            Retry::Stream(_) => RetryPolicy::default(),
        });
    Ok(Dispatch::Hash { upstream: up.name.clone(), key, retry })
}

/// The built-in variables a key expression reads in `config`: its own, and through the `map` blocks and
/// `set` values it reads, transitively (what a request must carry for its key to be computed).
pub fn needs(config: &Config, expr: &Expression) -> Vec<String> {
    let set_values = sets(config);
    let maps = config.maps();
    let captures = capture_names(config);
    let (mut seen, mut out) = (Vec::<String>::new(), Vec::new());
    let mut todo: Vec<String> = expr.variables().map(str::to_string).collect();
    while let Some(v) = todo.pop() {
        if seen.contains(&v) {
            continue;
        }
        seen.push(v.clone());
        let mut derived = false;
        if let Some(m) = maps.iter().rev().find(|m| m.variable == v) {
            let values =
                m.keys.iter().map(|(_, e)| e).chain(m.regexes.iter().map(|(_, e)| e)).chain(m.default.as_ref());
            todo.extend(m.source.variables().chain(values.flat_map(|e| e.variables())).map(str::to_string));
            derived = true;
        }
        for (_, value) in set_values.iter().filter(|(n, _)| *n == v) {
            if let Ok(e) = Expression::parse(value) {
                todo.extend(e.variables().map(str::to_string));
            }
            derived = true;
        }
        if !derived && !captures.contains(&v) {
            out.push(v);
        }
    }
    out.sort();
    out
}

/// The variables `config` defines that are empty until the request's path gives them a value: those of
/// its `set` directives and of the named captures of its regular expressions (for
/// [`key::Context::set_variables`]).
pub fn defined_variables(config: &Config) -> Vec<String> {
    sets(config).into_iter().map(|(name, _)| name.to_string()).chain(capture_names(config)).collect()
}

/// The variables the named captures of every regular expression of `config` define (lower-cased, as
/// nginx looks variables up): empty until a match sets them (`ngx_http_regex_compile` gives them
/// `ngx_http_variable_not_found`).
fn capture_names(config: &Config) -> Vec<String> {
    fn walk(locations: &[LocationBlock], out: &mut Vec<String>) {
        for l in locations {
            if let Match::Regex(re) = &l.matcher {
                out.extend(re.names().iter().map(|(n, _)| n.to_ascii_lowercase()));
            }
            walk(&l.nested, out);
        }
    }
    let mut out = Vec::new();
    for site in config.sites() {
        out.extend(site.regex_names.iter().flat_map(|r| r.names()).map(|(n, _)| n.to_ascii_lowercase()));
        walk(&site.locations, &mut out);
    }
    for m in config.maps() {
        out.extend(m.regexes.iter().flat_map(|(r, _)| r.names()).map(|(n, _)| n.to_ascii_lowercase()));
    }
    out
}

/// Every `set` of every server and location of `config`: the variable and its value as written.
fn sets(config: &Config) -> Vec<(&str, &[u8])> {
    fn walk<'a>(rewrites: &'a [Rewrite], locations: &'a [LocationBlock], out: &mut Vec<(&'a str, &'a [u8])>) {
        for r in rewrites {
            if let Rewrite::Set { variable, value } = r {
                out.push((variable, value));
            }
        }
        for l in locations {
            walk(&l.rewrites, &l.nested, out);
        }
    }
    let mut out = Vec::new();
    for site in config.sites() {
        walk(&site.rewrites, &site.locations, &mut out);
    }
    out
}

/// [`Dispatch::Return`]; with a trace, the text computed (`ngx_http_rewrite_return`,
/// src/http/modules/ngx_http_rewrite_module.c: `ngx_http_send_response` computes the complex value).
fn returned(
    status: u16,
    text: Option<&[u8]>,
    eval: &mut key::Evaluation<'_, '_>,
    trace: Option<&mut Trace>,
) -> Result<Dispatch, DispatchError> {
    if let (Some(t), Some(text)) = (trace, text) {
        let expr = Expression::parse(text).map_err(|e| DispatchError::Unmodelled(e.to_string()))?;
        t.return_text = Some(eval.evaluate(&expr)?);
    }
    Ok(Dispatch::Return { status })
}

/// A `return`'s status and text as written.
type Answered<'r> = (u16, Option<&'r [u8]>);

/// Runs one block's rewrite directives in order (`ngx_http_rewrite_handler`): `set` assigns, `return`
/// answers (its status and text), `break` stops; `rewrite` and `if` are refused by name.
fn rewrite<'r>(
    rewrites: &'r [Rewrite],
    eval: &mut key::Evaluation<'_, '_>,
) -> Result<Option<Answered<'r>>, DispatchError> {
    for r in rewrites {
        match r {
            Rewrite::Set { variable, value } => {
                if key::Variable::http(variable).is_ok() {
                    return Err(DispatchError::Unmodelled(format!("set of the built-in variable \"${variable}\"")));
                }
                let expr = Expression::parse(value).map_err(|e| DispatchError::Unmodelled(e.to_string()))?;
                let v = eval.evaluate(&expr)?;
                eval.set(variable, v);
            }
            Rewrite::Return { status, text } => return Ok(Some((*status, text.as_deref()))),
            Rewrite::Break => break,
            Rewrite::Unmodelled { directive, at } => {
                return Err(DispatchError::Unmodelled(format!("\"{directive}\" at {at} on the request's path")));
            }
        }
    }
    Ok(None)
}

fn strip_scheme(url: &[u8]) -> &[u8] {
    for s in [&b"http://"[..], b"https://"] {
        if url.len() >= s.len() && url[..s.len()].eq_ignore_ascii_case(s) {
            return &url[s.len()..];
        }
    }
    url
}

/// The servers that receive connections on `to`: those listening on its exact address if any
/// (nginx binds the specific address when one is configured), else those on the wildcard address, for
/// the port. A server without `listen` listens on `*:80`.
fn listeners(sites: &[Site], to: SocketAddr) -> Vec<(&Site, bool)> {
    let on = |s: &Site, exact: bool| -> Option<bool> {
        if s.listen.is_empty() {
            return (!exact && to.port() == 80).then_some(false);
        }
        s.listen
            .iter()
            .find(|l| l.port == to.port() && if exact { l.addr == Some(to.ip()) } else { l.addr.is_none() })
            .map(|l| l.default_server)
    };
    let exact: Vec<(&Site, bool)> = sites.iter().filter_map(|s| on(s, true).map(|d| (s, d))).collect();
    if !exact.is_empty() {
        return exact;
    }
    sites.iter().filter_map(|s| on(s, false).map(|d| (s, d))).collect()
}

/// The `default_server` of the address, else its first server (`ngx_http_add_addresses`).
fn default_site<'a>(candidates: &[(&'a Site, bool)]) -> Option<&'a Site> {
    candidates.iter().find(|(_, d)| *d).or(candidates.first()).map(|(s, _)| *s)
}

/// `ngx_http_find_virtual_server` (src/http/ngx_http_request.c, all modelled releases; via
/// `ngx_hash_find_combined`): an exact name, then the longest leading wildcard (`*.example.com`,
/// `.example.com`), then the longest trailing wildcard (`www.example.*`) ([`hostnames::find`]), then the
/// regular expressions of the address's servers in order (`ngx_http_server_names` keeps them in the order
/// of the servers and their names), run on the lower-cased host; with the one that matched.
fn by_name<'a>(
    candidates: &[(&'a Site, bool)],
    host: &[u8],
    regex_first: bool,
) -> Result<Option<(&'a Site, Option<&'a Regex>)>, DispatchError> {
    if regex_first && let Some(found) = by_regex(candidates, host)? {
        return Ok(Some(found));
    }
    let patterns: Vec<(NamePattern, &'a Site)> = candidates
        .iter()
        .flat_map(|(s, _)| s.names.iter().map(move |n| (*s, n)))
        .filter(|(_, n)| !n.starts_with(b"~"))
        .filter_map(|(s, n)| NamePattern::wildcard(n).ok().map(|p| (p, s)))
        .collect();
    if let Some(site) = hostnames::find(patterns.iter().map(|(p, s)| (p, *s)), host) {
        return Ok(Some((site, None)));
    }
    by_regex(candidates, host)
}

/// The first server whose regular-expression name matches `host` (none for an empty host).
fn by_regex<'a>(
    candidates: &[(&'a Site, bool)],
    host: &[u8],
) -> Result<Option<(&'a Site, Option<&'a Regex>)>, DispatchError> {
    if host.is_empty() {
        return Ok(None);
    }
    let mut scratch = crate::regex::Captures::default();
    for (site, _) in candidates {
        for re in &site.regex_names {
            if re.exec(host, &mut scratch).map_err(KeyError::from)? {
                return Ok(Some((*site, Some(re))));
            }
        }
    }
    Ok(None)
}

/// What `ngx_http_core_find_location` returns: a final choice (`NGX_OK`: an exact match or a regular
/// expression), the longest prefix (`NGX_AGAIN`), or nothing (`NGX_DECLINED`).
#[derive(Debug, Clone, Copy)]
enum Found<'a> {
    Final(&'a LocationBlock),
    Prefix(&'a LocationBlock),
    None,
}

/// `ngx_http_core_find_location` (src/http/ngx_http_core_module.c, all modelled releases): the static
/// locations first (`ngx_http_core_find_static_location`: an exact match is final, else the longest
/// prefix); a longest prefix's nested locations are searched in turn (a final choice there is final, a
/// prefix there replaces it); then, unless the longest prefix of this level has `^~`, this level's
/// regular expressions in the order written (`ngx_http_cmp_locations` sorts them after the others and
/// keeps their order), run on the normalised URI: the first that matches is final, after its own nested
/// locations are searched; else the prefix stands.
fn find_location<'a>(
    locations: &'a [LocationBlock],
    uri: &[u8],
    eval: &mut key::Evaluation<'_, '_>,
    wrong: Option<WrongRule>,
) -> Result<Found<'a>, DispatchError> {
    if wrong == Some(WrongRule::RegexLocationsFirst)
        && let Some(found) = by_regex_location(locations, uri, eval, wrong)?
    {
        return Ok(found);
    }
    let mut best: Option<&LocationBlock> = None;
    for l in locations {
        match &l.matcher {
            Match::Exact(p) if p == uri => return Ok(Found::Final(l)),
            Match::Prefix(p) | Match::PrefixNoRegex(p)
                if uri.starts_with(p) && best.is_none_or(|b| prefix_len(b) < p.len()) =>
            {
                best = Some(l);
            }
            _ => {}
        }
    }
    let mut found = best.map_or(Found::None, Found::Prefix);
    if let Some(b) = best {
        match find_location(&b.nested, uri, eval, wrong)? {
            Found::Final(inner) => return Ok(Found::Final(inner)),
            Found::Prefix(inner) => found = Found::Prefix(inner),
            Found::None => {}
        }
    }
    if best.is_some_and(|b| matches!(b.matcher, Match::PrefixNoRegex(_))) {
        return Ok(found);
    }
    Ok(by_regex_location(locations, uri, eval, wrong)?.unwrap_or(found))
}

/// The first regular-expression location of `locations` that matches `uri`, after its own nested
/// locations are searched.
fn by_regex_location<'a>(
    locations: &'a [LocationBlock],
    uri: &[u8],
    eval: &mut key::Evaluation<'_, '_>,
    wrong: Option<WrongRule>,
) -> Result<Option<Found<'a>>, DispatchError> {
    for l in locations {
        let Match::Regex(re) = &l.matcher else { continue };
        let matched = if wrong == Some(WrongRule::CaselessIgnored) && re.caseless() {
            let strict = Regex::compile(re.pattern(), false, crate::NginxVersion::LATEST)
                .map_err(|e| DispatchError::Unmodelled(e.0))?;
            eval.exec(&strict, uri)?
        } else {
            eval.exec(re, uri)?
        };
        if matched {
            return Ok(Some(match find_location(&l.nested, uri, eval, wrong)? {
                Found::Final(inner) | Found::Prefix(inner) => Found::Final(inner),
                Found::None => Found::Final(l),
            }));
        }
    }
    Ok(None)
}

fn prefix_len(l: &LocationBlock) -> usize {
    match &l.matcher {
        Match::Prefix(p) | Match::PrefixNoRegex(p) => p.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadOptions;

    fn refusal(server_body: &str) -> String {
        let text = format!(
            "upstream u {{ hash $uri consistent; server 10.0.0.1; }}\nserver {{ listen 80; {server_body} location / {{ proxy_pass http://u; }} }}"
        );
        let conf = Config::parse_str(&text, "x.conf", &LoadOptions { resolve: false, ..LoadOptions::fragment() })
            .expect("the configuration reads");
        let req = Request::builder("GET", "/").header("Host", "x").build();
        dispatch(&conf, &req).expect_err("refused").to_string()
    }

    fn conf(text: &str) -> Result<Config, String> {
        Config::parse_str(text, "x.conf", &LoadOptions { resolve: false, ..LoadOptions::fragment() })
            .map_err(|e| e.to_string())
    }

    #[cfg(feature = "pcre2")]
    #[test]
    fn invalid_regexes_are_refused_with_nginx_wording_and_line() {
        for (text, want) in [
            ("server {\n location ~ ^/(a { }\n}", "pcre2_compile() failed: missing closing parenthesis in \"^/(a\""),
            (
                "server { server_name a\n ~a)b; }",
                "pcre2_compile() failed: unmatched closing parenthesis in \"a)b\" at \")b\"",
            ),
            ("server { server_name ~; }", "empty regex in server name \"~\""),
            (
                "map $uri $m {\n ~*[z-a] 1; }",
                "pcre2_compile() failed: range out of order in character class in \"[z-a]\" at \"a]\"",
            ),
        ] {
            let err = conf(text).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
            let line = if text.contains('\n') { "x.conf:2" } else { "x.conf:1" };
            assert!(err.contains(line), "{text}: {err} (want {line})");
        }
    }

    #[test]
    fn a_hashed_request_carries_its_locations_retry_rules_as_inherited() {
        let c = conf(
            "upstream u { hash $uri consistent; server 10.0.0.1; server 10.0.0.2; }\n\
             proxy_next_upstream error http_502;\n\
             server { listen 80; proxy_next_upstream_tries 3;\n\
               location /a/ { proxy_pass http://u; }\n\
               location /b/ { proxy_next_upstream off; location /b/c/ { proxy_pass http://u; } }\n\
               location /d/ { proxy_next_upstream_timeout 2s; proxy_pass http://u; } }",
        )
        .expect("reads");
        let retry = |t: &str| match dispatch(&c, &Request::builder("GET", t).header("Host", "x").build()).unwrap() {
            Dispatch::Hash { retry, .. } => retry,
            other => panic!("{t}: {other:?}"),
        };
        let a = retry("/a/1");
        assert_eq!((a.next_upstream.to_string().as_str(), a.tries, a.timeout_ms), ("error http_502", 3, 0));
        let c_ = retry("/b/c/1");
        assert_eq!((c_.next_upstream.to_string().as_str(), c_.tries), ("off", 3), "nested: the parent's `off`");
        let d = retry("/d/1");
        assert_eq!((d.next_upstream.to_string().as_str(), d.tries, d.timeout_ms), ("error http_502", 3, 2000));
        // The same rules `Config::proxied` lists for each proxy_pass.
        let listed: Vec<_> = c.proxied.iter().map(|p| p.retry).collect();
        assert_eq!(listed, [a, c_, d].map(Retry::Http));
    }

    #[cfg(feature = "pcre2")]
    #[test]
    fn a_capture_read_before_a_map_changes_it_is_refused() {
        let c = conf(
            "upstream u { hash $1$m consistent; server 10.0.0.1; }\n\
             map $arg_a $m { ~^(..)$ x; }\n\
             server { listen 80; location ~ ^/(.)$ { proxy_pass http://u; } }",
        )
        .expect("reads");
        let req = |t: &str| Request::builder("GET", t).header("Host", "x").build();
        let Dispatch::Hash { upstream, key, .. } = dispatch(&c, &req("/a")).unwrap() else { panic!("not hashed") };
        assert_eq!((upstream.as_str(), key.as_slice()), ("u", &b"a"[..]));
        assert_eq!(
            dispatch(&c, &req("/a?a=bb")).unwrap_err(),
            DispatchError::Key(KeyError::CaptureChanged(1)),
            "nginx would copy two bytes into a one-byte slot"
        );
    }

    #[test]
    fn rewrite_directives_not_modelled_are_refused_by_name() {
        assert_eq!(refusal("if ($arg_a) { set $v 1; }"), "not modelled: \"if\" at x.conf:2 on the request's path");
        assert_eq!(refusal("rewrite ^ /b;"), "not modelled: \"rewrite\" at x.conf:2 on the request's path");
        assert_eq!(refusal("set $args a=1;"), "not modelled: set of the built-in variable \"$args\"");
    }
}
