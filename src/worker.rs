//! A simulator of one nginx worker process: request after request, with all the state nginx keeps.
//!
//! nginx's choice is a pure function of the key only on the happy path. Retries, the empty key, a single
//! peer, several peers under one server string and the round-robin fallback all depend on per-peer state
//! (smooth weighted round-robin weights, failure counts, timestamps) that lives in the worker and carries
//! over from one request to the next. [`Worker`] keeps exactly that state, so that feeding it the same
//! requests a fresh nginx worker receives reproduces nginx's `$upstream_addr` attempt by attempt.

use crate::failure::{self, Attempt, ClientRequest, Decision, Freed, RetryPolicy, StreamAttempt, StreamPolicy};
use crate::peer::{List, Peer, PeerId};
use crate::plain::{RehashSequence, Slots};
use crate::upstream::{Balancer, Chash, MAX_HASH_MISSES, Upstream};

mod trace;
pub use trace::{Fallback, Skip, Status, Step, Verdict};

/// What a request did: the peers it tried, in order, and how it ended.
///
/// # Example
///
/// ```
/// use nginx_ketama::{Method, Peer, Upstream, Worker};
///
/// let up = Upstream::builder(Method::Consistent).peers(["a:80", "b:80"].map(Peer::new)).build()?;
/// let out = Worker::new(&up).request(b"", 0, |_| false);
/// assert!(out.round_robin, "the empty key is never hashed");
/// assert_eq!(up.peer(out.attempts[0]).server().as_str(), "a:80");
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Every peer nginx connected to, in order (`$upstream_addr`, without a trailing upstream name).
    pub attempts: Vec<PeerId>,
    /// How the request ended.
    pub status: Status,
    /// `true` if at least one pick (or the final "no live upstreams") came from nginx's round-robin code
    /// rather than from the hash: the empty key, a single peer, or more than [`MAX_HASH_MISSES`] misses.
    pub round_robin: bool,
    /// Per attempt, how the peer was freed and its `$upstream_status` (same order as `attempts`).
    pub results: Vec<AttemptResult>,
    /// What the client got: the passed response's status, or nginx's own 502/504 (stream: `$status`,
    /// 200 or 502).
    pub client_status: u16,
}

/// How one attempt ended for nginx's accounting (algorithm §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttemptResult {
    /// The state the peer was freed with.
    pub freed: Freed,
    /// `$upstream_status` of the attempt (502 or 504 for errors and timeouts).
    pub upstream_status: u16,
}

/// Per-peer state nginx keeps in `ngx_http_upstream_rr_peer_t`; read it with [`Worker::peer_state`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerState {
    current_weight: i64,
    effective_weight: i64,
    fails: u32,
    accessed: u64,
    checked: u64,
    conns: u32,
}

impl PeerState {
    /// `current_weight` (smooth weighted round robin).
    pub fn current_weight(&self) -> i64 {
        self.current_weight
    }

    /// `effective_weight` (lowered by failures, recovering by 1 per round-robin pass).
    pub fn effective_weight(&self) -> i64 {
        self.effective_weight
    }

    /// `fails`: failures counted since the last reset.
    pub fn fails(&self) -> u32 {
        self.fails
    }

    /// `accessed`: the second of the last counted failure.
    pub fn accessed(&self) -> u64 {
        self.accessed
    }

    /// `checked`: the second of the last failure or of the first pick after `fail_timeout`.
    pub fn checked(&self) -> u64 {
        self.checked
    }
}

impl PeerState {
    fn new(peer: &Peer) -> PeerState {
        PeerState {
            current_weight: 0,
            effective_weight: i64::from(peer.weight()),
            fails: 0,
            accessed: 0,
            checked: 0,
            conns: 0,
        }
    }
}

/// Per-request state (nginx's `ngx_http_upstream_hash_peer_data_t` with its embedded round-robin data),
/// except where the hash walk stands ([`Walk`]).
#[derive(Debug)]
struct Request<'k, 't> {
    key: &'k [u8],
    /// The list round-robin currently walks (switches to backup for good once primary is exhausted).
    list: List,
    /// Tried peers of the current list, by index.
    tried: Vec<bool>,
    /// Hash misses so far (`hp->tries`).
    misses: u32,
    /// Attempts left (`pc->tries`).
    budget: u32,
    round_robin: bool,
    /// Where [`Worker::request_traced`] records the steps (`None`: not traced).
    trace: Option<&'t mut Vec<Step>>,
}

impl Request<'_, '_> {
    /// Records a step when traced; `step` is only built then.
    #[inline]
    fn record(&mut self, step: impl FnOnce() -> Step) {
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.push(step());
        }
    }
}

/// Where one request's hash walk stands, with the upstream's data for its method.
#[derive(Debug)]
enum Walk<'u, 'k> {
    /// Consistent: the ring index of the next point to look at.
    Ring { chash: &'u Chash, point: usize },
    /// Plain: the rehash sequence.
    Rehash { slots: &'u Slots, seq: RehashSequence<'k> },
}

/// One nginx worker's view of an upstream, with the state it accumulates across requests.
///
/// Start it fresh (as nginx does after a start or reload) and feed it the requests that worker receives, in
/// order. With `worker_processes 1` this reproduces nginx exactly; with several workers each has its own
/// state (unless `zone` shares it) and the mapping of requests to workers is up to the kernel.
///
/// # Example
///
/// ```
/// use nginx_ketama::{List, Method, Peer, PeerId, Status, Upstream, Worker};
///
/// // docs/nginx-algorithm.md §11 C, recorded from nginx: 9001 and 9002 answer, 9901..9903 refuse connections.
/// let up = Upstream::builder(Method::Consistent)
///     .peers(["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9901", "127.0.0.1:9902", "127.0.0.1:9903"]
///         .map(|s| Peer::new(s).with_max_fails(0)))
///     .build()?;
/// let mut worker = Worker::new(&up);
/// let out = worker.request(b"k0", 0, |peer| peer.name().contains(":99"));
/// let tried: Vec<&str> = out.attempts.iter().map(|&id| up.peer(id).name()).collect();
/// assert_eq!(tried, ["127.0.0.1:9903", "127.0.0.1:9901", "127.0.0.1:9002"]);
/// assert_eq!(out.status, Status::Answered);
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Worker<'u> {
    upstream: &'u Upstream,
    primary: Vec<PeerState>,
    backup: Vec<PeerState>,
}

/// Two workers of the same upstream are equal when no request can tell them apart: every future request,
/// whatever the clock reads, gives both the same outcome and leaves them equal. Per-peer state is compared
/// where it can still matter: a peer's failure count and timestamps (`fails`, `accessed`, `checked`) only
/// while a failure is counted against it (`max_fails > 0` and `fails > 0`). Otherwise nothing reads them
/// before the next failure overwrites them. The proof uses this to merge the states a request can leave
/// behind when it is not known at which second nginx's clock ticked during it.
impl PartialEq for Worker<'_> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.upstream, other.upstream) && self.live_state().eq(other.live_state())
    }
}

impl Eq for Worker<'_> {}

impl std::hash::Hash for Worker<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for s in self.live_state() {
            s.hash(state);
        }
    }
}

impl<'u> Worker<'u> {
    /// Every peer's state as far as it can still change an outcome (see `PartialEq for Worker`).
    fn live_state(&self) -> impl Iterator<Item = (i64, i64, u32, u32, u64, u64)> + '_ {
        let up = self.upstream;
        let lists = [(up.primary(), &self.primary), (up.backup(), &self.backup)];
        lists.into_iter().flat_map(|(peers, states)| peers.iter().zip(states.iter())).map(|(peer, st)| {
            let counted = peer.max_fails() > 0 && st.fails > 0;
            let (fails, accessed, checked) = if counted { (st.fails, st.accessed, st.checked) } else { (0, 0, 0) };
            (st.current_weight, st.effective_weight, st.conns, fails, accessed, checked)
        })
    }

    /// A freshly started worker (all weights, failure counts and timestamps at their initial values).
    pub fn new(upstream: &'u Upstream) -> Worker<'u> {
        Worker {
            upstream,
            primary: upstream.primary().iter().map(PeerState::new).collect(),
            backup: upstream.backup().iter().map(PeerState::new).collect(),
        }
    }

    /// The upstream this worker serves.
    pub fn upstream(&self) -> &'u Upstream {
        self.upstream
    }

    /// Runs one request for `key` at time `now` (seconds; nginx's cached clock), as nginx would with
    /// `proxy_next_upstream error` and no time limit: pick a peer, connect, and on failure pick again until
    /// a peer answers, the retry budget runs out, or nothing usable is left.
    ///
    /// `fails(peer)` says whether connecting to that peer fails (e.g. the port is closed). A failure is
    /// counted against the peer (`max_fails`/`fail_timeout`) exactly as nginx counts it.
    pub fn request(&mut self, key: &[u8], now: u64, fails: impl FnMut(&Peer) -> bool) -> Outcome {
        self.refused_run(key, &mut || now, fails, None)
    }

    /// [`Worker::request`] with a clock that may move during the request: `clock` is read where nginx reads
    /// its cached clock (`ngx_time()`, whole seconds): once per peer choice (the getter, and the round-robin
    /// getter it may hand over to, in the same call) and once after each *failed* attempt (a success does
    /// not read it). nginx updates that cache once per event-loop iteration, so between two attempts of
    /// one request it may have moved on (algorithm §5, "Time").
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::{Method, Peer, Upstream, Worker};
    ///
    /// // fail_timeout=0: a failed peer is skipped only within the second of its failure.
    /// let up = Upstream::builder(Method::Consistent)
    ///     .peers(["127.0.0.1:1", "127.0.0.1:2"].map(|s| Peer::new(s).with_fail_timeout(0)))
    ///     .build()?;
    /// let mut w = Worker::new(&up);
    /// let first = w.request(b"k", 100, |p| p.name() == "127.0.0.1:1");
    /// let owner = up.peer(first.attempts[0]).name().to_string();
    /// // The next request reads the clock at 101: the owner is tried again.
    /// let mut t = 100;
    /// let again = w.request_with_clock(b"k", || { t += 1; t }, |_| false);
    /// assert_eq!(up.peer(again.attempts[0]).name(), owner);
    /// # Ok::<(), nginx_ketama::UpstreamError>(())
    /// ```
    pub fn request_with_clock(
        &mut self,
        key: &[u8],
        mut clock: impl FnMut() -> u64,
        fails: impl FnMut(&Peer) -> bool,
    ) -> Outcome {
        self.refused_run(key, &mut clock, fails, None)
    }

    /// [`Worker::request`], recording every step nginx takes in `trace` (appended): each ring point or
    /// rehash slot looked at and why its peers were passed over, the hand-over to round-robin and why,
    /// each connection, and how the request ended. The outcome is the one `request` returns.
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::worker::{Skip, Step, Verdict};
    /// use nginx_ketama::{Method, Peer, Upstream, Worker};
    ///
    /// let up = Upstream::builder(Method::Consistent)
    ///     .peers(["127.0.0.1:1", "127.0.0.1:2"].map(|s| Peer::new(s).with_max_fails(0)))
    ///     .build()?;
    /// let mut trace = Vec::new();
    /// let out = Worker::new(&up).request_traced(b"k", 0, |p| p.name() == "127.0.0.1:1", &mut trace);
    /// // Whoever owns the key's point is tried; when 127.0.0.1:1 refuses, the retry passes its point.
    /// if out.attempts.len() == 2 {
    ///     assert!(trace.iter().any(|s| matches!(s, Step::Point { verdict: Verdict::Miss { passed, .. }, .. }
    ///         if passed[0].1 == Skip::Tried)));
    /// }
    /// # Ok::<(), nginx_ketama::UpstreamError>(())
    /// ```
    pub fn request_traced(
        &mut self,
        key: &[u8],
        now: u64,
        fails: impl FnMut(&Peer) -> bool,
        trace: &mut Vec<Step>,
    ) -> Outcome {
        self.refused_run(key, &mut || now, fails, Some(trace))
    }

    /// Runs one HTTP request as nginx does with a retry `policy` (`proxy_next_upstream`, `_tries`,
    /// `_timeout`) for a `client` request (method, body buffering): `reply(peer)` says how the attempt at
    /// that peer ends (a status, a refused connection, a timeout, an invalid header, a stale keepalive
    /// connection) and how long it took. Which attempt comes next, when the sequence stops, what the client
    /// gets and how each peer is freed follow algorithm §5.1 ([`failure::decide`]).
    ///
    /// [`Worker::request`] is the shorthand for refused connections with the default policy.
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::failure::{ClientRequest, Condition, Freed, NextUpstream, Reply, RetryPolicy};
    /// use nginx_ketama::{Method, Peer, Status, Upstream, Worker};
    ///
    /// let up = Upstream::builder(Method::Consistent)
    ///     .peers(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"].map(Peer::new))
    ///     .build()?;
    /// let policy = RetryPolicy { next_upstream: NextUpstream::default().with(Condition::Http503), tries: 2, ..Default::default() };
    /// // Every server answers 503: the first 503 is a failure and moves on; the second is the last try,
    /// // so it is passed to the client and its server is freed as a success.
    /// let mut w = Worker::new(&up);
    /// let out = w.request_with(b"k", 0, &policy, &ClientRequest::default(), |_| Reply::Status(503));
    /// assert_eq!((out.attempts.len(), out.status, out.client_status), (2, Status::Answered, 503));
    /// assert_eq!(out.results[0].freed, Freed::Failed);
    /// assert_eq!(out.results[1].freed, Freed::Success);
    /// assert_eq!(w.peer_state(out.attempts[1]).fails(), 0);
    /// # Ok::<(), nginx_ketama::UpstreamError>(())
    /// ```
    pub fn request_with<A: Into<Attempt>>(
        &mut self,
        key: &[u8],
        now: u64,
        policy: &RetryPolicy,
        client: &ClientRequest,
        reply: impl FnMut(&Peer) -> A,
    ) -> Outcome {
        self.request_with_clocked(key, || now, policy, client, reply)
    }

    /// [`Worker::request_with`] with a clock that may move during the request, read where nginx reads its
    /// cached clock, as in [`Worker::request_with_clock`]. The live proof judges nginx's answers with it
    /// when a request spans a second boundary.
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::failure::{ClientRequest, Reply, RetryPolicy};
    /// use nginx_ketama::{Method, Peer, Upstream, Worker};
    ///
    /// let up = Upstream::builder(Method::Consistent).peers(["127.0.0.1:1", "127.0.0.1:2"].map(Peer::new)).build()?;
    /// let (policy, client) = (RetryPolicy::default(), ClientRequest::default());
    /// let mut t = 0;
    /// let out = Worker::new(&up).request_with_clocked(b"k", || { t += 1; t }, &policy, &client, |_| Reply::Refused);
    /// assert_eq!((out.attempts.len(), out.client_status), (2, 502));
    /// # Ok::<(), nginx_ketama::UpstreamError>(())
    /// ```
    pub fn request_with_clocked<A: Into<Attempt>>(
        &mut self,
        key: &[u8],
        mut clock: impl FnMut() -> u64,
        policy: &RetryPolicy,
        client: &ClientRequest,
        mut reply: impl FnMut(&Peer) -> A,
    ) -> Outcome {
        self.policy_run(key, &mut clock, policy, client, &mut reply, None)
    }

    /// [`Worker::request_with`], recording every step nginx takes in `trace` (appended), as
    /// [`Worker::request_traced`] does for refused connections.
    pub fn request_with_traced<A: Into<Attempt>>(
        &mut self,
        key: &[u8],
        now: u64,
        policy: &RetryPolicy,
        client: &ClientRequest,
        mut reply: impl FnMut(&Peer) -> A,
        trace: &mut Vec<Step>,
    ) -> Outcome {
        self.policy_run(key, &mut || now, policy, client, &mut reply, Some(trace))
    }

    /// [`Worker::request_with`] with the rule for each attempt supplied by the caller: `judge(peer, budget)`
    /// returns what nginx does after the attempt at `peer` when `budget` attempts were left before it
    /// (normally [`failure::decide`] of that peer's reply). The budget starts as `policy` and the peers
    /// allow. It exists so that a test can change one of nginx's rules and show that the live proof catches
    /// the change (`crates/cli/tests/failures_live.rs`).
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::failure::{decide, ClientRequest, Reply, RetryPolicy};
    /// use nginx_ketama::{Method, Peer, Upstream, Worker};
    ///
    /// let up = Upstream::builder(Method::Consistent).peers(["127.0.0.1:1", "127.0.0.1:2"].map(Peer::new)).build()?;
    /// let (policy, client) = (RetryPolicy::default(), ClientRequest::default());
    /// let out = Worker::new(&up).request_judged(b"k", 0, &policy, |_, left| decide(Reply::Refused, &policy, &client, left, 0));
    /// assert_eq!((out.attempts.len(), out.client_status), (2, 502));
    /// # Ok::<(), nginx_ketama::UpstreamError>(())
    /// ```
    pub fn request_judged(
        &mut self,
        key: &[u8],
        now: u64,
        policy: &RetryPolicy,
        mut judge: impl FnMut(&Peer, u32) -> Decision,
    ) -> Outcome {
        let budget = policy.budget(self.peer_budget());
        self.run(key, &mut || now, budget, &mut judge, None)
    }

    /// Runs one `stream` session (algorithm §7): only connecting can fail over, `proxy_next_upstream` is
    /// on or off, a connected session frees its peer as a success, a UDP socket error counts without a
    /// retry ([`failure::decide_stream`]).
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::failure::{StreamPolicy, StreamReply};
    /// use nginx_ketama::{Method, Peer, Status, Upstream, Worker};
    ///
    /// let up = Upstream::builder(Method::Consistent).peers(["127.0.0.1:1", "127.0.0.1:2"].map(Peer::new)).build()?;
    /// let off = StreamPolicy { next_upstream: false, ..Default::default() };
    /// let out = Worker::new(&up).session(b"k", 0, &off, |_| StreamReply::Refused);
    /// assert_eq!((out.attempts.len(), out.status, out.client_status), (1, Status::Failed, 502));
    /// # Ok::<(), nginx_ketama::UpstreamError>(())
    /// ```
    pub fn session<A: Into<StreamAttempt>>(
        &mut self,
        key: &[u8],
        now: u64,
        policy: &StreamPolicy,
        mut reply: impl FnMut(&Peer) -> A,
    ) -> Outcome {
        let mut elapsed = 0u64;
        let budget = policy.budget(self.peer_budget());
        let mut judge = |peer: &Peer, _left: u32| {
            let attempt: StreamAttempt = reply(peer).into();
            elapsed = elapsed.saturating_add(attempt.ms);
            failure::decide_stream(attempt.reply, policy, elapsed)
        };
        self.run(key, &mut || now, budget, &mut judge, None)
    }

    /// A peer's state as this worker holds it now.
    ///
    /// # Panics
    ///
    /// If `id` is not a peer of the upstream.
    pub fn peer_state(&self, id: PeerId) -> &PeerState {
        match id.list {
            List::Primary => &self.primary[id.index],
            List::Backup => &self.backup[id.index],
        }
    }

    /// `pc->tries` before any cap: every address, primary and backup; since nginx 1.19.6 only the ones not
    /// marked `down` (algorithm §5, the retry budget).
    fn peer_budget(&self) -> u32 {
        self.upstream.peer_tries()
    }

    /// A request under `policy` for `client`, each attempt ending as `reply` says (its durations summed for
    /// `_timeout`), judged by [`failure::decide`].
    fn policy_run<A: Into<Attempt>>(
        &mut self,
        key: &[u8],
        clock: &mut dyn FnMut() -> u64,
        policy: &RetryPolicy,
        client: &ClientRequest,
        reply: &mut impl FnMut(&Peer) -> A,
        trace: Option<&mut Vec<Step>>,
    ) -> Outcome {
        let mut elapsed = 0u64;
        let mut judge = |peer: &Peer, left: u32| {
            let attempt: Attempt = reply(peer).into();
            elapsed = elapsed.saturating_add(attempt.ms);
            failure::decide(attempt.reply, policy, client, left, elapsed)
        };
        let budget = policy.budget(self.peer_budget());
        self.run(key, clock, budget, &mut judge, trace)
    }

    /// The refused-only shorthand's judge: a failure is an `error` retried by the default policy.
    fn refused_run(
        &mut self,
        key: &[u8],
        clock: &mut dyn FnMut() -> u64,
        mut fails: impl FnMut(&Peer) -> bool,
        trace: Option<&mut Vec<Step>>,
    ) -> Outcome {
        let policy = RetryPolicy::default();
        let client = ClientRequest::default();
        let mut judge = |peer: &Peer, left: u32| {
            let reply = if fails(peer) { failure::Reply::Refused } else { failure::Reply::OK };
            failure::decide(reply, &policy, &client, left, 0)
        };
        let budget = self.peer_budget();
        self.run(key, clock, budget, &mut judge, trace)
    }

    fn run(
        &mut self,
        key: &[u8],
        clock: &mut dyn FnMut() -> u64,
        budget: u32,
        judge: &mut dyn FnMut(&Peer, u32) -> Decision,
        trace: Option<&mut Vec<Step>>,
    ) -> Outcome {
        let up = self.upstream;
        let mut walk = match up.balancer() {
            Balancer::Consistent(chash) => {
                let point = if chash.ring().is_empty() { 0 } else { chash.ring().locate_key(key) };
                Walk::Ring { chash, point }
            }
            Balancer::Plain(slots) => Walk::Rehash { slots, seq: slots.sequence(key) },
        };
        let mut req = Request {
            key,
            list: List::Primary,
            tried: vec![false; up.primary().len().max(up.backup().len())],
            misses: 0,
            budget,
            round_robin: false,
            trace,
        };
        let mut attempts = Vec::new();
        let mut results = Vec::new();
        let (status, client_status) = loop {
            let Some(index) = self.get(&mut req, &mut walk, clock()) else {
                break (Status::NoLiveUpstreams, 502);
            };
            let id = PeerId { list: req.list, index };
            attempts.push(id);
            let d = judge(up.peer(id), req.budget);
            results.push(AttemptResult { freed: d.freed, upstream_status: d.upstream_status });
            let failed = d.freed == Freed::Failed;
            req.record(|| Step::Attempt { peer: id, failed });
            self.free(&mut req, index, failed, clock);
            if d.given_back {
                req.budget += 1;
            }
            if !d.retry {
                break (if failed { Status::Failed } else { Status::Answered }, d.client_status);
            }
            if req.budget == 0 {
                break (Status::Failed, d.client_status);
            }
        };
        req.record(|| Step::End(status));
        Outcome { attempts, status, round_robin: req.round_robin, results, client_status }
    }

    fn states(&mut self, list: List) -> &mut Vec<PeerState> {
        match list {
            List::Primary => &mut self.primary,
            List::Backup => &mut self.backup,
        }
    }

    /// `peer.get()`: the hash module's getter, falling through to round-robin. `None` is `NGX_BUSY`.
    fn get(&mut self, req: &mut Request<'_, '_>, walk: &mut Walk<'_, '_>, now: u64) -> Option<usize> {
        let up = self.upstream;
        let bypass = match walk {
            Walk::Ring { .. } => up.is_single(req.list).then_some(Fallback::SinglePeer),
            Walk::Rehash { .. } => up
                .plain_bypasses(req.list)
                .then(|| if up.is_single(req.list) { Fallback::SinglePeer } else { Fallback::FewerThanTwoPeers }),
        };
        let fallback = if req.misses > MAX_HASH_MISSES {
            Some(Fallback::MissBudget)
        } else if bypass.is_some() {
            bypass
        } else if req.key.is_empty() {
            Some(Fallback::EmptyKey)
        } else {
            None
        };
        if let Some(reason) = fallback {
            req.record(|| Step::Fallback(reason));
            return self.round_robin(req, now);
        }
        let found = match walk {
            Walk::Ring { chash, point } => self.consistent(req, chash, point, now),
            Walk::Rehash { slots, seq } => self.plain(req, slots, seq, now),
        };
        match found {
            Some(i) => {
                self.select(req, i, now);
                Some(i)
            }
            None => {
                let reason = if req.misses > MAX_HASH_MISSES { Fallback::MissBudget } else { Fallback::NothingToHash };
                req.record(|| Step::Fallback(reason));
                self.round_robin(req, now)
            }
        }
    }

    /// Why the peers of `list` that `belongs` admits were passed over (for the trace only).
    fn passed_over(
        &self,
        req: &Request<'_, '_>,
        now: u64,
        belongs: impl Fn(usize, &Peer) -> bool,
    ) -> Vec<(PeerId, Skip)> {
        let list = req.list;
        let states = match list {
            List::Primary => &self.primary,
            List::Backup => &self.backup,
        };
        self.upstream
            .list(list)
            .iter()
            .zip(states)
            .enumerate()
            .filter(|&(i, (peer, _))| belongs(i, peer))
            .map(|(i, (peer, st))| (PeerId { list, index: i }, skip_reason(req.tried[i], peer, st, now)))
            .collect()
    }

    /// Walks the ring from the request's point; `None` after too many empty points.
    fn consistent(&mut self, req: &mut Request<'_, '_>, chash: &Chash, point: &mut usize, now: u64) -> Option<usize> {
        let up = self.upstream;
        let ring = chash.ring();
        if up.list(req.list).is_empty() || ring.is_empty() {
            return None;
        }
        loop {
            let wanted = ring.server_index_at(*point);
            let list = req.list;
            let same_server = |i: usize, peer: &Peer| match list {
                List::Primary => chash.ring_server_of(i) == wanted,
                List::Backup => *peer.server() == ring.servers()[wanted],
            };
            let tried = &req.tried;
            let chosen = smooth_wrr(up.list(list), self.states(list), |i, peer, st| {
                !tried[i] && usable(peer, st, now) && same_server(i, peer)
            });
            let index = *point % ring.len();
            if let Some(i) = chosen {
                let hash = ring.point(index).hash;
                req.record(|| Step::Point {
                    index,
                    hash,
                    server: wanted,
                    verdict: Verdict::Chosen(PeerId { list, index: i }),
                });
                return chosen;
            }
            *point += 1;
            req.misses += 1;
            if req.trace.is_some() {
                let passed = self.passed_over(req, now, same_server);
                let (hash, misses) = (ring.point(index).hash, req.misses);
                req.record(|| Step::Point { index, hash, server: wanted, verdict: Verdict::Miss { misses, passed } });
            }
            if req.misses > MAX_HASH_MISSES {
                return None;
            }
        }
    }

    /// Rehashes until a usable, untried slot; `None` after too many misses.
    fn plain(
        &mut self,
        req: &mut Request<'_, '_>,
        slots: &Slots,
        seq: &mut RehashSequence<'_>,
        now: u64,
    ) -> Option<usize> {
        let up = self.upstream;
        let list = req.list;
        let peers = up.list(list);
        loop {
            let step = seq.next_step();
            let p = slots.owner(list, step.sum);
            let st = &self.states(list)[p];
            if !req.tried[p] && usable(&peers[p], st, now) {
                let slot = slots.slot(list, step.sum);
                req.record(|| Step::Rehash {
                    step,
                    slot,
                    list,
                    owner: p,
                    verdict: Verdict::Chosen(PeerId { list, index: p }),
                });
                return Some(p);
            }
            req.misses += 1;
            if req.trace.is_some() {
                let passed = self.passed_over(req, now, |i, _| i == p);
                let (slot, misses) = (slots.slot(list, step.sum), req.misses);
                req.record(|| Step::Rehash { step, slot, list, owner: p, verdict: Verdict::Miss { misses, passed } });
            }
            if req.misses > MAX_HASH_MISSES {
                return None;
            }
        }
    }

    /// Marks a hash-chosen peer as taken (`conns++`, `checked`, the tried bit).
    fn select(&mut self, req: &mut Request<'_, '_>, i: usize, now: u64) {
        let timeout = self.upstream.list(req.list)[i].fail_timeout();
        let st = &mut self.states(req.list)[i];
        st.conns += 1;
        if now.saturating_sub(st.checked) > timeout {
            st.checked = now;
        }
        req.tried[i] = true;
    }

    /// `ngx_http_upstream_get_round_robin_peer`, including the switch to the backup list.
    fn round_robin(&mut self, req: &mut Request<'_, '_>, now: u64) -> Option<usize> {
        req.round_robin = true;
        let up = self.upstream;
        let list = req.list;
        if up.is_single(list) {
            let peer = &up.list(list)[0];
            let st = &mut self.states(list)[0];
            if !peer.is_down() && !at_max_conns(peer, st) {
                st.conns += 1;
                req.record(|| Step::RoundRobin { list, chosen: Some(0) });
                return Some(0);
            }
        } else {
            let tried = &req.tried;
            let chosen = smooth_wrr(up.list(list), self.states(list), |i, peer, st| !tried[i] && usable(peer, st, now));
            if let Some(b) = chosen {
                self.select(req, b, now);
                req.record(|| Step::RoundRobin { list, chosen: Some(b) });
                return Some(b);
            }
        }
        req.record(|| Step::RoundRobin { list, chosen: None });
        if req.list == List::Primary && !up.backup().is_empty() {
            req.list = List::Backup;
            req.tried.iter_mut().for_each(|t| *t = false);
            req.record(|| Step::SwitchToBackup);
            return self.round_robin(req, now);
        }
        None
    }

    /// `ngx_http_upstream_free_round_robin_peer` after one attempt; only a counted failure reads the clock.
    fn free(&mut self, req: &mut Request<'_, '_>, i: usize, failed: bool, clock: &mut dyn FnMut() -> u64) {
        let up = self.upstream;
        let peer = &up.list(req.list)[i];
        let single = up.is_single(req.list);
        let st = &mut self.states(req.list)[i];
        if single {
            st.fails = 0;
            st.conns = st.conns.saturating_sub(1);
            req.budget = 0;
            return;
        }
        if failed {
            let now = clock();
            st.fails += 1;
            st.accessed = now;
            st.checked = now;
            if peer.max_fails() > 0 {
                st.effective_weight -= i64::from(peer.weight() / peer.max_fails());
            }
            if st.effective_weight < 0 {
                st.effective_weight = 0;
            }
        } else if st.accessed < st.checked {
            st.fails = 0;
        }
        st.conns = st.conns.saturating_sub(1);
        req.budget = req.budget.saturating_sub(1);
    }
}

/// One pass of nginx's smooth weighted round-robin over the peers `eligible` admits: every candidate's
/// `current_weight` grows by its `effective_weight` (which recovers by 1 toward `weight`), the largest wins
/// (the first on ties), and the winner pays back the pass's total.
fn smooth_wrr(
    peers: &[Peer],
    states: &mut [PeerState],
    mut eligible: impl FnMut(usize, &Peer, &PeerState) -> bool,
) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    let mut total = 0i64;
    for (i, (peer, st)) in peers.iter().zip(states.iter_mut()).enumerate() {
        if !eligible(i, peer, st) {
            continue;
        }
        st.current_weight += st.effective_weight;
        total += st.effective_weight;
        if st.effective_weight < i64::from(peer.weight()) {
            st.effective_weight += 1;
        }
        if best.is_none_or(|(_, cw)| st.current_weight > cw) {
            best = Some((i, st.current_weight));
        }
    }
    let (b, _) = best?;
    states[b].current_weight -= total;
    Some(b)
}

/// Not `down`, not failed within `fail_timeout`, not at `max_conns`.
fn usable(peer: &Peer, st: &PeerState, now: u64) -> bool {
    if peer.is_down() {
        return false;
    }
    !failed(peer, st, now) && !at_max_conns(peer, st)
}

/// `max_fails` failures, the last within `fail_timeout` (inclusive).
fn failed(peer: &Peer, st: &PeerState, now: u64) -> bool {
    peer.max_fails() > 0 && st.fails >= peer.max_fails() && now.saturating_sub(st.checked) <= peer.fail_timeout()
}

/// The first reason a peer is not a candidate (tried, down, failed, at max_conns); `Tried` for a usable
/// peer that was tried. Called only for peers that were passed over.
fn skip_reason(tried: bool, peer: &Peer, st: &PeerState, now: u64) -> Skip {
    if tried {
        Skip::Tried
    } else if peer.is_down() {
        Skip::Down
    } else if failed(peer, st, now) {
        Skip::Failed
    } else {
        debug_assert!(at_max_conns(peer, st), "a passed-over peer is tried or unusable");
        Skip::MaxConns
    }
}

fn at_max_conns(peer: &Peer, st: &PeerState) -> bool {
    peer.max_conns() > 0 && st.conns >= peer.max_conns()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NginxVersion;
    use crate::upstream::Method;

    fn ports(up: &Upstream, out: &Outcome) -> Vec<String> {
        out.attempts.iter().map(|&id| up.peer(id).name().rsplit(':').next().unwrap().to_string()).collect()
    }

    fn upstream(method: Method, servers: &[&str]) -> Upstream {
        Upstream::builder(method)
            .peers(servers.iter().map(|s| Peer::new(format!("127.0.0.1:{s}")).with_max_fails(0)))
            .build()
            .unwrap()
    }

    fn refuses(p: &Peer) -> bool {
        p.name().contains(":99")
    }

    /// Algorithm §11 C: failover chains recorded from nginx (each key on a fresh worker is not required: with
    /// max_fails=0 and unique names the chain does not depend on history).
    #[test]
    fn consistent_failover_chains_match_nginx() {
        let up = upstream(Method::Consistent, &["9001", "9002", "9901", "9902", "9903"]);
        let mut w = Worker::new(&up);
        let want: [(&str, &[&str]); 7] = [
            ("k0", &["9903", "9901", "9002"]),
            ("k1", &["9001"]),
            ("k4", &["9902", "9903", "9901", "9002"]),
            ("k6", &["9903", "9902", "9001"]),
            ("k9", &["9903", "9902", "9901", "9001"]),
            ("k10", &["9903", "9901", "9002"]),
            ("k11", &["9901", "9002"]),
        ];
        for (key, chain) in want {
            let out = w.request(key.as_bytes(), 100, refuses);
            assert_eq!(ports(&up, &out), chain, "{key}");
            assert_eq!(out.status, Status::Answered);
            assert!(!out.round_robin);
        }
    }

    /// Algorithm §11 D: plain hash with refused peers.
    #[test]
    fn plain_failover_chains_match_nginx() {
        let up = upstream(Method::Plain, &["9001", "9901", "9902", "9002"]);
        let mut w = Worker::new(&up);
        let want: [(&str, &[&str]); 5] = [
            ("k0", &["9901", "9002"]),
            ("k1", &["9902", "9901", "9002"]),
            ("k2", &["9002"]),
            ("k3", &["9001"]),
            ("k7", &["9901", "9002"]),
        ];
        for (key, chain) in want {
            assert_eq!(ports(&up, &w.request(key.as_bytes(), 100, refuses)), chain, "{key}");
        }
    }

    #[test]
    fn empty_key_is_weighted_round_robin_with_state() {
        let up = Upstream::builder(Method::Consistent)
            .peer(Peer::new("127.0.0.1:1").with_weight(2))
            .peer(Peer::new("127.0.0.1:2"))
            .build()
            .unwrap();
        let mut w = Worker::new(&up);
        let picks: Vec<String> = (0..6).flat_map(|_| ports(&up, &w.request(b"", 0, |_| false))).collect();
        // Smooth WRR with weights 2:1: a b a, a b a.
        assert_eq!(picks, ["1", "2", "1", "1", "2", "1"]);
        assert!(w.request(b"", 0, |_| false).round_robin);
    }

    #[test]
    fn addresses_of_one_name_alternate_by_weighted_round_robin() {
        let up = Upstream::builder(Method::Consistent)
            .peer(Peer::new("multi:9001").with_name("127.0.0.2:9001"))
            .peer(Peer::new("multi:9001").with_name("127.0.0.3:9001"))
            .peer(Peer::new("127.0.0.1:9002"))
            .build()
            .unwrap();
        let key = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| up.ring().unwrap().owner(k.as_bytes()).unwrap().as_str() == "multi:9001")
            .unwrap();
        let mut w = Worker::new(&up);
        let names: Vec<String> =
            (0..4).map(|_| up.peer(w.request(key.as_bytes(), 0, |_| false).attempts[0]).name().to_string()).collect();
        assert_eq!(names, ["127.0.0.2:9001", "127.0.0.3:9001", "127.0.0.2:9001", "127.0.0.3:9001"]);
        // A retry stays on the same point: the other address of the name is tried before moving on.
        let out = w.request(key.as_bytes(), 0, |p| p.name() == "127.0.0.2:9001");
        assert_eq!(up.peer(out.attempts[1]).name(), "127.0.0.3:9001");
    }

    #[test]
    fn more_than_twenty_misses_fall_back_to_round_robin_then_backup() {
        // 25 down servers around two live ones: keys landing in the down region pass 21 empty points.
        let mut b = Upstream::builder(Method::Consistent);
        for i in 0..25 {
            b = b.peer(Peer::new(format!("10.0.0.{i}:80")).with_down(true));
        }
        let up = b
            .peer(Peer::new("127.0.0.1:1").with_max_fails(0))
            .peer(Peer::new("127.0.0.1:2").with_max_fails(0))
            .backup(Peer::new("127.0.0.1:3").with_max_fails(0))
            .build()
            .unwrap();
        let mut w = Worker::new(&up);
        let mut fell_back = 0;
        for i in 0..300 {
            let key = format!("k{i}");
            let fresh = Worker::new(&up).request(key.as_bytes(), 0, |_| false);
            let routed = up.route(key.as_bytes());
            assert_eq!(fresh.round_robin, routed == crate::Route::RoundRobin, "{key}");
            let out = w.request(key.as_bytes(), 0, |p| p.name() != "127.0.0.1:3");
            if out.round_robin {
                fell_back += 1;
            }
            // Both primaries refuse, so every request ends on the backup, reached only through round-robin.
            assert_eq!(up.peer(*out.attempts.last().unwrap()).name(), "127.0.0.1:3", "{key}");
            assert_eq!(out.status, Status::Answered);
        }
        assert_eq!(fell_back, 300);
    }

    #[test]
    fn single_peer_gets_one_attempt_and_never_counts_failures() {
        let up = Upstream::builder(Method::Consistent).peer(Peer::new("127.0.0.1:1")).build().unwrap();
        let mut w = Worker::new(&up);
        for _ in 0..3 {
            let out = w.request(b"key", 0, |_| true);
            assert_eq!(out.attempts.len(), 1);
            assert_eq!(out.status, Status::Failed);
            assert!(out.round_robin);
        }
        let down = Upstream::builder(Method::Plain).peer(Peer::new("127.0.0.1:1").with_down(true)).build().unwrap();
        let out = Worker::new(&down).request(b"key", 0, |_| false);
        assert_eq!((out.attempts.len(), out.status), (0, Status::NoLiveUpstreams));
    }

    #[test]
    fn max_fails_takes_a_peer_out_for_fail_timeout() {
        let up = Upstream::builder(Method::Consistent)
            .peers((1..=3).map(|p| Peer::new(format!("127.0.0.1:{p}")).with_fail_timeout(10)))
            .build()
            .unwrap();
        let key = b"some key";
        let owner = up.ring().unwrap().owner(key).unwrap().clone();
        let mut w = Worker::new(&up);
        let first = w.request(key, 1000, |p| *p.server() == owner);
        assert_eq!(up.peer(first.attempts[0]).server(), &owner);
        assert_eq!(first.attempts.len(), 2);
        // Within fail_timeout the owner is skipped even though it would answer now.
        let skipped = w.request(key, 1010, |_| false);
        assert_ne!(up.peer(skipped.attempts[0]).server(), &owner);
        // After it, the owner is tried again.
        let back = w.request(key, 1011, |_| false);
        assert_eq!(up.peer(back.attempts[0]).server(), &owner);
    }

    /// The clock is read where nginx reads its cached clock: at each peer choice and after each failed
    /// attempt. With `fail_timeout=0` a server failed at second 100 is skipped at 100 and tried at 101,
    /// within one request if the clock moves between its attempts.
    #[test]
    fn the_clock_is_read_at_every_choice_and_every_failure() {
        let up = Upstream::builder(Method::Consistent)
            .peers((1..=4).map(|p| Peer::new(format!("127.0.0.1:{p}")).with_fail_timeout(0)))
            .build()
            .unwrap();
        let refused = |p: &Peer| p.name() == "127.0.0.1:1";
        let key = (0..)
            .map(|i| format!("k{i}").into_bytes())
            .find(|k| ports(&up, &Worker::new(&up).request(k, 100, refused))[0] == "1")
            .unwrap();
        let mut w = Worker::new(&up);
        let mut reads = Vec::new();
        let out = w.request_with_clock(
            &key,
            || {
                reads.push(100);
                100
            },
            refused,
        );
        // get (100), the failure (100), get (100): answered by the second peer.
        assert_eq!((out.attempts.len(), reads.len()), (2, 3));
        // Still second 100: the failed owner is skipped.
        assert_ne!(ports(&up, &w.request(&key, 100, |_| false))[0], "1");
        // Second 101: it is tried again (and fails again).
        let mut again = w.clone();
        assert_eq!(ports(&up, &again.request(&key, 101, refused))[0], "1");
        // A clock that moves to 101 after the first read: the choice at 100 skips it, nothing else reads.
        let mut t = 99;
        let moving = w.request_with_clock(
            &key,
            || {
                t += 1;
                t.min(101)
            },
            refused,
        );
        assert_ne!(ports(&up, &moving)[0], "1");
    }

    /// Workers are equal when no request can tell them apart: the timestamps of a peer without a counted
    /// failure do not count, those of a failed peer do, and equal workers answer every later request alike.
    #[test]
    fn equal_workers_answer_alike_and_failure_times_tell_them_apart() {
        let up = Upstream::builder(Method::Consistent)
            .peers((1..=5).map(|p| Peer::new(format!("127.0.0.1:{p}")).with_fail_timeout(3)))
            .build()
            .unwrap();
        let hash = |w: &Worker<'_>| {
            use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
            BuildHasherDefault::<DefaultHasher>::default().hash_one(w)
        };
        // Same request at different seconds, nothing fails: `checked` differs, nothing that matters does.
        let (mut a, mut b) = (Worker::new(&up), Worker::new(&up));
        a.request(b"k", 100, |_| false);
        b.request(b"k", 200, |_| false);
        assert_eq!(a, b);
        assert_eq!(hash(&a), hash(&b));
        // Then the same failures at the same seconds: both answer the same to every later request.
        let refused = |p: &Peer| p.name() == "127.0.0.1:2";
        for i in 0..300u64 {
            let key = format!("k{i}");
            let now = 300 + i / 20;
            assert_eq!(a.request(key.as_bytes(), now, refused), b.request(key.as_bytes(), now, refused), "{key}");
            assert_eq!(a, b);
        }
        // A failure counted at different seconds: unequal, and a later request tells them apart.
        let (mut c, mut d) = (Worker::new(&up), Worker::new(&up));
        let key = (0..)
            .map(|i| format!("f{i}").into_bytes())
            .find(|k| ports(&up, &Worker::new(&up).request(k, 0, |_| false))[0] == "2")
            .unwrap();
        c.request(&key, 100, refused);
        d.request(&key, 101, refused);
        assert_ne!(c, d);
        assert_ne!(c.request(&key, 104, |_| false), d.request(&key, 104, |_| false));
    }

    #[test]
    fn plain_with_one_primary_and_backups_depends_on_version() {
        // Three backups, the primary refuses. 1.26 hashes onto the lone primary, misses 21 times on it and
        // then round-robins through the backups; 1.30 round-robins at once and, once on the backup list
        // (which has 3 peers), hashes over it with the key's rehash sequence.
        let build = |version| {
            Upstream::builder(Method::Plain)
                .version(version)
                .peer(Peer::new("127.0.0.1:1").with_max_fails(0))
                .backup(Peer::new("127.0.0.1:2").with_max_fails(0))
                .backup(Peer::new("127.0.0.1:3").with_max_fails(0))
                .backup(Peer::new("127.0.0.1:4").with_max_fails(0))
                .build()
                .unwrap()
        };
        let old = build(NginxVersion::new(1, 26, 3));
        let new = build(NginxVersion::new(1, 30, 6));
        let mut differ = 0;
        for i in 0..200 {
            let key = format!("k{i}");
            let fails = |p: &Peer| p.name() != "127.0.0.1:4";
            let a = ports(&old, &Worker::new(&old).request(key.as_bytes(), 0, fails));
            let b = ports(&new, &Worker::new(&new).request(key.as_bytes(), 0, fails));
            // Old rules: primary, then the backups in round-robin order.
            assert_eq!(a, ["1", "2", "3", "4"], "{key}");
            assert_eq!(b[..2], ["1", "2"], "{key}");
            assert_eq!(b.last().unwrap(), "4");
            differ += usize::from(a != b);
        }
        assert!(differ > 0, "the hash over the backup list must change some chains");
    }

    #[test]
    fn retry_budget_counts_down_servers_before_1_19_6() {
        // Two refusing servers and one `down`: 1.18.0's budget is 3 (every address), so after both refusals a
        // third get() finds nothing usable (no live upstreams); 1.19.6's is 2 and runs out (failed, 502 with
        // the last error). The attempts are the same.
        let build = |version| {
            Upstream::builder(Method::Consistent)
                .version(version)
                .peer(Peer::new("127.0.0.1:1").with_max_fails(0))
                .peer(Peer::new("127.0.0.1:2").with_max_fails(0).with_down(true))
                .peer(Peer::new("127.0.0.1:3").with_max_fails(0))
                .build()
                .unwrap()
        };
        let old = build(NginxVersion::new(1, 18, 0));
        let new = build(NginxVersion::new(1, 19, 6));
        for i in 0..50 {
            let key = format!("k{i}");
            let a = Worker::new(&old).request(key.as_bytes(), 0, |_| true);
            let b = Worker::new(&new).request(key.as_bytes(), 0, |_| true);
            assert_eq!(ports(&old, &a).len(), 2, "{key}");
            assert_eq!(ports(&old, &a), ports(&new, &b), "{key}");
            assert_eq!((a.status, b.status), (Status::NoLiveUpstreams, Status::Failed), "{key}");
        }
        // With one of the two live servers answering, both releases answer alike.
        let a = Worker::new(&old).request(b"k", 0, |p| p.name() == "127.0.0.1:1");
        let b = Worker::new(&new).request(b"k", 0, |p| p.name() == "127.0.0.1:1");
        assert_eq!((a.status, ports(&old, &a)), (b.status, ports(&new, &b)));
        assert_eq!(a.status, Status::Answered);
    }

    mod failures {
        use super::*;
        use crate::Route;
        use crate::failure::{
            ClientRequest, Condition, Freed, NextUpstream, Reply, RequestBody, RequestMethod, RetryPolicy,
            StreamPolicy, StreamReply,
        };

        fn three() -> Upstream {
            Upstream::builder(Method::Consistent)
                .peers((1..=3).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
                .build()
                .unwrap()
        }

        fn listing(conditions: &[Condition]) -> RetryPolicy {
            RetryPolicy {
                next_upstream: conditions.iter().fold(NextUpstream::DEFAULT, |s, &c| s.with(c)),
                ..RetryPolicy::default()
            }
        }

        fn freed(out: &Outcome) -> Vec<Freed> {
            out.results.iter().map(|r| r.freed).collect()
        }

        /// Algorithm §5.1: a listed status fails a peer only when another attempt follows; the last one is
        /// passed to the client and its peer freed as a success (`ngx_http_upstream_test_next()`).
        #[test]
        fn the_last_attempts_listed_status_is_passed_on_as_a_success() {
            let up = three();
            let mut w = Worker::new(&up);
            let out = w.request_with(b"k", 100, &listing(&[Condition::Http502]), &ClientRequest::default(), |_| {
                Reply::Status(502)
            });
            assert_eq!(freed(&out), [Freed::Failed, Freed::Failed, Freed::Success]);
            assert_eq!((out.status, out.client_status), (Status::Answered, 502));
            let fails: Vec<u32> = out.attempts.iter().map(|&id| w.peer_state(id).fails()).collect();
            assert_eq!(fails, [1, 1, 0]);
            // With proxy_next_upstream_tries 1 no status is ever a failure.
            let once = RetryPolicy { tries: 1, ..listing(&[Condition::Http502]) };
            let mut w = Worker::new(&up);
            let out = w.request_with(b"k", 100, &once, &ClientRequest::default(), |_| Reply::Status(502));
            assert_eq!((freed(&out), w.peer_state(out.attempts[0]).fails()), (vec![Freed::Success], 0));
            // Unlisted (the default policy): passed on at once.
            let out =
                Worker::new(&up).request_with(b"k", 100, &RetryPolicy::default(), &ClientRequest::default(), |_| {
                    Reply::Status(503)
                });
            assert_eq!((out.attempts.len(), out.client_status), (1, 503));
        }

        /// 403 and 404 free as NEXT: tried (the retry goes elsewhere) but not failed; 429 is FAILED.
        #[test]
        fn listed_403_and_404_are_next_and_429_is_failed() {
            let up = three();
            let p = listing(&[Condition::Http404, Condition::Http429]);
            let mut w = Worker::new(&up);
            let out = w.request_with(b"k", 100, &p, &ClientRequest::default(), |_| Reply::Status(404));
            assert_eq!(freed(&out), [Freed::Next, Freed::Next, Freed::Success]);
            for &id in &out.attempts {
                assert_eq!((w.peer_state(id).fails(), w.peer_state(id).effective_weight()), (0, 1));
            }
            let out = w.request_with(b"k", 100, &p, &ClientRequest::default(), |_| Reply::Status(429));
            assert_eq!(freed(&out), [Freed::Failed, Freed::Failed, Freed::Success]);
            assert_eq!(w.peer_state(out.attempts[0]).fails(), 1);
        }

        /// Errors and timeouts are counted even when not retried (`proxy_next_upstream off`).
        #[test]
        fn errors_count_against_the_peer_when_the_sequence_stops() {
            let up = three();
            let off = RetryPolicy { next_upstream: NextUpstream::OFF, ..RetryPolicy::default() };
            let mut w = Worker::new(&up);
            let out = w.request_with(b"k", 100, &off, &ClientRequest::default(), |_| Reply::ReadTimeout);
            assert_eq!((out.attempts.len(), out.status, out.client_status), (1, Status::Failed, 504));
            assert_eq!(w.peer_state(out.attempts[0]).fails(), 1);
            // The next request within fail_timeout passes that peer over.
            let next = w.request_with(b"k", 105, &off, &ClientRequest::default(), |_| Reply::OK);
            assert_ne!(next.attempts[0], out.attempts[0]);
        }

        /// With budget left but nothing usable, a retried 5xx ends in "no live upstreams" (502).
        #[test]
        fn a_retried_status_can_end_with_no_live_upstreams() {
            let up = Upstream::builder(Method::Consistent)
                .peers((1..=2).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
                .build()
                .unwrap();
            let mut w = Worker::new(&up);
            let first = w.request(b"k", 100, |_| false).attempts[0];
            let other = PeerId { list: List::Primary, index: 1 - first.index };
            // Fail the other peer (refused), then ask again within its fail_timeout.
            let key = (0..)
                .map(|i| format!("o{i}"))
                .find(|k| up.route(k.as_bytes()) == Route::Server(up.peer(other).server()))
                .unwrap();
            w.request(key.as_bytes(), 100, |p| p.name() == up.peer(other).name());
            assert_eq!(w.peer_state(other).fails(), 1);
            let out = w.request_with(b"k", 101, &listing(&[Condition::Http503]), &ClientRequest::default(), |_| {
                Reply::Status(503)
            });
            assert_eq!((out.attempts, out.status, out.client_status), (vec![first], Status::NoLiveUpstreams, 502));
            assert_eq!(freed_first(&w, first), 1);
        }

        fn freed_first(w: &Worker<'_>, id: PeerId) -> u32 {
            w.peer_state(id).fails()
        }

        /// An error on a cached connection gives the attempt back (even past `proxy_next_upstream_tries 1`);
        /// the peer is still failed and stays tried. A timeout there is not given back.
        #[test]
        fn a_stale_keepalive_connection_gives_the_attempt_back() {
            let up = three();
            let once = RetryPolicy { tries: 1, ..RetryPolicy::default() };
            let mut w = Worker::new(&up);
            let mut n = 0;
            let out = w.request_with(b"k", 100, &once, &ClientRequest::default(), |_| {
                n += 1;
                if n == 1 { Reply::StaleConnection } else { Reply::OK }
            });
            assert_eq!(freed(&out), [Freed::Failed, Freed::Success]);
            assert_ne!(out.attempts[0], out.attempts[1]);
            assert_eq!(w.peer_state(out.attempts[0]).fails(), 1);
            let out =
                Worker::new(&up).request_with(b"k", 100, &once, &ClientRequest::default(), |_| Reply::ReadTimeout);
            assert_eq!(out.attempts.len(), 1);
            // A single peer gets its attempt back too, and is tried again (the single getter has no tried test).
            let single = Upstream::builder(Method::Consistent).peer(Peer::new("127.0.0.1:1")).build().unwrap();
            let mut n = 0;
            let out = Worker::new(&single).request_with(
                b"k",
                100,
                &RetryPolicy::default(),
                &ClientRequest::default(),
                |_| {
                    n += 1;
                    if n == 1 { Reply::StaleConnection } else { Reply::OK }
                },
            );
            assert_eq!((out.attempts.len(), out.status), (2, Status::Answered));
            let out = Worker::new(&single).request_with(
                b"k",
                100,
                &RetryPolicy::default(),
                &ClientRequest::default(),
                |_| Reply::Closed,
            );
            assert_eq!((out.attempts.len(), out.status), (1, Status::Failed));
        }

        /// POST once sent, or a sent unbuffered body: no retry without `non_idempotent`; still counted.
        #[test]
        fn methods_and_bodies_stop_the_sequence_not_the_accounting() {
            let up = three();
            let post = ClientRequest { method: RequestMethod::Post, body: RequestBody::Buffered };
            let mut w = Worker::new(&up);
            let out = w.request_with(b"k", 100, &RetryPolicy::default(), &post, |_| Reply::ReadTimeout);
            assert_eq!((out.attempts.len(), out.client_status), (1, 504));
            assert_eq!(w.peer_state(out.attempts[0]).fails(), 1);
            let out = Worker::new(&up).request_with(b"k", 100, &RetryPolicy::default(), &post, |_| Reply::Refused);
            assert_eq!(out.attempts.len(), 3, "a refused connect did not send the POST");
            let idem = listing(&[Condition::NonIdempotent]);
            let out = Worker::new(&up).request_with(b"k", 100, &idem, &post, |_| Reply::ReadTimeout);
            assert_eq!(out.attempts.len(), 3);
            let streamed = ClientRequest { method: RequestMethod::Put, body: RequestBody::Unbuffered };
            let out = Worker::new(&up).request_with(b"k", 100, &idem, &streamed, |_| Reply::Closed);
            assert_eq!(out.attempts.len(), 1);
        }

        #[test]
        fn the_next_upstream_timeout_stops_retries() {
            let up = three();
            let p = RetryPolicy { timeout_ms: 100, ..RetryPolicy::default() };
            let out = Worker::new(&up).request_with(b"k", 100, &p, &ClientRequest::default(), |_| {
                crate::failure::Attempt { reply: Reply::ConnectTimeout, ms: 60 }
            });
            assert_eq!((out.attempts.len(), out.client_status), (2, 504));
        }

        /// A success after `fail_timeout` clears the failures (accessed < checked), a passed 5xx included.
        #[test]
        fn a_passed_status_after_fail_timeout_resets_fails() {
            let up = three();
            let mut w = Worker::new(&up);
            let owner = w.request(b"k", 100, |_| false).attempts[0];
            w.request(b"k", 100, |p| p.name() == up.peer(owner).name());
            assert_eq!(w.peer_state(owner).fails(), 1);
            let out =
                w.request_with(b"k", 111, &RetryPolicy::default(), &ClientRequest::default(), |_| Reply::Status(502));
            assert_eq!(out.attempts, [owner]);
            assert_eq!(w.peer_state(owner).fails(), 0);
        }

        /// Stream (algorithm §7): connects fail over when on; off counts without retrying; UDP errors count.
        #[test]
        fn stream_sessions_fail_over_on_connects_only() {
            let up = three();
            let mut w = Worker::new(&up);
            let mut n = 0;
            let out = w.session(b"k", 100, &StreamPolicy::default(), |_| {
                n += 1;
                if n == 1 { StreamReply::Refused } else { StreamReply::Connected }
            });
            assert_eq!((freed(&out), out.client_status), (vec![Freed::Failed, Freed::Success], 200));
            let off = StreamPolicy { next_upstream: false, ..StreamPolicy::default() };
            let out = Worker::new(&up).session(b"k", 100, &off, |_| StreamReply::ConnectTimeout);
            assert_eq!((out.attempts.len(), out.status), (1, Status::Failed));
            let mut w = Worker::new(&up);
            let out = w.session(b"k", 100, &StreamPolicy::default(), |_| StreamReply::UdpError);
            assert_eq!((out.attempts.len(), out.status), (1, Status::Failed));
            assert_eq!(w.peer_state(out.attempts[0]).fails(), 1);
            let capped = StreamPolicy { tries: 2, ..StreamPolicy::default() };
            assert_eq!(Worker::new(&up).session(b"k", 100, &capped, |_| StreamReply::Refused).attempts.len(), 2);
        }

        /// The shorthand is the default policy with refused connections.
        #[test]
        fn refused_shorthand_matches_the_policy_form() {
            let up = three();
            for i in 0..50 {
                let key = format!("k{i}");
                let refuses = |p: &Peer| p.name().ends_with(":2");
                let a = Worker::new(&up).request(key.as_bytes(), 0, refuses);
                let b = Worker::new(&up).request_with(
                    key.as_bytes(),
                    0,
                    &RetryPolicy::default(),
                    &ClientRequest::default(),
                    |p| {
                        if refuses(p) { Reply::Refused } else { Reply::OK }
                    },
                );
                assert_eq!(a, b, "{key}");
            }
        }
    }
}
