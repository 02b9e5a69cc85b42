//! Runs request sequences against nginx and against a model, and compares `$upstream_addr` exactly.

use crate::forge::Forger;
use crate::nginx::build::Build;
use crate::nginx::instance::Instance;
use crate::nginx::log::log_tail;
use crate::run::client::{Method as HttpMethod, Response, get, pipeline, pipeline_methods};
use crate::run::clock::{ClockedModel, Judgement, Unclocked};
use crate::run::observation::{Observation, failure_observation, observation};
use crate::site::conf::{HTTP_KEY, Part, Site};
use crate::site::failures::{Connections, Failures, STALE_KEEPALIVE_TIMEOUT};
use crate::site::topology::{Resolution, Topology, random_keys};
use anyhow::{Context, Result};
use nginx_ketama::failure::{ClientRequest, Decision, Reply, RetryPolicy};
use nginx_ketama::upstream::Upstream;
use nginx_ketama::worker::Worker;
use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use std::time::{Duration, Instant};

/// Why a request is in the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyKind {
    /// A random key.
    Random,
    /// The empty key (no header).
    Empty,
    /// A key whose CRC32 equals a ring point's hash (the last key of that point's arc).
    OnPoint,
    /// A key whose CRC32 is a ring point's hash + 1 (the first key of the next arc).
    PastPoint,
    /// CRC32 0 or 0xFFFFFFFF.
    RingEdge,
}

/// One request of a plan.
#[derive(Debug, Clone)]
pub struct PlannedRequest {
    /// The key (raw bytes).
    pub key: Vec<u8>,
    /// Why it is there.
    pub kind: KeyKind,
    /// The method it is sent with (GET unless the run has failure kinds).
    pub method: HttpMethod,
}

/// The requests to send, in order.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Requests in sending order.
    pub requests: Vec<PlannedRequest>,
    /// Arcs covered by both-end keys (0 without a ring proof).
    pub arcs: usize,
}

/// What to put in a plan.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Random keys.
    pub random_keys: usize,
    /// Empty keys (round-robin requests).
    pub empty_keys: usize,
    /// Forge keys at both ends of every arc (consistent only).
    pub prove_ring: bool,
}

/// Builds the request sequence for `upstream`, shuffled reproducibly by `seed`.
pub fn plan(upstream: &Upstream, seed: u64, options: &PlanOptions) -> Plan {
    let mut requests: Vec<PlannedRequest> = random_keys(seed, options.random_keys)
        .into_iter()
        .map(|key| PlannedRequest { key, kind: KeyKind::Random, method: HttpMethod::Get })
        .collect();
    requests.extend((0..options.empty_keys).map(|_| PlannedRequest {
        key: Vec::new(),
        kind: KeyKind::Empty,
        method: HttpMethod::Get,
    }));
    let mut arcs = 0;
    if let (true, Some(ring)) = (options.prove_ring, upstream.ring()) {
        let forger = Forger::new();
        arcs = ring.len();
        for (i, p) in ring.points().enumerate() {
            let prefix = format!("arc{i}-");
            requests.push(PlannedRequest {
                key: forger.forge(prefix.as_bytes(), p.hash),
                kind: KeyKind::OnPoint,
                method: HttpMethod::Get,
            });
            if p.hash != u32::MAX {
                let key = forger.forge(prefix.as_bytes(), p.hash + 1);
                requests.push(PlannedRequest { key, kind: KeyKind::PastPoint, method: HttpMethod::Get });
            }
        }
        for edge in [0, u32::MAX] {
            requests.push(PlannedRequest {
                key: forger.forge(b"edge-", edge),
                kind: KeyKind::RingEdge,
                method: HttpMethod::Get,
            });
        }
    }
    requests.shuffle(&mut ChaCha8Rng::seed_from_u64(seed ^ 0x5348_5546));
    Plan { requests, arcs }
}

/// `plan` with `percent` of its requests (chosen reproducibly by `seed`) sent as POST.
pub fn with_posts(mut plan: Plan, seed: u64, percent: u8) -> Plan {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x504f_5354);
    for r in &mut plan.requests {
        if rand::RngExt::random_range(&mut rng, 0..100) < percent {
            r.method = HttpMethod::Post;
        }
    }
    plan
}

/// Predicts `$upstream_addr` and the status for each request of a sequence, in order.
pub trait Model {
    /// What nginx should answer to the next request: its status and `$upstream_addr`.
    fn expect(&mut self, key: &[u8]) -> Observation;

    /// [`Model::expect`] for a planned request (its method too); by default the key alone decides.
    fn expect_request(&mut self, request: &PlannedRequest) -> Observation {
        self.expect(&request.key)
    }

    /// [`Model::expect_request`] at second `now` of the worker's clock (vectors whose clock advances); by
    /// default the clock is ignored.
    fn expect_at(&mut self, request: &PlannedRequest, now: u64) -> Observation {
        let _ = now;
        self.expect_request(request)
    }

    /// Whether the model predicts `$upstream_status` (then nginx's is compared too).
    fn predicts_upstream_status(&self) -> bool {
        false
    }
}

/// One of nginx's failure rules changed on purpose, to show that the live proof and the vectors catch the
/// change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The last attempt's listed 5xx (passed to the client) frees its peer as FAILED, not as a success.
    LastStatusFails,
    /// A retried 403/404 frees its peer as FAILED, not as NEXT.
    NotFoundFails,
    /// A retried 429 frees its peer as NEXT (like 403/404), not as FAILED.
    TooManyRequestsNext,
    /// `non_idempotent` is ignored: a sent POST is retried like a GET.
    PostRetried,
    /// An error on a cached keepalive connection is not given back: it counts against the budget.
    StaleNotGivenBack,
    /// `proxy_next_upstream_tries` is ignored: the budget is the peers'.
    TriesIgnored,
}

impl Mutation {
    /// The budget policy of a request under `policy` with this mutation.
    pub fn budget_policy(mutation: Option<Mutation>, policy: &RetryPolicy) -> RetryPolicy {
        match mutation {
            Some(Mutation::TriesIgnored) => RetryPolicy { tries: 0, ..*policy },
            _ => *policy,
        }
    }

    /// nginx's [`decide`](nginx_ketama::failure::decide) for one attempt, with `mutation`'s rule changed.
    pub fn decide(
        mutation: Option<Mutation>,
        reply: Reply,
        policy: &RetryPolicy,
        client: &ClientRequest,
        left: u32,
    ) -> Decision {
        use nginx_ketama::failure::{Condition, Freed, RequestMethod, decide};
        let mut d = decide(reply, policy, client, left, 0);
        match (mutation, reply) {
            (Some(Mutation::LastStatusFails), Reply::Status(s))
                if s >= 500
                    && !d.retry
                    && Condition::for_status(s).is_some_and(|c| policy.next_upstream.contains(c)) =>
            {
                d.freed = Freed::Failed;
            }
            (Some(Mutation::NotFoundFails), _) if d.freed == Freed::Next => d.freed = Freed::Failed,
            (Some(Mutation::TooManyRequestsNext), Reply::Status(429)) if d.freed == Freed::Failed => {
                d.freed = Freed::Next;
            }
            (Some(Mutation::PostRetried), _) => {
                d = decide(reply, policy, &ClientRequest { method: RequestMethod::Get, ..*client }, left, 0);
            }
            (Some(Mutation::StaleNotGivenBack), Reply::StaleConnection) => {
                d.given_back = false;
            }
            _ => {}
        }
        d
    }
}

/// The library's simulator with failure kinds: each peer answers as `failures` says, the front's policy
/// decides, and requests carry their method. Optionally with one rule changed ([`Mutation`]).
#[derive(Debug)]
pub struct FailureModel<'a> {
    worker: Worker<'a>,
    topology: &'a Topology,
    failures: &'a Failures,
    connections: Connections,
    mutation: Option<Mutation>,
}

impl<'a> FailureModel<'a> {
    /// A fresh worker for `upstream`, with `topology`'s dead servers refusing and `failures` for the rest.
    pub fn new(upstream: &'a Upstream, topology: &'a Topology, failures: &'a Failures) -> Self {
        FailureModel {
            worker: Worker::new(upstream),
            topology,
            failures,
            connections: Connections::default(),
            mutation: None,
        }
    }

    /// The same model with `mutation` applied.
    pub fn mutated(mut self, mutation: Mutation) -> Self {
        self.mutation = Some(mutation);
        self
    }
}

impl Model for FailureModel<'_> {
    fn expect(&mut self, key: &[u8]) -> Observation {
        self.expect_request(&PlannedRequest { key: key.to_vec(), kind: KeyKind::Random, method: HttpMethod::Get })
    }

    fn expect_request(&mut self, request: &PlannedRequest) -> Observation {
        let (topology, failures, mutation) = (self.topology, self.failures, self.mutation);
        let policy = failures.policy;
        let client = ClientRequest { method: request.method.as_request_method(), ..ClientRequest::default() };
        let connections = &mut self.connections;
        let out = self.worker.request_judged(
            &request.key,
            RUN_CLOCK,
            &Mutation::budget_policy(mutation, &policy),
            |peer, left| {
                Mutation::decide(mutation, failures.reply(topology, peer, connections), &policy, &client, left)
            },
        );
        failure_observation(self.worker.upstream(), &out)
    }

    fn predicts_upstream_status(&self) -> bool {
        true
    }
}

/// The library's per-worker simulator as a [`Model`].
#[derive(Debug)]
pub struct LibraryModel<'a> {
    worker: Worker<'a>,
    topology: &'a Topology,
}

impl<'a> LibraryModel<'a> {
    /// A fresh worker for `upstream`, whose refused peers are those `topology` marks dead.
    pub fn new(upstream: &'a Upstream, topology: &'a Topology) -> Self {
        LibraryModel { worker: Worker::new(upstream), topology }
    }
}

/// nginx's clock during a run: every request within the same second (failure windows are 1 h).
pub const RUN_CLOCK: u64 = 1_000_000_000;

impl Model for LibraryModel<'_> {
    fn expect(&mut self, key: &[u8]) -> Observation {
        let topology = self.topology;
        expect_with(&mut self.worker, key, |p| topology.refuses(p.name()))
    }
}

/// Runs one request on `worker` (at [`RUN_CLOCK`]) and renders what nginx would answer: the status and
/// `$upstream_addr` (attempted addresses, plus the upstream name when nothing usable was left).
pub fn expect_with(
    worker: &mut Worker<'_>,
    key: &[u8],
    refuses: impl FnMut(&nginx_ketama::Peer) -> bool,
) -> Observation {
    let out = worker.request(key, RUN_CLOCK, refuses);
    observation(worker.upstream(), &out)
}

/// A request whose outcome differed.
#[derive(Debug, Clone)]
pub struct Mismatch {
    /// Position in the sequence.
    pub index: usize,
    /// The key.
    pub key: Vec<u8>,
    /// Why it was sent.
    pub kind: KeyKind,
    /// What the model predicted (for the stream module, which has no status, both statuses are 0).
    pub expected: Observation,
    /// What nginx did.
    pub actual: Observation,
}

/// The result of one topology on one nginx.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Requests compared.
    pub requests: usize,
    /// Requests that went through at least one retry.
    pub failovers: usize,
    /// Arcs whose both ends matched (0 if any ring key mismatched or no ring proof was planned).
    pub arcs_proven: usize,
    /// Every mismatch.
    pub mismatches: Vec<Mismatch>,
    /// Requests not compared, by why (see [`crate::run::clock`]); counted in `requests`.
    pub not_comparable: Vec<(Unclocked, usize)>,
    /// Time spent talking to nginx.
    pub elapsed: Duration,
}

/// Builds the site for an HTTP topology.
pub fn http_site(topology: &Topology, probe_resolution: bool) -> Site {
    http_site_failing(topology, probe_resolution, None)
}

/// [`http_site`] with failure kinds: the failing listeners answer as `failures` says and the front
/// retries by its policy.
pub fn http_site_failing(topology: &Topology, probe_resolution: bool, failures: Option<&Failures>) -> Site {
    let failing = failures.map(|f| f.failing(topology));
    let failing_listeners: Vec<&crate::site::topology::Listen> =
        failing.iter().flat_map(|f| f.groups.iter().flat_map(|(_, l)| l)).collect();
    let mut upstream_block = topology.upstream_block(HTTP_KEY, true);
    if failures.is_some_and(Failures::has_stale_keepalive) {
        // Idle cached connections stay until the stale server closes them on reuse (not after 60 s).
        upstream_block = upstream_block.replace(
            "    keepalive 64;\n",
            &format!("    keepalive 64;\n    keepalive_timeout {STALE_KEEPALIVE_TIMEOUT};\n"),
        );
    }
    Site {
        http: Some(Part {
            upstream_block,
            listeners: topology.live_listeners().into_iter().filter(|l| !failing_listeners.contains(&l)).collect(),
        }),
        stream: None,
        hosts: (!topology.hosts.is_empty()).then(|| topology.hosts_file()),
        probes: if probe_resolution { topology.hostnames().iter().map(|n| format!("{n}:9")).collect() } else { vec![] },
        failing,
    }
}

/// nginx running one topology.
pub struct Session {
    instance: Box<dyn Instance>,
    describe: String,
    topology: Topology,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("backend", &self.describe).finish()
    }
}

/// Starts nginx for `topology`. In a container, where this process cannot run a resolver in nginx's
/// environment, the addresses of hostnames are taken from nginx itself (in its resolver's order); the
/// session holds the topology resolved that way.
///
/// # Errors
///
/// nginx failing to start (with its own error output) or not answering the probes.
pub fn start(backend: &Build, topology: Topology) -> Result<Session> {
    start_failing(backend, topology, None)
}

/// [`start`] with failure kinds (see [`http_site_failing`]).
///
/// # Errors
///
/// As [`start`].
pub fn start_failing(backend: &Build, topology: Topology, failures: Option<&Failures>) -> Result<Session> {
    start_site(backend, topology, |t, probe| http_site_failing(t, probe, failures))
}

/// Starts nginx on `backend` with the site `site(topology, probe)` draws; in a container (`probe`), asks
/// nginx how its resolver ordered each hostname's addresses and keeps the topology resolved that way.
fn start_site(backend: &Build, topology: Topology, site: impl FnOnce(&Topology, bool) -> Site) -> Result<Session> {
    let probe = matches!(backend, Build::Docker { .. }) && !topology.hosts.is_empty();
    let instance = backend.start(&site(&topology, probe), backend.prefix()?)?;
    let topology = if probe {
        let resolution = resolve_through_nginx(instance.as_ref(), &topology)?;
        topology.resolved(&resolution)
    } else {
        topology
    };
    Ok(Session { instance, describe: backend.describe(), topology })
}

/// [`start`] with the upstream hashing `expression` (a key expression, as written after `hash`) instead of
/// the raw-key header, with the `map` blocks it reads (`maps`, http level): for [`crate::run::keyed`].
///
/// # Errors
///
/// As [`start`].
pub fn start_keyed(backend: &Build, topology: Topology, expression: &str, maps: &str) -> Result<Session> {
    // The nginx of the topology's first run, stopped, left its unix sockets behind: this one must bind them.
    for l in topology.lines.iter().flat_map(|l| &l.endpoints) {
        if let crate::site::topology::Listen::Unix(path) = &l.listen {
            let _ = std::fs::remove_file(path);
        }
    }
    start_site(backend, topology, |t, probe| {
        let mut site = http_site(t, probe);
        if let Some(http) = site.http.as_mut() {
            http.upstream_block = format!("{maps}{}", t.upstream_block(&crate::site::token::token(expression), true));
        }
        site
    })
}

/// The nginx.conf the library reads to judge a [`start_keyed`] run: the same maps and upstream block behind
/// a default server on `listen` whose only location proxies to it, as the run's front does.
pub fn keyed_model_conf(topology: &Topology, expression: &str, maps: &str, listen: std::net::SocketAddr) -> String {
    format!(
        "events {{}}\nhttp {{\n{maps}{}server {{\n    listen {listen};\n    location / {{ proxy_pass http://{}; }}\n}}\n}}\n",
        topology.upstream_block(&crate::site::token::token(expression), true),
        crate::site::topology::UPSTREAM
    )
}

/// The address the front of `session` listens on, as nginx sees it: where the harness connects, unless a
/// container maps it (then `127.0.0.1:`[`FRONT_HTTP_PORT`](crate::site::conf::FRONT_HTTP_PORT) inside).
pub fn front_as_nginx_sees_it(backend: &Build, session: &Session) -> std::net::SocketAddr {
    match backend {
        Build::Docker { .. } => std::net::SocketAddr::from(([127, 0, 0, 1], crate::site::conf::FRONT_HTTP_PORT)),
        _ => session.http_front(),
    }
}

/// Starts nginx for `topology` (with `failures`, if any); with `probe` (and hostnames to resolve), asks nginx
/// how its resolver ordered each name's addresses and returns the topology resolved that way.
///
/// # Errors
///
/// As [`start`].
pub fn start_resolving(
    backend: &Build,
    topology: Topology,
    probe: bool,
    failures: Option<&Failures>,
) -> Result<(Box<dyn Instance>, Topology)> {
    let probe = probe && !topology.hosts.is_empty();
    let instance = backend.start(&http_site_failing(&topology, probe, failures), backend.prefix()?)?;
    if !probe {
        return Ok((instance, topology));
    }
    let resolution = resolve_through_nginx(instance.as_ref(), &topology)?;
    Ok((instance, topology.resolved(&resolution)))
}

/// Asks nginx (started with [`http_site`]`(topology, true)`) in which order its resolver returned each
/// hostname's addresses.
///
/// # Errors
///
/// nginx not answering a probe, or answering something that is not a list of addresses.
pub fn resolve_through_nginx(instance: &dyn Instance, topology: &Topology) -> Result<Resolution> {
    let mut resolved = Vec::new();
    for (i, name) in topology.hostnames().into_iter().enumerate() {
        let path = format!("/__resolve/{i}");
        let resp = get(instance.net(), instance.http_front(), &path).with_context(|| {
            format!("probing {name} at {path}\nnginx's error log ends:\n{}", log_tail(&instance.logs()))
        })?;
        let addrs = resp.upstream_addr.unwrap_or_default();
        let ips = addrs
            .split(", ")
            .map(|a| a.parse::<std::net::SocketAddr>().map(|sa| sa.ip()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .with_context(|| format!("nginx reported {addrs:?} for {name}"))?;
        resolved.push((name, ips));
    }
    Ok(resolved.into_iter().collect())
}

impl Session {
    /// The topology this nginx runs, its hostnames resolved the way nginx resolved them.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Sends `plan` and compares every answer with `model`.
    ///
    /// # Errors
    ///
    /// The connection failing (nginx's error output is attached).
    pub fn run(&self, plan: &Plan, model: &mut dyn Model, progress: &mut dyn FnMut(usize)) -> Result<RunReport> {
        let started = Instant::now();
        let responses = self.send_plan(plan, progress)?;
        Ok(compare(plan, &responses, model, started.elapsed()))
    }

    /// Sends raw keys in order (pipelined, one connection) and returns nginx's answers, without judging
    /// them: the recorder of golden vectors uses this.
    ///
    /// # Errors
    ///
    /// The connection failing (nginx's error output is attached).
    pub fn send(&self, keys: &[Vec<u8>], progress: &mut dyn FnMut(usize)) -> Result<Vec<Response>> {
        pipeline(self.instance.net(), self.instance.http_front(), keys, progress).with_context(|| {
            format!(
                "talking to nginx ({})\nnginx's error log ends:\n{}",
                self.describe,
                log_tail(&self.instance.logs())
            )
        })
    }

    /// Sends the requests of `plan` in order (pipelined, one connection), each with its method.
    ///
    /// # Errors
    ///
    /// As [`Session::send`].
    pub fn send_plan(&self, plan: &Plan, progress: &mut dyn FnMut(usize)) -> Result<Vec<Response>> {
        let requests: Vec<(HttpMethod, &[u8])> = plan.requests.iter().map(|r| (r.method, r.key.as_slice())).collect();
        pipeline_methods(self.instance.net(), self.instance.http_front(), &requests, progress).with_context(|| {
            format!(
                "talking to nginx ({})\nnginx's error log ends:\n{}",
                self.describe,
                log_tail(&self.instance.logs())
            )
        })
    }

    /// nginx's error output so far.
    pub fn logs(&self) -> String {
        self.instance.logs()
    }

    /// The front server's address (for load generators), reached through [`Session::net`].
    pub fn http_front(&self) -> std::net::SocketAddr {
        self.instance.http_front()
    }

    /// Where connections to the front server are opened.
    pub fn net(&self) -> crate::nginx::netns::Net<'_> {
        self.instance.net()
    }

    /// The local nginx master's process id (`None` in a container).
    pub fn pid(&self) -> Option<u32> {
        self.instance.pid()
    }

    /// Where the rendered `nginx.conf` and `hosts` live (local processes only).
    pub fn prefix(&self) -> Option<std::path::PathBuf> {
        self.instance.prefix()
    }
}

/// Compares responses with the model's predictions, request by request.
pub fn compare(plan: &Plan, responses: &[Response], model: &mut dyn Model, elapsed: Duration) -> RunReport {
    let mut mismatches = Vec::new();
    let mut failovers = 0;
    let mut ring_ok = true;
    for (index, (req, resp)) in plan.requests.iter().zip(responses).enumerate() {
        let expected = model.expect_request(req);
        let actual = Observation {
            status: resp.status,
            upstream_addr: resp.upstream_addr.clone().unwrap_or_default(),
            upstream_status: if model.predicts_upstream_status() {
                Some(resp.upstream_status.clone().unwrap_or_default())
            } else {
                None
            },
        };
        if actual.upstream_addr.contains(',') {
            failovers += 1;
        }
        if expected != actual {
            if matches!(req.kind, KeyKind::OnPoint | KeyKind::PastPoint | KeyKind::RingEdge) {
                ring_ok = false;
            }
            mismatches.push(Mismatch { index, key: req.key.clone(), kind: req.kind, expected, actual });
        }
    }
    RunReport {
        requests: responses.len(),
        failovers,
        arcs_proven: if ring_ok { plan.arcs } else { 0 },
        mismatches,
        not_comparable: Vec::new(),
        elapsed,
    }
}

/// Compares responses with `model`, which follows nginx's clock through each response's window (see
/// [`crate::run::clock`]): requests whose answer depends on when the clock ticked are counted as not comparable,
/// never as mismatches. Arcs are proven if every ring key matched, less one arc per ring key not compared.
pub fn compare_clocked(
    plan: &Plan,
    responses: &[Response],
    model: &mut ClockedModel<'_>,
    elapsed: Duration,
) -> RunReport {
    let mut mismatches = Vec::new();
    let mut not_comparable: Vec<(Unclocked, usize)> = Vec::new();
    let mut failovers = 0;
    let mut ring_ok = true;
    // Each ring key not compared leaves (at most) one arc unproven.
    let mut ring_unjudged = 0;
    for (index, (req, resp)) in plan.requests.iter().zip(responses).enumerate() {
        let actual = Observation {
            status: resp.status,
            upstream_addr: resp.upstream_addr.clone().unwrap_or_default(),
            upstream_status: if model.predicts_upstream_status() {
                Some(resp.upstream_status.clone().unwrap_or_default())
            } else {
                None
            },
        };
        if actual.upstream_addr.contains(',') {
            failovers += 1;
        }
        let ring = matches!(req.kind, KeyKind::OnPoint | KeyKind::PastPoint | KeyKind::RingEdge);
        match model.judge_as(&req.key, req.method.as_request_method(), resp.clock, &actual) {
            Judgement::Match => {}
            Judgement::Differs(expected) => {
                ring_ok &= !ring;
                mismatches.push(Mismatch { index, key: req.key.clone(), kind: req.kind, expected, actual });
            }
            Judgement::NotComparable(why) => {
                ring_unjudged += usize::from(ring);
                match not_comparable.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, n)) => *n += 1,
                    None => not_comparable.push((why, 1)),
                }
            }
        }
    }
    RunReport {
        requests: responses.len(),
        failovers,
        arcs_proven: if ring_ok { plan.arcs.saturating_sub(ring_unjudged) } else { 0 },
        mismatches,
        not_comparable,
        elapsed,
    }
}

/// `text` cut to its first `max` characters, saying how long it was: for reports and messages that quote
/// what they did not write (a shim's answer, nginx's `$upstream_addr`).
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some((cut, _)) => std::borrow::Cow::Owned(format!("{}… ({} bytes)", &text[..cut], text.len())),
    }
}

/// A short, printable rendering of a key for messages.
pub fn show_key(key: &[u8]) -> String {
    let s = String::from_utf8_lossy(key);
    if s.chars().count() > 60 {
        format!("{:?}… ({} bytes)", s.chars().take(60).collect::<String>(), key.len())
    } else {
        format!("{s:?}")
    }
}
