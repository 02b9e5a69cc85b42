//! Proving a user's own `nginx.conf`: every hash upstream as written, on real nginx, with nothing leaving
//! the machine.
//!
//! * [`choose`] reads the upstreams the config reader found ([`nginx_ketama::config`], with the version's
//!   rules, nothing resolved) and turns each hash upstream into a [`Topology`] ([`Topology::from_config`]):
//!   the server strings exactly as written (they are hashed), weights, `down`, `backup`, `max_fails`,
//!   `fail_timeout` and the method. The key expression is replaced by the harness's raw-key header: the
//!   proof sends raw keys; how `$request_uri` or `$arg_x` builds a key is the user's side.
//! * [`plan`] decides where everything lives: the config's addresses are put on `lo` inside a private
//!   network namespace (so `10.0.0.7:8080` is local there and exists nowhere else), hostnames get a
//!   private hosts file (a name that resolves on this machine keeps its addresses in the resolver's order,
//!   resolved inside a private namespace so that no DNS query leaves the machine; a name that does not
//!   resolve gets a stand-in address), the directories of `unix:` sockets are shadowed by private ones in
//!   the mount namespace, the ephemeral port range holds no port of the config, and the front server uses
//!   an address the config does not.
//! * [`Prover`] runs each upstream on each nginx build: all servers live with forged keys at both ends of
//!   every arc plus random keys, then runs in which a random set of servers refuses connections; with
//!   failure kinds, every second of those runs also has servers that answer 5xx/403/404/429, send an
//!   invalid header (or stall, where `fail_timeout` is an hour), under the retry rules of the location that
//!   proxies to the upstream ([`PassRules`]) and with GET and POST requests.
//!
//! Without namespaces (not root) only upstreams whose every server is a loopback literal on a port outside
//! the machine's ephemeral range can be run (on the shared loopback); the others are skipped with the
//! reason.

pub mod expression;
pub mod plan;

use crate::nginx::build::Build;
use crate::nginx::install::Installation;
use crate::nginx::local::LocalNginx;
use crate::nginx::log::log_tail;
use crate::nginx::netns::{self, Holder, Isolation};
use crate::nginx::scratch::ScratchDir;
use crate::proofs::replay::{self, Replay};
use crate::proofs::sweep::{Finding, topology_seed};
use crate::proofs::verdict::Tally;
use crate::run::client::{Method as HttpMethod, pipeline_methods};
use crate::run::clock::{ClockedModel, Unclocked};
use crate::run::keyed;
use crate::run::parity::{self, PlanOptions, compare_clocked, http_site_failing, resolve_through_nginx};
use crate::site::conf::HTTP_KEY;
use crate::site::failures::Failures;
use crate::site::topology::{Endpoint, Listen, Resolution, ServerLine, Spelling, Topology};
use anyhow::{Context as _, Result, bail};
use nginx_ketama::Libc;
use nginx_ketama::config::{Balancer, Config, ConfigError, Context, Input, LoadOptions, Retry};
use nginx_ketama::failure::RetryPolicy;
use nginx_ketama::server::Address;
use nginx_ketama::upstream::{Method, Upstream, default_name};
use nginx_ketama::version::NginxVersion;
use plan::{NameSource, NetworkPlan};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// Reads `path` with `version`'s rules, resolving nothing (the proof resolves names itself, privately).
///
/// # Errors
///
/// What nginx would say about the file (nginx's wording, with file and line).
pub fn load(path: &Path, version: NginxVersion, libc: Libc) -> Result<Config, ConfigError> {
    Config::load(path, &LoadOptions { resolve: false, version, libc, input: Input::Config })
}

/// A hash upstream of the config, ready to prove.
#[derive(Debug, Clone)]
pub struct ConfigUpstream {
    /// Its name.
    pub name: String,
    /// Its position among the config's upstreams (seeds derive from it, so `--upstream` replays the same
    /// keys).
    pub index: usize,
    /// Where its block starts (`file:line`).
    pub location: String,
    /// The key expression as written (replaced by the raw-key header in the proof).
    pub key: String,
    /// Its servers, hostnames not yet resolved.
    pub topology: Topology,
    /// Where each line of `topology` is written (`file:line`), in the same order.
    pub locations: Vec<String>,
    /// The retry rules the failure-kind runs follow; `None` when no `*_pass` of the config names the
    /// upstream (nginx's defaults then).
    pub rules: Option<PassRules>,
    /// What the key expression reads (for its run, [`expression`]), or why it cannot be proven.
    pub expression: Result<expression::Needs, expression::NotProven>,
}

/// The retry rules of the first `*_pass` that names an upstream (the front of a failure-kind run follows
/// them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassRules {
    /// `*_next_upstream`, `_tries` and `_timeout` as inherited there.
    pub policy: RetryPolicy,
    /// Where the `*_pass` is (`file:line`).
    pub at: String,
}

impl ConfigUpstream {
    /// The policy of its failure-kind runs.
    pub fn policy(&self) -> RetryPolicy {
        self.rules.as_ref().map_or_else(RetryPolicy::default, |r| r.policy)
    }
}

/// An upstream the proof leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its name (`stream:NAME` for a stream upstream).
    pub name: String,
    /// Where its block starts.
    pub location: String,
    /// Why.
    pub why: String,
}

/// What [`choose`] found.
#[derive(Debug, Clone, Default)]
pub struct Choice {
    /// The upstreams to prove, in config order.
    pub prove: Vec<ConfigUpstream>,
    /// The upstreams left out, in config order.
    pub skipped: Vec<Skipped>,
}

/// The upstreams of `config` to prove: those named in `names` (each must exist and use `hash`), or every
/// hash upstream. Stream upstreams and upstreams with run-time resolved (`resolve`) servers are skipped
/// with the reason; so are non-hash upstreams when no names are given.
///
/// # Errors
///
/// A name that is not an upstream of the config, or names an upstream that does not use `hash` (the
/// config reader's messages); a named upstream that cannot be proven.
pub fn choose(config: &Config, names: &[String], seed: u64) -> Result<Choice> {
    let mut wanted: Vec<usize> = Vec::new();
    for name in names {
        let found = config.hash_upstream(Some(name))?;
        if let Some(i) = config.upstreams.iter().position(|u| std::ptr::eq(u, found.config))
            && !wanted.contains(&i)
        {
            wanted.push(i);
        }
    }
    let mut choice = Choice::default();
    for (index, u) in config.upstreams.iter().enumerate() {
        if !names.is_empty() && !wanted.contains(&index) {
            continue;
        }
        let label = match u.context {
            Context::Http => u.name.clone(),
            Context::Stream => format!("stream:{}", u.name),
        };
        let skip = |why: String| Skipped { name: label.clone(), location: u.location.to_string(), why };
        let (key, upstream) = match &u.balancer {
            Balancer::Hash { key, upstream } => (key, upstream),
            Balancer::Other(b) => {
                choice.skipped.push(skip(format!("balancer {b}, not hash")));
                continue;
            }
            Balancer::RoundRobin => {
                choice.skipped.push(skip("round-robin, not hash".into()));
                continue;
            }
        };
        let why = if u.context == Context::Stream {
            Some("a stream upstream: the proof runs HTTP upstreams (keys in a header)".to_string())
        } else {
            config
                .warnings
                .iter()
                .find(|w| {
                    w.message.contains("resolved at run time")
                        && upstream
                            .primary()
                            .iter()
                            .chain(upstream.backup())
                            .any(|p| w.message.starts_with(&format!("server \"{}\"", p.server().as_str())))
                })
                .map(|w| format!("has servers resolved at run time (`resolve`, {}): not proven", w.location))
        };
        match why {
            Some(why) if names.is_empty() => choice.skipped.push(skip(why)),
            Some(why) => bail!("upstream \"{}\" in {} cannot be proven: {why}", u.name, u.location),
            None => choice.prove.push(ConfigUpstream {
                name: u.name.clone(),
                index,
                location: u.location.to_string(),
                key: key.clone(),
                topology: Topology::from_config(upstream, topology_seed(seed, index)),
                locations: u.servers.iter().map(ToString::to_string).collect(),
                expression: expression::needs(config, key),
                rules: config.proxied.iter().find_map(|p| match &p.retry {
                    Retry::Http(policy) if p.upstream.eq_ignore_ascii_case(&u.name) => {
                        Some(PassRules { policy: *policy, at: p.location.to_string() })
                    }
                    _ => None,
                }),
            }),
        }
    }
    Ok(choice)
}

/// How a `server` string is spelled, for reports (hostnames: one address until resolved).
pub fn spelling_of(server: &str) -> Spelling {
    match Address::parse(server) {
        Ok(Address::Unix { .. }) if server.starts_with("unix:") => Spelling::Unix,
        Ok(Address::Unix { .. }) => Spelling::UnixUpper,
        Ok(Address::Ipv6 { port: Some(_), .. }) => Spelling::Ipv6Port,
        Ok(Address::Ipv6 { port: None, .. }) => Spelling::Ipv6NoPort,
        _ => match default_name(&nginx_ketama::Server::new(server), 80).parse::<SocketAddr>() {
            Ok(_) if !server.contains(':') => Spelling::IpNoPort,
            Ok(a) if server.rsplit_once(':').is_some_and(|(_, p)| p != a.port().to_string()) => Spelling::IpOddPort,
            Ok(_) => Spelling::IpPort,
            Err(_) => Spelling::Hostname,
        },
    }
}

impl Topology {
    /// The topology of a config's upstream (read with `resolve: false`: one peer per `server` line): every
    /// line as written — its exact server string, weight, `down`, `backup`, `max_fails`, `fail_timeout` —
    /// primary lines then backup lines, each in config order, and the method. Literal addresses and unix
    /// paths get their endpoint (an IPv4-mapped IPv6 address listens on its IPv4 address, where the kernel
    /// connects it); hostname lines get theirs from [`Topology::resolved`]. No line is failing.
    pub fn from_config(upstream: &Upstream, seed: u64) -> Topology {
        let line = |p: &nginx_ketama::Peer, backup: bool| {
            let server = p.server().as_str().to_string();
            let spelling = spelling_of(&server);
            let endpoints = match Address::parse(&server) {
                Ok(Address::Unix { path }) => vec![Endpoint { listen: Listen::Unix(path), name: server.clone() }],
                _ => {
                    let name = default_name(p.server(), 80);
                    match name.parse::<SocketAddr>() {
                        Ok(a) => {
                            let listen = SocketAddr::new(a.ip().to_canonical(), a.port());
                            vec![Endpoint { listen: Listen::Tcp(listen), name }]
                        }
                        Err(_) => Vec::new(),
                    }
                }
            };
            ServerLine {
                server,
                spelling,
                weight: p.weight(),
                down: p.is_down(),
                dead: false,
                backup,
                max_fails: p.max_fails(),
                fail_timeout: p.fail_timeout(),
                endpoints,
            }
        };
        let mut lines: Vec<ServerLine> = upstream.primary().iter().map(|p| line(p, false)).collect();
        lines.extend(upstream.backup().iter().map(|p| line(p, true)));
        Topology { seed, method: upstream.method(), lines, hosts: Vec::new() }
    }

    /// This topology with the lines flagged in `failing` refusing connections (and every line that shares
    /// an address with one of them: an address either listens or not).
    pub fn with_failing(mut self, failing: &[bool]) -> Topology {
        for (line, &f) in self.lines.iter_mut().zip(failing) {
            line.dead = f;
        }
        loop {
            let dead: Vec<Listen> = self
                .lines
                .iter()
                .filter(|l| l.dead)
                .flat_map(|l| l.endpoints.iter().map(|e| e.listen.clone()))
                .collect();
            let mut changed = false;
            for l in self.lines.iter_mut().filter(|l| !l.dead) {
                if l.endpoints.iter().any(|e| dead.contains(&e.listen)) {
                    l.dead = true;
                    changed = true;
                }
            }
            if !changed {
                return self;
            }
        }
    }
}

/// Random sets of failing lines, one per failure run: each line fails with probability 1/3, at least one
/// per set.
pub fn failing_sets(lines: usize, runs: usize, seed: u64) -> Vec<Vec<bool>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6661_696c);
    (0..runs)
        .map(|_| {
            let mut set: Vec<bool> = (0..lines).map(|_| rng.random_range(0..3) == 0).collect();
            if lines > 0 && !set.contains(&true) {
                set[rng.random_range(0..lines)] = true;
            }
            set
        })
        .collect()
}

/// Resolves `name` in a fresh private network namespace with this machine's `/etc/hosts`: only `lo`
/// exists there, so only the hosts file (and resolvers listening on loopback, which are not there) can
/// answer, and no query leaves the machine. `None` when it does not resolve.
pub fn resolve_on_machine(exe: &Path, name: &str) -> Option<Vec<IpAddr>> {
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    crate::proofs::sweep::resolve_in_namespace(exe, &hosts, &[name.to_string()])
        .ok()
        .map(|r| r.addresses(name).to_vec())
        .filter(|a| !a.is_empty())
}

/// Knobs of a proof.
#[derive(Debug, Clone)]
pub struct ProveOptions {
    /// Master seed.
    pub seed: u64,
    /// Random keys per run.
    pub keys: usize,
    /// Forge keys at both ends of every arc (consistent upstreams).
    pub prove_ring: bool,
    /// Runs per upstream with a random set of failing servers.
    pub failure_runs: usize,
    /// Send each failure run's keys in two halves with this pause between, so that servers failed in the
    /// first half come back (`fail_timeout`) in the second; `None`: all at once.
    pub failure_pause: Option<std::time::Duration>,
    /// Every second failure run has failure kinds ([`Failures::random_under`] the upstream's rules).
    pub failure_kinds: bool,
    /// For mutation checks only: the model of the key expression run evaluates this expression instead of
    /// the one nginx hashes.
    #[doc(hidden)]
    pub model_key: Option<String>,
}

impl ProveOptions {
    /// Whether run `run` (0: all live) has failure kinds.
    pub fn has_failure_kinds(&self, run: usize) -> bool {
        self.failure_kinds && run > 0 && run.is_multiple_of(2)
    }
}

/// One upstream on one nginx build.
#[derive(Debug, Clone)]
pub struct UpstreamReport {
    /// The build (`1.26.3`, `1.26.3-musl`).
    pub build: String,
    /// The upstream's name.
    pub upstream: String,
    /// `hash … consistent` or plain `hash`.
    pub method: Method,
    /// `server` lines.
    pub servers: usize,
    /// Peers (a hostname line has one per address).
    pub peers: usize,
    /// Ring points (0 for plain hash).
    pub points: usize,
    /// Arcs proven at both ends in every run (0 without a ring, or if any ring key differed).
    pub arcs_proven: usize,
    /// Requests compared over all runs.
    pub requests: usize,
    /// nginx runs (1 all-live + the failure runs).
    pub runs: usize,
    /// Requests that went through at least one retry.
    pub failovers: usize,
    /// Runs with failure kinds, and the requests that met each kind in them (`refused`, `http_502`, …),
    /// and the rules they ran under ([`FailureKinds::rules`]).
    pub failure_kinds: FailureKinds,
    /// The key expression run.
    pub expression: ExpressionReport,
    /// Every difference.
    pub findings: Vec<Finding>,
    /// Requests not compared (counted in `requests`), by why: their route depends on when nginx's clock
    /// ticked (see [`crate::run::clock`]).
    pub not_comparable: Vec<(Unclocked, usize)>,
    /// Why the harness could not finish (not a mismatch, never a pass).
    pub fault: Option<String>,
    /// How nginx ordered each hostname's addresses (asked from nginx itself).
    pub resolution: Vec<(String, Vec<IpAddr>)>,
}

impl UpstreamReport {
    /// The report of `upstream` (`method`, `servers` server lines) on `build` before anything ran.
    pub fn new(build: String, upstream: String, method: Method, servers: usize) -> UpstreamReport {
        UpstreamReport {
            build,
            upstream,
            method,
            servers,
            peers: 0,
            points: 0,
            arcs_proven: 0,
            requests: 0,
            runs: 0,
            failovers: 0,
            failure_kinds: FailureKinds::default(),
            expression: ExpressionReport::NotRun,
            findings: Vec::new(),
            not_comparable: Vec::new(),
            fault: None,
            resolution: Vec::new(),
        }
    }

    /// Requests not compared, in all.
    pub fn not_compared(&self) -> usize {
        self.not_comparable.iter().map(|(_, n)| n).sum()
    }

    /// What a `verify --config` run counted, for its [`Verdict`](crate::proofs::verdict::Verdict):
    /// `reports`, plus `rejected` builds that refused the config; `unhostable` when nothing ran because
    /// the namespace plan refused every upstream.
    pub fn tally(reports: &[UpstreamReport], rejected: usize, unhostable: bool) -> Tally {
        Tally {
            mismatches: reports.iter().map(|r| r.findings.len()).sum(),
            protocol_faults: 0,
            harness_faults: rejected + reports.iter().filter(|r| r.fault.is_some()).count(),
            compared: reports.iter().map(|r| r.requests - r.not_compared()).sum(),
            unhostable_only: reports.is_empty() && unhostable,
        }
    }
}

/// `mismatches` of one run of `upstream` on `install` (seeded `seed`, its upstream written as `block`) as
/// findings.
fn findings(
    install: &Installation,
    upstream: &ConfigUpstream,
    seed: u64,
    block: &str,
    replay: &str,
    mismatches: Vec<crate::run::parity::Mismatch>,
) -> impl Iterator<Item = Finding> {
    let (version, index, block, replay) = (install.label(), upstream.index, block.to_string(), replay.to_string());
    mismatches.into_iter().map(move |mismatch| Finding {
        version: version.clone(),
        backend: "local".into(),
        topology: index,
        topology_seed: seed,
        upstream_block: block.clone(),
        mismatch,
        replay: replay.clone(),
    })
}

/// The key expression run of one upstream ([`expression`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpressionReport {
    /// Not run (the proof stopped before it).
    NotRun,
    /// Not proven, and why (a variable the library does not model, a `set` variable of a location).
    NotProven(String),
    /// Run: the requests compared (their mismatches are findings), how many of them nginx refused (and the
    /// library too, or a mismatch), and the variables the key read.
    Run {
        /// Requests compared.
        requests: usize,
        /// Of which nginx answered itself (400 and the like).
        refused: usize,
        /// Requests nginx routed otherwise than the library (each also a finding).
        mismatches: usize,
        /// The variables the key reads, directly or through maps.
        variables: Vec<String>,
    },
}

/// What the failure-kind runs of one upstream met.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureKinds {
    /// Runs with failure kinds.
    pub runs: usize,
    /// Their requests.
    pub requests: usize,
    /// POSTs among them.
    pub posts: usize,
    /// Requests that met each kind (a request meeting two kinds counts for both).
    pub met: std::collections::BTreeMap<String, usize>,
    /// The rules they ran under (`proxy_next_upstream …; tries N`, and where).
    pub rules: String,
}

/// The command that proves `upstream` of the config `file` on `install` again, with `options`.
pub fn replay_command(file: &Path, upstream: &str, install: &Installation, options: &ProveOptions) -> String {
    Replay::verify()
        .option("--config", file.display())
        .option("--upstream", upstream)
        .build(&Build::Local(install.clone()), replay::Backend::Implied)
        .option("--seed", options.seed)
        .option("--keys", options.keys)
        .option("--failure-runs", options.failure_runs)
        .switch("--no-ring-proof", !options.prove_ring)
        .switch("--no-failure-kinds", !options.failure_kinds)
        .into()
}

/// Where a proof of one upstream on one build stands, for progress reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The run (0: every server live; then the failure runs).
    pub run: usize,
    /// Runs in all.
    pub runs: usize,
    /// Responses read in this run.
    pub done: usize,
    /// Requests in this run.
    pub total: usize,
}

/// Requests one run of `upstream` sends: the random and empty keys, and (consistent, with the ring proof)
/// two forged keys per ring point plus the ring's two edges. Hostname lines count one address each, so
/// this is a lower bound when a name has several.
pub fn requests_per_run(upstream: &ConfigUpstream, options: &ProveOptions) -> usize {
    let mut n = options.keys + options.keys / 50;
    if options.prove_ring && upstream.topology.method == Method::Consistent {
        let weights: usize = upstream.topology.lines.iter().filter(|l| !l.backup).map(|l| l.weight as usize).sum();
        n += 2 * 160 * weights + 2;
    }
    n
}

/// The proof's environment: the namespace holder (as root), the plan, and the private directories; each
/// build runs in it (or, without namespaces, on the shared loopback).
#[derive(Debug)]
pub struct Prover {
    plan: Option<NetworkPlan>,
    // Declared before `base`: the namespace ends before its directories are removed.
    holder: Option<Holder>,
    base: ScratchDir,
    shadow_dirs: Vec<(PathBuf, plan::Shadow)>,
    /// The namespace's working directory: relative unix socket paths are created below it.
    cwd: PathBuf,
    runs: std::sync::atomic::AtomicUsize,
}

impl Prover {
    /// Prepares the namespace for `upstreams` (as root): resolves hostnames on this machine (privately),
    /// plans addresses and ports (leaving out, with the reason, upstreams that cannot be hosted), starts the
    /// holder with a private name service (see [`netns::private_name_service`]), adds the addresses to its
    /// `lo`. Without namespaces it prepares nothing: [`Prover::runnable`] then says which upstreams can
    /// still run.
    ///
    /// # Errors
    ///
    /// The config cannot be hosted at all ([`plan::Unhostable`], see [`NetworkPlan::new`]), the namespace
    /// or `ip` failing.
    pub fn new(upstreams: &[&ConfigUpstream], installs: &[&Installation], resolver_exe: &Path) -> Result<Prover> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        // One directory per prover (short: unix socket paths must fit in 107 bytes).
        let pid = format!("{}-{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        if !netns::available() {
            let base = ScratchDir::create(PathBuf::from(format!("/tmp/nk-oc-{pid}")), &[])?;
            return Ok(Prover {
                plan: None,
                holder: None,
                cwd: base.to_path_buf(),
                base,
                shadow_dirs: Vec::new(),
                runs: 0.into(),
            });
        }
        let mut needed: Vec<PathBuf> = installs.iter().flat_map(|i| i.paths()).collect();
        needed.extend(plan::needed_paths());
        let needed: Vec<&Path> = needed.iter().map(PathBuf::as_path).collect();
        let plan = NetworkPlan::new(upstreams, |name| resolve_on_machine(resolver_exe, name), &needed)?;
        let shadowed = |p: &Path| plan.shadows.iter().any(|s| p.starts_with(&s.target));
        let base = crate::nginx::scratch::PLACES
            .iter()
            .map(|b| PathBuf::from(format!("{b}/nk-oc-{pid}")))
            .find(|b| !shadowed(b) && !b.parent().and_then(|p| p.canonicalize().ok()).is_some_and(|p| shadowed(&p)))
            .context("every temporary directory would be shadowed by a unix socket's directory")?;
        // Removed when dropped: by the prover, or on the way out if the namespace cannot be made.
        let base = ScratchDir::create(base, &[])?;
        let mut binds = Vec::new();
        let mut shadow_dirs = Vec::new();
        for (i, shadow) in plan.shadows.iter().enumerate() {
            let private = base.join(format!("shadow{i}"));
            std::fs::create_dir_all(&private)?;
            for s in &shadow.sockets {
                if let Some(dir) = private.join(&s.within).parent() {
                    std::fs::create_dir_all(dir)?;
                }
            }
            binds.push((private.clone(), shadow.target.clone()));
            shadow_dirs.push((private, shadow.clone()));
        }
        let cwd = base.join("cwd");
        std::fs::create_dir_all(&cwd)?;
        for r in &plan.relative {
            if let Some(dir) = cwd.join(r).parent() {
                std::fs::create_dir_all(dir)?;
            }
        }
        let hosts = base.join("hosts");
        std::fs::write(&hosts, plan.hosts_file())?;
        binds.push((hosts, PathBuf::from("/etc/hosts")));
        // A shadow already hides whatever it covers (a socket directory covering nscd's, say).
        let names = netns::private_name_service(&base.join("names")).context("a private name service")?;
        binds.extend(names.into_iter().filter(|(_, target)| !shadowed(target)));
        let holder = Holder::start(&Isolation { binds, ephemeral: plan.ephemeral.clone(), cwd: Some(cwd.clone()) })
            .context("creating the private network and mount namespaces")?;
        holder.add_addresses(&plan.on_lo).context("adding the config's addresses to lo in the namespace")?;
        Ok(Prover { plan: Some(plan), holder: Some(holder), base, shadow_dirs, cwd, runs: 0.into() })
    }

    /// The plan (`None` without namespaces).
    pub fn plan(&self) -> Option<&NetworkPlan> {
        self.plan.as_ref()
    }

    /// The namespace holder (`None` without namespaces).
    pub fn holder(&self) -> Option<&Holder> {
        self.holder.as_ref()
    }

    /// Whether `upstream` can run here; if not, why: a server line the namespace cannot host, or, without
    /// namespaces, the first server that needs one.
    ///
    /// # Errors
    ///
    /// The reason, naming the server line.
    pub fn runnable(&self, upstream: &ConfigUpstream) -> std::result::Result<(), String> {
        if let Some(plan) = &self.plan {
            return match plan.refusal(&upstream.name) {
                Some(why) => Err(why.to_string()),
                None => Ok(()),
            };
        }
        let own = netns::own_ephemeral_ports().unwrap_or(1..=65535);
        for l in &upstream.topology.lines {
            let ok = l.endpoints.len() == 1
                && matches!(l.spelling, Spelling::IpPort | Spelling::IpOddPort | Spelling::Ipv6Port)
                && l.endpoints.iter().all(|e| match e.listen {
                    Listen::Tcp(a) => plan::is_on_lo_already(a.ip()) && a.port() >= 1024 && !own.contains(&a.port()),
                    Listen::Unix(_) => false,
                });
            if !ok {
                return Err(format!(
                    "needs a private network namespace (root) for server {}: without one only loopback \
                     literals on ports outside the ephemeral range {}-{} can be run",
                    l.server,
                    own.start(),
                    own.end()
                ));
            }
        }
        Ok(())
    }

    /// Starts nginx for `topology` (with resolution probes if `probe`) in the namespace, or on the shared
    /// loopback without one.
    fn start(
        &self,
        install: &Installation,
        topology: &Topology,
        probe: bool,
        failures: Option<&Failures>,
    ) -> Result<LocalNginx> {
        self.start_site(install, &http_site_failing(topology, probe, failures))
    }

    /// Starts nginx for `site` in the namespace, or on the shared loopback without one.
    fn start_site(&self, install: &Installation, site: &crate::site::conf::Site) -> Result<LocalNginx> {
        // A killed nginx leaves its sockets behind; a new one could not bind them.
        for (private, shadow) in &self.shadow_dirs {
            for s in &shadow.sockets {
                let _ = std::fs::remove_file(private.join(&s.within));
            }
        }
        if let Some(plan) = &self.plan {
            for r in &plan.relative {
                let _ = std::fs::remove_file(self.cwd.join(r));
            }
        }
        let n = self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prefix = ScratchDir::create(self.base.join(format!("r{n}")), &["logs", "tmp", "sock"])?;
        match (&self.holder, &self.plan) {
            (Some(holder), Some(plan)) => LocalNginx::start_joined(install, site, prefix, holder, plan.front),
            _ => LocalNginx::start(install, site, prefix),
        }
    }

    /// Proves `upstream` on `install`: one all-live run (forged keys at both ends of every arc, random keys,
    /// empty keys), then `failure_runs` runs with random sets of failing servers. Each request is judged at
    /// the seconds nginx's clock can have read during it ([`crate::run::clock`]).
    pub fn prove(
        &self,
        install: &Installation,
        upstream: &ConfigUpstream,
        options: &ProveOptions,
        replay: &str,
        progress: &mut dyn FnMut(Progress),
    ) -> UpstreamReport {
        let mut report = UpstreamReport::new(
            install.label(),
            upstream.name.clone(),
            upstream.topology.method,
            upstream.topology.lines.len(),
        );
        if let Err(e) = self.prove_into(install, upstream, options, replay, &mut report, progress) {
            report.fault = Some(format!("{e:#}"));
        }
        report
    }

    fn prove_into(
        &self,
        install: &Installation,
        upstream: &ConfigUpstream,
        options: &ProveOptions,
        replay: &str,
        report: &mut UpstreamReport,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let mut base = upstream.topology.clone();
        if let Some(plan) = &self.plan {
            // Listeners for every address the hosts file gives a name; nginx then says in which order it
            // took them.
            base.hosts = Vec::new();
            for line in &base.lines {
                if let Some(host) = plan::hostname_of(&line.server)
                    && matches!(line.spelling, Spelling::Hostname | Spelling::HostnameTwoAddresses)
                    && let Some(n) = plan.names.iter().find(|n| n.name.eq_ignore_ascii_case(&host))
                    && !base.hosts.iter().any(|(_, h)| h == &host)
                {
                    base.hosts.extend(n.addresses.iter().map(|a| (*a, host.clone())));
                }
            }
            let names: Resolution = base
                .hostnames()
                .into_iter()
                .map(|h| {
                    let ips = base.hosts.iter().filter(|(_, n)| *n == h).map(|(ip, _)| *ip).collect();
                    (h, ips)
                })
                .collect();
            base = base.resolved(&names);
        }
        let runs = 1 + options.failure_runs;
        let sets = failing_sets(base.lines.len(), options.failure_runs, base.seed);
        let mut arcs: Option<usize> = None;
        for (run, failing) in std::iter::once(None).chain(sets.iter().map(Some)).enumerate() {
            let mut t = base.clone();
            t.seed = base.seed.wrapping_add(run as u64);
            if let Some(failing) = failing {
                t = t.with_failing(failing);
            }
            let probe = run == 0 && !t.hosts.is_empty();
            let failures =
                options.has_failure_kinds(run).then(|| Failures::random_under(&t, t.seed, upstream.policy()));
            let nginx = self.start(install, &t, probe, failures.as_ref()).context("starting nginx")?;
            if probe {
                let resolution = resolve_through_nginx(&nginx, &t)?;
                report.resolution =
                    t.hostnames().into_iter().map(|h| (h.clone(), resolution.addresses(&h).to_vec())).collect();
                base = base.resolved(&resolution);
                t = t.resolved(&resolution);
            }
            let model_upstream = t.upstream(install.version, install.libc)?;
            if run == 0 {
                report.peers = model_upstream.primary().len() + model_upstream.backup().len();
                report.points = model_upstream.ring().map_or(0, |r| r.len());
            }
            let mut plan = parity::plan(
                &model_upstream,
                t.seed,
                &PlanOptions {
                    random_keys: options.keys,
                    empty_keys: options.keys / 50,
                    prove_ring: options.prove_ring && t.method == Method::Consistent,
                },
            );
            if let Some(f) = &failures {
                plan = parity::with_posts(plan, t.seed, f.post_percent);
            }
            let requests: Vec<(HttpMethod, &[u8])> =
                plan.requests.iter().map(|r| (r.method, r.key.as_slice())).collect();
            let started = std::time::Instant::now();
            let total = requests.len();
            let pause = options.failure_pause.filter(|_| run > 0 && requests.len() > 1);
            let halves: Vec<&[(HttpMethod, &[u8])]> = match pause {
                Some(_) => {
                    let (a, b) = requests.split_at(requests.len() / 2);
                    vec![a, b]
                }
                None => vec![requests.as_slice()],
            };
            let mut responses = Vec::with_capacity(total);
            for (i, half) in halves.into_iter().enumerate() {
                if let (Some(pause), 1) = (pause, i) {
                    std::thread::sleep(pause);
                }
                let before = responses.len();
                let mut report_progress = |n: usize| progress(Progress { run, runs, done: before + n, total });
                let got = pipeline_methods(nginx.net(), nginx.http_front(), half, &mut report_progress).with_context(
                    || format!("talking to nginx\nnginx's error log ends:\n{}", log_tail(&nginx.stderr())),
                )?;
                responses.extend(got);
            }
            let mut model = match &failures {
                Some(f) => ClockedModel::failing(&model_upstream, &t, f),
                None => ClockedModel::new(&model_upstream, &t),
            };
            let result = compare_clocked(&plan, &responses, &mut model, started.elapsed());
            if let Some(f) = &failures {
                let kinds = &mut report.failure_kinds;
                kinds.runs += 1;
                kinds.requests += plan.requests.len();
                kinds.posts += plan.requests.iter().filter(|r| r.method == HttpMethod::Post).count();
                f.count_met(&t, responses.iter().map(|r| r.upstream_addr.as_deref()), &mut kinds.met);
                let p = f.policy;
                kinds.rules = format!(
                    "proxy_next_upstream {}; proxy_next_upstream_tries {} ({})",
                    p.next_upstream,
                    p.tries,
                    upstream.rules.as_ref().map_or("nginx's defaults: no *_pass names it", |r| r.at.as_str())
                );
            }
            drop(nginx);
            arcs = Some(arcs.map_or(result.arcs_proven, |a| a.min(result.arcs_proven)));
            report.runs += 1;
            report.requests += result.requests;
            report.failovers += result.failovers;
            for (why, n) in result.not_comparable {
                match report.not_comparable.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, m)) => *m += n,
                    None => report.not_comparable.push((why, n)),
                }
            }
            let block = t.upstream_block(HTTP_KEY, true);
            report.findings.extend(findings(install, upstream, t.seed, &block, replay, result.mismatches));
        }
        report.arcs_proven = arcs.unwrap_or(0);
        report.expression = match &upstream.expression {
            Err(why) => ExpressionReport::NotProven(why.clone()),
            Ok(needs) => self.prove_expression(install, upstream, &base, needs, options, replay, report)?,
        };
        Ok(())
    }

    /// The key expression run: every server live, the upstream hashing `upstream.key` as written (with the
    /// maps it reads), generated requests from many client addresses, each on a connection of its own; the
    /// library reads the rendered nginx.conf and dispatches each request to its key.
    #[allow(clippy::too_many_arguments)]
    fn prove_expression(
        &self,
        install: &Installation,
        upstream: &ConfigUpstream,
        base: &Topology,
        needs: &expression::Needs,
        options: &ProveOptions,
        replay: &str,
        report: &mut UpstreamReport,
    ) -> Result<ExpressionReport> {
        let mut t = base.clone();
        t.seed = base.seed.wrapping_add(0x6b6579);
        let mut site = http_site_failing(&t, false, None);
        let block = format!(
            "{}{}",
            needs.maps.iter().map(|m| format!("{m}\n")).collect::<String>(),
            t.upstream_block(&crate::site::token::token(&upstream.key), true)
        );
        if let Some(http) = site.http.as_mut() {
            http.upstream_block = block.clone();
        }
        let nginx = self.start_site(install, &site).context("starting nginx with the key expression")?;
        let conf = nginx.prefix().join("nginx.conf");
        let text = std::fs::read_to_string(&conf).with_context(|| format!("reading {}", conf.display()))?;
        // The `user` directive would make the library ask the host's name service (getpwnam) about
        // root: nothing of the run may reach it, and routing does not depend on it.
        let text = text.replace("user root root;\n", "");
        let text = match &options.model_key {
            Some(wrong) => text.replace(
                &format!("hash {} ", crate::site::token::token(&upstream.key)),
                &format!("hash {} ", crate::site::token::token(wrong)),
            ),
            None => text,
        };
        let load = LoadOptions { resolve: false, version: install.version, libc: install.libc, input: Input::Config };
        let config = match Config::parse_str(&text, &conf, &load) {
            Ok(c) => c,
            Err(e) => {
                return Ok(ExpressionReport::NotProven(format!("the library cannot read the run's nginx.conf: {e}")));
            }
        };
        let model_upstream = t.upstream(install.version, install.libc)?;
        let generated = keyed::requests(&needs.variables, t.seed, (options.keys / 10).max(100));
        let target = keyed::Target {
            net: nginx.net(),
            front: nginx.http_front(),
            server: nginx.http_front(),
            client_addresses: true,
        };
        let run = keyed::run(target, &generated, &config, &model_upstream, |_| false)
            .with_context(|| format!("talking to nginx\nnginx's error log ends:\n{}", log_tail(&nginx.stderr())))?;
        drop(nginx);
        let run = match run {
            Ok(run) => run,
            Err(keyed::NotModelled(why)) => return Ok(ExpressionReport::NotProven(why)),
        };
        let (requests, refused, mismatches) = (run.requests, run.refused, run.mismatches.len());
        report.findings.extend(findings(install, upstream, t.seed, &block, replay, run.mismatches));
        Ok(ExpressionReport::Run { requests, refused, mismatches, variables: needs.variables.clone() })
    }

    /// How each hostname got its addresses (empty without namespaces).
    pub fn names(&self) -> Vec<(String, Vec<IpAddr>, NameSource)> {
        self.plan
            .as_ref()
            .map(|p| p.names.iter().map(|n| (n.name.clone(), n.addresses.clone(), n.source)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
