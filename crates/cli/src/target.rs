//! `--target-servers FILE`: the server list of the platform one moves to, in that platform's own format,
//! given to the engine instead of the nginx upstream's peers (docs/engines.md, "The target's own server
//! list"). The format is recognised from the file's contents; each is read as the engine documents it:
//!
//! * **Envoy** EDS `ClusterLoadAssignment` JSON (envoyproxy/envoy `api/envoy/config/endpoint/v3/
//!   endpoint.proto` and `endpoint_components.proto`): `endpoints[]` (`LocalityLbEndpoints`: `priority`,
//!   `lb_endpoints[]`), each `LbEndpoint` with `endpoint.address.socket_address` (`address`,
//!   `port_value`), `endpoint.hostname`, `load_balancing_weight` (at least 1, default 1), `health_status`
//!   and `metadata.filter_metadata."envoy.lb".hash_key`. Field names as in the proto or in proto3 JSON's
//!   lowerCamelCase; a field the proto does not have is refused, as Envoy's JSON parser refuses it.
//!   Priority 0 only (the first pick), and hosts whose `health_status` is `UNHEALTHY`, `DRAINING`,
//!   `TIMEOUT` or `DEGRADED` are left out (said in the output).
//! * **HAProxy** `backend` (or `listen`) section text (haproxy `doc/configuration.txt`, "server" and
//!   "5.2. Server and default-server options"): `server NAME ADDRESS:PORT [weight N] [backup] [id N]
//!   [disabled] …`, `default-server` options before them; other options are skipped.
//! * **Kong** Admin API `GET /upstreams/{name}/targets` (Kong/kong `kong/db/schema/entities/targets.lua`):
//!   `data[]` of `target` `host:port` and `weight` (0 to 65535, default 100; 0 disables the target).
//! * **APISIX** upstream `nodes` (apache/apisix `apisix/schema_def.lua`, `upstream.nodes`): an object of
//!   `"host:port": weight` or an array of `{host, port, weight, priority}`, alone, in an upstream object, or
//!   in the Admin API's `{"value": {…}}`; the highest `priority` only (APISIX's priority balancer).
//! * **Traefik** `loadBalancer.servers` (traefik/traefik v3 `pkg/config/dynamic/http_config.go`, `Server`:
//!   `url`, `weight`, `preservePath`, and `fenced` in the API's JSON), YAML or JSON: a whole dynamic configuration with one service, a `loadBalancer`, or
//!   the `servers` list. The URL is what Traefik names (and hashes) the server by; the port for pairing is
//!   the URL's, else the scheme's (80, 443).
//! * **Caddy** `reverse_proxy` upstreams (caddyserver/caddy `modules/caddyhttp/reverseproxy/addresses.go`,
//!   `parseUpstreamDialAddress`): a Caddyfile `reverse_proxy` line (and its block's `to` lines), or the
//!   JSON `upstreams[].dial` of one `reverse_proxy` handler. The dial address Caddy forms is what it
//!   hashes: `host:port`, the port the URL's, the scheme's, else 80.
//!
//! Every server must be an IP address with a port (pairing with nginx's peers is by `address:port`);
//! errors name the file and, where the format has lines, the line.

use anyhow::{Result, anyhow, bail};
use nginx_ketama::engines::Backend;
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::collections::BTreeMap;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// The largest file read.
const MAX_BYTES: u64 = 64 << 20;

/// The formats `--target-servers` reads, each an engine's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Envoy EDS `ClusterLoadAssignment`.
    Envoy,
    /// A HAProxy `backend` section.
    HaProxy,
    /// Kong's `/upstreams/{name}/targets`.
    Kong,
    /// APISIX upstream `nodes`.
    Apisix,
    /// Traefik `loadBalancer.servers`.
    Traefik,
    /// Caddy `reverse_proxy` upstreams.
    Caddy,
}

impl Format {
    /// The engine (`Engine::name`) whose list this is.
    pub(crate) fn engine(self) -> &'static str {
        match self {
            Format::Envoy => "envoy",
            Format::HaProxy => "haproxy",
            Format::Kong => "kong",
            Format::Apisix => "apisix",
            Format::Traefik => "traefik",
            Format::Caddy => "caddy",
        }
    }

    /// What output calls it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Format::Envoy => "Envoy EDS ClusterLoadAssignment",
            Format::HaProxy => "HAProxy backend",
            Format::Kong => "Kong upstream targets",
            Format::Apisix => "APISIX upstream nodes",
            Format::Traefik => "Traefik loadBalancer.servers",
            Format::Caddy => "Caddy reverse_proxy upstreams",
        }
    }
}

/// A server list read from `--target-servers`.
#[derive(Debug)]
pub(crate) struct TargetServers {
    /// The file.
    pub(crate) file: PathBuf,
    /// Its format.
    pub(crate) format: Format,
    /// The list's name where it has one (Envoy's `cluster_name`, HAProxy's backend, Traefik's service).
    pub(crate) name: Option<String>,
    /// The servers, in the file's order.
    pub(crate) backends: Vec<Backend>,
    /// Servers read but not given to the engine's first pick, and why.
    pub(crate) left_out: Vec<String>,
}

/// Reads `path`, recognising its format.
pub(crate) fn read(path: &Path) -> Result<TargetServers> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| anyhow!("--target-servers {shown}: cannot open: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| anyhow!("--target-servers {shown}: cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        bail!("--target-servers {shown}: larger than {} MiB", MAX_BYTES >> 20);
    }
    let text = String::from_utf8(bytes).map_err(|_| anyhow!("--target-servers {shown}: not UTF-8 text"))?;
    let at = Source { file: &shown, text: &text };
    let (format, name, backends, left_out) = parse(&at)?;
    if backends.is_empty() {
        bail!("--target-servers {shown}: the {} lists no server that takes traffic", format.describe());
    }
    Ok(TargetServers { file: path.to_path_buf(), format, name, backends, left_out })
}

/// The file being read, for errors.
struct Source<'a> {
    file: &'a str,
    text: &'a str,
}

impl Source<'_> {
    /// An error naming the file and (when `needle` is found) the line it first appears on.
    fn err(&self, needle: Option<&str>, what: impl std::fmt::Display) -> anyhow::Error {
        match needle.and_then(|n| self.line_of(n)) {
            Some(line) => anyhow!("--target-servers {}:{line}: {what}", self.file),
            None => anyhow!("--target-servers {}: {what}", self.file),
        }
    }

    fn at_line(&self, line: usize, what: impl std::fmt::Display) -> anyhow::Error {
        anyhow!("--target-servers {}:{line}: {what}", self.file)
    }

    fn line_of(&self, needle: &str) -> Option<usize> {
        self.text.find(needle).map(|i| self.text[..i].matches('\n').count() + 1)
    }
}

/// serde_json's message without its " at line L column C" (the error names the place first).
fn without_location(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

type Parsed = (Format, Option<String>, Vec<Backend>, Vec<String>);

fn parse(src: &Source) -> Result<Parsed> {
    let trimmed = src.text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let value: serde_json::Value = serde_json::from_str(src.text).map_err(|e| {
            anyhow!("--target-servers {}:{}:{}: not JSON ({})", src.file, e.line(), e.column(), without_location(&e))
        })?;
        return parse_json(src, &value);
    }
    let words = |l: &str| l.split('#').next().unwrap_or("").split_whitespace().next().map(str::to_string);
    let first_words: Vec<String> = src.text.lines().filter_map(words).collect();
    if first_words.iter().any(|w| matches!(w.as_str(), "backend" | "listen" | "server" | "default-server")) {
        return haproxy(src);
    }
    if src.text.contains("reverse_proxy") {
        return caddyfile(src);
    }
    let value: serde_yaml::Value = serde_yaml::from_str(src.text).map_err(|e| match e.location() {
        Some(l) => src.at_line(
            l.line(),
            format!("not a server list this reads: not JSON, not a HAProxy backend, not a Caddyfile, not YAML ({e})"),
        ),
        None => src.err(None, format!("not JSON, not a HAProxy backend, not a Caddyfile, not YAML ({e})")),
    })?;
    let json = serde_json::to_value(&value).map_err(|e| src.err(None, format!("YAML that is no JSON value: {e}")))?;
    match traefik_servers(src, &json)? {
        Some(parsed) => Ok(parsed),
        None => Err(src.err(
            None,
            "not a server list this reads: not JSON, not a HAProxy backend, not a Caddyfile, not YAML with a Traefik \
             loadBalancer.servers list",
        )),
    }
}

fn parse_json(src: &Source, value: &serde_json::Value) -> Result<Parsed> {
    use serde_json::Value;
    let obj = value.as_object();
    let has = |k: &str| obj.is_some_and(|o| o.contains_key(k));
    let type_url = obj.and_then(|o| o.get("@type")).and_then(Value::as_str).unwrap_or("");
    if type_url.ends_with("ClusterLoadAssignment") || has("cluster_name") || has("clusterName") || has("endpoints") {
        return envoy(src);
    }
    if has("resources") {
        bail!(
            src.err(
                Some("resources"),
                "an xDS DiscoveryResponse: give the one ClusterLoadAssignment of its `resources`"
            )
        );
    }
    if has("data") || value.as_array().is_some_and(|a| a.iter().any(|t| t.get("target").is_some())) {
        return kong(src, value);
    }
    if let Some(parsed) = traefik_servers(src, value)? {
        return Ok(parsed);
    }
    if let Some(nodes) = apisix_nodes(value) {
        return apisix(src, nodes);
    }
    if let Some(upstreams) = caddy_json(value) {
        return caddy_dials(src, &upstreams);
    }
    Err(src.err(
        None,
        "JSON that is none of the lists this reads: an Envoy ClusterLoadAssignment, Kong targets, APISIX nodes, \
         a Traefik loadBalancer, a Caddy reverse_proxy handler",
    ))
}

/// An IP address and a port, or an error naming what is wrong.
fn ip_port(src: &Source, host: &str, port: Option<u32>, needle: &str) -> Result<SocketAddr> {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let ip: IpAddr = bare.parse().map_err(|_| {
        src.err(Some(needle), format!("{host:?} is not an IP address (pairing with nginx's peers is by address:port)"))
    })?;
    let port = port.ok_or_else(|| src.err(Some(needle), format!("server {host} has no port")))?;
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| src.err(Some(needle), format!("server {host}: port {port} is not a port number")))?;
    Ok(SocketAddr::new(ip, port))
}

/// `host:port` (IPv6 in brackets) split; the port `None` when absent.
fn split_host_port(s: &str) -> (String, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[')
        && let Some((h, after)) = rest.split_once(']')
    {
        return (h.to_string(), after.strip_prefix(':'));
    }
    match s.rsplit_once(':') {
        // A bare IPv6 address has colons but no port.
        Some((h, p)) if !h.contains(':') => (h.to_string(), Some(p)),
        _ => (s.to_string(), None),
    }
}

fn port_number(src: &Source, p: Option<&str>, needle: &str) -> Result<Option<u32>> {
    p.map(|p| p.parse::<u32>().map_err(|_| src.err(Some(needle), format!("port {p:?} is not a port number"))))
        .transpose()
}

/// The servers an engine is given instead of the upstream's peers: ingress-nginx endpoints
/// (`--backends`) or the target's own list (`--target-servers`).
pub(crate) enum ServerList {
    /// `--backends`.
    Ingress(crate::ingress::Endpoints),
    /// `--target-servers`.
    Target(TargetServers),
}

/// What the JSON documents say of the list.
#[derive(serde::Serialize)]
pub(crate) struct ServerListJson {
    pub(crate) file: String,
    /// The ingress-nginx backend, or the list's name (`-` when it has none).
    pub(crate) backend: String,
    pub(crate) count: usize,
    /// `kubectl ingress-nginx backends`, or the target's format.
    pub(crate) format: &'static str,
    /// Servers read but left out of the engine's first pick, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) left_out: Vec<String>,
}

impl ServerList {
    /// `--backends` or `--target-servers`, if one is given (not both).
    pub(crate) fn read(
        backends: &crate::ingress::BackendsFile,
        target: &crate::args::TargetServersFile,
    ) -> Result<Option<ServerList>> {
        match (&backends.backends, &target.target_servers) {
            (Some(_), Some(_)) => bail!("--backends and --target-servers both give the engine its servers: give one"),
            (_, Some(path)) => Ok(Some(ServerList::Target(read(path)?))),
            _ => Ok(backends.read()?.map(ServerList::Ingress)),
        }
    }

    /// The servers.
    pub(crate) fn backends(&self) -> &[Backend] {
        match self {
            ServerList::Ingress(e) => &e.backends,
            ServerList::Target(t) => &t.backends,
        }
    }

    /// The flag that gave it.
    pub(crate) fn flag(&self) -> &'static str {
        match self {
            ServerList::Ingress(_) => "--backends",
            ServerList::Target(_) => "--target-servers",
        }
    }

    /// Refuses an engine the list is not for: a target's list is its own engine's (its names, hash keys,
    /// ids are that engine's); ingress-nginx endpoints go to any engine.
    pub(crate) fn check_engine(&self, engine: &nginx_ketama::engines::Engine) -> Result<()> {
        if let ServerList::Target(t) = self
            && t.format.engine() != engine.name()
        {
            bail!(
                "--target-servers {}: {} {} list is {}'s own: compare it with --against/--to/--engine {}, not {engine}",
                t.file.display(),
                if matches!(t.format, Format::Envoy | Format::Apisix) { "an" } else { "a" },
                t.format.describe(),
                t.format.engine(),
                t.format.engine()
            );
        }
        Ok(())
    }

    /// The line the tables show.
    pub(crate) fn line(&self) -> String {
        match self {
            ServerList::Ingress(e) => {
                format!("endpoints: {} of ingress-nginx backend {} ({})", e.backends.len(), e.name, e.file.display())
            }
            ServerList::Target(t) => {
                let name = t.name.as_ref().map_or_else(String::new, |n| format!(" {n}"));
                let mut line =
                    format!("servers: {} of {}{name} ({})", t.backends.len(), t.format.describe(), t.file.display());
                for l in &t.left_out {
                    line.push_str(&format!("\n  left out: {l}"));
                }
                line
            }
        }
    }

    /// The JSON object.
    pub(crate) fn json(&self) -> ServerListJson {
        match self {
            ServerList::Ingress(e) => ServerListJson {
                file: e.file.display().to_string(),
                backend: e.name.clone(),
                count: e.backends.len(),
                format: "kubectl ingress-nginx backends",
                left_out: Vec::new(),
            },
            ServerList::Target(t) => ServerListJson {
                file: t.file.display().to_string(),
                backend: t.name.clone().unwrap_or_else(|| "-".into()),
                count: t.backends.len(),
                format: t.format.describe(),
                left_out: t.left_out.clone(),
            },
        }
    }
}

// ---- Envoy ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cla {
    #[serde(rename = "@type", default)]
    _type: Option<String>,
    #[serde(alias = "clusterName", default)]
    cluster_name: Option<String>,
    #[serde(default)]
    endpoints: Vec<LocalityLbEndpoints>,
    #[serde(alias = "namedEndpoints", rename = "named_endpoints", default)]
    _named_endpoints: Option<IgnoredAny>,
    #[serde(rename = "policy", default)]
    _policy: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LocalityLbEndpoints {
    #[serde(default, rename = "locality")]
    _locality: Option<IgnoredAny>,
    #[serde(default, rename = "metadata")]
    _metadata: Option<IgnoredAny>,
    #[serde(alias = "lbEndpoints", default)]
    lb_endpoints: Vec<LbEndpoint>,
    #[serde(alias = "loadBalancerEndpoints", rename = "load_balancer_endpoints", default)]
    _load_balancer_endpoints: Option<IgnoredAny>,
    #[serde(alias = "ledsClusterLocalityConfig", rename = "leds_cluster_locality_config", default)]
    _leds: Option<IgnoredAny>,
    #[serde(alias = "loadBalancingWeight", rename = "load_balancing_weight", default)]
    _load_balancing_weight: Option<IgnoredAny>,
    #[serde(default)]
    priority: u32,
    #[serde(default, rename = "proximity")]
    _proximity: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LbEndpoint {
    #[serde(default)]
    endpoint: Option<EnvoyEndpoint>,
    #[serde(alias = "endpointName", default)]
    endpoint_name: Option<String>,
    #[serde(alias = "healthStatus", default)]
    health_status: Option<String>,
    #[serde(default)]
    metadata: Option<EnvoyMetadata>,
    #[serde(alias = "loadBalancingWeight", default)]
    load_balancing_weight: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvoyEndpoint {
    #[serde(default)]
    address: Option<EnvoyAddress>,
    #[serde(alias = "healthCheckConfig", rename = "health_check_config", default)]
    _health_check_config: Option<IgnoredAny>,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(alias = "additionalAddresses", rename = "additional_addresses", default)]
    _additional_addresses: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvoyAddress {
    #[serde(alias = "socketAddress", default)]
    socket_address: Option<SocketAddress>,
    #[serde(default)]
    pipe: Option<IgnoredAny>,
    #[serde(alias = "envoyInternalAddress", default)]
    envoy_internal_address: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SocketAddress {
    #[serde(default, rename = "protocol")]
    _protocol: Option<IgnoredAny>,
    address: String,
    #[serde(alias = "portValue", default)]
    port_value: Option<u32>,
    #[serde(alias = "namedPort", default)]
    named_port: Option<String>,
    #[serde(alias = "resolverName", rename = "resolver_name", default)]
    _resolver_name: Option<IgnoredAny>,
    #[serde(alias = "ipv4Compat", rename = "ipv4_compat", default)]
    _ipv4_compat: Option<IgnoredAny>,
    #[serde(alias = "networkNamespaceFilepath", rename = "network_namespace_filepath", default)]
    _netns: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct EnvoyMetadata {
    #[serde(alias = "filterMetadata", default)]
    filter_metadata: BTreeMap<String, serde_json::Value>,
}

fn envoy(src: &Source) -> Result<Parsed> {
    let cla: Cla = serde_json::from_str(src.text).map_err(|e| {
        anyhow!(
            "--target-servers {}:{}:{}: not an Envoy ClusterLoadAssignment: {}",
            src.file,
            e.line(),
            e.column(),
            without_location(&e)
        )
    })?;
    let mut backends = Vec::new();
    let mut left_out = Vec::new();
    for group in &cla.endpoints {
        for lb in &group.lb_endpoints {
            let Some(endpoint) = &lb.endpoint else {
                let name = lb.endpoint_name.as_deref().unwrap_or("");
                bail!(
                    src.err(Some("endpoint_name"), format!("endpoint_name {name:?}: a named endpoint has no address"))
                );
            };
            let Some(addr) = &endpoint.address else { bail!(src.err(Some("endpoint"), "an endpoint without address")) };
            let Some(sa) = &addr.socket_address else {
                let what = if addr.pipe.is_some() {
                    "a pipe"
                } else if addr.envoy_internal_address.is_some() {
                    "an internal address"
                } else {
                    "no socket_address"
                };
                bail!(
                    src.err(Some("address"), format!("an endpoint address that is {what}, not an IP socket address"))
                );
            };
            if let Some(named) = &sa.named_port {
                bail!(src.err(Some(named), format!("named_port {named:?}: give port_value")));
            }
            let needle = format!("\"{}\"", sa.address);
            let socket = ip_port(src, &sa.address, sa.port_value, &needle)?;
            let weight = lb.load_balancing_weight.unwrap_or(1);
            if weight == 0 {
                bail!(src.err(Some(&needle), format!("endpoint {socket}: load_balancing_weight must be at least 1")));
            }
            if group.priority > 0 {
                left_out.push(format!("{socket}: priority {} (only priority 0 takes the first pick)", group.priority));
                continue;
            }
            let status = lb.health_status.as_deref().unwrap_or("UNKNOWN");
            if !matches!(status, "UNKNOWN" | "HEALTHY") {
                left_out.push(format!("{socket}: health_status {status}"));
                continue;
            }
            let hash_key = lb
                .metadata
                .as_ref()
                .and_then(|m| m.filter_metadata.get("envoy.lb"))
                .and_then(|lb| lb.get("hash_key"))
                .and_then(|k| k.as_str())
                .map(str::to_string);
            let mut b = Backend::new(socket, weight);
            b.name = endpoint.hostname.clone().filter(|h| !h.is_empty());
            b.hash_key = hash_key;
            backends.push(b);
        }
    }
    Ok((Format::Envoy, cla.cluster_name, backends, left_out))
}

// ---- HAProxy ----

fn haproxy(src: &Source) -> Result<Parsed> {
    let mut sections: Vec<(String, Vec<Backend>, usize)> = Vec::new();
    let mut in_proxy: Option<usize> = None;
    let mut loose: Vec<Backend> = Vec::new();
    let mut defaults = Backend::new(SocketAddr::from(([0, 0, 0, 0], 0)), 1);
    for (i, raw) in src.text.lines().enumerate() {
        let line = i + 1;
        let words: Vec<&str> = raw.split('#').next().unwrap_or("").split_whitespace().collect();
        let Some(&kw) = words.first() else { continue };
        match kw {
            "backend" | "listen" => {
                let name = words.get(1).ok_or_else(|| src.at_line(line, format!("`{kw}` without a name")))?;
                sections.push((name.to_string(), Vec::new(), line));
                in_proxy = Some(sections.len() - 1);
                defaults = Backend::new(SocketAddr::from(([0, 0, 0, 0], 0)), 1);
            }
            "frontend" | "global" | "defaults" | "peers" | "resolvers" | "userlist" | "mailers" | "cache"
            | "program" | "http-errors" | "ring" => {
                in_proxy = None;
                defaults = Backend::new(SocketAddr::from(([0, 0, 0, 0], 0)), 1);
            }
            "default-server" => options(src, line, &words[1..], &mut defaults)?,
            "server-template" => {
                bail!(src.at_line(line, "server-template: its servers come from DNS; list them as server lines"))
            }
            "server" => {
                let (Some(_name), Some(address)) = (words.get(1), words.get(2)) else {
                    bail!(src.at_line(line, "`server` needs a name and an address"));
                };
                let addr = address.strip_prefix("ipv4@").or_else(|| address.strip_prefix("ipv6@")).unwrap_or(address);
                // HAProxy splits the port at the last colon (IPv6 too: `::1:80`).
                let (host, port) = match addr.strip_prefix('[') {
                    Some(_) => split_host_port(addr),
                    None => match addr.rsplit_once(':') {
                        Some((h, p)) => (h.to_string(), Some(p)),
                        None => (addr.to_string(), None),
                    },
                };
                let port = match port {
                    None | Some("") => {
                        bail!(src.at_line(
                            line,
                            format!("server {address} has no port (HAProxy would use the client's destination port)")
                        ))
                    }
                    Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                        src.at_line(line, format!("server {address}: port {p:?} is not a fixed port number"))
                    })?,
                };
                let ip: IpAddr = host.parse().map_err(|_| {
                    src.at_line(
                        line,
                        format!("server {address}: {host:?} is not an IP address (pairing is by address:port)"),
                    )
                })?;
                let mut b = defaults.clone();
                b.addr = SocketAddr::new(ip, port);
                options(src, line, &words[3..], &mut b)?;
                match in_proxy {
                    Some(s) => sections[s].1.push(b),
                    None if sections.is_empty() => loose.push(b),
                    None => bail!(src.at_line(line, "a server line outside a backend or listen section")),
                }
            }
            _ => {}
        }
    }
    let with: Vec<&(String, Vec<Backend>, usize)> = sections.iter().filter(|s| !s.1.is_empty()).collect();
    let (name, list) = match (with.as_slice(), loose.is_empty()) {
        ([], false) => (None, loose),
        ([one], true) => (Some(one.0.clone()), one.1.clone()),
        ([], true) => bail!(src.err(None, "a HAProxy configuration without server lines")),
        _ => bail!(src.err(
            None,
            format!(
                "{} backends have servers ({}): give one backend section",
                with.len(),
                with.iter().map(|s| format!("{} at line {}", s.0, s.2)).collect::<Vec<_>>().join(", ")
            )
        )),
    };
    let mut left_out = Vec::new();
    let mut backends = Vec::new();
    for b in list {
        if b.weight == 0 && !b.disabled {
            left_out.push(format!("{}: weight 0", b.addr));
        }
        backends.push(b);
    }
    if backends.iter().all(|b| b.disabled || b.weight == 0) {
        backends.clear();
    }
    Ok((Format::HaProxy, name, backends, left_out))
}

/// The server options the model reads; the others are skipped.
fn options(src: &Source, line: usize, words: &[&str], b: &mut Backend) -> Result<()> {
    let mut i = 0;
    while i < words.len() {
        let value =
            || words.get(i + 1).copied().ok_or_else(|| src.at_line(line, format!("`{}` needs a value", words[i])));
        match words[i] {
            "weight" => {
                let v = value()?;
                b.weight = v
                    .parse::<u32>()
                    .ok()
                    .filter(|w| *w <= 256)
                    .ok_or_else(|| src.at_line(line, format!("weight {v:?}: expected 0 to 256")))?;
                i += 1;
            }
            "id" => {
                let v = value()?;
                b.id = Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| src.at_line(line, format!("id {v:?}: expected a positive integer")))?,
                );
                i += 1;
            }
            "backup" => b.backup = true,
            "no-backup" => b.backup = false,
            "disabled" => b.disabled = true,
            "enabled" => b.disabled = false,
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

// ---- Kong ----

#[derive(Deserialize)]
struct KongTarget {
    target: String,
    #[serde(default = "kong_default_weight")]
    weight: u32,
}

fn kong_default_weight() -> u32 {
    100
}

fn kong(src: &Source, value: &serde_json::Value) -> Result<Parsed> {
    let list = match value.get("data") {
        Some(d) => d.clone(),
        None => value.clone(),
    };
    let targets: Vec<KongTarget> = serde_json::from_value(list)
        .map_err(|e| src.err(None, format!("not Kong's targets (`data[]` of target and weight): {e}")))?;
    let mut backends = Vec::new();
    let mut left_out = Vec::new();
    for t in targets {
        let needle = format!("\"{}\"", t.target);
        let (host, port) = split_host_port(&t.target);
        let addr = ip_port(src, &host, port_number(src, port, &needle)?, &needle)?;
        if t.weight > 65535 {
            bail!(src.err(Some(&needle), format!("target {}: weight {} is above 65535", t.target, t.weight)));
        }
        if t.weight == 0 {
            left_out.push(format!("{addr}: weight 0 (disabled)"));
            continue;
        }
        backends.push(Backend::new(addr, t.weight));
    }
    Ok((Format::Kong, None, backends, left_out))
}

// ---- APISIX ----

fn apisix_nodes(value: &serde_json::Value) -> Option<&serde_json::Value> {
    let inner = value.get("value").unwrap_or(value);
    let inner = inner.get("upstream").unwrap_or(inner);
    if let Some(n) = inner.get("nodes") {
        return Some(n);
    }
    // The nodes alone: `"host:port": weight` or `[{host, port, weight}]`.
    let hash_form = value.as_object().is_some_and(|o| !o.is_empty() && o.values().all(serde_json::Value::is_number));
    let array_form = value.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(|n| n.get("host").is_some()));
    (hash_form || array_form).then_some(value)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApisixNode {
    host: String,
    #[serde(default)]
    port: Option<u32>,
    weight: u32,
    #[serde(default)]
    priority: i64,
    #[serde(default, rename = "metadata")]
    _metadata: Option<IgnoredAny>,
}

fn apisix(src: &Source, nodes: &serde_json::Value) -> Result<Parsed> {
    let list: Vec<ApisixNode> = match nodes {
        serde_json::Value::Object(o) => {
            let mut list = Vec::new();
            for (k, w) in o {
                let (host, port) = split_host_port(k);
                let needle = format!("\"{k}\"");
                let weight = w.as_u64().and_then(|w| u32::try_from(w).ok()).ok_or_else(|| {
                    src.err(Some(&needle), format!("node {k}: weight {w} is not a non-negative integer"))
                })?;
                list.push(ApisixNode {
                    host,
                    port: port_number(src, port, &needle)?,
                    weight,
                    priority: 0,
                    _metadata: None,
                });
            }
            list
        }
        other => serde_json::from_value(other.clone())
            .map_err(|e| src.err(None, format!("not APISIX nodes (`host`, `port`, `weight`, `priority`): {e}")))?,
    };
    let top = list.iter().map(|n| n.priority).max().unwrap_or(0);
    let mut backends = Vec::new();
    let mut left_out = Vec::new();
    for n in list {
        let needle = format!("\"{}", n.host);
        let addr = ip_port(src, &n.host, n.port, &needle)?;
        if n.priority < top {
            left_out.push(format!("{addr}: priority {} (below {top}: used when those fail)", n.priority));
        } else if n.weight == 0 {
            left_out.push(format!("{addr}: weight 0"));
        } else {
            backends.push(Backend::new(addr, n.weight));
        }
    }
    Ok((Format::Apisix, None, backends, left_out))
}

// ---- Traefik ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TraefikServer {
    url: String,
    #[serde(default)]
    weight: Option<i64>,
    #[serde(default, rename = "preservePath")]
    _preserve_path: Option<IgnoredAny>,
    /// Traefik's API prints it (`json:"fenced"`): a fenced server takes no new request.
    #[serde(default)]
    fenced: bool,
}

/// A Traefik server list in `value`, if it has one.
fn traefik_servers(src: &Source, value: &serde_json::Value) -> Result<Option<Parsed>> {
    let mut found: Vec<(Option<String>, &serde_json::Value)> = Vec::new();
    if let Some(services) = value.pointer("/http/services").and_then(|s| s.as_object()) {
        for (name, s) in services {
            if let Some(servers) = s.pointer("/loadBalancer/servers") {
                found.push((Some(name.clone()), servers));
            }
        }
    } else if let Some(servers) = value.pointer("/loadBalancer/servers").or_else(|| value.get("servers")) {
        found.push((None, servers));
    } else if value.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(|s| s.get("url").is_some())) {
        found.push((None, value));
    }
    let (name, servers) = match found.as_slice() {
        [] => return Ok(None),
        [one] => one.clone(),
        many => bail!(src.err(
            None,
            format!(
                "{} Traefik services have servers ({}): give one service",
                many.len(),
                many.iter().filter_map(|(n, _)| n.clone()).collect::<Vec<_>>().join(", ")
            )
        )),
    };
    let servers: Vec<TraefikServer> = serde_json::from_value(servers.clone())
        .map_err(|e| src.err(Some("servers"), format!("not Traefik servers (`url`, `weight`): {e}")))?;
    let mut backends = Vec::new();
    let mut left_out = Vec::new();
    for s in servers {
        let (scheme, rest) =
            s.url.split_once("://").ok_or_else(|| src.err(Some(&s.url), format!("url {:?} has no scheme", s.url)))?;
        let authority = rest.split('/').next().unwrap_or("");
        let (host, port) = split_host_port(authority);
        let port = match port_number(src, port, &s.url)? {
            Some(p) => Some(p),
            None => match scheme {
                "http" | "h2c" => Some(80),
                "https" => Some(443),
                _ => None,
            },
        };
        let addr = ip_port(src, &host, port, &s.url)?;
        let weight = s.weight.unwrap_or(1);
        if s.fenced {
            left_out.push(format!("{}: fenced (takes no new request)", s.url));
            continue;
        }
        if weight <= 0 {
            left_out.push(format!("{}: weight {weight} (not added)", s.url));
            continue;
        }
        let mut b = Backend::new(addr, u32::try_from(weight).unwrap_or(u32::MAX));
        b.name = Some(s.url.clone());
        backends.push(b);
    }
    Ok(Some((Format::Traefik, name, backends, left_out)))
}

// ---- Caddy ----

/// The `upstreams[].dial` of the one `reverse_proxy` handler in a Caddy JSON configuration.
fn caddy_json(value: &serde_json::Value) -> Option<Vec<String>> {
    fn walk<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        match v {
            serde_json::Value::Object(o) => {
                if o.get("handler").and_then(|h| h.as_str()) == Some("reverse_proxy") {
                    out.push(v);
                }
                o.values().for_each(|x| walk(x, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut handlers = Vec::new();
    walk(value, &mut handlers);
    let h = handlers.first()?;
    Some(
        h.get("upstreams")?
            .as_array()?
            .iter()
            .map(|u| u.get("dial").and_then(|d| d.as_str()).unwrap_or("").to_string())
            .collect(),
    )
}

fn caddy_dials(src: &Source, dials: &[String]) -> Result<Parsed> {
    let mut backends = Vec::new();
    for d in dials {
        if d.is_empty() {
            bail!(src.err(Some("upstreams"), "an upstream without `dial`"));
        }
        let needle = format!("\"{d}\"");
        let (host, port) = split_host_port(d);
        let addr = ip_port(src, &host, port_number(src, port, &needle)?, &needle)?;
        let mut b = Backend::new(addr, 1);
        b.name = Some(d.clone());
        backends.push(b);
    }
    Ok((Format::Caddy, None, backends, Vec::new()))
}

fn caddyfile(src: &Source) -> Result<Parsed> {
    let mut upstreams: Vec<(String, usize)> = Vec::new();
    let mut proxies = 0;
    let mut depth_in: Option<usize> = None;
    let mut depth = 0usize;
    for (i, raw) in src.text.lines().enumerate() {
        let line = i + 1;
        let words: Vec<&str> = raw.split('#').next().unwrap_or("").split_whitespace().collect();
        let mut ws = words.iter().copied().peekable();
        if let Some(&first) = words.first() {
            if first == "reverse_proxy" {
                proxies += 1;
                if proxies > 1 {
                    bail!(src.at_line(line, "a second reverse_proxy: give the one whose upstreams to compare"));
                }
                ws.next();
                // A matcher token first: `@name`, a path, `*`.
                if ws.peek().is_some_and(|w| w.starts_with('@') || w.starts_with('/') || *w == "*") {
                    ws.next();
                }
                for w in ws.by_ref() {
                    if w == "{" {
                        depth_in = Some(depth);
                        depth += 1;
                        break;
                    }
                    upstreams.push((w.to_string(), line));
                }
                continue;
            }
            if first == "to" && depth_in.is_some_and(|d| depth == d + 1) {
                ws.next();
                for w in ws.by_ref() {
                    upstreams.push((w.to_string(), line));
                }
                continue;
            }
        }
        for w in &words {
            if w.ends_with('{') {
                depth += 1;
            }
            if *w == "}" {
                depth = depth.saturating_sub(1);
                if depth_in == Some(depth) {
                    depth_in = None;
                }
            }
        }
    }
    if upstreams.is_empty() {
        bail!(src.err(Some("reverse_proxy"), "reverse_proxy without upstreams"));
    }
    let mut backends = Vec::new();
    for (u, line) in upstreams {
        let (host, port) = if let Some((scheme, rest)) = u.split_once("://") {
            if rest.contains('/') {
                bail!(src.at_line(line, format!("{u}: upstream URLs take scheme, host and port only")));
            }
            let (host, port) = split_host_port(rest);
            let port = match port {
                Some(p) => Some(p.to_string()),
                None => match scheme {
                    "" | "http" | "h2c" => Some("80".to_string()),
                    "https" => Some("443".to_string()),
                    _ => None,
                },
            };
            (host, port)
        } else {
            let (host, port) = split_host_port(&u);
            (host, Some(port.map_or_else(|| "80".to_string(), str::to_string)))
        };
        if u.contains('{') {
            bail!(src.at_line(line, format!("{u}: a placeholder is known only at request time")));
        }
        let port = port.ok_or_else(|| src.at_line(line, format!("{u}: no port and a scheme without a default one")))?;
        let port_num: u16 = port
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| src.at_line(line, format!("{u}: port {port:?} is not one port number")))?;
        let ip: IpAddr = host.parse().map_err(|_| {
            src.at_line(line, format!("{u}: {host:?} is not an IP address (pairing is by address:port)"))
        })?;
        let mut b = Backend::new(SocketAddr::new(ip, port_num), 1);
        // `net.JoinHostPort`: brackets around a host with a colon.
        b.name = Some(if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") });
        backends.push(b);
    }
    Ok((Format::Caddy, None, backends, Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Parsed> {
        parse(&Source { file: "f", text })
    }

    fn addrs(p: &Parsed) -> Vec<String> {
        p.2.iter().map(|b| format!("{}/{}", b.addr, b.weight)).collect()
    }

    #[test]
    fn envoy_eds_with_weights_hostnames_hash_keys_priorities() {
        let text = r#"{
  "cluster_name": "web",
  "endpoints": [
    {"lb_endpoints": [
      {"endpoint": {"address": {"socket_address": {"address": "10.0.0.1", "port_value": 80}}, "hostname": "web-1"},
       "load_balancing_weight": 2,
       "metadata": {"filter_metadata": {"envoy.lb": {"hash_key": "k1"}}}},
      {"endpoint": {"address": {"socketAddress": {"address": "10.0.0.2", "portValue": 80}}}},
      {"endpoint": {"address": {"socket_address": {"address": "10.0.0.3", "port_value": 80}}}, "health_status": "DRAINING"}
    ]},
    {"priority": 1, "lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.0.0.9", "port_value": 80}}}}]}
  ]
}"#;
        let p = parse_text(text).unwrap();
        assert_eq!((p.0, p.1.as_deref()), (Format::Envoy, Some("web")));
        assert_eq!(addrs(&p), ["10.0.0.1:80/2", "10.0.0.2:80/1"]);
        assert_eq!((p.2[0].name.as_deref(), p.2[0].hash_key.as_deref()), (Some("web-1"), Some("k1")));
        assert_eq!(p.3.len(), 2, "{:?}", p.3);
        let err = |t: &str| parse_text(t).unwrap_err().to_string();
        let unknown = err(&text.replace("\"hostname\"", "\"host_name\""));
        assert!(
            unknown
                .starts_with("--target-servers f:5:105: not an Envoy ClusterLoadAssignment: unknown field `host_name`"),
            "{unknown}"
        );
        assert!(!unknown.contains("at line"), "{unknown}");
        let no_port = text.replace(", \"portValue\": 80", "");
        assert_eq!(err(&no_port), "--target-servers f:8: server 10.0.0.2 has no port");
        assert!(err("{\"endpoints\": [").starts_with("--target-servers f:1:"));
        assert!(
            err(&text.replace("\"load_balancing_weight\": 2", "\"load_balancing_weight\": 0")).contains("at least 1")
        );
    }

    #[test]
    fn haproxy_backend_sections() {
        let text = "global\n  maxconn 100\nbackend web\n  balance hdr(x-key)\n  hash-type consistent\n  default-server weight 3\n  server a 10.0.0.1:80 check id 7\n  server b 10.0.0.2:8080 weight 10 backup\n  server c [::1]:80 disabled\n";
        let p = parse_text(text).unwrap();
        assert_eq!((p.0, p.1.as_deref()), (Format::HaProxy, Some("web")));
        assert_eq!(addrs(&p), ["10.0.0.1:80/3", "10.0.0.2:8080/10", "[::1]:80/3"]);
        assert_eq!((p.2[0].id, p.2[1].backup, p.2[2].disabled), (Some(7), true, true));
        let err = |t: &str| parse_text(t).unwrap_err().to_string();
        assert_eq!(
            err("backend web\n  server a 10.0.0.1\n"),
            "--target-servers f:2: server 10.0.0.1 has no port (HAProxy would use the client's destination port)"
        );
        assert!(
            err("backend web\n  server a web1.local:80\n")
                .starts_with("--target-servers f:2: server web1.local:80: \"web1.local\" is not an IP")
        );
        assert!(
            err("backend a\n server a 10.0.0.1:80\nbackend b\n server b 10.0.0.2:80\n")
                .contains("2 backends have servers (a at line 1, b at line 3)")
        );
        assert!(
            err("backend a\n server a 10.0.0.1:80 weight 300\n").starts_with("--target-servers f:2: weight \"300\"")
        );
    }

    #[test]
    fn kong_apisix_traefik_caddy() {
        let kong = parse_text(r#"{"data": [{"target": "10.0.0.1:8000", "weight": 100, "id": "x"}, {"target": "[::1]:80"}, {"target": "10.0.0.3:80", "weight": 0}], "next": null}"#).unwrap();
        assert_eq!(
            (kong.0, addrs(&kong)),
            (Format::Kong, vec!["10.0.0.1:8000/100".to_string(), "[::1]:80/100".into()])
        );
        assert_eq!(kong.3.len(), 1);
        let err = |t: &str| parse_text(t).unwrap_err().to_string();
        assert_eq!(
            err("{\"data\": [\n {\"target\": \"10.0.0.1\"}]}"),
            "--target-servers f:2: server 10.0.0.1 has no port"
        );

        let hash =
            parse_text(r#"{"type": "chash", "key": "arg_k", "nodes": {"127.0.0.1:1980": 2, "127.0.0.1:1981": 1}}"#)
                .unwrap();
        assert_eq!(
            (hash.0, addrs(&hash)),
            (Format::Apisix, vec!["127.0.0.1:1980/2".to_string(), "127.0.0.1:1981/1".into()])
        );
        let array = parse_text(r#"{"value": {"nodes": [{"host": "10.0.0.1", "port": 80, "weight": 1, "priority": 1}, {"host": "10.0.0.2", "port": 80, "weight": 1}]}}"#).unwrap();
        assert_eq!((addrs(&array), array.3.len()), (vec!["10.0.0.1:80/1".to_string()], 1));
        assert!(
            err(r#"{"nodes": [{"host": "10.0.0.1", "port": 80, "weight": 1, "prio": 1}]}"#)
                .contains("unknown field `prio`")
        );

        let yaml = "http:\n  services:\n    web:\n      loadBalancer:\n        servers:\n          - url: http://10.0.0.1:8080\n            weight: 2\n          - url: \"http://10.0.0.2\"\n          - url: http://10.0.0.3:80\n            weight: 0\n";
        let t = parse_text(yaml).unwrap();
        assert_eq!(
            (t.0, t.1.as_deref(), addrs(&t)),
            (Format::Traefik, Some("web"), vec!["10.0.0.1:8080/2".to_string(), "10.0.0.2:80/1".into()])
        );
        assert_eq!((t.2[1].name.as_deref(), t.3.len()), (Some("http://10.0.0.2"), 1));
        let api = parse_text(r#"{"loadBalancer": {"servers": [{"url": "http://10.0.0.1:80"}, {"url": "http://10.0.0.2:80", "fenced": true}]}}"#).unwrap();
        assert_eq!((addrs(&api), api.3.len()), (vec!["10.0.0.1:80/1".to_string()], 1));
        assert!(err("servers:\n  - url: http://web:80\n").starts_with("--target-servers f:2: \"web\" is not an IP"));

        let caddy = parse_text("example.com {\n  reverse_proxy 10.0.0.1:8080 http://10.0.0.2 {\n    to [::1]:81\n    lb_policy header X-Key\n  }\n}\n").unwrap();
        assert_eq!(
            (caddy.0, addrs(&caddy)),
            (Format::Caddy, vec!["10.0.0.1:8080/1".to_string(), "10.0.0.2:80/1".into(), "[::1]:81/1".into()])
        );
        assert_eq!(
            caddy.2.iter().map(|b| b.name.clone().unwrap()).collect::<Vec<_>>(),
            ["10.0.0.1:8080", "10.0.0.2:80", "[::1]:81"]
        );
        assert!(
            err(":80 {\n reverse_proxy 10.0.0.1:8000-8010\n}\n")
                .starts_with("--target-servers f:2: 10.0.0.1:8000-8010: port")
        );
        let json = parse_text(
            r#"{"apps": {"http": {"servers": {"s": {"routes": [{"handle": [{"handler": "reverse_proxy", "upstreams": [{"dial": "10.0.0.1:80"}, {"dial": "10.0.0.2"}]}]}]}}}}}"#,
        );
        assert_eq!(json.unwrap_err().to_string(), "--target-servers f:1: server 10.0.0.2 has no port");
    }
}
