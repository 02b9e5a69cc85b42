//! The driver: one provisioned build, its random topologies (each started as its own engine process), the
//! keys asked through it, and the backend each reached compared with the model's pick. Returns a report;
//! `tests/engines_live.rs` asserts it clean, `verify --engine` prints it.

use super::backends::{EchoBackends, Request, ask};
use super::install::{Build, Live};
use super::process::{StartError, start};
use super::random::Gen;
use super::{caddy, haproxy};
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

/// Topologies per release by default: each HAProxy kind of topology once (16 before 3.0, 21 from 3.0), two
/// pools of each Caddy policy (6 on 2.6.2, 10 from 2.7: [`caddy::policies`]).
pub fn default_topologies(build: &Build) -> Result<usize, ProofError> {
    Ok(match build.engine {
        Live::HaProxy => haproxy::kinds(haproxy_release(build)?).len(),
        Live::Caddy => caddy::default_topologies(caddy_release(build)?),
    })
}

/// One request on which the engine and the model differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The topology's index.
    pub topology: usize,
    /// What the topology sets (`consistent crc32`, `uri_hash, pool of 4`).
    pub label: String,
    /// The key the model hashed (HAProxy's and Caddy's `header`: the `X-Key` sent; Caddy's `uri_hash` the
    /// URI, `query` the values joined, `ip_hash` the address).
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
    /// The same counts per kind of topology, in the order first run.
    pub kinds: Vec<KindReport>,
}

/// What one kind of topology counted: a HAProxy kind (`consistent crc32`), a Caddy policy (`uri_hash`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindReport {
    /// The kind.
    pub kind: String,
    /// Topologies run.
    pub topologies: usize,
    /// Requests compared.
    pub requests: usize,
    /// Of them, mismatches.
    pub mismatches: usize,
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

/// One topology, ready to run: its configuration, servers, requests (each with the key the model hashes)
/// and model.
struct Topology {
    kind: String,
    label: String,
    config: Box<dyn Fn(u16) -> String>,
    servers: Vec<SocketAddr>,
    requests: Vec<(Request, Vec<u8>)>,
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
            let requests = keys.into_iter().map(|key| (Request::keyed(&key), key)).collect();
            let kind = case.name.clone();
            Ok(Topology {
                kind,
                label,
                config: Box::new(move |port| haproxy::config(&case, port)),
                servers,
                requests,
                pick,
            })
        }
        Live::Caddy => {
            let release = caddy_release(build)?;
            let policy = caddy::policy(release, index);
            let pool = caddy::pool(index, backends, &mut rng);
            let asked = caddy::requests(&policy, &mut rng, options.keys.unwrap_or(caddy::DEFAULT_KEYS));
            let (model, requests) = match options.model {
                ModelRule::Right => {
                    (caddy::model(release, &pool), asked.into_iter().map(|a| (a.request, a.key)).collect())
                }
                ModelRule::Wrong => (
                    caddy::wrong_model(release, &policy, &pool),
                    asked.into_iter().map(|a| (a.request, a.wrong_key)).collect(),
                ),
            };
            let label = caddy::label(&policy, &pool);
            let config_pool = pool.clone();
            Ok(Topology {
                kind: caddy::kind(&policy),
                label,
                config: Box::new(move |port| caddy::config(&policy, &config_pool, port)),
                servers: pool,
                requests,
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
        kinds: Vec::new(),
    };
    for &index in &indexes {
        let t = topology(build, index, backends.addrs(), options, &forger)?;
        let running =
            start(build, &*t.config).map_err(|e| ProofError::new(build, Some((index, &t.label)), Cause::Start(e)))?;
        let before = report.mismatches.len();
        for (request, key) in &t.requests {
            let real = ask(running.front(), request).map_err(|source| {
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
        let kind = match report.kinds.iter().position(|k| k.kind == t.kind) {
            Some(at) => &mut report.kinds[at],
            None => {
                let kind = KindReport { kind: t.kind.clone(), topologies: 0, requests: 0, mismatches: 0 };
                report.kinds.push(kind);
                report.kinds.last_mut().expect("just pushed")
            }
        };
        kind.topologies += 1;
        kind.requests += t.requests.len();
        kind.mismatches += report.mismatches.len() - before;
        progress(&Progress {
            index,
            of: count,
            label: &t.label,
            requests: t.requests.len(),
            mismatches: report.mismatches.len() - before,
        });
    }
    Ok(report)
}
