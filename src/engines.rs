//! How other proxies spread keys with consistent hashing (feature `engines`): what a team leaving nginx
//! keeps of its cache affinity (docs/engines.md).
//!
//! Each engine is its own module, every rule cited to the engine's source by file, function and release:
//!
//! * [`haproxy`]: `hash-type consistent` and `map-based`, every hash function, `avalanche`, `hash-key`,
//!   weights, ids, backups; releases 2.2.9, 2.6.12, 3.0.11 (another default ring) and 3.2.26.
//! * [`caddy`]: the hashing `lb_policy`s, rendezvous over FNV-1a 32 (2.6.2) or xxHash64 (2.8 on).
//! * [`resty_chash`]: the `resty.chash` ring, under [`ingress_nginx`] (`upstream-hash-by`, and its
//!   subsets) and [`apisix`] (`chash`).
//! * [`envoy`]: `RING_HASH` (xxHash64 or MurmurHash2 ring scaled between its minimum and maximum size) and
//!   `MAGLEV` (a 65537-slot table), Envoy 1.36.
//! * [`kong`]: Kong 3.9.3's `consistent-hashing` wheel (luaxxhash's xxHash32 over `slots`).
//! * [`traefik`]: Traefik v3.7.9's `hrw` (rendezvous over FNV-1a 64).
//!
//! [`Engine`] names an engine with its settings (`haproxy@3.0.11:crc32`), [`Engine::model`] builds its
//! [`Model`] over a list of [`Backend`]s, and [`Model::pick`] answers a key. The agreement with nginx is
//! `analysis::compare::Comparison::against_engine`: exact over 2³² CRC-32 values where the engine's pick
//! is a function of the key's CRC-32 on intervals ([`Model::crc32_segments`]), sampled otherwise.
//!
//! HAProxy and Caddy are proven against the real engines (`tests/engines_live.rs`); ingress-nginx,
//! APISIX, Envoy, Kong and Traefik are modelled from source (and, where they have them, the engines' own
//! unit-test vectors) and not proven live.

pub mod apisix;
pub mod caddy;
pub mod envoy;
pub mod haproxy;
pub mod ingress_nginx;
pub mod kong;
pub mod resty_chash;
pub mod traefik;

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

/// Why an engine cannot be set up as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// An engine the project does not model.
    #[error("unknown engine \"{0}\" (expected haproxy, caddy, ingress-nginx, apisix, envoy, kong or traefik)")]
    Unknown(String),
    /// An option value the engine does not have.
    #[error("{engine}: invalid {option} \"{value}\" (expected {expected})")]
    Option {
        /// The engine.
        engine: &'static str,
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
        /// What the engine takes.
        expected: &'static str,
    },
    /// An option the release lacks.
    #[error("{engine} {release} has no {what}")]
    Unsupported {
        /// The engine.
        engine: &'static str,
        /// The release.
        release: String,
        /// What it lacks.
        what: &'static str,
    },
    /// A weight the engine refuses.
    #[error("{engine}: weight {weight} of server {server} is above {max}")]
    Weight {
        /// The engine.
        engine: &'static str,
        /// The server's address.
        server: String,
        /// The weight.
        weight: u32,
        /// The largest weight the engine takes.
        max: u32,
    },
    /// A setting or a server list the engine itself refuses, in the engine's words.
    #[error("{engine}: {message}")]
    Refused {
        /// The engine.
        engine: &'static str,
        /// Why (the engine's message where it has one).
        message: String,
    },
    /// A server id that is 0 or used twice.
    #[error("{engine}: server {server} has id {id}, 0 or already used")]
    Id {
        /// The engine.
        engine: &'static str,
        /// The server's address.
        server: String,
        /// The id.
        id: u32,
    },
}

/// An engine and its settings.
///
/// Written `ENGINE[@RELEASE][:OPTION,…]`: `haproxy@2.6.12:crc32`, `haproxy@3.0:hash-key=addr,avalanche`,
/// `haproxy:map-based`, `caddy@2.6.2`, `ingress-nginx`, `apisix`, `envoy`, `envoy:maglev,table-size=65537`,
/// `envoy:murmur2,min-ring-size=4096`, `kong:slots=20000`, `traefik`. HAProxy's options: a hash function
/// (`sdbm`, `djb2`, `wt6`, `crc32`, `none`), `avalanche`, `map-based`, `hash-key=id|addr|addr-port`,
/// `allbackups`; the default release is the newest modelled. Envoy's: `maglev` and `table-size=N`, or the
/// ring's `murmur2`, `min-ring-size=N`, `max-ring-size=N` ([`envoy::Policy`]), and for both
/// `use-hostname-for-hashing` ([`Backend::host_key`]); Kong's: `slots=N`.
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::{Backend, Engine};
///
/// let engine: Engine = "haproxy@2.6.12:crc32".parse()?;
/// assert_eq!(engine.to_string(), "haproxy@2.6.12:crc32");
/// let backends: Vec<Backend> = (1..=3).map(|i| Backend::new(format!("10.0.0.{i}:80").parse().unwrap(), 1)).collect();
/// let model = engine.model(&backends)?;
/// assert!(model.pick(b"/video/42").is_some());
/// assert!(model.crc32_segments().is_some()); // crc32 without avalanche: exact
/// # Ok::<(), nginx_ketama::engines::EngineError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// HAProxy (`haproxy`).
    HaProxy(haproxy::Options),
    /// Caddy (`caddy`).
    Caddy(caddy::Release),
    /// ingress-nginx's `upstream-hash-by` (`ingress-nginx`).
    IngressNginx,
    /// APISIX's `chash` (`apisix`).
    Apisix,
    /// Envoy's `RING_HASH` or `MAGLEV` (`envoy`, `envoy:maglev`), with the cluster's
    /// `use_hostname_for_hashing` (`envoy:use-hostname-for-hashing`).
    Envoy {
        /// The load balancer and its settings.
        policy: envoy::Policy,
        /// `common_lb_config.consistent_hashing_lb_config.use_hostname_for_hashing`: a host without a
        /// `hash_key` is hashed by its hostname, not its address ([`Backend::host_key`]).
        use_hostname: bool,
    },
    /// Kong's `consistent-hashing` over a wheel of `slots` (`kong`, `kong:slots=N`).
    Kong {
        /// The upstream's `slots`.
        slots: u64,
    },
    /// Traefik's `hrw` (`traefik`).
    Traefik,
}

impl Engine {
    /// The engine's name.
    pub fn name(&self) -> &'static str {
        match self {
            Engine::HaProxy(_) => "haproxy",
            Engine::Caddy(_) => "caddy",
            Engine::IngressNginx => "ingress-nginx",
            Engine::Apisix => "apisix",
            Engine::Envoy { .. } => "envoy",
            Engine::Kong { .. } => "kong",
            Engine::Traefik => "traefik",
        }
    }

    /// Whether the project proves this engine's model against the real engine (`tests/engines_live.rs`).
    pub fn proven_live(&self) -> bool {
        matches!(self, Engine::HaProxy(_) | Engine::Caddy(_))
    }

    /// What the model is read from, for output: "modelled from … source".
    pub fn source(&self) -> &'static str {
        match self {
            Engine::HaProxy(_) => "haproxy/haproxy src/lb_chash.c, src/lb_map.c, src/backend.c",
            Engine::Caddy(_) => "caddyserver/caddy modules/caddyhttp/reverseproxy/selectionpolicies.go",
            Engine::IngressNginx => {
                "kubernetes/ingress-nginx controller-v1.15.1 balancer/chash.lua on lua-resty-balancer chash"
            }
            Engine::Apisix => "apache/apisix 3.18.0 apisix/balancer/chash.lua on lua-resty-balancer chash",
            Engine::Envoy { policy: envoy::Policy::RingHash { .. }, .. } => {
                "envoyproxy/envoy 1.36 ring_hash/ring_hash_lb.cc, key hashed with xxHash64 as a header hash policy does"
            }
            Engine::Envoy { policy: envoy::Policy::Maglev { .. }, .. } => {
                "envoyproxy/envoy 1.36 maglev/maglev_lb.cc, key hashed with xxHash64 as a header hash policy does"
            }
            Engine::Kong { .. } => "Kong/kong 3.9.3 kong/runloop/balancer/consistent_hashing.lua on luaxxhash 1.0.0",
            Engine::Traefik => {
                "traefik/traefik v3.7.9 pkg/server/service/loadbalancer/hrw/hrw.go, servers named http://ip:port"
            }
        }
    }

    /// The engine and release its model is read from, as output names them (`Envoy 1.36`): "modelled
    /// from Envoy 1.36 source, not proven live".
    pub fn modelled_from(&self) -> String {
        match self {
            Engine::HaProxy(o) => format!("HAProxy {}", o.release),
            Engine::Caddy(r) => format!("Caddy {r}"),
            Engine::IngressNginx => "ingress-nginx controller-v1.15.1".into(),
            Engine::Apisix => "APISIX 3.18.0".into(),
            Engine::Envoy { .. } => "Envoy 1.36".into(),
            Engine::Kong { .. } => "Kong 3.9.3".into(),
            Engine::Traefik => "Traefik v3.7.9".into(),
        }
    }

    /// The engine's model over `backends` (in configuration order).
    ///
    /// # Errors
    ///
    /// [`EngineError`]: settings the release lacks, a weight the engine refuses.
    pub fn model(&self, backends: &[Backend]) -> Result<Model, EngineError> {
        Ok(match self {
            Engine::HaProxy(options) => {
                let servers: Vec<haproxy::Server> = backends
                    .iter()
                    .map(|b| haproxy::Server {
                        weight: b.weight,
                        backup: b.backup,
                        disabled: b.disabled,
                        id: b.id,
                        ..haproxy::Server::new(b.addr)
                    })
                    .collect();
                Model::HaProxy(haproxy::Backend::new(*options, &servers)?)
            }
            Engine::Caddy(release) => Model::Caddy(caddy::Pool::new(
                *release,
                backends.iter().map(|b| b.name.clone().unwrap_or_else(|| b.addr.to_string())),
            )),
            Engine::IngressNginx => {
                Model::Ring(ingress_nginx::ring(&backends.iter().map(|b| b.addr).collect::<Vec<_>>()))
            }
            Engine::Apisix => {
                let names: Vec<String> = backends.iter().map(|b| b.addr.to_string()).collect();
                let nodes: Vec<(&str, u32)> =
                    names.iter().map(String::as_str).zip(backends.iter().map(|b| b.weight)).collect();
                Model::Ring(apisix::ring(&nodes))
            }
            Engine::Envoy { policy, use_hostname } => {
                let keys: Vec<String> = backends.iter().map(|b| b.host_key(*use_hostname)).collect();
                let hosts: Vec<(&[u8], u32)> =
                    keys.iter().map(String::as_bytes).zip(backends.iter().map(|b| b.weight)).collect();
                Model::Envoy(policy.build(&hosts)?)
            }
            Engine::Kong { slots } => {
                let targets: Vec<kong::Target> =
                    backends.iter().map(|b| kong::Target::ip(b.addr.ip(), b.addr.port(), b.weight)).collect();
                Model::Kong(kong::Wheel::new(*slots, &targets)?)
            }
            Engine::Traefik => Model::Traefik(traefik::Pool::new(
                backends.iter().map(|b| (b.name.clone().unwrap_or_else(|| traefik::Pool::url(&b.addr)), b.weight)),
            )),
        })
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Engine::HaProxy(o) => {
                write!(f, "haproxy@{}", o.release)?;
                let mut opts: Vec<String> = Vec::new();
                if o.function != haproxy::Function::Sdbm {
                    opts.push(o.function.to_string());
                }
                if o.avalanche {
                    opts.push("avalanche".into());
                }
                if o.method == haproxy::Method::MapBased {
                    opts.push("map-based".into());
                }
                if o.hash_key != haproxy::HashKey::Id {
                    opts.push(format!("hash-key={}", o.hash_key));
                }
                if o.all_backups {
                    opts.push("allbackups".into());
                }
                if !opts.is_empty() {
                    write!(f, ":{}", opts.join(","))?;
                }
                Ok(())
            }
            Engine::Caddy(r) => write!(f, "caddy@{r}"),
            Engine::IngressNginx | Engine::Apisix => f.write_str(self.name()),
            Engine::Envoy { policy, use_hostname: false } => policy.fmt(f),
            Engine::Envoy { policy, use_hostname: true } => {
                let p = policy.to_string();
                let sep = if p.contains(':') { "," } else { ":" };
                write!(f, "{p}{sep}use-hostname-for-hashing")
            }
            Engine::Kong { slots } if *slots == kong::DEFAULT_SLOTS => f.write_str("kong"),
            Engine::Kong { slots } => write!(f, "kong:slots={slots}"),
            Engine::Traefik => f.write_str("traefik"),
        }
    }
}

impl FromStr for Engine {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<Engine, EngineError> {
        let (head, opts) = s.split_once(':').map_or((s, None), |(h, o)| (h, Some(o)));
        let (name, release) = head.split_once('@').map_or((head, None), |(n, r)| (n, Some(r)));
        let opts: Vec<&str> = opts.map(|o| o.split(',').filter(|x| !x.is_empty()).collect()).unwrap_or_default();
        let no_options = |engine: &'static str| -> Result<(), EngineError> {
            match opts.first() {
                Some(o) => {
                    Err(EngineError::Option { engine, option: "option", value: o.to_string(), expected: "none" })
                }
                None => Ok(()),
            }
        };
        let no_release = |engine: &'static str| -> Result<(), EngineError> {
            match release {
                Some(r) => Err(EngineError::Option {
                    engine,
                    option: "release",
                    value: r.to_string(),
                    expected: "none: one release is modelled",
                }),
                None => Ok(()),
            }
        };
        match name {
            "haproxy" => {
                let release = release.map_or(Ok(haproxy::Release::V3_2), str::parse)?;
                let mut o = haproxy::Options::consistent(release);
                for opt in opts {
                    match opt {
                        "avalanche" => o.avalanche = true,
                        "map-based" => o.method = haproxy::Method::MapBased,
                        "consistent" => o.method = haproxy::Method::Consistent,
                        "allbackups" => o.all_backups = true,
                        _ => match opt.strip_prefix("hash-key=") {
                            Some(k) => o.hash_key = k.parse()?,
                            None => o.function = opt.parse()?,
                        },
                    }
                }
                // Refuse what the release lacks now, not at the first model.
                haproxy::Backend::new(o, &[])?;
                Ok(Engine::HaProxy(o))
            }
            "caddy" => {
                no_options("caddy")?;
                Ok(Engine::Caddy(release.map_or(Ok(caddy::Release::V2_11), str::parse)?))
            }
            "ingress-nginx" => {
                no_release("ingress-nginx")?;
                no_options("ingress-nginx")?;
                Ok(Engine::IngressNginx)
            }
            "apisix" => {
                no_release("apisix")?;
                no_options("apisix")?;
                Ok(Engine::Apisix)
            }
            "envoy" => {
                no_release("envoy")?;
                let opts = s.split_once(':').map_or("", |(_, o)| o);
                let use_hostname = opts.split(',').any(|o| o == "use-hostname-for-hashing");
                let rest: Vec<&str> = opts.split(',').filter(|o| *o != "use-hostname-for-hashing").collect();
                Ok(Engine::Envoy { policy: rest.join(",").parse()?, use_hostname })
            }
            "kong" => {
                no_release("kong")?;
                let mut slots = kong::DEFAULT_SLOTS;
                for opt in &opts {
                    let bad = || EngineError::Option {
                        engine: "kong",
                        option: "option",
                        value: opt.to_string(),
                        expected: "slots=N (10 to 65536)",
                    };
                    let n = opt.strip_prefix("slots=").ok_or_else(bad)?;
                    slots = n.parse().map_err(|_| bad())?;
                    if !(10..=kong::MAX_SLOTS).contains(&slots) {
                        return Err(bad());
                    }
                }
                Ok(Engine::Kong { slots })
            }
            "traefik" => {
                no_release("traefik")?;
                no_options("traefik")?;
                Ok(Engine::Traefik)
            }
            _ => Err(EngineError::Unknown(name.to_string())),
        }
    }
}

/// One backend as the engine is configured with it: an address and a weight, and what the engine's own
/// server list may add (read by the command line's `--target-servers`, docs/engines.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// Its address.
    pub addr: SocketAddr,
    /// Its weight (engines without weights ignore it).
    pub weight: u32,
    /// The name the engine hashes instead of the address, where its list gives one: Caddy's dial address
    /// as Caddy forms it (`net.JoinHostPort`), Traefik's server URL as written, Envoy's endpoint
    /// `hostname` (hashed only with `use_hostname_for_hashing`).
    pub name: Option<String>,
    /// Envoy: the endpoint's `filter_metadata."envoy.lb".hash_key` (hashed before anything else when not
    /// empty).
    pub hash_key: Option<String>,
    /// HAProxy: `id N`.
    pub id: Option<u32>,
    /// HAProxy: `backup`.
    pub backup: bool,
    /// HAProxy: `disabled` (takes an id, never traffic).
    pub disabled: bool,
}

impl Backend {
    /// A backend with no more than an address and a weight.
    pub fn new(addr: SocketAddr, weight: u32) -> Backend {
        Backend { addr, weight, name: None, hash_key: None, id: None, backup: false, disabled: false }
    }

    /// Envoy's host key (`HashingLoadBalancer::hashKey`, `thread_aware_lb_impl.h`): the `hash_key`
    /// metadata when set and not empty, else the hostname with `use_hostname_for_hashing`, else the
    /// address as `Address::asString` prints it (`10.0.0.1:80`, `[::1]:80`).
    ///
    /// ```
    /// use nginx_ketama::engines::Backend;
    ///
    /// let mut b = Backend::new("10.0.0.1:80".parse().unwrap(), 1);
    /// assert_eq!(b.host_key(true), ""); // no hostname: Envoy hashes its empty hostname
    /// b.name = Some("web-1".into());
    /// assert_eq!((b.host_key(false), b.host_key(true)), ("10.0.0.1:80".into(), "web-1".into()));
    /// b.hash_key = Some("k1".into());
    /// assert_eq!(b.host_key(true), "k1");
    /// ```
    pub fn host_key(&self, use_hostname: bool) -> String {
        match (&self.hash_key, &self.name) {
            (Some(k), _) if !k.is_empty() => k.clone(),
            (_, name) if use_hostname => name.clone().unwrap_or_default(),
            _ => self.addr.to_string(),
        }
    }
}

/// An engine's first pick over its backends.
#[derive(Debug, Clone)]
pub enum Model {
    /// A HAProxy backend.
    HaProxy(haproxy::Backend),
    /// A Caddy pool.
    Caddy(caddy::Pool),
    /// A `resty.chash` ring (ingress-nginx, APISIX).
    Ring(resty_chash::Ring),
    /// An Envoy ring or Maglev table.
    Envoy(envoy::Balancer),
    /// A Kong wheel.
    Kong(kong::Wheel),
    /// A Traefik `hrw` pool.
    Traefik(traefik::Pool),
}

impl Model {
    /// The backend (index in the list) `key` goes to; `None` when the engine would not hash it to one
    /// (Caddy's empty key: not hashed, its fallback policy picks at random).
    pub fn pick(&self, key: &[u8]) -> Option<usize> {
        match self {
            Model::HaProxy(b) => b.pick(key),
            // An empty key is an absent header, query parameter or cookie: Caddy does not hash it but
            // asks the policy's fallback (`random` in 2.6.2; the `fallback`, `random` by default, from
            // 2.7: `HeaderHashSelection.Select`, `QueryHashSelection.Select`), so no one server.
            Model::Caddy(_) if key.is_empty() => None,
            Model::Caddy(p) => p.pick(key),
            Model::Ring(r) => (!r.is_empty()).then(|| r.pick(key)),
            Model::Envoy(b) => b.pick(key),
            Model::Kong(w) => w.pick(key),
            Model::Traefik(p) => p.pick(key),
        }
    }

    /// When the pick is a function of `crc32(key)` on intervals: `(first value, backend)` segments over
    /// all 2³² values, ascending from 0.
    pub fn crc32_segments(&self) -> Option<Vec<(u32, usize)>> {
        match self {
            Model::HaProxy(b) => b.crc32_segments(),
            Model::Caddy(_) | Model::Envoy(_) | Model::Kong(_) | Model::Traefik(_) => None,
            Model::Ring(r) => (!r.is_empty()).then(|| r.crc32_segments()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::PickMap;
    use crate::analysis::compare::{Comparison, Method as Counted};
    use crate::{Method, Peer, Upstream};

    fn upstream(servers: &[(&str, u32)]) -> Upstream {
        Upstream::builder(Method::Consistent)
            .peers(servers.iter().map(|&(s, w)| Peer::new(s).with_weight(w)))
            .build()
            .unwrap()
    }

    #[test]
    fn engines_parse_and_refuse_what_they_lack() {
        for s in [
            "haproxy",
            "haproxy@2.2.9:crc32,avalanche",
            "haproxy@3.0.11:none,hash-key=addr-port,map-based",
            "caddy@2.6.2",
            "ingress-nginx",
            "apisix",
            "envoy",
            "envoy:maglev",
            "envoy:murmur2,min-ring-size=4096",
            "kong",
            "kong:slots=1000",
            "traefik",
        ] {
            let e: Engine = s.parse().unwrap();
            assert_eq!(e.to_string().parse::<Engine>().unwrap(), e, "{s}");
        }
        let err = |s: &str| s.parse::<Engine>().unwrap_err().to_string();
        assert_eq!(err("haproxy@2.6:hash-key=addr"), "haproxy 2.6.12 has no hash-key (3.0 on)");
        assert_eq!(err("haproxy@2.2:none"), "haproxy 2.2.9 has no hash-type … none (3.0 on)");
        assert_eq!(
            err("haproxy:md5"),
            "haproxy: invalid hash function \"md5\" (expected sdbm, djb2, wt6, crc32 or none)"
        );
        assert_eq!(err("haproxy@1.8"), "haproxy: invalid release \"1.8\" (expected 2.2.9, 2.6.12, 3.0.11 or 3.2.26)");
        assert_eq!(
            err("nginx"),
            "unknown engine \"nginx\" (expected haproxy, caddy, ingress-nginx, apisix, envoy, kong or traefik)"
        );
        assert_eq!(err("caddy:ip_hash"), "caddy: invalid option \"ip_hash\" (expected none)");
    }

    /// What output says of an engine that does not run here is what docs/engines.md says of it, and its
    /// release is the one its source is cited at.
    #[test]
    fn engines_not_run_here_are_named_as_the_docs_name_them() {
        let docs = include_str!("../docs/engines.md");
        for s in ["ingress-nginx", "apisix", "envoy", "kong", "traefik"] {
            let e: Engine = s.parse().unwrap();
            assert!(!e.proven_live(), "{s}");
            let said = format!("modelled from {} source, not proven live", e.modelled_from());
            assert!(docs.contains(&said), "docs/engines.md lacks {said:?}");
            let release = e.modelled_from().rsplit(' ').next().unwrap().to_string();
            assert!(e.source().contains(release.trim_start_matches('v')), "{s}: {release} vs {}", e.source());
        }
    }

    /// Envoy's `ring_hash_lb_test.cc` `BasicWithHostname` (hosts `tcp://127.0.0.1:90`…`:95` with
    /// hostnames `90`…`95`, `use_hostname_for_hashing`, `minimum_ring_size` 12) and
    /// `BasicWithMetadataHashKey` (the same keys as `envoy.lb` `hash_key`, no hostname option) expect one
    /// ring: Envoy's entries, reproduced here through [`Backend::host_key`]. A `hash_key` wins over the
    /// hostname; without the option the hostname is not hashed.
    #[test]
    fn envoy_hashes_hash_key_then_hostname_then_address() {
        let expected = envoy::HOSTNAME_TEST_RING;
        let ring = |engine: &str, backends: &[Backend]| match engine.parse::<Engine>().unwrap().model(backends).unwrap()
        {
            Model::Envoy(envoy::Balancer::Ring(r)) => r.entries().collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let host = |port: u16, name: Option<String>, key: Option<String>| {
            let mut b = Backend::new(format!("127.0.0.1:{port}").parse().unwrap(), 1);
            (b.name, b.hash_key) = (name, key);
            b
        };
        let by_hostname: Vec<Backend> = (90..=95).map(|p| host(p, Some(p.to_string()), None)).collect();
        assert_eq!(ring("envoy:min-ring-size=12,use-hostname-for-hashing", &by_hostname), expected);
        let by_metadata: Vec<Backend> = (90..=95).map(|p| host(p + 100, None, Some(p.to_string()))).collect();
        assert_eq!(ring("envoy:min-ring-size=12", &by_metadata), expected);
        let both: Vec<Backend> = (90..=95).map(|p| host(p, Some(format!("h{p}")), Some(p.to_string()))).collect();
        assert_eq!(ring("envoy:min-ring-size=12,use-hostname-for-hashing", &both), expected);
        // Without the option, the hostname is not the key: the address `127.0.0.1:90` is (`Basic`).
        assert_ne!(ring("envoy:min-ring-size=12", &by_hostname), expected);
        let plain: Vec<Backend> = (90..=95).map(|p| host(p, None, None)).collect();
        assert_eq!(ring("envoy:min-ring-size=12", &by_hostname), ring("envoy:min-ring-size=12", &plain));
        let e: Engine = "envoy:maglev,use-hostname-for-hashing".parse().unwrap();
        assert_eq!(e.to_string(), "envoy:maglev,use-hostname-for-hashing");
        assert_eq!(
            "envoy:use-hostname-for-hashing".parse::<Engine>().unwrap().to_string(),
            "envoy:use-hostname-for-hashing"
        );
    }

    /// Caddy's header, query and cookie policies do not hash an empty value (an absent header): they ask
    /// the fallback (`random`), so an empty key is not hashed, and a comparison counts it apart.
    #[test]
    fn caddy_does_not_hash_an_empty_key() {
        let up = upstream(&[("10.0.0.1:80", 1), ("10.0.0.2:80", 1), ("10.0.0.3:80", 1)]);
        let map = PickMap::new(&up);
        for release in ["caddy@2.6.2", "caddy@2.11.4"] {
            let engine: Engine = release.parse().unwrap();
            let model = engine.model(&crate::analysis::compare::engine_backends(&up).unwrap()).unwrap();
            assert_eq!(model.pick(b""), None, "{release}");
            assert!(model.pick(b"x").is_some());
            let keys: [&[u8]; 4] = [b"", b"a", b"", b"b"];
            let c = Comparison::of_keys(&up, &map, crate::analysis::compare::Against::Engine(engine), keys).unwrap();
            assert_eq!((c.total, c.not_hashed), (4, 2), "{release}");
            assert!(c.agree <= 2);
        }
    }

    /// lua-resty-balancer's `t/chash.t` TEST 2 ("compare with nginx chash") runs APISIX's ids (`:` → NUL)
    /// beside nginx's `hash $arg_key consistent` over the same three `ip:port` lines, weights 2, 2, 1, and
    /// expects the same port for every key: exactly what the comparison must find over all 2³² values.
    #[test]
    fn apisix_agrees_with_nginx_exactly_on_ipv4_lines() {
        let up = upstream(&[("127.0.0.1:1985", 2), ("127.0.0.1:1986", 2), ("127.0.0.1:1987", 1)]);
        let map = PickMap::new(&up);
        let c = Comparison::against_engine(&up, &map, Engine::Apisix, 0, 0).unwrap();
        assert_eq!((c.method, c.agree), (Counted::Exact, c.total));
        // Weights 2, 2, 4 become 1, 1, 2: APISIX keeps half of each server's points.
        let up = upstream(&[("127.0.0.1:1985", 2), ("127.0.0.1:1986", 2), ("127.0.0.1:1987", 4)]);
        let c = Comparison::against_engine(&up, &PickMap::new(&up), Engine::Apisix, 0, 0).unwrap();
        assert!(c.agree < c.total && c.agree > c.total / 2, "{}", c.agree);
    }

    /// The exact count and a sample of the same engine agree within the sample's interval (HAProxy with
    /// `crc32`, ingress-nginx).
    #[test]
    fn exact_and_sampled_counts_agree() {
        let up = upstream(&[("10.0.0.1:80", 1), ("10.0.0.2:80", 2), ("10.0.0.3:80", 1), ("10.0.0.4:80", 1)]);
        let map = PickMap::new(&up);
        for engine in ["haproxy@2.6:crc32", "ingress-nginx", "apisix"] {
            let engine: Engine = engine.parse().unwrap();
            let exact = Comparison::against_engine(&up, &map, engine, 0, 0).unwrap();
            assert_eq!(exact.method, Counted::Exact);
            let sampled =
                Comparison::sampled(&up, &map, crate::analysis::compare::Against::Engine(engine), 20_000, 3).unwrap();
            let (lo, hi) = crate::analysis::compare::wilson(sampled.agree, sampled.total);
            // 95% intervals, fixed seed: deterministic; widened by 0.01 against the 1-in-20 miss.
            let p = exact.fraction(exact.agree);
            assert!(lo - 0.01 <= p && p <= hi + 0.01, "{engine}: exact {p}, sample {lo}..{hi}");
        }
        let sdbm = Comparison::against_engine(&up, &map, "haproxy".parse().unwrap(), 1000, 1).unwrap();
        assert!(matches!(sdbm.method, Counted::Sampled { keys: 1000, .. }));
    }
}
