//! Inside `upstream { }`: the `server` lines, the balancer directives and the directives that do not change
//! routing, each checked with nginx's rules for the chosen version; then the model is built.

use super::error::{ConfigError, ErrorKind, Location, Text};
use super::values;
use super::{Balancer, Context, Keepalive, LoadOptions, UpstreamConfig, Warning};
use crate::peer::{Peer, default_name, socket_name};
use crate::resolve::resolve_host;
use crate::server::{Address, AddressError, Server, ngx_inet_addr};
use crate::upstream::{Method, Upstream, UpstreamError};
use crate::version::Rules;

/// The smallest `zone` size nginx accepts: eight 4 KiB pages.
const MIN_ZONE: u64 = 8 * 4096;

/// What the checks inside `upstream { }` take from the reading around them: the release's rules, the load
/// options, and where warnings go.
#[derive(Debug)]
pub(crate) struct Env<'a> {
    pub(crate) rules: Rules,
    pub(crate) options: &'a LoadOptions,
    pub(crate) warnings: &'a mut Vec<Warning>,
}

impl Env<'_> {
    fn warn(&mut self, message: String, location: &Location) {
        self.warnings.push(Warning { message, location: location.clone() });
    }
}

#[derive(Debug, Clone)]
enum Bal {
    Hash { key: String, method: Method },
    Other(&'static str),
}

/// One `upstream` block as read.
#[derive(Debug)]
pub(crate) struct UpstreamBlock {
    pub(crate) name: Text,
    pub(crate) context: Context,
    pub(crate) location: Location,
    pub(crate) servers: Vec<ServerLine>,
    balancer: Option<Bal>,
    zone: bool,
    resolver: bool,
    /// Directives that may appear once (`keepalive`, `keepalive_timeout`, …) and were seen.
    seen: Vec<&'static str>,
    /// `keepalive N` as written, and whether a balancing method came after it (before 1.29.7 that
    /// replaces it, algorithm §2.3).
    keepalive: Option<(u32, bool)>,
}

impl UpstreamBlock {
    pub(crate) fn new(name: Text, context: Context, location: Location) -> UpstreamBlock {
        UpstreamBlock {
            name,
            context,
            location,
            servers: Vec::new(),
            balancer: None,
            zone: false,
            resolver: false,
            seen: Vec::new(),
            keepalive: None,
        }
    }
}

#[derive(Debug)]
pub(crate) struct ServerLine {
    server: Server,
    weight: u32,
    max_fails: u32,
    fail_timeout: u64,
    max_conns: u32,
    down: bool,
    backup: bool,
    /// Resolved by nginx's run-time resolver (a name with `resolve`), not at startup.
    runtime: bool,
    /// The addresses found at startup (`None`: one peer named as written).
    addresses: Option<Vec<std::net::IpAddr>>,
    port: u16,
    /// Where it is written.
    at: Location,
}

/// A balancing method is being set: nginx warns if one was (or, before 1.29.7, if `keepalive` was, which
/// the method then replaces; algorithm §2.3).
fn redefine(env: &mut Env<'_>, up: &mut UpstreamBlock, at: &Location) {
    let keepalive_slot = !env.rules.keepalive_by_default && up.keepalive.is_some();
    if up.balancer.is_some() || keepalive_slot {
        env.warn("load balancing method redefined".into(), at);
    }
    if let Some((_, replaced)) = &mut up.keepalive {
        *replaced = keepalive_slot || *replaced;
    }
}

/// Compares like C's `strcmp` on nginx's NUL-terminated copy of a token.
fn is(arg: &[u8], word: &[u8]) -> bool {
    arg.split(|&b| b == 0).next() == Some(word)
}

/// Checks one directive inside the block; returns the variables it uses (a `hash` key's).
pub(crate) fn directive(
    env: &mut Env<'_>,
    up: &mut UpstreamBlock,
    args: &[Vec<u8>],
    at: &Location,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    let rules = env.rules;
    let name = args[0].as_slice();
    let n = args.len() - 1;
    let count = |ok: bool| if ok { Ok(()) } else { fail(ErrorKind::ArgumentCount(Text::c_str(name)), at) };
    let once = |up: &mut UpstreamBlock, key: &'static str| {
        if up.seen.contains(&key) {
            return fail(ErrorKind::Duplicate(Text::new(name)), at);
        }
        up.seen.push(key);
        Ok(())
    };
    match name {
        b"server" => {
            count(n >= 1)?;
            let line = server(env, up, args, at)?;
            up.servers.push(line);
        }
        b"hash" => {
            count((1..=2).contains(&n))?;
            let used = values::variables(&args[1]).map_err(|k| ConfigError::invalid(k, at.clone()))?;
            let method = match args.get(2) {
                None => Method::Plain,
                Some(a) if is(a, b"consistent") => Method::Consistent,
                Some(a) => return fail(ErrorKind::InvalidParameter(Text::new(a)), at),
            };
            redefine(env, up, at);
            let key = String::from_utf8_lossy(&args[1]).into_owned();
            up.balancer = Some(Bal::Hash { key, method });
            return Ok(used);
        }
        b"ip_hash" | b"least_conn" => {
            count(n == 0)?;
            redefine(env, up, at);
            up.balancer = Some(Bal::Other(if name == b"ip_hash" { "ip_hash" } else { "least_conn" }));
        }
        b"random" => {
            count(n <= 2)?;
            redefine(env, up, at);
            if let Some(a) = args.get(1).filter(|a| !is(a, b"two")) {
                return fail(ErrorKind::InvalidParameter(Text::new(a)), at);
            }
            if let Some(a) = args.get(2).filter(|a| !is(a, b"least_conn")) {
                return fail(ErrorKind::InvalidParameter(Text::new(a)), at);
            }
            up.balancer = Some(Bal::Other("random"));
        }
        b"zone" => {
            count((1..=2).contains(&n))?;
            if let Some(size) = args.get(2) {
                match values::parse_size(size) {
                    None => return fail(ErrorKind::InvalidZoneSize(Text::new(size)), at),
                    Some(s) if s < MIN_ZONE => return fail(ErrorKind::ZoneTooSmall(Text::new(&args[1])), at),
                    Some(_) => {}
                }
            }
            up.zone = true;
        }
        b"keepalive" => {
            count(n == 1 || (n == 2 && rules.keepalive_zero_and_local))?;
            once(up, "keepalive")?;
            match values::atoi(&args[1]) {
                Some(0) if !rules.keepalive_zero_and_local => {
                    return fail(ErrorKind::InvalidValueIn(Text::new(&args[1]), Text::new(name)), at);
                }
                None => return fail(ErrorKind::InvalidValueIn(Text::new(&args[1]), Text::new(name)), at),
                Some(_) => {}
            }
            if let Some(a) = args.get(2).filter(|a| !is(a, b"local")) {
                return fail(ErrorKind::InvalidParameter(Text::new(a)), at);
            }
            let n = values::atoi(&args[1]).unwrap_or(0);
            up.keepalive = Some((u32::try_from(n).unwrap_or(u32::MAX), false));
        }
        b"keepalive_timeout" | b"keepalive_time" | b"resolver_timeout" => {
            count(n == 1)?;
            once(
                up,
                match name {
                    b"keepalive_timeout" => "keepalive_timeout",
                    b"keepalive_time" => "keepalive_time",
                    _ => "resolver_timeout",
                },
            )?;
            if values::parse_time(&args[1], false).is_none() {
                return fail(ErrorKind::DirectiveInvalidValue(Text::new(name)), at);
            }
        }
        b"keepalive_requests" => {
            count(n == 1)?;
            once(up, "keepalive_requests")?;
            if values::atoi(&args[1]).is_none() {
                return fail(ErrorKind::DirectiveInvalidNumber(Text::new(name)), at);
            }
        }
        b"resolver" => {
            count(n >= 1)?;
            up.resolver = true;
        }
        b"sticky" => count(n >= 1)?,
        // NGINX-DIFF: `sticky` arguments (and any other directive the release allows here) are not checked.
        _ => {}
    }
    Ok(Vec::new())
}

/// One `server` line, checked like nginx's upstream `server` directive.
fn server(env: &mut Env<'_>, up: &UpstreamBlock, args: &[Vec<u8>], at: &Location) -> Result<ServerLine, ConfigError> {
    let rules = env.rules;
    let http = up.context == Context::Http;
    // Which parameters the balancer declared so far allows (nginx checks when it reads the line).
    let backup_allowed = match &up.balancer {
        None => true,
        Some(Bal::Other(b)) => *b == "least_conn",
        Some(Bal::Hash { .. }) => false,
    };
    let mut line = ServerLine {
        server: Server::new(String::from_utf8_lossy(&args[1]).into_owned()),
        weight: 1,
        max_fails: 1,
        fail_timeout: 10,
        max_conns: 0,
        down: false,
        backup: false,
        runtime: false,
        addresses: None,
        port: if http { 80 } else { 0 },
        at: at.clone(),
    };
    let mut resolve = false;
    let mut service = false;
    for p in &args[2..] {
        let invalid = || fail(ErrorKind::InvalidParameter(Text::new(p)), at);
        // NGINX-DIFF: numbers above u32::MAX (nginx allows up to its ngx_int_t range) are refused.
        let number = |v: &[u8]| values::atoi(v).and_then(|n| u32::try_from(n).ok());
        if let Some(v) = p.strip_prefix(b"weight=") {
            match number(v) {
                Some(w) if w > 0 => line.weight = w,
                _ => return invalid(),
            }
        } else if let Some(v) = p.strip_prefix(b"max_conns=") {
            line.max_conns = match number(v) {
                Some(x) => x,
                None => return invalid(),
            };
        } else if let Some(v) = p.strip_prefix(b"max_fails=") {
            line.max_fails = match number(v) {
                Some(x) => x,
                None => return invalid(),
            };
        } else if let Some(v) = p.strip_prefix(b"fail_timeout=") {
            line.fail_timeout = match values::parse_time(v, true) {
                Some(x) => x,
                None => return invalid(),
            };
        } else if is(p, b"backup") {
            if !backup_allowed {
                return fail(ErrorKind::BalancerParameter(Text::new(p)), at);
            }
            line.backup = true;
        } else if is(p, b"down") {
            line.down = true;
        } else if is(p, b"resolve") && rules.server_resolve {
            resolve = true;
        } else if p.starts_with(b"service=") && rules.server_resolve {
            // NGINX-DIFF: SRV lookups are not modelled; the line is treated like `resolve`.
            service = true;
        } else if p.starts_with(b"route=") && rules.sticky && http {
        } else if is(p, b"drain") && rules.sticky && http {
            // The hash balancers treat a draining peer exactly like a down one.
            line.down = true;
        } else {
            return invalid();
        }
    }
    if service && !resolve {
        return fail(ErrorKind::ServiceNeedsResolve(Text::new(&args[1])), at);
    }
    let text = line.server.as_str().to_string();
    let address = Address::parse(&text).map_err(|e| {
        let why = match e {
            AddressError::NoUnixPath => "no path in the unix domain socket",
            AddressError::UnixPathTooLong => "too long path in the unix domain socket",
            AddressError::InvalidHost => "invalid host",
            AddressError::InvalidPort => "invalid port",
            AddressError::NoHost => "no host",
            AddressError::InvalidIpv6 => "invalid IPv6 address",
            _ => "no port",
        };
        ConfigError::invalid(ErrorKind::Address(why, Text::new(&args[1])), at.clone())
    })?;
    let needs_port = !http && !service && address.port().is_none() && !matches!(address, Address::Unix { .. });
    if let Some(p) = address.port() {
        line.port = p;
    }
    if let Address::Host { host, .. } = &address
        && ngx_inet_addr(host).is_none()
    {
        line.runtime = resolve;
        if env.options.resolve {
            match resolve_host(host) {
                Ok(addrs) => line.addresses = Some(addrs),
                Err(_) if resolve => {
                    line.addresses = Some(Vec::new());
                }
                Err(_) => return fail(ErrorKind::HostNotFound(Text::new(&args[1])), at),
            }
        }
        if resolve {
            env.warn(
                format!(
                    "server \"{text}\" is resolved at run time by nginx's own DNS resolver, which does not read \
                     /etc/hosts; its peers here are what the system resolver returns now ({}), placed after \
                     the static peers as nginx adds them once DNS answers",
                    match &line.addresses {
                        None => "not looked up".to_string(),
                        Some(a) if a.is_empty() => "no address: no peer".to_string(),
                        Some(a) => a.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                    }
                ),
                at,
            );
        }
    }
    if needs_port {
        return fail(ErrorKind::NoPort(Text::new(&args[1])), at);
    }
    Ok(line)
}

/// The checks nginx makes when it initialises the upstream, then the model.
pub(crate) fn finish(
    env: &mut Env<'_>,
    up: &UpstreamBlock,
    resolver_outside: bool,
) -> Result<UpstreamConfig, ConfigError> {
    let name = up.name.clone();
    if up.servers.iter().any(|s| s.runtime) {
        if !up.zone {
            return fail(ErrorKind::ResolveNeedsZone(name, up.location.clone()), &up.location);
        }
        if !up.resolver && !resolver_outside {
            return fail(ErrorKind::NoResolver(name, up.location.clone()), &up.location);
        }
    }
    if up.servers.iter().all(|s| s.backup) {
        return fail(ErrorKind::NoServersIn(name, up.location.clone()), &up.location);
    }
    let display = name.to_string();
    let balancer = match &up.balancer {
        Some(Bal::Hash { key, method }) => {
            Balancer::Hash { key: key.clone(), upstream: Box::new(build(env, &display, *method, up)?) }
        }
        Some(Bal::Other(b)) => Balancer::Other((*b).to_string()),
        None => Balancer::RoundRobin,
    };
    // In the order the model takes the lines' peers (see `build`).
    let static_primary = up.servers.iter().filter(|s| !s.runtime && !s.backup);
    let runtime = up.servers.iter().filter(|s| s.runtime);
    let backup = up.servers.iter().filter(|s| !s.runtime && s.backup);
    let servers = static_primary.chain(runtime).chain(backup).map(|s| s.at.clone()).collect();
    let keepalive = match (up.context, up.keepalive, env.rules.keepalive_by_default) {
        (Context::Stream, ..) => Keepalive::Off,
        (_, Some((_, true)), _) => Keepalive::Replaced,
        (_, Some((0, _)), _) => Keepalive::Off,
        (_, Some((n, _)), _) => Keepalive::Cached(n),
        (_, None, true) => Keepalive::Cached(32),
        (_, None, false) => Keepalive::Off,
    };
    Ok(UpstreamConfig {
        name: display,
        context: up.context,
        location: up.location.clone(),
        servers,
        balancer,
        keepalive,
    })
}

/// Turns the server lines into peers and builds the model.
fn build(env: &Env<'_>, name: &str, method: Method, up: &UpstreamBlock) -> Result<Upstream, ConfigError> {
    let mut builder = Upstream::builder(method).name(name).version(env.options.version).libc(env.options.libc);
    let mut resolved_later = Vec::new();
    for line in &up.servers {
        let peers = peers_of(line);
        if line.runtime {
            // Names resolved at run time join after every static peer, in the order learned.
            // NGINX-DIFF: resolved once, by the system resolver; later DNS changes are not followed.
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
        UpstreamError::NoServers(_) => ConfigError::invalid(
            ErrorKind::NoServersIn(Text::new(name.as_bytes()), up.location.clone()),
            up.location.clone(),
        ),
        other => ConfigError::invalid(ErrorKind::Model(other.to_string()), up.location.clone()),
    })
}

fn peers_of(line: &ServerLine) -> Vec<Peer> {
    let make = |name: String| {
        Peer::new(line.server.clone())
            .with_name(name)
            .with_weight(line.weight)
            .with_max_fails(line.max_fails)
            .with_fail_timeout(line.fail_timeout)
            .with_max_conns(line.max_conns)
            .with_down(line.down)
    };
    match &line.addresses {
        Some(addrs) => addrs.iter().map(|ip| make(socket_name(std::net::SocketAddr::new(*ip, line.port)))).collect(),
        None => vec![make(default_name(&line.server, 80))],
    }
}

/// An error of `kind` at `at`.
fn fail<T>(kind: ErrorKind, at: &Location) -> Result<T, ConfigError> {
    Err(ConfigError::invalid(kind, at.clone()))
}
