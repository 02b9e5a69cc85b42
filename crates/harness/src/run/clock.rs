//! nginx's clock as the proof sees it from outside, and a model that follows it.
//!
//! Whether a failed server is still out (`max_fails`, `fail_timeout`) depends on nginx's cached clock:
//! whole seconds, refreshed once per event-loop iteration and read at each peer choice and after each
//! failed attempt (algorithm §5, "Time"). A run that lasts longer than a `fail_timeout` sees failed
//! servers come back, so the model must read the seconds nginx read — a fixed clock calls every retry of
//! a server whose window ran out a mismatch.
//!
//! The harness cannot see those reads, but nginx says, with every response, when the request was created
//! and when its response header went out (the front server adds `X-Clock: $msec $request_time`; both are
//! the cached clock in milliseconds). Every read the request made lies between the two: a [`Window`] of
//! whole seconds.
//!
//! * Nearly always the window is one second: the request runs on the worker at that second, exactly.
//! * When a second boundary falls inside a request, [`ClockedModel`] runs it in every way the clock could
//!   have ticked between its reads (each read a second of the window, never earlier than the one before),
//!   keeps each distinct worker state this leaves (see `PartialEq for Worker`), and lets later answers rule
//!   states out.
//! * A request whose answer differs between those ways is **not comparable**: its answer depends on when
//!   nginx's clock ticked, which nothing outside nginx can pin down. It is counted and shown, never called
//!   a mismatch. A request whose answer matches none of them is a mismatch.
//! * If the possible states or ways grow past [`MAX_STATES`] / [`MAX_WAYS`] (a machine so loaded that
//!   requests span seconds), the rest of the run is not comparable, and the report says so.

use crate::run::observation::Observation;
use crate::run::observation::{failure_observation, observation};
use crate::site::failures::{Connections, Failures};
use crate::site::topology::Topology;
use nginx_ketama::failure::{ClientRequest, RequestMethod};
use nginx_ketama::upstream::{Peer, Upstream};
use nginx_ketama::worker::{Outcome, Worker};
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

/// The response header in which the front server reports nginx's clock: `$msec $request_time`.
pub const CLOCK_HEADER: &str = "X-Clock";

/// The whole seconds nginx's cached clock can have read during one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The second the request was created in.
    pub first: u64,
    /// The second its response header was sent in (never before `first`).
    pub last: u64,
}

impl Window {
    /// A window of one second.
    pub fn at(second: u64) -> Window {
        Window { first: second, last: second }
    }

    /// Reads the [`CLOCK_HEADER`] value `"$msec $request_time"` (`"1764620000.123 0.004"`): the header went
    /// out at `$msec`, the request was created `$request_time` before (nginx computes it from the same
    /// cached clock, in milliseconds). `None` if it is not two such numbers.
    pub fn parse(value: &str) -> Option<Window> {
        let mut it = value.split_whitespace();
        let end = millis(it.next()?)?;
        let took = millis(it.next()?)?;
        if it.next().is_some() {
            return None;
        }
        Some(Window { first: end.saturating_sub(took) / 1000, last: end / 1000 })
    }
}

/// `"S.mmm"` in milliseconds.
fn millis(s: &str) -> Option<u64> {
    let (secs, ms) = s.split_once('.')?;
    if ms.len() != 3 || !ms.bytes().all(|b| b.is_ascii_digit()) || !secs.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    secs.parse::<u64>().ok()?.checked_mul(1000)?.checked_add(ms.parse::<u64>().ok()?)
}

/// The most worker states a [`ClockedModel`] keeps before it gives up on the rest of a run.
pub const MAX_STATES: usize = 64;

/// The most ways (clock readings) one request is run in before the model gives up on the rest of a run.
pub const MAX_WAYS: usize = 4096;

/// Why a request is not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unclocked {
    /// Its answer depends on when nginx's clock ticked during it (nginx's answer is one of the library's
    /// answers for the possible ticks).
    Tick,
    /// nginx did not report its clock for it (no [`CLOCK_HEADER`]): from here on the model cannot follow.
    NoClock,
    /// Earlier ticks left more possible states than [`MAX_STATES`] (or ways than [`MAX_WAYS`]).
    TooManyStates,
}

impl std::fmt::Display for Unclocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unclocked::Tick => "its route depends on when nginx's clock ticked during it",
            Unclocked::NoClock => "nginx did not report its clock",
            Unclocked::TooManyStates => "the clock's possible ticks left too many possible states",
        })
    }
}

/// What one request's answer says about the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// The library predicted it (for every way the clock can have read).
    Match,
    /// No way the clock can have read gives nginx's answer; this is what the library predicts (the first
    /// of its predictions if they differ between ways).
    Differs(Observation),
    /// Not compared.
    NotComparable(Unclocked),
}

/// The library's per-worker simulator following nginx's clock: the set of worker states nginx's answers
/// so far allow, each request run at the seconds its [`Window`] allows.
#[derive(Debug)]
pub struct ClockedModel<'a> {
    states: Vec<Worker<'a>>,
    /// The worker's cached connections to stale-keepalive servers, as nginx's own attempts left them.
    connections: Connections,
    topology: &'a Topology,
    answers: Answers<'a>,
    lost: Option<Unclocked>,
}

/// How the servers of a run answer.
#[derive(Debug, Clone, Copy)]
pub enum Answers<'a> {
    /// The topology's dead servers refuse, the rest answer `200 OK`, under nginx's default retry policy.
    Refusing,
    /// As the run's failure kinds say, under their retry policy; a request's method matters, and nginx's
    /// answer includes `$upstream_status`.
    Failing(&'a Failures),
}

impl<'a> ClockedModel<'a> {
    /// A freshly started worker for `upstream`, whose refused peers are those `topology` marks dead.
    pub fn new(upstream: &'a Upstream, topology: &'a Topology) -> ClockedModel<'a> {
        ClockedModel {
            states: vec![Worker::new(upstream)],
            connections: Connections::default(),
            topology,
            answers: Answers::Refusing,
            lost: None,
        }
    }

    /// [`ClockedModel::new`] whose servers answer as `failures` says.
    pub fn failing(upstream: &'a Upstream, topology: &'a Topology, failures: &'a Failures) -> ClockedModel<'a> {
        ClockedModel { answers: Answers::Failing(failures), ..ClockedModel::new(upstream, topology) }
    }

    /// Whether nginx's answers are compared with their `$upstream_status` too.
    pub fn predicts_upstream_status(&self) -> bool {
        matches!(self.answers, Answers::Failing(_))
    }

    /// How many worker states nginx's answers still allow.
    pub fn states(&self) -> usize {
        self.states.len()
    }

    /// Judges nginx's answer `actual` to the next request, a GET for `key`, made within `window`.
    pub fn judge(&mut self, key: &[u8], window: Option<Window>, actual: &Observation) -> Judgement {
        self.judge_as(key, RequestMethod::Get, window, actual)
    }

    /// [`ClockedModel::judge`] for a request sent with `method`.
    pub fn judge_as(
        &mut self,
        key: &[u8],
        method: RequestMethod,
        window: Option<Window>,
        actual: &Observation,
    ) -> Judgement {
        if let Some(why) = self.lost {
            return Judgement::NotComparable(why);
        }
        let Some(window) = window.filter(|w| w.first <= w.last) else {
            return self.lose(Unclocked::NoClock);
        };
        let (topology, answers) = (self.topology, self.answers);
        let client = ClientRequest { method, ..ClientRequest::default() };
        let connections = &self.connections;
        // One request on a worker, the clock read as `clock` says, and what nginx would answer.
        let run = |w: &mut Worker<'a>, clock: &mut dyn FnMut() -> u64| match answers {
            Answers::Refusing => {
                let out = w.request_with_clock(key, clock, |p: &Peer| topology.refuses(p.name()));
                observation(w.upstream(), &out)
            }
            Answers::Failing(f) => {
                let mut c = connections.clone();
                let out =
                    w.request_with_clocked(key, clock, &f.policy, &client, |p: &Peer| f.reply(topology, p, &mut c));
                failure_observation(w.upstream(), &out)
            }
        };
        let mut ways: Vec<(Observation, Worker<'a>)> = Vec::new();
        for mut state in std::mem::take(&mut self.states) {
            if window.first == window.last {
                let o = run(&mut state, &mut || window.first);
                ways.push((o, state));
                continue;
            }
            match every_way_with(&state, window, run, MAX_WAYS.saturating_sub(ways.len())) {
                Some(found) => ways.extend(found),
                None => return self.lose(Unclocked::TooManyStates),
            }
        }
        let mut predicted: Vec<&Observation> = Vec::new();
        for (o, _) in &ways {
            if !predicted.contains(&o) {
                predicted.push(o);
            }
        }
        let Some(&first) = predicted.first() else {
            return self.lose(Unclocked::TooManyStates);
        };
        let judgement = if predicted.len() == 1 && first == actual {
            Judgement::Match
        } else if predicted.contains(&actual) {
            Judgement::NotComparable(Unclocked::Tick)
        } else {
            Judgement::Differs(first.clone())
        };
        // nginx's own attempts tell which cached connections it left (whatever the model predicted).
        if let Answers::Failing(f) = self.answers {
            for name in actual.upstream_addr.split(", ") {
                let refuses = self.topology.refuses(name);
                let _ = self.connections.reply(name, refuses, f.answer_of(self.topology, name));
            }
        }
        // A tick-dependent answer rules out the ways that predicted something else.
        let tick = judgement == Judgement::NotComparable(Unclocked::Tick);
        let kept: Vec<Worker<'a>> = ways.into_iter().filter(|(o, _)| !tick || o == actual).map(|(_, w)| w).collect();
        self.states = distinct(kept.into_iter());
        if self.states.len() > MAX_STATES {
            return self.lose(Unclocked::TooManyStates);
        }
        judgement
    }

    fn lose(&mut self, why: Unclocked) -> Judgement {
        self.states.clear();
        self.lost = Some(why);
        Judgement::NotComparable(why)
    }
}

/// Every way one request on `worker` can go when each clock read is a second of `window`, never earlier
/// than the read before: the outcome and the worker state each way leaves. `None` if there are more than
/// `limit` ways.
///
/// A way is the sequence of seconds the reads return. Running the all-`first` way tells how many reads the
/// request makes; every other way agrees with some way already run up to a read where it moves to a later
/// second, and is run from there (ways that differ only after the request's last read are the same way).
pub fn every_way<'a>(
    worker: &Worker<'a>,
    key: &[u8],
    window: Window,
    refuses: impl Fn(&Peer) -> bool,
    limit: usize,
) -> Option<Vec<(Outcome, Worker<'a>)>> {
    every_way_with(
        worker,
        window,
        |w: &mut Worker<'a>, clock: &mut dyn FnMut() -> u64| w.request_with_clock(key, clock, &refuses),
        limit,
    )
}

/// [`every_way`] for any request: `run(worker, clock)` runs it on `worker` reading `clock`, and returns
/// what is kept of each way (its outcome, or what nginx would answer).
pub fn every_way_with<'a, T>(
    worker: &Worker<'a>,
    window: Window,
    run: impl Fn(&mut Worker<'a>, &mut dyn FnMut() -> u64) -> T,
    limit: usize,
) -> Option<Vec<(T, Worker<'a>)>> {
    let mut out = Vec::new();
    let mut pending: Vec<Vec<u64>> = vec![Vec::new()];
    while let Some(prefix) = pending.pop() {
        let last = prefix.last().copied().unwrap_or(window.first);
        let mut w = worker.clone();
        let mut reads = 0usize;
        let kept = run(&mut w, &mut || {
            let v = prefix.get(reads).copied().unwrap_or(last);
            reads += 1;
            v
        });
        out.push((kept, w));
        for at in prefix.len()..reads {
            for later in last + 1..=window.last {
                let mut next = prefix.clone();
                next.resize(at, last);
                next.push(later);
                pending.push(next);
            }
        }
        if out.len() + pending.len() > limit {
            return None;
        }
    }
    Some(out)
}

/// `workers` without repeats (by `PartialEq for Worker`), first occurrences in order.
fn distinct<'a>(workers: impl ExactSizeIterator<Item = Worker<'a>>) -> Vec<Worker<'a>> {
    if workers.len() <= 1 {
        // The usual case (one state, a one-second window): nothing to compare.
        return workers.collect();
    }
    let hasher = BuildHasherDefault::<DefaultHasher>::default();
    let mut buckets: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut out: Vec<Worker<'a>> = Vec::new();
    for w in workers {
        let bucket = buckets.entry(hasher.hash_one(&w)).or_default();
        if !bucket.iter().any(|&i| out[i] == w) {
            bucket.push(out.len());
            out.push(w);
        }
    }
    out
}

#[cfg(test)]
mod tests;
