//! Offline replay of records against a [`Model`]: the library's [`Worker`] ([`LibraryReplayer`]) or a
//! deliberately broken model in tests.

use super::record_file::{Record, Run, upstream_of_peers};
use super::snapshots::show;
use crate::catalog::flag::Flag;
use crate::run::observation::Observation;
use crate::run::parity::{Model, expect_with};
use anyhow::Result;
use nginx_ketama::upstream::Upstream;
use nginx_ketama::version::NginxVersion;
use nginx_ketama::worker::Worker;
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
        let got = if record.stateful { shared.expect(&key) } else { replayer.fresh().expect(&key) };
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

/// The library's [`Worker`] set up from a run's peers and nginx version.
#[derive(Debug)]
pub struct LibraryReplayer {
    upstream: Upstream,
    refusing: BTreeSet<String>,
}

impl LibraryReplayer {
    /// Builds the upstream of `run` (peers in list order) with the rules of its nginx version and the tie
    /// rule of its C library.
    ///
    /// # Errors
    ///
    /// An upstream the library rejects.
    pub fn new(record: &Record, run: &Run) -> Result<LibraryReplayer> {
        let refusing = run.peers.iter().filter(|p| p.refuses).map(|p| p.address.clone()).collect();
        let upstream = upstream_of_peers(record.method, run.nginx, run.c_library(), &run.peers)?;
        Ok(LibraryReplayer { upstream, refusing })
    }
}

struct WorkerModel<'a> {
    worker: Worker<'a>,
    refusing: &'a BTreeSet<String>,
}

impl Model for WorkerModel<'_> {
    fn expect(&mut self, key: &[u8]) -> Observation {
        let refusing = self.refusing;
        expect_with(&mut self.worker, key, |p| refusing.contains(p.name()))
    }
}

impl Replayer for LibraryReplayer {
    fn fresh(&self) -> Box<dyn Model + '_> {
        Box::new(WorkerModel { worker: Worker::new(&self.upstream), refusing: &self.refusing })
    }
}
