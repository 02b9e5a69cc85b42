//! The driver: one provisioned build, its random topologies (each started as its own engine process), the
//! keys asked through it, and the backend each reached compared with the model's pick. Returns a report;
//! `tests/engines_live.rs` asserts it clean, `verify --engine` prints it.

use super::backends::{EchoBackends, ask};
use super::install::{Build, Live};
use super::process::{StartError, start};
use super::random::Gen;
use super::{caddy, haproxy};
use nginx_ketama::analysis::compare::sample_key;
use nginx_ketama::analysis::forge::Forger;
use nginx_ketama::engines::EngineError;
use nginx_ketama::engines::caddy::Release as CaddyRelease;
use nginx_ketama::engines::haproxy::{Backend, Release as HaProxyRelease};
use std::net::SocketAddr;

/// Echo backends every proof needs (HAProxy's backup topologies put the fifth on as backups).
pub const BACKENDS: usize = 7;

/// Which model the engine is compared with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ModelRule {
    /// The library's model.
    #[default]
    Right,
    /// A deliberately wrong rule ([`haproxy::wrong_pick`], [`caddy::wrong_model`]): the proof must find
    /// mismatches (`verify --engine … --wrong-model`, the mutation check).
    Wrong,
}

/// What a proof runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// The master seed: with a topology's index, it names the topology and its keys.
    pub seed: u64,
    /// Topologies per release (default: [`default_topologies`]).
    pub topologies: Option<usize>,
    /// Random keys per topology (default: [`haproxy::DEFAULT_KEYS`], [`caddy::DEFAULT_KEYS`]).
    pub keys: Option<usize>,
    /// Run only this topology (to replay a mismatch).
    pub only: Option<usize>,
    /// The model compared.
    pub model: ModelRule,
}

/// Topologies per release by default: each HAProxy kind of topology once (16 before 3.0, 21 from 3.0), 4
/// Caddy pools.
pub fn default_topologies(build: &Build) -> Result<usize, ProofError> {
    Ok(match build.engine {
        Live::HaProxy => haproxy::kinds(haproxy_release(build)?).len(),
        Live::Caddy => caddy::DEFAULT_TOPOLOGIES,
    })
}

/// One request on which the engine and the model differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The topology's index.
    pub topology: usize,
    /// What the topology sets (`consistent crc32`, `pool of 4`).
    pub label: String,
    /// The key.
    pub key: Vec<u8>,
    /// The backend the engine sent it to (`None`: it answered itself, no server).
    pub engine_said: Option<SocketAddr>,
    /// The backend the model picks (`None`: no server).
    pub model_said: Option<SocketAddr>,
    /// The engine's configuration (its front port as it ran).
    pub config: String,
}

/// What one build's proof counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseReport {
    /// The engine.
    pub engine: Live,
    /// Its release.
    pub release: String,
    /// Topologies run.
    pub topologies: usize,
    /// Requests compared.
    pub requests: usize,
    /// Where the engine and the model differ.
    pub mismatches: Vec<Mismatch>,
}

/// One topology done, for progress.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// Its index.
    pub index: usize,
    /// How many the release runs.
    pub of: usize,
    /// What it sets.
    pub label: &'a str,
    /// Requests it compared.
    pub requests: usize,
    /// Of them, mismatches.
    pub mismatches: usize,
}

/// Why a proof could not run to its end (never a mismatch: the engine and the model were not compared).
#[derive(Debug, thiserror::Error)]
#[error("{at}: {cause}")]
pub struct ProofError {
    /// Where: the engine and release, and the topology when one was running (`haproxy 3.0.11, topology 3
    /// (consistent crc32)`).
    pub at: String,
    /// What went wrong.
    pub cause: Box<Cause>,
}

/// What stopped a proof.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    /// A provisioned release the models lack.
    #[error("a provisioned release the models lack: {0}")]
    Unmodelled(EngineError),
    /// A topology the model refuses (a bug of the generator).
    #[error("the model refuses the topology: {0}")]
    Model(EngineError),
    /// The engine did not start.
    #[error("{0}")]
    Start(StartError),
    /// A request through the engine failed (no answer, connection refused).
    #[error("asking for key {key:?}: {source}")]
    Ask {
        /// The key, lossily printable.
        key: String,
        /// Why.
        source: std::io::Error,
    },
}

impl ProofError {
    fn new(build: &Build, topology: Option<(usize, &str)>, cause: Cause) -> ProofError {
        let mut at = format!("{} {}", build.engine, build.release);
        if let Some((index, label)) = topology {
            at += &format!(", topology {index} ({label})");
        }
        ProofError { at, cause: Box::new(cause) }
    }
}

/// The model's pick of a key: a server's index in the topology.
type Pick = Box<dyn Fn(&[u8]) -> Option<usize>>;

fn haproxy_release(build: &Build) -> Result<HaProxyRelease, ProofError> {
    build.release.parse().map_err(|e| ProofError::new(build, None, Cause::Unmodelled(e)))
}

fn caddy_release(build: &Build) -> Result<CaddyRelease, ProofError> {
    build.release.parse().map_err(|e| ProofError::new(build, None, Cause::Unmodelled(e)))
}

/// One topology, ready to run: its configuration, servers, keys and model.
struct Topology {
    label: String,
    config: Box<dyn Fn(u16) -> String>,
    servers: Vec<SocketAddr>,
    keys: Vec<Vec<u8>>,
    pick: Pick,
}

/// Topology `index` of `build` (`backends`: at least [`BACKENDS`]).
fn topology(
    build: &Build,
    index: usize,
    backends: &[SocketAddr],
    options: &Options,
    forger: &Forger,
) -> Result<Topology, ProofError> {
    let mut rng = Gen::for_topology(options.seed, index);
    match build.engine {
        Live::HaProxy => {
            let release = haproxy_release(build)?;
            let kinds = haproxy::kinds(release);
            let case = haproxy::case(release, kinds[index % kinds.len()], backends, &mut rng);
            let model = Backend::new(case.options, &case.servers)
                .map_err(|e| ProofError::new(build, Some((index, &case.name)), Cause::Model(e)))?;
            let keys = haproxy::keys(&case, &model, forger, &mut rng, options.keys.unwrap_or(haproxy::DEFAULT_KEYS));
            let pick: Pick = match options.model {
                ModelRule::Right => Box::new(move |key| model.pick(key)),
                ModelRule::Wrong => Box::new(move |key| haproxy::wrong_pick(&model, key)),
            };
            let servers = case.servers.iter().map(|s| s.addr).collect();
            let label = case.name.clone();
            Ok(Topology { label, config: Box::new(move |port| haproxy::config(&case, port)), servers, keys, pick })
        }
        Live::Caddy => {
            let release = caddy_release(build)?;
            let pool = caddy::pool(index, backends, &mut rng);
            let model = match options.model {
                ModelRule::Right => caddy::model(release, &pool),
                ModelRule::Wrong => caddy::wrong_model(release, &pool),
            };
            let mut keys = Vec::new();
            let mut key = Vec::new();
            for i in 0..options.keys.unwrap_or(caddy::DEFAULT_KEYS) {
                sample_key(rng.next_u64(), i as u64, &mut key);
                keys.push(key.clone());
            }
            let label = format!("pool of {}", pool.len());
            let config_pool = pool.clone();
            Ok(Topology {
                label,
                config: Box::new(move |port| caddy::config(&config_pool, port)),
                servers: pool,
                keys,
                pick: Box::new(move |key| model.pick(key)),
            })
        }
    }
}

/// Proves `build` against its model on random topologies over `backends`, calling `progress` after each.
///
/// # Errors
///
/// [`ProofError`]: a release the models lack, an engine that does not start or answer.
pub fn prove(
    build: &Build,
    backends: &EchoBackends,
    options: &Options,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<ReleaseReport, ProofError> {
    let count = match options.topologies {
        Some(n) => n,
        None => default_topologies(build)?,
    };
    let indexes: Vec<usize> = match options.only {
        Some(i) => vec![i],
        None => (0..count).collect(),
    };
    let forger = Forger::new();
    let mut report = ReleaseReport {
        engine: build.engine,
        release: build.release.clone(),
        topologies: 0,
        requests: 0,
        mismatches: Vec::new(),
    };
    for &index in &indexes {
        let t = topology(build, index, backends.addrs(), options, &forger)?;
        let running =
            start(build, &*t.config).map_err(|e| ProofError::new(build, Some((index, &t.label)), Cause::Start(e)))?;
        let before = report.mismatches.len();
        for key in &t.keys {
            let real = ask(running.front(), key).map_err(|source| {
                let key = String::from_utf8_lossy(key).into_owned();
                ProofError::new(build, Some((index, &t.label)), Cause::Ask { key, source })
            })?;
            let engine_said = real.map(|b| backends.addrs()[b]);
            let model_said = (t.pick)(key).map(|s| t.servers[s]);
            report.requests += 1;
            if engine_said != model_said {
                report.mismatches.push(Mismatch {
                    topology: index,
                    label: t.label.clone(),
                    key: key.clone(),
                    engine_said,
                    model_said,
                    config: running.config().to_string(),
                });
            }
        }
        report.topologies += 1;
        progress(&Progress {
            index,
            of: count,
            label: &t.label,
            requests: t.keys.len(),
            mismatches: report.mismatches.len() - before,
        });
    }
    Ok(report)
}
