//! The arguments commands share, each defined once: a command flattens the groups it takes
//! (`#[command(flatten)]`), so `--help`, the completions and the man page, all generated from these
//! definitions, describe a flag the same way in every command.
//!
//! [`ConfigArgs`] is the configuration a command reads (`--config`, `--upstream`, [`NoResolve`],
//! `--nginx-version`, `--libc`, [`Fragment`]); [`Failed`], [`KeyLength`], [`KeysFile`], [`FormatArg`]
//! and [`SvgFile`] are the analysis commands' options; [`FailMovedAbove`], [`FailSkewAbove`] and
//! [`FailAgreementBelow`] their gates (`gate`). A command in which a flag means more than its shared
//! definition says so with `#[command(mut_args(help_of("ID", "…")))]`.

use crate::gate::{Percent, Ratio};
use crate::lines::count_keys;
use crate::render::Format;
use crate::traffic::{self, Traffic};
use anyhow::{Result, bail};
use clap::builder::TypedValueParser as _;
use nginx_ketama::config::{Balancer, Config, Input, LoadOptions};
use nginx_ketama::failure::{ClientRequest, Reply, RequestMethod, RetryPolicy};
use nginx_ketama::version::MODELLED;
use nginx_ketama::{Libc, NginxVersion, Peer, Upstream};
use std::num::NonZeroUsize;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// The configuration a command reads, and the nginx whose rules it follows.
#[derive(clap::Args)]
pub(crate) struct ConfigArgs {
    /// nginx configuration file (includes are followed). Host names in its `server` lines are resolved with
    /// this machine's system resolver (getaddrinfo: /etc/hosts, DNS), as nginx resolves them at start-up, unless
    /// --no-resolve.
    #[arg(long)]
    config: PathBuf,
    /// The upstream to use (`NAME`, or `http:NAME` / `stream:NAME` when both contexts have one); may be left
    /// out when the file has exactly one.
    #[arg(long)]
    upstream: Option<String>,
    #[command(flatten)]
    resolve: NoResolve,
    // The help names the modelled range, from the version table.
    #[arg(
        long,
        default_value_t = NginxVersion::LATEST,
        value_parser = modelled_version,
        help = with_modelled_range("Follow the rules of this nginx version")
    )]
    nginx_version: NginxVersion,
    /// The C library nginx was built with: glibc (Debian, Ubuntu, RHEL, nginx.org packages) or musl (Alpine,
    /// the `-alpine` images). It decides which server keeps a ring point two servers share.
    #[arg(long, default_value_t = Libc::Glibc, value_parser = libc_parser())]
    libc: Libc,
    #[command(flatten)]
    fragment: Fragment,
}

impl ConfigArgs {
    /// The configuration file.
    pub(crate) fn path(&self) -> &Path {
        &self.config
    }

    /// `--upstream`, if given.
    pub(crate) fn upstream(&self) -> Option<&str> {
        self.upstream.as_deref()
    }

    /// Reads the configuration (its warnings go to stderr), every upstream of it.
    pub(crate) fn load_config(&self) -> Result<Config> {
        let options = load_options(&self.resolve, &self.fragment, self.nginx_version, self.libc);
        let config = Config::load(&self.config, &options)?;
        for w in &config.warnings {
            eprintln!("nginx-ketama: [warn] {w}");
        }
        Ok(config)
    }

    /// Reads the configuration (its warnings go to stderr) and takes the upstream `--upstream` names.
    pub(crate) fn load(&self) -> Result<Loaded> {
        let options = load_options(&self.resolve, &self.fragment, self.nginx_version, self.libc);
        load(&self.config, self.upstream.as_deref(), &options)
    }
}

/// `--no-resolve`.
#[derive(clap::Args)]
pub(crate) struct NoResolve {
    /// Make every `server` line exactly one peer, with no DNS lookups. Without it a host name is resolved
    /// with the system resolver, as nginx does at start-up, and each of its addresses is a peer.
    #[arg(long)]
    no_resolve: bool,
}

/// `--fragment [http|stream]`.
#[derive(clap::Args)]
pub(crate) struct Fragment {
    /// Read the file as a fragment (a `conf.d` include holding `upstream` blocks) that would sit inside
    /// `http { }` (the default) or `stream { }`, instead of a whole nginx.conf. This reads less than nginx.
    #[arg(long, value_enum, value_name = "CONTEXT", num_args = 0..=1, default_missing_value = "http")]
    fragment: Option<FragmentOf>,
}

/// Where a `--fragment` file's directives would sit.
#[derive(Clone, Copy, clap::ValueEnum)]
enum FragmentOf {
    Http,
    Stream,
}

/// How to read a configuration: as `resolve` and `fragment` say, for nginx `version` built with `libc`.
pub(crate) fn load_options(resolve: &NoResolve, fragment: &Fragment, version: NginxVersion, libc: Libc) -> LoadOptions {
    let input = match fragment.fragment {
        None => Input::Config,
        Some(FragmentOf::Http) => Input::Fragment,
        Some(FragmentOf::Stream) => Input::StreamFragment,
    };
    LoadOptions { resolve: !resolve.no_resolve, version, libc, input }
}

/// A hash upstream read from a configuration.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The upstream's name (without `http:`/`stream:`).
    pub(crate) name: String,
    pub(crate) upstream: Upstream,
    /// The files read: the configuration and what it includes.
    pub(crate) files: Vec<PathBuf>,
    /// The places that proxy to this upstream, with their retry rules.
    pub(crate) proxied: Vec<nginx_ketama::config::Proxied>,
    /// The whole configuration (requests are dispatched through it).
    pub(crate) config: Config,
}

/// Reads the configuration `path` with `options` (its warnings go to stderr) and takes the hash upstream
/// `upstream` names (or its only one).
pub(crate) fn load(path: &Path, upstream: Option<&str>, options: &LoadOptions) -> Result<Loaded> {
    let config = Config::load(path, options)?;
    for w in &config.warnings {
        eprintln!("nginx-ketama: [warn] {w}");
    }
    let chosen = config.hash_upstream(upstream)?;
    let proxied = config
        .proxied
        .iter()
        .filter(|p| {
            let context = match p.retry {
                nginx_ketama::config::Retry::Http(_) => nginx_ketama::config::Context::Http,
                nginx_ketama::config::Retry::Stream(_) => nginx_ketama::config::Context::Stream,
            };
            p.upstream == chosen.config.name && context == chosen.config.context
        })
        .cloned()
        .collect();
    let (name, upstream) = (chosen.config.name.clone(), chosen.upstream.clone());
    Ok(Loaded { name, upstream, files: config.files().to_vec(), proxied, config })
}

/// `help`, then the releases whose routing is modelled: `… (modelled: 1.18.0 to 1.30.x)`.
pub(crate) fn with_modelled_range(help: &str) -> String {
    format!("{help} (modelled: {})", modelled_range())
}

/// The releases whose routing is modelled ([`MODELLED`]), as `--help` and `--version` name them:
/// `1.18.0 to 1.30.x`.
pub(crate) fn modelled_range() -> String {
    range_text(&MODELLED)
}

/// `1.18.0 to 1.30.x`: a last release with the highest patch number stands for every patch release.
fn range_text(range: &RangeInclusive<NginxVersion>) -> String {
    let (first, last) = (range.start(), range.end());
    let last = match last.patch {
        u32::MAX => format!("{}.{}.x", last.major, last.minor),
        _ => last.to_string(),
    };
    format!("{first} to {last}")
}

/// An nginx version whose routing is modelled ([`MODELLED`]).
pub(crate) fn modelled_version(s: &str) -> Result<NginxVersion, String> {
    let v: NginxVersion = s.parse().map_err(|e| format!("{e}"))?;
    v.modelled().map_err(|e| e.to_string())
}

/// `--libc`: one of [`Libc::ALL`] by name (listed in `--help` and the completions).
pub(crate) fn libc_parser() -> impl clap::builder::TypedValueParser<Value = Libc> {
    clap::builder::PossibleValuesParser::new(Libc::ALL.map(Libc::as_str)).try_map(|s| s.parse::<Libc>())
}

/// `--failed SERVER`, repeatable.
#[derive(clap::Args)]
pub(crate) struct Failed {
    /// A server that refuses connections: a configured server string (every peer of that line) or one
    /// peer address as nginx prints it in $upstream_addr (e.g. `127.0.0.9:8080`, `[::1]:8080`). Repeatable.
    #[arg(long = "failed", value_name = "SERVER")]
    failed: Vec<String>,
}

impl Failed {
    /// The peers of `upstream` that `--failed` names, as a predicate; an argument that names no peer is an
    /// error listing the peers.
    pub(crate) fn in_upstream(&self, upstream: &Upstream) -> Result<impl Fn(&Peer) -> bool + Copy + '_> {
        for f in &self.failed {
            if !peers(upstream).any(|p| names(f, p)) {
                let known: Vec<String> = peers(upstream).map(|p| format!("{} ({})", p.server(), p.name())).collect();
                bail!(
                    "--failed {f:?} matches no server string or peer address in upstream \"{}\"; peers: {}",
                    upstream.name(),
                    known.join(", ")
                );
            }
        }
        Ok(self.predicate())
    }

    /// The same over the two upstreams of a change: each argument must name a peer of one of them at least.
    pub(crate) fn in_either(&self, a: &Upstream, b: &Upstream) -> Result<impl Fn(&Peer) -> bool + Copy + '_> {
        for f in &self.failed {
            if !peers(a).chain(peers(b)).any(|p| names(f, p)) {
                bail!("--failed {f:?} matches no server string or peer address in either upstream");
            }
        }
        Ok(self.predicate())
    }

    fn predicate(&self) -> impl Fn(&Peer) -> bool + Copy + '_ {
        move |p: &Peer| self.failed.iter().any(|f| names(f, p))
    }
}

/// Every peer of `upstream`, primary then backup.
fn peers(upstream: &Upstream) -> impl Iterator<Item = &Peer> {
    upstream.primary().iter().chain(upstream.backup())
}

/// Whether the argument `f` names peer `p`: its server string or its address.
fn names(f: &str, p: &Peer) -> bool {
    f == p.server().as_str() || f == p.name()
}

/// How attempts at some servers end, the request method and the retry policy: `--fail`, `--method`,
/// `--location` (issue 20 point 3).
#[derive(clap::Args)]
pub(crate) struct FailArgs {
    /// How every attempt at a server ends: SERVER=KIND, SERVER as for --failed, KIND a status code the
    /// server answers (`502`, `503`, `404`, …), `refused`, `connect-timeout`, `timeout` (reading the
    /// response), `closed` (closed before a response header), `invalid-header`, or `stale` (a cached
    /// keepalive connection found closed). Repeatable; `--failed SERVER` is `--fail SERVER=refused`.
    #[arg(long = "fail", value_name = "SERVER=KIND", value_parser = parse_fail)]
    fail: Vec<(String, Reply)>,
    /// The request's method (default GET): POST, LOCK and PATCH are not retried once sent unless
    /// `non_idempotent` is listed in proxy_next_upstream. With --requests or --log each request has its own.
    #[arg(long, value_name = "METHOD")]
    method: Option<String>,
    /// Follow the retry rules (`*_next_upstream`, `_tries`, `_timeout`, as inherited) of the place whose
    /// `proxy_pass` (or `*_pass`) to the upstream is at LINE of --config, or FILE:LINE in an included
    /// file. Without it: nginx's defaults (`proxy_next_upstream error timeout`, no limits). With --requests
    /// or --log each request follows the rules of the location nginx chooses for it.
    #[arg(long, value_name = "[FILE:]LINE")]
    location: Option<String>,
}

/// `SERVER=KIND` of `--fail`.
fn parse_fail(arg: &str) -> Result<(String, Reply), String> {
    let (server, kind) =
        arg.rsplit_once('=').ok_or_else(|| format!("{arg:?} is not SERVER=KIND (e.g. 10.0.0.1:80=502)"))?;
    let reply = match kind.to_ascii_lowercase().as_str() {
        "refused" => Reply::Refused,
        "connect-timeout" => Reply::ConnectTimeout,
        "timeout" => Reply::ReadTimeout,
        "closed" => Reply::Closed,
        "invalid-header" | "invalid_header" => Reply::InvalidHeader,
        "stale" => Reply::StaleConnection,
        k => match k.parse::<u16>() {
            Ok(status) if (100..=599).contains(&status) => Reply::Status(status),
            _ => {
                return Err(format!(
                    "unknown failure kind {kind:?}: a status code (100-599), refused, connect-timeout, timeout, \
                     closed, invalid-header or stale"
                ));
            }
        },
    };
    if server.is_empty() {
        return Err(format!("{arg:?} names no server"));
    }
    Ok((server.to_string(), reply))
}

/// A failure kind as `--fail` spells it (the inverse of its parser).
pub(crate) fn fail_kind(reply: Reply) -> String {
    match reply {
        Reply::Status(s) => s.to_string(),
        Reply::Refused => "refused".into(),
        Reply::ConnectTimeout => "connect-timeout".into(),
        Reply::ReadTimeout => "timeout".into(),
        Reply::Closed => "closed".into(),
        Reply::InvalidHeader => "invalid-header".into(),
        Reply::StaleConnection => "stale".into(),
    }
}

/// What [`FailArgs`] resolve to for one upstream.
pub(crate) struct Failures<'a> {
    fail: &'a [(String, Reply)],
    refused: &'a Failed,
    /// The retry policy in force.
    pub(crate) policy: RetryPolicy,
    /// The request.
    pub(crate) client: ClientRequest,
}

impl Failures<'_> {
    /// How an attempt at `p` ends.
    pub(crate) fn reply(&self, p: &Peer) -> Reply {
        if let Some((_, r)) = self.fail.iter().find(|(f, _)| names(f, p)) {
            return *r;
        }
        if self.refused.predicate()(p) { Reply::Refused } else { Reply::OK }
    }
}

impl FailArgs {
    /// Whether any of the flags is given (the output then carries statuses).
    pub(crate) fn given(&self) -> bool {
        !self.fail.is_empty() || self.method.is_some() || self.location.is_some()
    }

    /// The failures for requests (`--requests`, `--log`): each request brings its method and is sent under
    /// the retry rules of the location nginx chooses for it, so `--method` and `--location` are refused; each
    /// `--fail` and `--failed` server must name a peer of some hash upstream of `config`.
    pub(crate) fn for_requests<'a>(&'a self, config: &Config, refused: &'a Failed) -> Result<Failures<'a>> {
        if let Some(m) = &self.method {
            bail!(
                "--method {m:?} applies to keys from stdin: with --requests or --log each request has its own method"
            );
        }
        if let Some(l) = &self.location {
            bail!(
                "--location {l:?} applies to keys from stdin: with --requests or --log each request follows the \
                 retry rules of the location nginx chooses for it"
            );
        }
        let upstreams: Vec<&Upstream> = config
            .upstreams
            .iter()
            .filter_map(|u| match &u.balancer {
                Balancer::Hash { upstream, .. } => Some(&**upstream),
                _ => None,
            })
            .collect();
        let every = |f: &str| upstreams.iter().any(|u| peers(u).any(|p| names(f, p)));
        let named = self.fail.iter().map(|(f, _)| ("--fail", f)).chain(refused.failed.iter().map(|f| ("--failed", f)));
        for (flag, f) in named {
            if !every(f) {
                bail!(
                    "{flag} {f:?} matches no server string or peer address of any hash upstream of the configuration"
                );
            }
        }
        Ok(Failures { fail: &self.fail, refused, policy: RetryPolicy::default(), client: ClientRequest::default() })
    }

    /// The failures, method and policy for keys from stdin to `loaded`; a server or location that names nothing is an error.
    pub(crate) fn resolve<'a>(&'a self, loaded: &Loaded, refused: &'a Failed) -> Result<Failures<'a>> {
        let upstream = &loaded.upstream;
        for (f, _) in &self.fail {
            if !peers(upstream).any(|p| names(f, p)) {
                let known: Vec<String> = peers(upstream).map(|p| format!("{} ({})", p.server(), p.name())).collect();
                bail!(
                    "--fail {f:?} matches no server string or peer address in upstream \"{}\"; peers: {}",
                    upstream.name(),
                    known.join(", ")
                );
            }
        }
        let policy = match &self.location {
            None => RetryPolicy::default(),
            Some(at) => {
                let (file, line) = match at.rsplit_once(':') {
                    Some((file, line)) => (Some(file), line),
                    None => (None, at.as_str()),
                };
                let line: usize = line.parse().map_err(|_| anyhow::anyhow!("--location {at:?} is not [FILE:]LINE"))?;
                let found = loaded.proxied.iter().find(|p| {
                    p.location.line == line
                        && match file {
                            None => *p.location.file == loaded.files[0],
                            Some(f) => p.location.file.as_path() == Path::new(f) || p.location.file.ends_with(f),
                        }
                });
                let places: Vec<String> = loaded.proxied.iter().map(|p| p.location.to_string()).collect();
                match found.map(|p| p.retry) {
                    Some(nginx_ketama::config::Retry::Http(policy)) => policy,
                    Some(nginx_ketama::config::Retry::Stream(_)) => {
                        bail!("--location {at:?} is a stream server: only http locations are modelled by --fail")
                    }
                    None => bail!(
                        "--location {at:?}: no *_pass to upstream \"{}\" there; it is proxied to from: {}",
                        loaded.name,
                        if places.is_empty() { "nowhere".to_string() } else { places.join(", ") }
                    ),
                }
            }
        };
        let method: RequestMethod = self.method.as_deref().unwrap_or("GET").parse().unwrap_or_default();
        Ok(Failures { fail: &self.fail, refused, policy, client: ClientRequest { method, ..ClientRequest::default() } })
    }
}

/// `--key-length BYTES`.
#[derive(clap::Args)]
pub(crate) struct KeyLength {
    /// Plain hash with unusable slots: the key length the rehash steps are computed for (they depend on
    /// the key's CRC32 and its length).
    #[arg(long, value_name = "BYTES", default_value_t = NonZeroUsize::new(16).unwrap())]
    pub(crate) key_length: NonZeroUsize,
}

/// `--target-servers FILE`: the target platform's own server list (`crate::target`), given to the
/// engine instead of the upstream's peers.
#[derive(clap::Args)]
pub(crate) struct TargetServersFile {
    /// The engine's own server list, in its own format (recognised from the contents): an Envoy EDS
    /// ClusterLoadAssignment (JSON), a HAProxy backend section, Kong's /upstreams/NAME/targets JSON, APISIX
    /// upstream nodes, Traefik loadBalancer.servers (YAML or JSON), or a Caddy reverse_proxy line (Caddyfile
    /// or JSON). Servers are paired with nginx's by address:port; the engine must be the file's
    /// (docs/engines.md, "The target's own server list").
    #[arg(long, value_name = "FILE")]
    pub(crate) target_servers: Option<std::path::PathBuf>,
}

/// `--keys FILE`, or the keys of the requests of `--requests FILE` or `--log FILE` ([`Traffic`]).
#[derive(clap::Args)]
pub(crate) struct KeysFile {
    /// Also count these keys (one per line), next to the uniform figure.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["requests", "log"])]
    pub(crate) keys: Option<PathBuf>,
    /// Or count the keys of these requests (weighted by traffic): those that reach the upstream.
    #[command(flatten)]
    pub(crate) traffic: Traffic,
    /// With --requests, --log or --keys: also the N keys with the most requests and the server each goes to
    /// (`diff` and `compare`: of the requests that move), after the table. Counted in bounded memory with
    /// 10 × N counters (at least 100): exact while the distinct keys fit, else estimated, each count with
    /// how far over it may be. At most 10,000.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=10_000))]
    pub(crate) hottest: Option<u16>,
}

impl KeysFile {
    /// `--hottest N`, refused where there are no keys to count (the uniform figures have no hot keys) and
    /// in CSV (its rows are not the table's).
    pub(crate) fn hottest(&self, format: Format) -> Result<Option<NonZeroUsize>> {
        let Some(n) = self.hottest else { return Ok(None) };
        if self.path().is_none() {
            bail!(
                "--hottest counts the requests of --requests or --log (or the keys of --keys): the uniform figures, \
                 over all 2^32 CRC32 values, have no hot keys"
            );
        }
        if format == Format::Csv {
            bail!("--hottest has no CSV form (its rows are not the table's): use --format table or json");
        }
        Ok(NonZeroUsize::new(usize::from(n)))
    }

    /// The file the keys come from, if any.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.keys.as_deref().or(self.traffic.requests.as_deref()).or(self.traffic.log.as_deref())
    }

    /// With `--keys`, `--requests` or `--log`: the file and what `count` makes of its keys, streamed (see
    /// [`count_keys`]); requests count with the key `loaded`'s upstream gives them, when they reach it.
    pub(crate) fn count<T>(
        &self,
        loaded: &Loaded,
        count: impl FnOnce(&mut dyn Iterator<Item = Vec<u8>>) -> T,
    ) -> Result<Option<(&Path, T)>> {
        match (&self.keys, self.traffic.given()) {
            (Some(path), _) => Ok(Some((path, count_keys(path, count)?))),
            (None, true) => {
                let t = traffic::keys(&self.traffic, &[(&loaded.config, &loaded.name)], |keys| {
                    count(&mut keys.map(|mut k| k.swap_remove(0)))
                })?;
                Ok(self.path().map(|p| (p, t)))
            }
            (None, false) => Ok(None),
        }
    }

    /// As [`KeysFile::count`], for a change: each key as `from` and as `to` computes it (the same twice
    /// for `--keys`).
    pub(crate) fn count_pairs<T>(
        &self,
        from: &Loaded,
        to: &Loaded,
        count: impl FnOnce(&mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> T,
    ) -> Result<Option<(&Path, T)>> {
        match (&self.keys, self.traffic.given()) {
            (Some(path), _) => Ok(Some((path, count_keys(path, |keys| count(&mut keys.map(|k| (k.clone(), k))))?))),
            (None, true) => {
                let sides = [(&from.config, from.name.as_str()), (&to.config, to.name.as_str())];
                let t = traffic::keys(&self.traffic, &sides, |keys| {
                    count(&mut keys.map(|mut k| {
                        let b = k.pop().unwrap_or_default();
                        (k.pop().unwrap_or_default(), b)
                    }))
                })?;
                Ok(self.path().map(|p| (p, t)))
            }
            (None, false) => Ok(None),
        }
    }
}

/// `--format table|json|csv`.
#[derive(clap::Args)]
pub(crate) struct FormatArg {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub(crate) format: Format,
}

/// `--samples N --seed S` (`compare`, `diff --engine`, `migrate`): the random keys a sampled figure is
/// measured on (exact figures need none).
#[derive(clap::Args)]
pub(crate) struct Sample {
    /// Sampled figures (a proxy that does not hash the key with CRC-32 on intervals): how many random keys,
    /// the same keys for every figure of the run.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) samples: u64,
    /// Sampled figures: the sample's seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
}

/// `--svg FILE`.
#[derive(clap::Args)]
pub(crate) struct SvgFile {
    /// Write a picture of the ring (SVG): arcs coloured by server.
    #[arg(long, value_name = "FILE")]
    pub(crate) svg: Option<PathBuf>,
}

/// `--fail-moved-above PERCENT` (`diff`).
#[derive(clap::Args)]
pub(crate) struct FailMovedAbove {
    /// Gate: exit 1 if more than this part of the hash space (or of the --keys) changes its first pick, after
    /// writing the answer; stderr says by how much. A percentage (20%) or a fraction (0.2).
    #[arg(long, value_name = "PERCENT", value_parser = Percent::parse)]
    pub(crate) fail_moved_above: Option<Percent>,
}

/// `--fail-skew-above RATIO` (`share`).
#[derive(clap::Args)]
pub(crate) struct FailSkewAbove {
    /// Gate: exit 1 if a server answers more than this many times its fair share (the hashed part × its
    /// points ÷ the points of the servers not failing or down), over the hash space or the --keys, after
    /// writing the answer; stderr says by how much. A ratio of at least 1 (1.25).
    #[arg(long, value_name = "RATIO", value_parser = Ratio::parse)]
    pub(crate) fail_skew_above: Option<Ratio>,
}

/// `--fail-agreement-below PERCENT` (`compare`).
#[derive(clap::Args)]
pub(crate) struct FailAgreementBelow {
    /// Gate: exit 1 if the other implementation sends less than this part of the keys (the hash space,
    /// the sample or the --keys) to nginx's server, after writing the answer; stderr says by how much. A
    /// percentage (90%) or a fraction (0.9).
    #[arg(long, value_name = "PERCENT", value_parser = Percent::parse)]
    pub(crate) fail_agreement_below: Option<Percent>,
}

/// `--engine ENGINE[@RELEASE]` (`verify`): the proxy whose model is proven against the real engine instead
/// of nginx, and the hidden `--wrong-model` that shows the proof catches a wrong rule. The flags that
/// concern nginx are refused with it.
#[cfg(feature = "live")]
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct EngineUnderProof {
    /// Prove this proxy's model against the real engine instead of the library against nginx: haproxy or
    /// caddy, every provisioned release (scripts/provision-engines) or the one named as engines/versions
    /// names it (haproxy@3.0.11, haproxy@3.2.x, caddy@2.6). Random topologies (--topologies, default one
    /// of each HAProxy kind, two of each Caddy lb_policy that hashes), random keys (--keys) and keys at both
    /// ends of every ring segment where the key's hash is computable, seeded by --seed; mismatches go to --mismatches; --report junit=FILE|json=FILE writes a suite per
    /// release and a case per kind of topology (Caddy: per lb_policy) with its requests and mismatches. Exit 0 proven, 1 on mismatches, 2 for
    /// an engine that does not run here (envoy, kong, traefik, ingress-nginx, apisix), 3 when it is not
    /// provisioned.
    #[arg(
        long,
        value_name = "ENGINE[@RELEASE]",
        value_parser = EngineTarget::parse,
        conflicts_with_all = [
            "config", "upstream", "failure_runs", "backend", "versions", "libc", "nginx", "image", "nginx_dir",
            "shim", "keep_going", "max_servers", "no_ring_proof", "no_failure_kinds", "stream_sessions",
            "repeat",
        ]
    )]
    pub(crate) engine: Option<EngineTarget>,
    /// With --engine: compare with a deliberately wrong model (HAProxy: every boundary one hash value early,
    /// ties to the node above; Caddy: the other release's hash), which the proof must catch.
    #[arg(long, hide = true, requires = "engine")]
    pub(crate) wrong_model: bool,
}

/// What `verify --engine` names: an engine that runs here (and maybe one release of it), or one that is
/// only modelled from source.
#[cfg(feature = "live")]
#[derive(Debug, Clone)]
pub(crate) enum EngineTarget {
    /// HAProxy or Caddy: every provisioned release, or the one named (`3.0.11`, `3.2.x`, `2.6`).
    Live {
        /// The engine.
        engine: nginx_ketama_harness::engines::install::Live,
        /// The release asked for.
        release: Option<String>,
    },
    /// An engine that does not run here.
    Modelled(nginx_ketama::engines::Engine),
}

#[cfg(feature = "live")]
impl EngineTarget {
    /// `ENGINE[@RELEASE]`: a release the model lacks and options (`haproxy:crc32`: the topologies cover
    /// every option) are refused.
    fn parse(s: &str) -> std::result::Result<EngineTarget, String> {
        use nginx_ketama::engines::{Engine, caddy, haproxy};
        use nginx_ketama_harness::engines::install::Live;
        let (head, options) = s.split_once(':').map_or((s, None), |(h, o)| (h, Some(o)));
        let (name, release) = head.split_once('@').map_or((head, None), |(n, r)| (n, Some(r)));
        let Some(engine) = Live::named(name) else {
            return s.parse::<Engine>().map(EngineTarget::Modelled).map_err(|e| e.to_string());
        };
        if options.is_some() {
            return Err(format!("{name}: takes no options here (ENGINE[@RELEASE]): its topologies cover every option"));
        }
        if let Some(release) = release {
            // `3.2.x` is the series, as engines/versions writes it.
            let series = release.strip_suffix(".x").unwrap_or(release);
            let modelled = match engine {
                Live::HaProxy => series.parse::<haproxy::Release>().map(|_| ()),
                Live::Caddy => series.parse::<caddy::Release>().map(|_| ()),
            };
            modelled.map_err(|e| e.to_string())?;
        }
        Ok(EngineTarget::Live { engine, release: release.map(str::to_string) })
    }
}

/// For `#[command(mut_args(…))]`: the help of the flag `id` in one command, where it means more there than
/// its shared definition says (the flag keeps its place in the help and the completions).
pub(crate) fn help_of(id: &'static str, help: &'static str) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |arg| if arg.get_id() == id { arg.help(help) } else { arg }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The help's range follows the version table, whatever it holds.
    #[test]
    fn the_range_is_written_from_the_table() {
        let v = NginxVersion::new;
        assert_eq!(range_text(&(v(1, 18, 0)..=v(1, 30, u32::MAX))), "1.18.0 to 1.30.x");
        assert_eq!(range_text(&(v(1, 20, 2)..=v(1, 32, u32::MAX))), "1.20.2 to 1.32.x");
        assert_eq!(range_text(&(v(1, 20, 2)..=v(1, 32, 4))), "1.20.2 to 1.32.4");
        assert_eq!(
            with_modelled_range("Follow"),
            format!("Follow (modelled: {} to {}.{}.x)", MODELLED.start(), MODELLED.end().major, MODELLED.end().minor)
        );
    }
}
