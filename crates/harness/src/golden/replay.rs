//! Offline replay of records against a [`Model`]: the library's [`Worker`] ([`LibraryReplayer`]) or a
//! deliberately broken model in tests.

use super::record_file::{PeerRecord, Record, Run, upstream_of_peers};
use super::snapshots::show;
use crate::catalog::flag::Flag;
use crate::run::client::Method;
use crate::run::observation::Observation;
use crate::run::observation::{failure_observation, observation};
use crate::run::parity::{KeyKind, Mutation, PlannedRequest, RUN_CLOCK};
use crate::run::parity::{Model, expect_with};
use crate::site::failures::{Answer, Connections};
use anyhow::Result;
use nginx_ketama::failure::{ClientRequest, Reply, RetryPolicy};
use nginx_ketama::upstream::Upstream;
use nginx_ketama::version::NginxVersion;
use nginx_ketama::worker::Worker;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

/// Makes fresh models (fresh workers) for one run; implemented by the library ([`LibraryReplayer`]) and by
/// deliberately broken models in tests.
pub trait Replayer {
    /// A model in the state of a freshly started nginx worker.
    fn fresh(&self) -> Box<dyn Model + '_>;
}

/// A key whose replay differed from the recording.
#[derive(Debug, Clone)]
pub struct ReplayFailure {
    /// The case.
    pub case: String,
    /// nginx version of the run.
    pub nginx: NginxVersion,
    /// 1-based position of the key in the case.
    pub position: usize,
    /// The key's flags.
    pub flags: Vec<Flag>,
    /// The key (shown).
    pub key: String,
    /// What nginx did.
    pub recorded: Observation,
    /// What the model said.
    pub replayed: Observation,
}

impl std::fmt::Display for ReplayFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (nginx {}) key #{} {}: nginx {} {:?}, model {} {:?}",
            self.case,
            self.nginx,
            self.position,
            self.key,
            self.recorded.status,
            self.recorded.upstream_addr,
            self.replayed.status,
            self.replayed.upstream_addr
        )
    }
}

/// Replays one run: a stateful case in order on one fresh model, a stateless case with a fresh model per key.
pub fn replay(record: &Record, run: &Run, replayer: &dyn Replayer) -> Vec<ReplayFailure> {
    let mut failures = Vec::new();
    let mut shared = replayer.fresh();
    for (i, (k, want)) in record.keys.iter().zip(&run.results).enumerate() {
        let key = k.bytes();
        let request = PlannedRequest { key: key.clone(), kind: KeyKind::Random, method: k.method() };
        let now = RUN_CLOCK + k.clock.unwrap_or(0);
        let got =
            if record.stateful { shared.expect_at(&request, now) } else { replayer.fresh().expect_at(&request, now) };
        if got != *want {
            failures.push(ReplayFailure {
                case: record.case.clone(),
                nginx: run.nginx,
                position: i + 1,
                flags: record.flags.iter().chain(&k.flags).copied().collect(),
                key: show(&key),
                recorded: want.clone(),
                replayed: got,
            });
        }
    }
    failures
}

/// The library's [`Worker`] set up from a run's peers and nginx version; in a record with failure kinds, the
/// peers answer as recorded under the record's policy.
#[derive(Debug)]
pub struct LibraryReplayer {
    upstream: Upstream,
    answers: PeerAnswers,
    failing: Option<RecordedPolicy>,
}

/// How each peer of a recorded run answers, by address: refusing, or its recorded [`Answer`] (`200 OK`
/// without one).
#[derive(Debug, Clone)]
pub struct PeerAnswers {
    refusing: BTreeSet<String>,
    answers: BTreeMap<String, Answer>,
}

impl PeerAnswers {
    /// The answers of `run`'s peers.
    pub fn of(run: &Run) -> PeerAnswers {
        PeerAnswers {
            refusing: run.peers.iter().filter(|p| p.refuses).map(|p| p.address.clone()).collect(),
            answers: run.peers.iter().filter_map(|p| Some((p.address.clone(), p.answer()?))).collect(),
        }
    }

    /// Whether connections to the peer printed as `name` are refused.
    pub fn refuses(&self, name: &str) -> bool {
        self.refusing.contains(name)
    }

    /// How an attempt at the peer printed as `name` ends, on a worker holding `connections`.
    pub fn reply(&self, name: &str, connections: &mut Connections) -> Reply {
        connections.reply(name, self.refuses(name), self.answers.get(name).copied())
    }
}

/// The retry policy a record with failure kinds replays under, optionally with one rule changed.
#[derive(Debug, Clone)]
struct RecordedPolicy {
    policy: RetryPolicy,
    mutation: Option<Mutation>,
}

impl LibraryReplayer {
    /// Builds the upstream of `run` (peers in list order) with the rules of its nginx version and the tie
    /// rule of its C library.
    ///
    /// # Errors
    ///
    /// An upstream the library rejects.
    pub fn new(record: &Record, run: &Run) -> Result<LibraryReplayer> {
        let upstream = upstream_of_peers(record.method, run.nginx, run.c_library(), &run.peers)?;
        let failing = match &record.policy {
            Some(policy) => Some(RecordedPolicy { policy: policy.policy()?, mutation: None }),
            None => None,
        };
        Ok(LibraryReplayer { upstream, answers: PeerAnswers::of(run), failing })
    }

    /// The same replayer with one of nginx's failure rules changed (records with failure kinds only).
    #[must_use]
    pub fn mutated(mut self, mutation: Mutation) -> LibraryReplayer {
        if let Some(f) = self.failing.as_mut() {
            f.mutation = Some(mutation);
        }
        self
    }

    /// The same replayer with the `fail_timeout` window's boundary changed: a failed peer is skipped while
    /// `now - checked < fail_timeout` (exclusive) instead of nginx's `<=` — the library's comparison, run
    /// with every `fail_timeout` one second shorter (never skipped where it is 0).
    ///
    /// # Errors
    ///
    /// An upstream the library rejects.
    pub fn with_exclusive_fail_timeout(self, record: &Record, run: &Run) -> Result<LibraryReplayer> {
        let peers: Vec<PeerRecord> = run
            .peers
            .iter()
            .map(|p| match p.fail_timeout {
                0 => PeerRecord { max_fails: 0, ..p.clone() },
                t => PeerRecord { fail_timeout: t - 1, ..p.clone() },
            })
            .collect();
        let upstream = upstream_of_peers(record.method, run.nginx, run.c_library(), &peers)?;
        Ok(LibraryReplayer { upstream, ..self })
    }
}

struct WorkerModel<'a> {
    worker: Worker<'a>,
    answers: &'a PeerAnswers,
}

impl Model for WorkerModel<'_> {
    fn expect(&mut self, key: &[u8]) -> Observation {
        let answers = self.answers;
        expect_with(&mut self.worker, key, |p| answers.refuses(p.name()))
    }

    fn expect_at(&mut self, request: &PlannedRequest, now: u64) -> Observation {
        let answers = self.answers;
        let out = self.worker.request(&request.key, now, |p| answers.refuses(p.name()));
        observation(self.worker.upstream(), &out)
    }
}

/// A worker whose peers answer as a record with failure kinds says.
struct FailingWorkerModel<'a> {
    worker: Worker<'a>,
    answers: &'a PeerAnswers,
    failing: &'a RecordedPolicy,
    connections: Connections,
}

impl Model for FailingWorkerModel<'_> {
    fn expect(&mut self, key: &[u8]) -> Observation {
        let request = PlannedRequest { key: key.to_vec(), kind: KeyKind::Random, method: Method::Get };
        self.expect_at(&request, RUN_CLOCK)
    }

    fn expect_at(&mut self, request: &PlannedRequest, now: u64) -> Observation {
        let (answers, f) = (self.answers, self.failing);
        let client = ClientRequest { method: request.method.as_request_method(), ..ClientRequest::default() };
        let connections = &mut self.connections;
        let out = self.worker.request_judged(
            &request.key,
            now,
            &Mutation::budget_policy(f.mutation, &f.policy),
            |peer, left| {
                Mutation::decide(f.mutation, answers.reply(peer.name(), connections), &f.policy, &client, left)
            },
        );
        failure_observation(self.worker.upstream(), &out)
    }
}

impl Replayer for LibraryReplayer {
    fn fresh(&self) -> Box<dyn Model + '_> {
        let worker = Worker::new(&self.upstream);
        match &self.failing {
            None => Box::new(WorkerModel { worker, answers: &self.answers }),
            Some(failing) => Box::new(FailingWorkerModel {
                worker,
                answers: &self.answers,
                failing,
                connections: Connections::default(),
            }),
        }
    }
}
