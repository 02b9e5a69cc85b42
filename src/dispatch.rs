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
//! assert_eq!(dispatch(&conf, &req)?, Dispatch::Hash { upstream: "app".into(), key: b"shop.example/cart".to_vec() });
//! let health = Request::builder("GET", "/health").header("Host", "x").build();
//! assert_eq!(dispatch(&conf, &health)?, Dispatch::Return { status: 204 });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::config::Location;
use crate::config::expression::{Expression, Part};
use crate::config::hostnames::{self, NamePattern};
use crate::config::sites::{Handler, LocationBlock, Match, Rewrite, Site};
use crate::config::{Balancer, Config, Context as UpstreamContext};
use crate::key::{self, KeyError};
use crate::request::{BadRequest, Request};
use std::net::SocketAddr;

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dispatch {
    /// To a `hash` upstream, hashed by `key`.
    Hash {
        /// The upstream's name.
        upstream: String,
        /// The bytes nginx hashes.
        key: Vec<u8>,
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
/// [`DispatchError::Unmodelled`] naming what is not modelled on the way (a regular-expression location or
/// server name, `proxy_pass` with variables); [`DispatchError::Key`] for a key variable not modelled.
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
            set_variables: sets(config).into_iter().map(|(name, _)| name.to_string()).collect(),
            keys,
        }
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
    let site = match parsed.host() {
        Some(host) => by_name(&candidates, host)?.unwrap_or(default),
        None => default,
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
    // NGX_HTTP_SERVER_REWRITE_PHASE, then the location's NGX_HTTP_REWRITE_PHASE.
    if let Some(status) = rewrite(&site.rewrites, &mut eval)? {
        return Ok(Dispatch::Return { status });
    }
    let Some(location) = find_location(&site.locations, parsed.uri())? else { return Ok(Dispatch::NoLocation) };
    if let Some(t) = trace.as_deref_mut() {
        t.location = Some(location.at.clone());
    }
    if let Some(status) = rewrite(&location.rewrites, &mut eval)? {
        return Ok(Dispatch::Return { status });
    }
    let url = match &location.handler {
        Handler::Other => return Ok(Dispatch::NoProxy),
        Handler::ProxyPass(url) => url,
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
    Ok(Dispatch::Hash { upstream: up.name.clone(), key })
}

/// The built-in variables a key expression reads in `config`: its own, and through the `map` blocks and
/// `set` values it reads, transitively (what a request must carry for its key to be computed).
pub fn needs(config: &Config, expr: &Expression) -> Vec<String> {
    let set_values = sets(config);
    let maps = config.maps();
    let (mut seen, mut out) = (Vec::<String>::new(), Vec::new());
    let mut todo: Vec<String> = expr.variables().map(str::to_string).collect();
    while let Some(v) = todo.pop() {
        if seen.contains(&v) {
            continue;
        }
        seen.push(v.clone());
        let mut derived = false;
        if let Some(m) = maps.iter().rev().find(|m| m.variable == v) {
            let values = m.keys.iter().map(|(_, e)| e).chain(m.default.as_ref());
            todo.extend(m.source.variables().chain(values.flat_map(|e| e.variables())).map(str::to_string));
            derived = true;
        }
        for (_, value) in set_values.iter().filter(|(n, _)| *n == v) {
            if let Ok(e) = Expression::parse(value) {
                todo.extend(e.variables().map(str::to_string));
            }
            derived = true;
        }
        if !derived {
            out.push(v);
        }
    }
    out.sort();
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

/// Runs one block's rewrite directives in order (`ngx_http_rewrite_handler`): `set` assigns, `return`
/// answers (its status), `break` stops; `rewrite` and `if` are refused by name.
fn rewrite(rewrites: &[Rewrite], eval: &mut key::Evaluation<'_, '_>) -> Result<Option<u16>, DispatchError> {
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
            Rewrite::Return(status) => return Ok(Some(*status)),
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

/// `ngx_http_find_virtual_server` (via `ngx_hash_find_combined`): an exact name, then the longest
/// leading wildcard (`*.example.com`, `.example.com`), then the longest trailing wildcard (`www.example.*`)
/// ([`hostnames::find`]), then regular expressions in order (not modelled).
fn by_name<'a>(candidates: &[(&'a Site, bool)], host: &[u8]) -> Result<Option<&'a Site>, DispatchError> {
    let patterns: Vec<(NamePattern, &'a Site)> = candidates
        .iter()
        .flat_map(|(s, _)| s.names.iter().map(move |n| (*s, n)))
        .filter(|(_, n)| !n.starts_with(b"~"))
        .filter_map(|(s, n)| NamePattern::wildcard(n).ok().map(|p| (p, s)))
        .collect();
    if let Some(site) = hostnames::find(patterns.iter().map(|(p, s)| (p, *s)), host) {
        return Ok(Some(site));
    }
    let mut names = candidates.iter().flat_map(|(s, _)| s.names.iter());
    if let Some(n) = names.find(|n| n.starts_with(b"~")) {
        return Err(DispatchError::Unmodelled(format!(
            "regular-expression server_name \"{}\" (needs the pcre2 feature)",
            String::from_utf8_lossy(n)
        )));
    }
    Ok(None)
}

/// `ngx_http_core_find_location`: an exact match wins; else the longest prefix, whose nested locations
/// are searched in turn; a longest prefix with `^~` stops there; else the regular expressions in order
/// (not modelled), else the longest prefix.
fn find_location<'a>(locations: &'a [LocationBlock], uri: &[u8]) -> Result<Option<&'a LocationBlock>, DispatchError> {
    let mut best: Option<&LocationBlock> = None;
    for l in locations {
        match &l.matcher {
            Match::Exact(p) if p == uri => return Ok(Some(l)),
            Match::Prefix(p) | Match::PrefixNoRegex(p)
                if uri.starts_with(p) && best.is_none_or(|b| prefix_len(b) < p.len()) =>
            {
                best = Some(l);
            }
            _ => {}
        }
    }
    if let Some(b) = best
        && !b.nested.is_empty()
        && let Some(inner) = find_location(&b.nested, uri)?
    {
        return Ok(Some(inner));
    }
    if best.is_some_and(|b| matches!(b.matcher, Match::PrefixNoRegex(_))) {
        return Ok(best);
    }
    if let Some(l) = locations.iter().find(|l| matches!(l.matcher, Match::Regex { .. })) {
        return Err(DispatchError::Unmodelled(format!(
            "regular-expression location at {} (needs the pcre2 feature)",
            l.at
        )));
    }
    Ok(best)
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

    #[test]
    fn rewrite_directives_not_modelled_are_refused_by_name() {
        assert_eq!(refusal("if ($arg_a) { set $v 1; }"), "not modelled: \"if\" at x.conf:2 on the request's path");
        assert_eq!(refusal("rewrite ^ /b;"), "not modelled: \"rewrite\" at x.conf:2 on the request's path");
        assert_eq!(refusal("set $args a=1;"), "not modelled: set of the built-in variable \"$args\"");
    }
}
