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
//!   every arc plus random keys, then runs in which a random set of servers refuses connections.
//!
//! Without namespaces (not root) only upstreams whose every server is a loopback literal on a port outside
//! the machine's ephemeral range can be run (on the shared loopback); the others are skipped with the
//! reason.

pub mod plan;

use crate::backend::log_tail;
use crate::client::pipeline;
use crate::install::Installation;
use crate::local::LocalNginx;
use crate::netns::{self, Holder, Isolation};
use crate::parity::{self, LibraryModel, PlanOptions, compare, http_site, resolve_through_nginx};
use crate::scratch::ScratchDir;
use crate::site::HTTP_KEY;
use crate::sweep::{Finding, topology_seed};
use crate::topology::{Endpoint, Listen, Resolution, ServerLine, Spelling, Topology};
use anyhow::{Context as _, Result, bail};
use nginx_ketama::Libc;
use nginx_ketama::config::{Balancer, Config, ConfigError, Context, Input, LoadOptions};
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
        let i = config.upstreams.iter().position(|u| std::ptr::eq(u, found.config)).expect("an upstream of config");
        if !wanted.contains(&i) {
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
    /// paths get their endpoint; hostname lines get theirs from [`Topology::resolved`]. No line is failing.
    pub fn from_config(upstream: &Upstream, seed: u64) -> Topology {
        let line = |p: &nginx_ketama::Peer, backup: bool| {
            let server = p.server().as_str().to_string();
            let spelling = spelling_of(&server);
            let endpoints = match Address::parse(&server) {
                Ok(Address::Unix { path }) => vec![Endpoint { listen: Listen::Unix(path), name: server.clone() }],
                _ => match default_name(p.server(), 80).parse::<SocketAddr>() {
                    Ok(a) => vec![Endpoint { listen: Listen::Tcp(a), name: a.to_string() }],
                    Err(_) => Vec::new(),
                },
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
    crate::sweep::resolve_in_namespace(exe, &hosts, &[name.to_string()])
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
    /// Every difference.
    pub findings: Vec<Finding>,
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
            findings: Vec::new(),
            fault: None,
            resolution: Vec::new(),
        }
    }
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
    runs: std::sync::atomic::AtomicUsize,
}

impl Prover {
    /// Prepares the namespace for `upstreams` (as root): resolves hostnames on this machine (privately),
    /// plans addresses and ports, starts the holder, adds the addresses to its `lo`. Without namespaces it
    /// prepares nothing: [`Prover::runnable`] then says which upstreams can still run.
    ///
    /// # Errors
    ///
    /// A plan that cannot be made (see [`NetworkPlan::new`]), the namespace or `ip` failing.
    pub fn new(upstreams: &[&ConfigUpstream], installs: &[&Installation], resolver_exe: &Path) -> Result<Prover> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        // One directory per prover (short: unix socket paths must fit in 107 bytes).
        let pid = format!("{}-{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        if !netns::available() {
            let base = ScratchDir::create(PathBuf::from(format!("/tmp/nk-oc-{pid}")), &[])?;
            return Ok(Prover { plan: None, holder: None, base, shadow_dirs: Vec::new(), runs: 0.into() });
        }
        let paths: Vec<PathBuf> = installs.iter().flat_map(|i| i.paths()).collect();
        let keep: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let topologies: Vec<&Topology> = upstreams.iter().map(|u| &u.topology).collect();
        let plan = NetworkPlan::new(&topologies, |name| resolve_on_machine(resolver_exe, name), &keep)?;
        let base = crate::scratch::PLACES
            .iter()
            .map(|b| PathBuf::from(format!("{b}/nk-oc-{pid}")))
            .find(|b| !plan.shadows.iter().any(|s| b.starts_with(&s.target)))
            .context("every temporary directory would be shadowed by a unix socket's directory")?;
        // Removed when dropped: by the prover, or on the way out if the namespace cannot be made.
        let base = ScratchDir::create(base, &[])?;
        let mut binds = Vec::new();
        let mut shadow_dirs = Vec::new();
        for (i, shadow) in plan.shadows.iter().enumerate() {
            let private = base.join(format!("shadow{i}"));
            for s in &shadow.sockets {
                let rel = s.strip_prefix(&shadow.target).expect("socket under its shadow");
                if let Some(dir) = private.join(rel).parent() {
                    std::fs::create_dir_all(dir)?;
                }
            }
            if let Ok(rel) = Path::new("/etc/hosts").strip_prefix(&shadow.target) {
                std::fs::create_dir_all(private.join(rel).parent().expect("a parent"))?;
                std::fs::write(private.join(rel), "")?;
            }
            std::fs::create_dir_all(&private)?;
            binds.push((private.clone(), shadow.target.clone()));
            shadow_dirs.push((private, shadow.clone()));
        }
        let hosts = base.join("hosts");
        std::fs::write(&hosts, plan.hosts_file())?;
        binds.push((hosts, PathBuf::from("/etc/hosts")));
        let holder = Holder::start(&Isolation { binds, ephemeral: plan.ephemeral.clone() })
            .context("creating the private network and mount namespaces")?;
        holder.add_addresses(&plan.on_lo).context("adding the config's addresses to lo in the namespace")?;
        Ok(Prover { plan: Some(plan), holder: Some(holder), base, shadow_dirs, runs: 0.into() })
    }

    /// The plan (`None` without namespaces).
    pub fn plan(&self) -> Option<&NetworkPlan> {
        self.plan.as_ref()
    }

    /// The namespace holder (`None` without namespaces).
    pub fn holder(&self) -> Option<&Holder> {
        self.holder.as_ref()
    }

    /// Whether `topology` can run here; without namespaces, why not.
    ///
    /// # Errors
    ///
    /// The reason, naming the first server that needs a namespace.
    pub fn runnable(&self, topology: &Topology) -> std::result::Result<(), String> {
        if self.holder.is_some() {
            return Ok(());
        }
        let own = netns::own_ephemeral_ports().unwrap_or(1..=65535);
        for l in &topology.lines {
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
    fn start(&self, install: &Installation, topology: &Topology, probe: bool) -> Result<LocalNginx> {
        for (private, shadow) in &self.shadow_dirs {
            for s in &shadow.sockets {
                let rel = s.strip_prefix(&shadow.target).expect("socket under its shadow");
                let _ = std::fs::remove_file(private.join(rel));
            }
        }
        let n = self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prefix = ScratchDir::create(self.base.join(format!("r{n}")), &["logs", "tmp", "sock"])?;
        let site = http_site(topology, probe);
        match (&self.holder, &self.plan) {
            (Some(holder), Some(plan)) => LocalNginx::start_joined(install, &site, prefix, holder, plan.front),
            _ => LocalNginx::start(install, &site, prefix),
        }
    }

    /// Proves `upstream` on `install`: one all-live run (forged keys at both ends of every arc, random keys,
    /// empty keys), then `failure_runs` runs with random sets of failing servers.
    pub fn prove(
        &self,
        install: &Installation,
        upstream: &ConfigUpstream,
        options: &ProveOptions,
        replay: &str,
        progress: &mut dyn FnMut(usize, usize),
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
        progress: &mut dyn FnMut(usize, usize),
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
        for run in 0..runs {
            let mut t = base.clone();
            t.seed = base.seed.wrapping_add(run as u64);
            if run > 0 {
                t = t.with_failing(&sets[run - 1]);
            }
            let probe = run == 0 && !t.hosts.is_empty();
            let nginx = self.start(install, &t, probe).context("starting nginx")?;
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
            let plan = parity::plan(
                &model_upstream,
                t.seed,
                &PlanOptions {
                    random_keys: options.keys,
                    empty_keys: options.keys / 50,
                    prove_ring: options.prove_ring && t.method == Method::Consistent,
                },
            );
            let keys: Vec<Vec<u8>> = plan.requests.iter().map(|r| r.key.clone()).collect();
            let started = std::time::Instant::now();
            let total = keys.len();
            let responses = pipeline(nginx.net(), nginx.http_front(), &keys, &mut |n| progress(n, total))
                .with_context(|| format!("talking to nginx\nnginx's error log ends:\n{}", log_tail(&nginx.stderr())))?;
            let result = compare(&plan, &responses, &mut LibraryModel::new(&model_upstream, &t), started.elapsed());
            drop(nginx);
            arcs = Some(arcs.map_or(result.arcs_proven, |a| a.min(result.arcs_proven)));
            report.runs += 1;
            report.requests += result.requests;
            report.failovers += result.failovers;
            let block = t.upstream_block(HTTP_KEY, true);
            report.findings.extend(result.mismatches.into_iter().map(|mismatch| Finding {
                version: install.label(),
                backend: "local".into(),
                topology: upstream.index,
                topology_seed: t.seed,
                upstream_block: block.clone(),
                mismatch,
                replay: replay.to_string(),
            }));
        }
        report.arcs_proven = arcs.unwrap_or(0);
        Ok(())
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
