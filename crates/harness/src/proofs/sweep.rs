//! A parity sweep: many random topologies × keys × nginx versions, with a readable summary.

use crate::nginx::build::Build;
use crate::nginx::docker::{Image, ImageOrigin};
use crate::nginx::install::{Installation, Stream};
use crate::nginx::log::log_tail;
use crate::proofs::replay::{self, Replay};
use crate::proofs::shim::{ProtocolFault, ShimModel, Unsupported};
use crate::proofs::verdict::Tally;
use crate::run::client::Method as HttpMethod;
use crate::run::observation::Observation;
use crate::run::parity::{self, FailureModel, KeyKind, LibraryModel, Mismatch, PlanOptions, compare};
use crate::run::stream;
use crate::site::failures::Failures;
use crate::site::topology::{Capabilities, Resolution, Topology, TopologyOptions};
use anyhow::{Context, Result, bail};
use nginx_ketama::Libc;
use nginx_ketama::upstream::{Method, Upstream};
use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a sweep does.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Master seed; topology `i` uses [`topology_seed`]`(seed, i)`.
    pub seed: u64,
    /// Topologies per version.
    pub topologies: usize,
    /// Only this topology index (replaying a mismatch).
    pub only: Option<usize>,
    /// Random keys per topology.
    pub keys: usize,
    /// Forge keys at both ends of every arc.
    pub prove_ring: bool,
    /// Stream sessions per version (local backends only; 0 to skip).
    pub stream_sessions: usize,
    /// The `nginx-ketama` executable, used to resolve hostnames inside nginx's hosts namespace. Without it,
    /// topologies use no hostnames.
    pub resolver_exe: Option<PathBuf>,
    /// Topology generator limits.
    pub topology: TopologyOptions,
    /// Prove this shim command (`ports/SHIM.md`) instead of the library.
    pub shim: Option<String>,
    /// Go on after a [`FaultKind::Protocol`] fault (by default the sweep stops at the first: a shim that
    /// hangs would cost the answer timeout on every topology).
    pub keep_going: bool,
    /// Every other topology (the odd indexes) gets failure kinds ([`Failures::random`]): servers that
    /// answer a status, stall or send an invalid header, a random retry policy, and POST requests. A shim
    /// gets them by protocol 2 (`ports/SHIM.md`); one that speaks only protocol 1 leaves them not proven.
    pub failure_kinds: bool,
    /// Where the provisioned builds are: a container hides the client's source port, which the stream
    /// upstream hashes, so the stream check of an image built by `scripts/build-images` runs on the
    /// provisioned build it was made from.
    pub provisioned: PathBuf,
}

/// Whether topology `index` of a sweep also gets a key expression run ([`crate::site::expressions`]): one
/// in four (2, 6, 10, …; never a failure-kind or collision topology).
pub fn has_key_expression(index: usize) -> bool {
    index % 4 == 2
}

/// Whether topology `index` of a sweep with failure kinds gets them (the odd indexes).
pub fn has_failure_kinds(index: usize) -> bool {
    index % 2 == 1
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions {
            seed: 2026,
            topologies: 8,
            only: None,
            keys: 3000,
            prove_ring: true,
            stream_sessions: 300,
            resolver_exe: None,
            topology: TopologyOptions::default(),
            shim: None,
            keep_going: false,
            failure_kinds: true,
            provisioned: Installation::default_root(),
        }
    }
}

/// Every this many topologies of a sweep, one is a collision topology: index `i` with `i %
/// COLLISION_EVERY == COLLISION_EVERY - 1` (3, 7, 11, ...).
pub const COLLISION_EVERY: usize = 4;

/// Colliding pairs of servers in a collision topology ([`Topology::with_collisions`]).
pub const COLLISION_PAIRS: usize = 3;

/// Whether topology `index` of a sweep is a collision topology (see [`COLLISION_EVERY`]).
pub fn is_collision_topology(index: usize) -> bool {
    index % COLLISION_EVERY == COLLISION_EVERY - 1
}

/// The seed of topology `index` in a sweep seeded with `seed`.
pub fn topology_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(index as u64 + 1)
}

/// A mismatch with everything needed to replay it.
#[derive(Debug, Clone)]
pub struct Finding {
    /// nginx version.
    pub version: String,
    /// Build description.
    pub backend: String,
    /// Topology index within the sweep.
    pub topology: usize,
    /// The topology's seed.
    pub topology_seed: u64,
    /// The rendered upstream block.
    pub upstream_block: String,
    /// The difference.
    pub mismatch: Mismatch,
    /// The command that runs this topology again.
    pub replay: String,
}

/// Whose fault a [`Fault`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The harness could not run the check: nginx did not start or answer, a socket failed.
    Harness,
    /// The implementation under test (a shim) broke the protocol: a [`ProtocolFault`].
    Protocol,
}

impl FaultKind {
    /// The kind of fault `e` is.
    pub fn of(e: &anyhow::Error) -> FaultKind {
        if ProtocolFault::in_chain(e) { FaultKind::Protocol } else { FaultKind::Harness }
    }

    /// How reports name it (`harness fault`, `protocol fault`).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Harness => "harness fault",
            FaultKind::Protocol => "protocol fault",
        }
    }
}

/// A topology (or the stream check) that could not be run to the end: the harness could not (nginx did not
/// start or answer, a socket failed), or the shim broke the protocol. Not a mismatch, and never a pass.
#[derive(Debug, Clone)]
pub struct Fault {
    /// Whose fault it is.
    pub kind: FaultKind,
    /// nginx version.
    pub version: String,
    /// Build description.
    pub backend: String,
    /// Topology index within the sweep; `None` for the stream check.
    pub topology: Option<usize>,
    /// The topology's seed.
    pub topology_seed: u64,
    /// What went wrong, with the last lines of nginx's error log (see [`crate::nginx::log::log_tail`]).
    pub cause: String,
    /// The command that runs this topology again.
    pub replay: String,
}

/// The `nginx-ketama verify` command line that runs topology `index` (or, with `None`, the stream check) of
/// this sweep again on `backend`: a provisioned build by version (and C library), a named binary by
/// `--nginx PATH`, a named image by `--image REF`.
pub fn replay_command(backend: &Build, options: &SweepOptions, index: Option<usize>) -> String {
    let defaults = SweepOptions::default();
    let mut replay = Replay::verify()
        .build(backend, replay::Backend::Named)
        .option("--seed", options.seed)
        .option("--keys", options.keys);
    if let Some(shim) = &options.shim {
        replay = replay.option("--shim", shim);
    }
    if options.topology.max_servers != defaults.topology.max_servers {
        replay = replay.option("--max-servers", options.topology.max_servers);
    }
    replay = replay.switch("--no-ring-proof", !options.prove_ring).switch("--no-failure-kinds", !options.failure_kinds);
    match index {
        Some(i) => replay.option("--only", i),
        None => replay.option("--topologies", 0).option("--stream-sessions", options.stream_sessions),
    }
    .into()
}

/// Totals for one nginx version.
#[derive(Debug, Clone, Default)]
pub struct VersionReport {
    /// nginx version.
    pub version: String,
    /// Build description.
    pub backend: String,
    /// The build and what its `nginx -V` says ([`Build::summary`]).
    pub build: String,
    /// Why the stream check did not run, when it did not although asked for.
    pub stream_skipped: Option<String>,
    /// Topologies run.
    pub topologies: usize,
    /// Of which consistent.
    pub consistent: usize,
    /// Requests compared (all sequential and stateful).
    pub requests: usize,
    /// Requests with at least one retry.
    pub failovers: usize,
    /// Empty-key (round-robin) requests.
    pub round_robin: usize,
    /// Arcs proven at both ends.
    pub arcs_proven: usize,
    /// Stream sessions compared.
    pub stream_sessions: usize,
    /// Collision topologies run (see [`is_collision_topology`]).
    pub collision_topologies: usize,
    /// Ring points whose owner depends on the C library (the two libcs' tie rules keep different servers),
    /// over every topology run.
    pub libc_points: usize,
    /// Requests the *other* C library's model (musl's for a glibc build, glibc's for a musl build) would have
    /// predicted wrongly, over the same requests: what the libc rule is worth on this run.
    pub other_libc_misses: usize,
    /// Server spellings exercised.
    pub spellings: BTreeSet<String>,
    /// Topologies run with failure kinds.
    pub failure_topologies: usize,
    /// Requests of those topologies, and of them the POSTs.
    pub failure_requests: (usize, usize),
    /// Requests (of topologies with failure kinds) that met each failure kind in at least one attempt.
    pub failure_kinds: BTreeMap<String, usize>,
    /// Key expression runs ([`has_key_expression`]): the expressions, by requests compared.
    pub expressions: BTreeMap<String, usize>,
    /// Requests of the key expression runs that nginx answered itself (400 and the like).
    pub expression_refused: usize,
    /// The variables those expressions read (directly or through maps).
    pub expression_variables: BTreeSet<String>,
    /// Everything that differed.
    pub findings: Vec<Finding>,
    /// Everything the harness could not run.
    pub faults: Vec<Fault>,
    /// Topologies the shim answered `unsupported` for ([`Unsupported`]): not proven, with the reason;
    /// neither a pass nor a fault.
    pub not_proven: Vec<NotProven>,
    /// Each topology run to the end, in the order run (one that faulted is in `faults` instead).
    pub runs: Vec<TopologyRun>,
    /// Time spent in request/response exchange.
    pub elapsed: Duration,
}

/// A topology whose upstream the shim answered `unsupported` for (a protocol-2 upstream, to a shim that
/// speaks only protocol 1): nothing of it was compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotProven {
    /// Its index in the sweep.
    pub topology: usize,
    /// Its seed ([`topology_seed`]).
    pub topology_seed: u64,
    /// Why ([`Unsupported`]'s message).
    pub reason: String,
    /// The command that runs it again.
    pub replay: String,
}

/// One topology of a sweep run to the end on one build: what it was and what it compared (its mismatches
/// are the [`Finding`]s with its index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyRun {
    /// Its index in the sweep.
    pub index: usize,
    /// Its seed ([`topology_seed`]).
    pub seed: u64,
    /// `12 servers, consistent, 1920 points` or `5 servers, plain`.
    pub label: String,
    /// `hash … consistent` or plain `hash`.
    pub method: Method,
    /// Requests compared.
    pub requests: usize,
    /// Arcs proven at both ends.
    pub arcs_proven: usize,
    /// Requests with at least one retry.
    pub failovers: usize,
    /// The command that runs it again.
    pub replay: String,
}

impl VersionReport {
    /// Whether a sweep run with `options` stops here: a protocol fault, and no `keep_going`.
    pub fn stopped(&self, options: &SweepOptions) -> bool {
        !options.keep_going && self.faults.iter().any(|f| f.kind == FaultKind::Protocol)
    }

    /// Whether this report proves anything: something compared, nothing differed, no faults.
    pub fn proven(&self) -> bool {
        self.findings.is_empty() && self.faults.is_empty() && self.requests + self.stream_sessions > 0
    }

    /// What the reports of one run of a sweep counted, for its [`Verdict`](crate::proofs::verdict::Verdict).
    pub fn tally(reports: &[VersionReport]) -> Tally {
        let faults = || reports.iter().flat_map(|r| &r.faults);
        Tally {
            mismatches: reports.iter().map(|r| r.findings.len()).sum(),
            protocol_faults: faults().filter(|f| f.kind == FaultKind::Protocol).count(),
            harness_faults: faults().filter(|f| f.kind == FaultKind::Harness).count(),
            compared: reports.iter().map(|r| r.requests + r.stream_sessions).sum(),
            unhostable_only: false,
        }
    }

    /// Requests per second against nginx.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Something to show while a sweep runs.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// A topology is starting: (version, index, description, planned requests).
    Topology(&'a str, usize, String, usize),
    /// Requests done within the current topology.
    Requests(usize),
    /// A topology finished with this many mismatches.
    Done(usize),
    /// This topology could not be run (see [`Fault`]).
    Fault(usize, FaultKind),
    /// The shim answered this topology `unsupported` (see [`NotProven`]).
    NotProven(usize),
    /// The stream check is starting, on this build (the image's own build when the sweep runs an image).
    Stream(String),
}

/// Resolves `names` the way nginx will see them: our resolver run in the same kind of private namespaces the
/// local backend starts nginx in, with `hosts` over `/etc/hosts`.
pub fn resolve_in_namespace(exe: &Path, hosts: &str, names: &[String]) -> Result<Resolution> {
    let dir = crate::nginx::local::fresh_prefix()?;
    let file = dir.join("hosts");
    std::fs::write(&file, hosts)?;
    let out = crate::nginx::netns::isolated_command(exe, Some(&file))
        .map(|mut cmd| cmd.arg("resolve-hosts").args(names).output())
        .and_then(|r| r);
    drop(dir);
    let out = out.context("running the resolver helper")?;
    if !out.status.success() {
        bail!("resolver helper failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next().context("empty line")?.to_string();
            let ips = it.map(|ip| ip.parse().context("bad address")).collect::<Result<Vec<IpAddr>>>()?;
            Ok((name, ips))
        })
        .collect()
}

/// Generates topology `index` for `backend`, with hostnames resolved as nginx will resolve them.
pub fn topology_for(backend: &Build, options: &SweepOptions, index: usize, unix_dir: &str) -> Result<Topology> {
    let mut caps: Capabilities = backend.capabilities(unix_dir);
    // A container reports its own resolver's order (see `parity::start`); a local nginx needs our resolver
    // run in its hosts namespace.
    let local = matches!(backend, Build::Local(_));
    caps.hostnames &= !local || options.resolver_exe.is_some();
    let collisions = if is_collision_topology(index) {
        COLLISION_PAIRS.min(options.topology.max_servers.saturating_sub(options.topology.min_servers) / 2)
    } else {
        0
    };
    // Room for the colliding lines within --max-servers.
    let mut topology_options = options.topology.clone();
    topology_options.max_servers -= 2 * collisions;
    let mut t = Topology::random(topology_seed(options.seed, index), &topology_options, &caps);
    if collisions > 0 {
        t = t.with_collisions(collisions);
    }
    if local && !t.hosts.is_empty() {
        let exe = options.resolver_exe.as_deref().expect("hostnames need the resolver");
        let resolution = resolve_in_namespace(exe, &t.hosts_file(), &t.hostnames())?;
        t = t.resolved(&resolution);
    }
    Ok(t)
}

/// Runs the sweep on one backend. A topology the harness cannot run is a [`Fault`] in the report, a
/// difference a [`Finding`]; neither stops the sweep — but a protocol fault does, unless
/// [`SweepOptions::keep_going`].
pub fn sweep_backend(backend: &Build, options: &SweepOptions, on: &mut dyn FnMut(Event<'_>)) -> VersionReport {
    let mut report = VersionReport {
        version: backend.label(),
        backend: backend.describe(),
        build: backend.summary(),
        ..VersionReport::default()
    };
    let indexes: Vec<usize> = match options.only {
        Some(i) => vec![i],
        None => (0..options.topologies).collect(),
    };
    for index in indexes {
        let seed = topology_seed(options.seed, index);
        if let Err(e) = run_topology(backend, options, index, &mut report, on) {
            if let Some(unsupported) = Unsupported::in_chain(&e) {
                on(Event::NotProven(index));
                report.not_proven.push(NotProven {
                    topology: index,
                    topology_seed: seed,
                    reason: unsupported.to_string(),
                    replay: replay_command(backend, options, Some(index)),
                });
                continue;
            }
            let kind = FaultKind::of(&e);
            on(Event::Fault(index, kind));
            report.faults.push(Fault {
                kind,
                version: report.version.clone(),
                backend: report.backend.clone(),
                topology: Some(index),
                topology_seed: seed,
                cause: format!("{e:#}"),
                replay: replay_command(backend, options, Some(index)),
            });
        }
        if report.stopped(options) {
            return report;
        }
    }
    if options.stream_sessions > 0 && options.only.is_none() {
        match backend {
            Build::Local(_) => {
                on(Event::Stream(backend.label()));
                stream_into(backend, options, &mut report);
            }
            Build::Docker(image) => stream_of_image(image, options, &mut report, on),
        }
    }
    report
}

/// The stream check of a sweep run on `image`: a container hides the client's source port, which the
/// stream upstream hashes, so an image `scripts/build-images` made is checked on the provisioned build it
/// was made from; a named image is its own build (a provisioned one of the same version may differ from
/// it) and is not checked. `report` says why when it is not.
fn stream_of_image(image: &Image, options: &SweepOptions, report: &mut VersionReport, on: &mut dyn FnMut(Event<'_>)) {
    let hidden = "stream check skipped: a container hides the client's source port, which the stream upstream \
                  hashes";
    match image.origin {
        ImageOrigin::Built => match Installation::discover(&options.provisioned)
            .into_iter()
            .find(|i| i.version == image.version && i.libc == image.libc)
        {
            Some(install) => {
                let build = Build::Local(install);
                on(Event::Stream(build.label()));
                stream_into(&build, options, report);
            }
            None => {
                report.stream_skipped =
                    Some(format!("{hidden}, and the build the image was made from is not provisioned here"))
            }
        },
        ImageOrigin::Named => {
            report.stream_skipped =
                Some(format!("{hidden}; a named image is its own build, not checked on a provisioned one"))
        }
    }
}

/// Runs the stream check on `backend` and adds its sessions, mismatches or fault to `report`; a build
/// without the stream module is not checked, and `report` says why.
pub fn stream_into(backend: &Build, options: &SweepOptions, report: &mut VersionReport) {
    if let Stream::Absent(why) = backend.stream() {
        report.stream_skipped = Some(format!("stream check skipped: {why}"));
        return;
    }
    match stream_check(backend, options) {
        Ok((sessions, findings)) => {
            report.stream_sessions = sessions;
            report.findings.extend(findings);
        }
        Err(e) => report.faults.push(Fault {
            kind: FaultKind::of(&e),
            version: report.version.clone(),
            backend: format!("{} (stream)", backend.describe()),
            topology: None,
            topology_seed: topology_seed(options.seed, STREAM_INDEX),
            cause: format!("{e:#}"),
            replay: replay_command(backend, options, None),
        }),
    }
}

/// Source ports the stream check binds on `127.0.0.1`.
pub const CLIENT_PORTS: std::ops::Range<u16> = 20000..32000;
const _: () = assert!(CLIENT_PORTS.end <= *crate::nginx::netns::EPHEMERAL_PORTS.start());

/// The index whose seed the stream check's topology uses.
const STREAM_INDEX: usize = usize::MAX / 2;

/// Runs topology `index` and adds what it compared to `report`.
fn run_topology(
    backend: &Build,
    options: &SweepOptions,
    index: usize,
    report: &mut VersionReport,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<()> {
    let version = backend.version();
    // Unix sockets live in a fresh short directory per topology (removed when it goes out of scope).
    let unix = crate::nginx::local::fresh_prefix()?;
    let unix_dir = unix.display().to_string();
    let result = (|| {
        let generated = topology_for(backend, options, index, &unix_dir)?;
        let failures =
            (options.failure_kinds && has_failure_kinds(index)).then(|| Failures::random(&generated, generated.seed));
        let keyed_topology = generated.clone();
        let session = parity::start_failing(backend, generated, failures.as_ref()).context("starting nginx")?;
        let topology = session.topology().clone();
        let libc = backend.libc();
        let upstream = topology.upstream(version, libc)?;
        let other = topology.upstream(version, other_libc(libc))?;
        let mut plan = parity::plan(
            &upstream,
            topology.seed,
            &PlanOptions {
                random_keys: options.keys,
                empty_keys: options.keys / 50,
                prove_ring: options.prove_ring && topology.method == Method::Consistent,
            },
        );
        if let Some(f) = &failures {
            plan = parity::with_posts(plan, topology.seed, f.post_percent);
        }
        let mut label = match upstream.ring() {
            Some(ring) => format!("{} servers, consistent, {} points", topology.lines.len(), ring.len()),
            None => format!("{} servers, plain", topology.lines.len()),
        };
        if let Some(f) = &failures {
            let p = f.policy;
            label.push_str(&format!(
                ", {} failing, proxy_next_upstream {} tries {}",
                f.answers.len(),
                p.next_upstream,
                p.tries
            ));
        }
        // The shim first: one that does not support the upstream (protocol 2, to a shim that speaks only
        // protocol 1) leaves the topology not proven, without sending it a request.
        let shim = match (&options.shim, &failures) {
            (Some(command), Some(f)) => Some(ShimModel::failing(command, &topology, f, version)?),
            (Some(command), None) => Some(ShimModel::start(command, &topology, version)?),
            (None, _) => None,
        };
        on(Event::Topology(&report.version, index, label.clone(), plan.requests.len()));
        let started = std::time::Instant::now();
        let responses = session.send_plan(&plan, &mut |n| on(Event::Requests(n)))?;
        let elapsed = started.elapsed();
        let mut run = match (shim, &failures) {
            (None, Some(f)) => compare(&plan, &responses, &mut FailureModel::new(&upstream, &topology, f), elapsed),
            (None, None) => compare(&plan, &responses, &mut LibraryModel::new(&upstream, &topology), elapsed),
            (Some(mut model), _) => {
                let run = compare(&plan, &responses, &mut model, elapsed);
                model.finish()?;
                run
            }
        };
        // The same answers judged by the other C library's tie rule: how many it would have got wrong.
        let other_misses = match &failures {
            Some(f) => compare(&plan, &responses, &mut FailureModel::new(&other, &topology, f), elapsed),
            None => compare(&plan, &responses, &mut LibraryModel::new(&other, &topology), elapsed),
        }
        .mismatches
        .len();
        let libc_points = libc_points(&upstream, &other);
        if let Some(f) = &failures {
            report.failure_topologies += 1;
            report.failure_requests.0 += plan.requests.len();
            report.failure_requests.1 += plan.requests.iter().filter(|r| r.method == HttpMethod::Post).count();
            f.count_met(&topology, responses.iter().map(|r| r.upstream_addr.as_deref()), &mut report.failure_kinds);
        }
        drop(session);
        if options.shim.is_none() && has_key_expression(index) {
            let local = matches!(backend, Build::Local(_));
            let mut rng = ChaCha8Rng::seed_from_u64(topology.seed ^ 0x6b65_7973);
            let e = crate::site::expressions::random(&mut rng, local);
            let maps = e.maps.concat();
            let variables = crate::site::expressions::variables(&e);
            let keyed = parity::start_keyed(backend, keyed_topology, e.expression, &maps)
                .context("starting nginx with a key expression")?;
            let t = keyed.topology().clone();
            let server = parity::front_as_nginx_sees_it(backend, &keyed);
            let text = parity::keyed_model_conf(&t, e.expression, &maps, server);
            let load = nginx_ketama::config::LoadOptions {
                resolve: false,
                version,
                libc,
                input: nginx_ketama::config::Input::Config,
            };
            let config = nginx_ketama::config::Config::parse_str(&text, "keyed.conf", &load)
                .map_err(|err| anyhow::anyhow!("the library cannot read the key expression run's config: {err}"))?;
            let model = t.upstream(version, libc)?;
            let generated = crate::run::keyed::requests(&variables, t.seed, (options.keys / 10).max(100));
            let target = crate::run::keyed::Target {
                net: keyed.net(),
                front: keyed.http_front(),
                server,
                client_addresses: local,
            };
            let keyed_run = crate::run::keyed::run(target, &generated, &config, &model, |p| t.refuses(p.name()))
                .with_context(|| {
                    format!(
                        "talking to nginx (key expression {})\nnginx's error log ends:\n{}",
                        e.expression,
                        log_tail(&keyed.logs())
                    )
                })?
                .map_err(|crate::run::keyed::NotModelled(why)| {
                    anyhow::anyhow!("key expression {}: {why}", e.expression)
                })?;
            *report.expressions.entry(e.expression.to_string()).or_default() += keyed_run.requests;
            report.expression_refused += keyed_run.refused;
            report.expression_variables.extend(variables);
            run.mismatches.extend(keyed_run.mismatches);
        }
        anyhow::Ok((topology, plan, run, other_misses, libc_points, label))
    })();
    drop(unix);
    let (topology, plan, run, other_misses, libc_points, label) = result?;
    on(Event::Done(run.mismatches.len()));
    report.topologies += 1;
    report.consistent += usize::from(topology.method == Method::Consistent);
    report.collision_topologies += usize::from(is_collision_topology(index) && topology.method == Method::Consistent);
    report.libc_points += libc_points;
    report.other_libc_misses += other_misses;
    report.requests += run.requests;
    report.failovers += run.failovers;
    report.round_robin += plan.requests.iter().filter(|r| r.kind == KeyKind::Empty).count();
    report.arcs_proven += run.arcs_proven;
    report.elapsed += run.elapsed;
    report.spellings.extend(topology.spellings().iter().map(|s| format!("{s:?}")));
    let block = topology.upstream_block(crate::site::conf::HTTP_KEY, true);
    let replay = replay_command(backend, options, Some(index));
    report.runs.push(TopologyRun {
        index,
        seed: topology.seed,
        label,
        method: topology.method,
        requests: run.requests,
        arcs_proven: run.arcs_proven,
        failovers: run.failovers,
        replay: replay.clone(),
    });
    report.findings.extend(run.mismatches.into_iter().map(|mismatch| Finding {
        version: report.version.clone(),
        backend: report.backend.clone(),
        topology: index,
        topology_seed: topology.seed,
        upstream_block: block.clone(),
        mismatch,
        replay: replay.clone(),
    }));
    Ok(())
}

/// The C library whose tie rule is the alternative to `libc`'s.
pub fn other_libc(libc: Libc) -> Libc {
    match libc {
        Libc::Glibc => Libc::Musl,
        Libc::Musl => Libc::Glibc,
    }
}

/// Ring points whose owner differs between two models of one upstream (0 without a ring). Both rings have
/// the same points: only the owners of shared hashes can differ.
pub fn libc_points(a: &Upstream, b: &Upstream) -> usize {
    match (a.ring(), b.ring()) {
        (Some(x), Some(y)) => x.points().zip(y.points()).filter(|(p, q)| p.server != q.server).count(),
        _ => 0,
    }
}

/// One stream topology (IPv4 and unix spellings, since stream `server` lines need ports) checked with
/// client-chosen source ports.
///
/// # Errors
///
/// nginx failing to start or the stream log not appearing.
pub fn stream_check(backend: &Build, options: &SweepOptions) -> Result<(usize, Vec<Finding>)> {
    let unix = crate::nginx::local::fresh_prefix()?;
    let unix_dir = unix.display().to_string();
    let caps = Capabilities { ipv6: false, port80: false, hostnames: false, unix_dir: Some(unix_dir.clone()) };
    let seed = topology_seed(options.seed, STREAM_INDEX);
    let topo_opts = TopologyOptions { max_servers: 20, ..options.topology.clone() };
    let topology = Topology::random(seed, &topo_opts, &caps);
    let upstream = topology.upstream(backend.version(), backend.libc())?;
    let mut library = LibraryModel::new(&upstream, &topology);
    let mut shim = match &options.shim {
        Some(command) => Some(ShimModel::start(command, &topology, backend.version())?),
        None => None,
    };
    let model: &mut dyn parity::Model = match &mut shim {
        Some(s) => s,
        None => &mut library,
    };
    // Distinct source ports on 127.0.0.1 (which no topology uses), in random order, outside the ephemeral
    // range the kernel hands out.
    let mut ports: Vec<u16> = CLIENT_PORTS.collect();
    ports.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    ports.truncate(options.stream_sessions);
    let result = stream::run_stream(backend, &topology, &ports, model);
    if let Some(shim) = shim {
        shim.finish()?;
    }
    drop(unix);
    let report = result.context("stream check")?;
    let block = topology.upstream_block(crate::site::conf::STREAM_KEY, false);
    let replay = replay_command(backend, options, None);
    let findings = report
        .mismatches
        .into_iter()
        .enumerate()
        .map(|(index, (port, expected, actual))| Finding {
            version: backend.label(),
            backend: format!("{} (stream)", backend.describe()),
            topology: usize::MAX,
            topology_seed: seed,
            upstream_block: block.clone(),
            mismatch: Mismatch {
                index,
                key: port.to_string().into_bytes(),
                kind: KeyKind::Random,
                expected: Observation { status: 0, upstream_addr: expected, upstream_status: None },
                actual: Observation { status: 0, upstream_addr: actual, upstream_status: None },
            },
            replay: replay.clone(),
        })
        .collect();
    Ok((report.sessions, findings))
}

impl VersionReport {
    /// The summary table, one row per nginx version.
    pub fn table(reports: &[VersionReport]) -> String {
        let mut out = format!(
            "{:<11} {:<7} {:>10} {:>9} {:>12} {:>10} {:>9} {:>8} {:>8} {:>10} {:>11} {:>7} {:>9}\n",
            "nginx",
            "backend",
            "topologies",
            "requests",
            "arcs proven",
            "failovers",
            "rr/empty",
            "stream",
            "libc pts",
            "other libc",
            "mismatches",
            "faults",
            "req/s"
        );
        for r in reports {
            out.push_str(&format!(
                "{:<11} {:<7} {:>10} {:>9} {:>12} {:>10} {:>9} {:>8} {:>8} {:>10} {:>11} {:>7} {:>9.0}\n",
                r.version,
                r.backend.split_whitespace().next().unwrap_or(""),
                format!("{} ({}c)", r.topologies, r.consistent),
                r.requests,
                r.arcs_proven,
                r.failovers,
                r.round_robin,
                r.stream_sessions,
                r.libc_points,
                r.other_libc_misses,
                r.findings.len(),
                r.faults.len(),
                r.rate()
            ));
        }
        for r in reports {
            if !r.build.is_empty() {
                out.push_str(&format!("{:<11} {}\n", r.version, r.build));
            }
            if let Some(why) = &r.stream_skipped {
                out.push_str(&format!("{:<11} {why}\n", r.version));
            }
            if !r.expressions.is_empty() {
                let exprs: Vec<String> = r.expressions.iter().map(|(e, n)| format!("{e} ({n})")).collect();
                let vars: Vec<String> = r.expression_variables.iter().map(|v| format!("${v}")).collect();
                out.push_str(&format!(
                    "{:<11} key expressions: {} requests ({} answered by nginx itself): {}; variables: {}\n",
                    r.version,
                    r.expressions.values().sum::<usize>(),
                    r.expression_refused,
                    exprs.join(", "),
                    vars.join(", ")
                ));
            }
            if r.failure_topologies > 0 {
                let kinds: Vec<String> = r.failure_kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
                out.push_str(&format!(
                    "{:<11} failure kinds: {} topologies, {} requests ({} POST); requests per kind met: {}\n",
                    r.version,
                    r.failure_topologies,
                    r.failure_requests.0,
                    r.failure_requests.1,
                    if kinds.is_empty() { "none".to_string() } else { kinds.join(", ") }
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nginx::install::Origin;

    fn provisioned(libc: Libc) -> Build {
        Build::Local(Installation {
            version: "1.26.3".parse().unwrap(),
            libc,
            stream: Stream::BuiltIn,
            configure: Vec::new(),
            origin: Origin::Provisioned { dir: "/nowhere".into(), package: "1.26.3-3".into() },
        })
    }

    #[test]
    fn replay_commands_name_every_option_that_changes_the_topology() {
        let backend = provisioned(Libc::Glibc);
        let mut options = SweepOptions { seed: 7, keys: 100, ..SweepOptions::default() };
        assert_eq!(
            replay_command(&backend, &options, Some(3)),
            "nginx-ketama verify --backend local --versions 1.26.3 --seed 7 --keys 100 --only 3"
        );
        options.topology.max_servers = 9;
        options.prove_ring = false;
        assert_eq!(
            replay_command(&backend, &options, None),
            "nginx-ketama verify --backend local --versions 1.26.3 --seed 7 --keys 100 --max-servers 9 \
             --no-ring-proof --topologies 0 --stream-sessions 300"
        );
        assert_eq!(
            replay_command(
                &provisioned(Libc::Musl),
                &SweepOptions { seed: 7, keys: 100, ..SweepOptions::default() },
                Some(3)
            ),
            "nginx-ketama verify --backend local --versions 1.26.3 --libc musl --seed 7 --keys 100 --only 3"
        );
    }

    /// A binary or an image named on the command line is named again by the replay command.
    #[test]
    fn replay_commands_name_the_binary_or_image() {
        let options =
            SweepOptions { seed: 7, keys: 100, shim: Some("python3 it's.py".into()), ..SweepOptions::default() };
        let named = Build::Local(Installation {
            version: "1.26.3".parse().unwrap(),
            libc: Libc::Glibc,
            stream: Stream::Absent("none".into()),
            configure: Vec::new(),
            origin: Origin::Named { path: "/opt/my nginx/sbin/nginx".into(), executable: "/opt/x".into() },
        });
        assert_eq!(
            replay_command(&named, &options, Some(2)),
            r"nginx-ketama verify --nginx '/opt/my nginx/sbin/nginx' --seed 7 --keys 100 --shim 'python3 it'\''s.py' --only 2"
        );
        let image = |origin| {
            Build::Docker(Image {
                reference: "registry.example/nginx:1.26.3".into(),
                version: "1.26.3".parse().unwrap(),
                libc: Libc::Musl,
                stream: Stream::BuiltIn,
                libc_description: "musl".into(),
                package: None,
                origin,
            })
        };
        let options = SweepOptions { seed: 7, keys: 100, ..SweepOptions::default() };
        assert_eq!(
            replay_command(&image(ImageOrigin::Named), &options, Some(0)),
            "nginx-ketama verify --image registry.example/nginx:1.26.3 --seed 7 --keys 100 --only 0"
        );
        assert_eq!(
            replay_command(&image(ImageOrigin::Built), &options, Some(0)),
            "nginx-ketama verify --backend docker --versions 1.26.3 --libc musl --seed 7 --keys 100 --only 0"
        );
    }

    #[test]
    fn every_fourth_topology_is_a_collision_topology() {
        let hits: Vec<usize> = (0..14).filter(|&i| is_collision_topology(i)).collect();
        assert_eq!(hits, [3, 7, 11]);
    }
}
