//! The options of `nginx-ketama verify`, and what they ask of the harness: which builds, which sweep,
//! which proof of a config.

use super::report::{Implementation, ReportTarget};
use nginx_ketama::Libc;
use nginx_ketama::version::NginxVersion;
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::nginx::selection::{Libcs, Place, Selection, SelectionError, Source, Unmodelled};
use nginx_ketama_harness::proofs::own_config::ProveOptions;
use nginx_ketama_harness::proofs::sweep::SweepOptions;
use nginx_ketama_harness::proofs::verdict::Verdict;
use std::path::PathBuf;

/// Where `verify` runs nginx.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BackendChoice {
    /// Docker if an engine answers and the images exist, else the provisioned binaries.
    Auto,
    /// The provisioned binaries, as local processes (each in a network namespace of its own as root).
    Local,
    /// Container images through testcontainers.
    Docker,
}

fn at_least_two(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 2 => Ok(n),
        Ok(_) => Err("a topology has at least 2 server lines".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Options of `nginx-ketama verify`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct VerifyArgs {
    /// Where nginx runs.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// nginx versions to check (default: every provisioned one).
    #[arg(long, value_delimiter = ',')]
    pub versions: Vec<NginxVersion>,
    /// C libraries to check (glibc, musl; comma-separated): of each version, only its builds against these
    /// (default: every provisioned build; with --shim, glibc only). The model follows each build's C
    /// library, detected from its binary.
    #[arg(long, value_delimiter = ',', value_parser = crate::args::libc_parser())]
    pub libc: Vec<Libc>,
    /// Random topologies per version [default: 14; with --engine, one of each kind: HAProxy 16 before 3.0
    /// and 21 from 3.0, Caddy 4].
    #[arg(long)]
    pub topologies: Option<usize>,
    /// Random keys per topology (plus 2% empty keys and, for consistent upstreams, two forged keys per
    /// ring point) [default: 3000; with --engine 150 for HAProxy, 300 for Caddy, plus the keys at both ends
    /// of every ring segment where the hash is computable].
    #[arg(long)]
    pub keys: Option<usize>,
    /// Master seed (a mismatch report names it).
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Run only this topology index (to replay a mismatch); must be below --topologies.
    #[arg(long)]
    pub only: Option<usize>,
    /// Largest topology, in server lines (at least 2).
    #[arg(long, default_value_t = 60, value_parser = at_least_two)]
    pub max_servers: usize,
    /// Skip the arc-by-arc ring proof.
    #[arg(long)]
    pub no_ring_proof: bool,
    /// Run every topology with refused connections only: no failure kinds (by default every other
    /// topology's live servers also answer 5xx/403/404/429, stall or send an invalid header, under a random
    /// `proxy_next_upstream` policy and tries limit, with GET and POST requests; with --config, every
    /// second failure run, under the retry rules of the location that proxies to the upstream).
    #[arg(long)]
    pub no_failure_kinds: bool,
    /// Stream sessions per version (local builds; 0 to skip).
    #[arg(long, default_value_t = 300)]
    pub stream_sessions: usize,
    /// Run the whole proof this many times in a row (a soak); ends with one row per run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    #[command(flatten)]
    pub engine: crate::args::EngineUnderProof,
    /// Prove this command instead of the library: it speaks the shim protocol of `ports/SHIM.md` (run by
    /// `sh -c`, one process per topology), e.g. `--shim "python3 ports/python/shim.py"`.
    #[arg(long, value_name = "COMMAND")]
    pub shim: Option<String>,
    /// With --shim: go on after the shim breaks the protocol (by default verify stops at the first protocol
    /// fault, since a shim that hangs would cost $NGINX_KETAMA_SHIM_TIMEOUT on every topology).
    #[arg(long, requires = "shim")]
    pub keep_going: bool,
    /// Where to write mismatches (JSON lines, each naming its run: start time and process id) if there are
    /// any. The file is replaced whole, never mixed with another run's; a device, FIFO or /dev/stdout is
    /// written through, never replaced; a file verify reads (--config and its includes, --nginx) is refused.
    /// A run that proves everything removes a mismatch file an earlier run left here (one written while this
    /// run ran is kept).
    #[arg(long, default_value = "target/nginx-ketama/mismatches.jsonl")]
    pub mismatches: PathBuf,
    /// Also write the run as a report for CI (repeatable): `junit=FILE` (JUnit XML: a test case per topology
    /// or upstream and build; a mismatch is a failure, a harness fault an error, what was not run or not
    /// modelled a skipped case) or `json=FILE` (the `nginx-ketama/verify/v1` document). Deterministic: the
    /// same seed writes the same bytes. The file's directory must exist; it is replaced whole.
    #[arg(long = "report", value_name = "FORMAT=FILE", value_parser = ReportTarget::parse)]
    pub reports: Vec<ReportTarget>,
    /// Directory of provisioned nginx builds (default: $NGINX_KETAMA_NGINX_DIR or ./.nginx).
    #[arg(long)]
    pub nginx_dir: Option<PathBuf>,
    /// Prove this nginx binary instead of the provisioned builds (repeatable): any build, run as a local
    /// process. Its version, C library and stream module are read from it (`nginx -V`, its executable).
    #[arg(long = "nginx", value_name = "PATH", conflicts_with_all = ["versions", "libc", "nginx_dir", "backend"])]
    pub nginx: Vec<PathBuf>,
    /// Prove this container image instead of the provisioned builds (repeatable), through testcontainers.
    /// It must be present locally (nothing is pulled); nginx must be its /usr/sbin/nginx.
    #[arg(long = "image", value_name = "REF", conflicts_with_all = ["versions", "libc", "nginx_dir", "backend"])]
    pub image: Vec<String>,
    /// Prove the upstreams of this nginx.conf as written (every hash upstream, or those named by
    /// --upstream) instead of random topologies; their addresses are made local in a private network
    /// namespace (root), and nothing leaves the machine.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// With --config: prove this upstream only (repeatable; `http:NAME`/`stream:NAME` when ambiguous).
    #[arg(long, value_name = "NAME", requires = "config")]
    pub upstream: Vec<String>,
    /// With --config: runs per upstream in which a random set of servers refuses connections (after the
    /// run with every server live); every second one also has failure kinds (see --no-failure-kinds).
    #[arg(long, default_value_t = 4, requires = "config")]
    pub failure_runs: usize,
}

impl VerifyArgs {
    /// What the command line asks for that cannot be done.
    ///
    /// # Errors
    ///
    /// A message for the user: nothing to check, or `--only` out of range.
    pub(crate) fn validate(&self) -> std::result::Result<(), String> {
        if self.topologies() == 0 && self.stream_sessions == 0 {
            return Err("nothing checked: --topologies 0 and --stream-sessions 0 leave nothing to compare".into());
        }
        if self.shim.is_some() && self.libc.iter().any(|l| *l != Libc::Glibc) {
            return Err("--shim proves glibc builds only: the shim protocol has no C library (drop --libc musl)".into());
        }
        match self.only {
            Some(i) if i >= self.topologies() => Err(format!(
                "--only {i} is out of range: with --topologies {} the topologies are numbered {}",
                self.topologies(),
                match self.topologies() {
                    0 => "(none)".to_string(),
                    1 => "0".to_string(),
                    n => format!("0 to {}", n - 1),
                }
            )),
            _ => Ok(()),
        }
    }

    /// `--topologies` against nginx.
    fn topologies(&self) -> usize {
        self.topologies.unwrap_or(14)
    }

    /// `--keys` against nginx.
    fn keys(&self) -> usize {
        self.keys.unwrap_or(3000)
    }

    /// The sweep `verify` runs on random topologies.
    pub(crate) fn sweep_options(&self) -> SweepOptions {
        SweepOptions {
            seed: self.seed,
            topologies: self.topologies(),
            only: self.only,
            keys: self.keys(),
            prove_ring: !self.no_ring_proof,
            stream_sessions: self.stream_sessions,
            resolver_exe: std::env::current_exe().ok(),
            topology: nginx_ketama_harness::site::topology::TopologyOptions {
                max_servers: self.max_servers,
                ..Default::default()
            },
            shim: self.shim.clone(),
            keep_going: self.keep_going,
            failure_kinds: !self.no_failure_kinds,
            provisioned: self.nginx_root(),
        }
    }

    /// The proof `verify --config` runs on each upstream.
    pub(crate) fn prove_options(&self) -> ProveOptions {
        ProveOptions {
            seed: self.seed,
            keys: self.keys(),
            prove_ring: !self.no_ring_proof,
            failure_runs: self.failure_runs,
            failure_pause: None,
            failure_kinds: !self.no_failure_kinds,
            model_key: None,
        }
    }

    /// The directory of provisioned builds.
    fn nginx_root(&self) -> PathBuf {
        self.nginx_dir.clone().unwrap_or_else(Installation::default_root)
    }

    /// The builds this command line asks for: `--nginx`/`--image`, else the provisioned builds of
    /// `--versions` and `--libc` (glibc only with `--shim`: the shim protocol has no C library) placed by
    /// `--backend`.
    pub(crate) fn selection(&self) -> Selection {
        let source = if self.nginx.is_empty() && self.image.is_empty() {
            let place = match self.backend {
                BackendChoice::Auto => Place::Auto,
                BackendChoice::Local => Place::Local,
                BackendChoice::Docker => Place::Docker,
            };
            Source::Provisioned { root: self.nginx_root(), versions: self.versions.clone(), place }
        } else {
            Source::Named { binaries: self.nginx.clone(), images: self.image.clone() }
        };
        let libcs = match (&self.libc[..], &self.shim) {
            ([], None) => Libcs::Provisioned,
            ([], Some(_)) => Libcs::Only(vec![Libc::Glibc]),
            (libcs, _) => Libcs::Only(libcs.to_vec()),
        };
        Selection { source, libcs, unmodelled: Unmodelled::Refuse }
    }

    /// Who is proven: the library, or the shim command.
    pub(crate) fn implementation(&self) -> Implementation {
        match &self.shim {
            Some(command) => Implementation::Shim(command.clone()),
            None => Implementation::Library,
        }
    }
}

/// Why the builds asked for cannot be used, said on stderr, and the verdict (exit code) it ends `verify`
/// with: a refusal is a usage error (exit 2), a build not available here a harness fault (exit 3).
pub(crate) fn refuse(args: &VerifyArgs, e: &SelectionError) -> (Verdict, String) {
    let message = match (e, &args.shim) {
        (SelectionError::OtherLibc { build, .. }, Some(_)) => {
            format!("--shim proves glibc builds only: the shim protocol has no C library ({build})")
        }
        _ => e.to_string(),
    };
    eprintln!("nginx-ketama: {message}");
    (if e.is_refusal() { Verdict::Usage } else { Verdict::HarnessFault }, message)
}
