//! `nginx-ketama verify`: the parity sweep with a progress bar, a summary table and a replay file.

use super::report::{Case, Counts, Implementation, Outcome, Proof, Report, ReportTarget, Suite};
use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use nginx_ketama::Libc;
use nginx_ketama::config::{Config, LoadOptions};
use nginx_ketama::version::NginxVersion;
use nginx_ketama_harness::golden::utc_time;
use nginx_ketama_harness::nginx::build::Build;
use nginx_ketama_harness::nginx::docker::{self, Image, ImageOrigin};
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::proofs::sweep::{
    Event, Fault, FaultKind, Finding, SweepOptions, VersionReport, replay_command, sweep_backend,
};
use nginx_ketama_harness::run::parity::{clip, show_key};
use nginx_ketama_output::FileId;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

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

/// How `verify` ends; [`Verdict::code`] is its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verdict {
    /// Exit 0: requests were compared and every one matched.
    Proven,
    /// Exit 1: nginx and the library (or the shim) differed on at least one request (mismatches win over
    /// faults).
    Mismatches,
    /// Exit 1: the shim under test broke the protocol (`ports/SHIM.md`): no answer in time, a line that is
    /// not an answer, an extra line, an attempt that is no peer's, an exit. The implementation under test
    /// failed, as with a mismatch — not the harness, so not exit 3 (which says "retry, nothing was
    /// learnt"); it wins over harness faults.
    ProtocolFault,
    /// Exit 2: the command line asks for something impossible (or for nothing at all), or names an nginx
    /// (`--nginx`, `--image`) whose version this library does not model: refused, not guessed.
    Usage,
    /// Exit 3: the harness could not run or finish a check (no nginx, nginx not starting or not answering,
    /// a socket error). Never a pass, and never called a mismatch.
    HarnessFault,
}

impl Verdict {
    /// The process exit code.
    pub(crate) fn code(self) -> u8 {
        match self {
            Verdict::Proven => 0,
            Verdict::Mismatches | Verdict::ProtocolFault => 1,
            Verdict::Usage => 2,
            Verdict::HarnessFault => 3,
        }
    }

    fn of(reports: &[VersionReport]) -> Verdict {
        if reports.iter().any(|r| !r.findings.is_empty()) {
            Verdict::Mismatches
        } else if reports.iter().flat_map(|r| &r.faults).any(|f| f.kind == FaultKind::Protocol) {
            Verdict::ProtocolFault
        } else if reports.iter().any(|r| !r.faults.is_empty()) || !reports.iter().any(|r| r.proven()) {
            Verdict::HarnessFault
        } else {
            Verdict::Proven
        }
    }

    /// How the reports and the soak table name it (`proven`, `protocol fault`).
    pub(crate) fn word(self) -> &'static str {
        match self {
            Verdict::Proven => "proven",
            Verdict::Mismatches => "mismatches",
            Verdict::ProtocolFault => "protocol fault",
            Verdict::Usage => "usage error",
            Verdict::HarnessFault => "harness fault",
        }
    }
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
    /// Random topologies per version.
    #[arg(long, default_value_t = 14)]
    pub topologies: usize,
    /// Random keys per topology (plus 2% empty keys and, for consistent upstreams, two forged keys per
    /// ring point).
    #[arg(long, default_value_t = 3000)]
    pub keys: usize,
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
    /// Stream sessions per version (local builds; 0 to skip).
    #[arg(long, default_value_t = 300)]
    pub stream_sessions: usize,
    /// Run the whole proof this many times in a row (a soak); ends with one row per run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
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
    /// run with every server live).
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
        if self.topologies == 0 && self.stream_sessions == 0 {
            return Err("nothing checked: --topologies 0 and --stream-sessions 0 leave nothing to compare".into());
        }
        if self.shim.is_some() && self.libc.iter().any(|l| *l != Libc::Glibc) {
            return Err("--shim proves glibc builds only: the shim protocol has no C library (drop --libc musl)".into());
        }
        match self.only {
            Some(i) if i >= self.topologies => Err(format!(
                "--only {i} is out of range: with --topologies {} the topologies are numbered {}",
                self.topologies,
                match self.topologies {
                    0 => "(none)".to_string(),
                    1 => "0".to_string(),
                    n => format!("0 to {}", n - 1),
                }
            )),
            _ => Ok(()),
        }
    }

    fn sweep_options(&self) -> SweepOptions {
        SweepOptions {
            seed: self.seed,
            topologies: self.topologies,
            only: self.only,
            keys: self.keys,
            prove_ring: !self.no_ring_proof,
            stream_sessions: self.stream_sessions,
            resolver_exe: std::env::current_exe().ok(),
            topology: nginx_ketama_harness::site::topology::TopologyOptions {
                max_servers: self.max_servers,
                ..Default::default()
            },
            shim: self.shim.clone(),
            keep_going: self.keep_going,
        }
    }
}

/// Why `verify` cannot start.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// A build whose version is not modelled, or another impossible request (exit 2).
    Usage(String),
    /// No nginx to run: nothing provisioned, a binary that does not run, an image not present (exit 3).
    Fault(anyhow::Error),
}

impl Refusal {
    /// Says why on stderr; the verdict (exit code) it ends `verify` with, and why.
    pub(crate) fn report(self) -> (Verdict, String) {
        let (verdict, message) = match self {
            Refusal::Usage(message) => (Verdict::Usage, message),
            Refusal::Fault(e) => (Verdict::HarnessFault, format!("{e:#}")),
        };
        eprintln!("nginx-ketama: {message}");
        (verdict, message)
    }
}

impl From<anyhow::Error> for Refusal {
    fn from(e: anyhow::Error) -> Refusal {
        Refusal::Fault(e)
    }
}

/// The builds named by `--nginx` and `--image`, each read from the binary or image itself; a version
/// outside the modelled range is refused.
///
/// # Errors
///
/// A binary that does not run or is not nginx, an image not present locally, an unmodelled version.
pub(crate) fn named_backends(paths: &[PathBuf], images: &[String]) -> Result<Vec<Build>, Refusal> {
    let mut out = Vec::new();
    for path in paths {
        out.push(Build::Local(Installation::named(path)?));
    }
    for reference in images {
        out.push(Build::Docker(Image::probe(reference, ImageOrigin::Named)?));
    }
    for backend in &out {
        if let Err(e) = backend.version().modelled() {
            return Err(Refusal::Usage(format!("{}: {e}", backend.summary())));
        }
    }
    Ok(out)
}

/// Chooses backends for `args`.
///
/// # Errors
///
/// No provisioned nginx, Docker asked for but not available, or a named build that cannot be used.
pub(crate) fn backends(args: &VerifyArgs) -> Result<Vec<Build>, Refusal> {
    if !args.nginx.is_empty() || !args.image.is_empty() {
        let backends = named_backends(&args.nginx, &args.image)?;
        if let Some(musl) = backends.iter().find(|b| args.shim.is_some() && b.libc() != Libc::Glibc) {
            return Err(Refusal::Usage(format!(
                "--shim proves glibc builds only: the shim protocol has no C library ({})",
                musl.summary()
            )));
        }
        return Ok(backends);
    }
    Ok(provisioned_backends(args)?)
}

/// The provisioned builds (as local processes or through their images) `args` asks for.
fn provisioned_backends(args: &VerifyArgs) -> Result<Vec<Build>> {
    let root = args.nginx_dir.clone().unwrap_or_else(Installation::default_root);
    let installs = Installation::discover(&root);
    let wanted = wanted_builds(args, &installs);
    if wanted.is_empty() && args.backend != BackendChoice::Docker {
        bail!("no nginx under {} — run scripts/provision-nginx first", root.display());
    }
    let images =
        || wanted.iter().map(|&(v, libc)| docker::image_for(v, libc).map(Build::Docker)).collect::<Result<Vec<_>>>();
    match args.backend {
        BackendChoice::Docker => return images(),
        BackendChoice::Auto if docker::available() => {
            if let Ok(backends) = images() {
                return Ok(backends);
            }
        }
        BackendChoice::Auto | BackendChoice::Local => {}
    }
    wanted
        .iter()
        .map(|&(v, libc)| {
            installs.iter().find(|i| i.version == v && i.libc == libc).cloned().map(Build::Local).ok_or_else(|| {
                let script = match libc {
                    Libc::Glibc => "scripts/provision-nginx",
                    Libc::Musl => "scripts/provision-nginx-musl",
                };
                anyhow::anyhow!(
                    "nginx {v} built with {libc} is not provisioned under {} ({script} {v})",
                    root.display()
                )
            })
        })
        .collect()
}

/// The builds (version, C library) `args` asks for: of the given versions (default: every provisioned one),
/// the builds against the given C libraries (default: every provisioned build; glibc when a version has
/// none provisioned, or with `--shim`).
fn wanted_builds(args: &VerifyArgs, installs: &[Installation]) -> Vec<(NginxVersion, Libc)> {
    let mut versions: Vec<NginxVersion> = installs.iter().map(|i| i.version).collect();
    if !args.versions.is_empty() {
        versions.clone_from(&args.versions);
    }
    versions.dedup();
    let mut out = Vec::new();
    for v in versions {
        let provisioned: Vec<Libc> = installs.iter().filter(|i| i.version == v).map(|i| i.libc).collect();
        let libcs: Vec<Libc> = if !args.libc.is_empty() {
            args.libc.clone()
        } else if args.shim.is_some() || provisioned.is_empty() {
            vec![Libc::Glibc]
        } else {
            provisioned
        };
        out.extend(libcs.into_iter().map(|l| (v, l)));
    }
    out
}

/// Runs `verify` and says how it ended (see [`Verdict`] for the exit codes). Progress goes to stderr, the
/// tables and findings to stdout, mismatches also to `--mismatches`.
pub(crate) fn verify(args: &VerifyArgs) -> Verdict {
    // The run starts now: a mismatch file last written before this moment is an earlier run's.
    Run::this();
    // A long run must not end by refusing to write its findings or its reports.
    let options = mismatch_file_options(args);
    if let Err(e) = nginx_ketama_output::check(&args.mismatches, &options) {
        eprintln!("nginx-ketama: --mismatches: {e}");
        return Verdict::Usage;
    }
    if let Err(message) = super::report::check(&args.reports, &args.mismatches, &report_options(&options)) {
        eprintln!("nginx-ketama: {message}");
        return Verdict::Usage;
    }
    let (verdict, report) = match &args.config {
        Some(file) => super::own_config::verify_config(args, file),
        None => sweep(args),
    };
    match report {
        Some(report) if !report.write_all(&args.reports, verdict, &report_options(&options)) => {
            // A proof whose report is lost does not pass a pipeline that reads the report.
            if verdict == Verdict::Proven { Verdict::HarnessFault } else { verdict }
        }
        _ => verdict,
    }
}

/// How `--report` files are written: as the mismatch file, but into directories that exist.
fn report_options(mismatches: &nginx_ketama_output::Options) -> nginx_ketama_output::Options {
    nginx_ketama_output::Options { create_dirs: false, ..mismatches.clone() }
}

/// A report of a run that could not start: one case, an error saying why.
pub(crate) fn refused_report(args: &VerifyArgs, proof: Proof, cause: String) -> Report {
    Report {
        proof,
        implementation: implementation(args),
        seed: args.seed,
        mismatches_file: None,
        suites: vec![Suite {
            build: "none".into(),
            description: "no nginx build could be used".into(),
            run: None,
            cases: vec![Case {
                name: "start".into(),
                detail: None,
                counts: Counts::default(),
                outcome: Outcome::Error { cause, replay: None },
            }],
        }],
    }
}

fn implementation(args: &VerifyArgs) -> Implementation {
    match &args.shim {
        Some(command) => Implementation::Shim(command.clone()),
        None => Implementation::Library,
    }
}

/// `verify` on random topologies: its verdict, and its report (none for a usage error of the command line).
fn sweep(args: &VerifyArgs) -> (Verdict, Option<Report>) {
    if let Err(message) = args.validate() {
        eprintln!("nginx-ketama: {message}");
        return (Verdict::Usage, None);
    }
    let backends = match backends(args) {
        Ok(b) => b,
        Err(refusal) => {
            let (verdict, cause) = refusal.report();
            return (verdict, Some(refused_report(args, Proof::Topologies, cause)));
        }
    };
    let options = args.sweep_options();
    if let Some(shim) = &options.shim {
        println!("implementation under test: the shim {shim:?} (not this library)");
    }
    let mut soak = Vec::new();
    let mut all_findings = Vec::new();
    let mut suites = Vec::new();
    for run in 1..=args.repeat {
        let started = Instant::now();
        let reports = run_once(args, &backends, &options);
        let stopped = reports.iter().any(|r| r.stopped(&options));
        let elapsed = started.elapsed();
        print!("{}", VersionReport::table(&reports));
        if reports.iter().any(|r| r.libc_points > 0) {
            println!(
                "libc pts: ring points whose owner the C library decides (two servers share the hash; every 4th \
                 topology has 3 such pairs); other libc: requests the other C library's tie rule would get wrong."
            );
        }
        let verdict = Verdict::of(&reports);
        print_faults(&reports);
        print_findings(&reports, options.shim.is_some());
        match verdict {
            Verdict::Proven => println!(
                "0 mismatches: {} routes exactly like nginx on every request above.",
                if options.shim.is_some() { "the shim" } else { "the library" }
            ),
            Verdict::HarnessFault if reports.iter().all(|r| r.faults.is_empty()) => {
                println!("nothing checked: no request or stream session was compared")
            }
            Verdict::HarnessFault => println!("harness fault: this run proves nothing (see above)"),
            Verdict::ProtocolFault => {
                println!("protocol fault: the shim broke the protocol of ports/SHIM.md; its routing is not proven")
            }
            _ => {}
        }
        if stopped {
            println!(
                "stopped at the first protocol fault: the remaining topologies, builds and runs were not run \
                 (--keep-going runs them)"
            );
        }
        if args.repeat > 1 {
            println!("== run {run}/{}: {} in {:.1} s\n", args.repeat, verdict.word(), elapsed.as_secs_f64());
        }
        suites.extend(sweep_suites(&backends, &reports, &options, (args.repeat > 1).then_some(run)));
        all_findings.extend(reports.iter().flat_map(|r| r.findings.iter().cloned()));
        soak.push(RunSummary::of(run, verdict, elapsed, &reports));
        if stopped {
            break;
        }
    }
    let verdict = soak.iter().map(|r| r.verdict).max().unwrap_or(Verdict::HarnessFault);
    let written = save_findings(args, &all_findings, verdict);
    if args.repeat > 1 {
        print!("{}", soak_table(&soak));
    }
    let report = Report {
        proof: Proof::Topologies,
        implementation: implementation(args),
        seed: args.seed,
        suites,
        mismatches_file: written.then(|| args.mismatches.clone()),
    };
    (verdict, Some(report))
}

/// Why a topology, a stream check or a build was not run: the sweep stopped.
const NOT_RUN: &str = "not run: the sweep stopped at the first protocol fault (--keep-going runs the rest)";

/// One suite per build of one run: a case per topology asked for, and one for the stream check when it was
/// asked for; what a stopped sweep did not reach is skipped.
fn sweep_suites(backends: &[Build], reports: &[VersionReport], options: &SweepOptions, run: Option<u32>) -> Vec<Suite> {
    let indexes: Vec<usize> = match options.only {
        Some(i) => vec![i],
        None => (0..options.topologies).collect(),
    };
    let stream = options.stream_sessions > 0 && options.only.is_none();
    backends
        .iter()
        .enumerate()
        .map(|(i, backend)| {
            let report = reports.get(i);
            let fault = |f: &Fault| match f.kind {
                FaultKind::Protocol => Outcome::ProtocolFault { cause: f.cause.clone(), replay: f.replay.clone() },
                FaultKind::Harness => Outcome::Error { cause: f.cause.clone(), replay: Some(f.replay.clone()) },
            };
            let skipped = || Outcome::Skipped { reason: NOT_RUN.into() };
            let mut cases: Vec<Case> = indexes
                .iter()
                .map(|&index| {
                    let ran = report.and_then(|r| r.runs.iter().find(|t| t.index == index));
                    let faulted = report.and_then(|r| r.faults.iter().find(|f| f.topology == Some(index)));
                    let (detail, counts, outcome) = match (ran, faulted, report) {
                        (Some(t), _, Some(r)) => (
                            Some(t.label.clone()),
                            Counts {
                                requests: t.requests,
                                arcs_proven: t.arcs_proven,
                                failovers: t.failovers,
                                not_comparable: 0,
                            },
                            Outcome::of(r.findings.iter().filter(|f| f.topology == index), t.replay.clone()),
                        ),
                        (_, Some(f), _) => (None, Counts::default(), fault(f)),
                        _ => (None, Counts::default(), skipped()),
                    };
                    Case { name: format!("topology {index}"), detail, counts, outcome }
                })
                .collect();
            if stream {
                let outcome = match report {
                    Some(r) => match r.faults.iter().find(|f| f.topology.is_none()) {
                        Some(f) => fault(f),
                        None if r.stream_sessions > 0 => Outcome::of(
                            r.findings.iter().filter(|f| f.topology == usize::MAX),
                            replay_command(backend, options, None),
                        ),
                        None => match &r.stream_skipped {
                            Some(why) => Outcome::Skipped { reason: why.clone() },
                            None => skipped(),
                        },
                    },
                    None => skipped(),
                };
                let sessions = report.map_or(0, |r| r.stream_sessions);
                cases.push(Case {
                    name: "stream check".into(),
                    detail: Some("the stream module's hash of the client's address and port".into()),
                    counts: Counts { requests: sessions, ..Counts::default() },
                    outcome,
                });
            }
            Suite { build: backend.label(), description: backend.summary(), run, cases }
        })
        .collect()
}

/// One run of every backend, with a progress bar on stderr.
fn run_once(args: &VerifyArgs, backends: &[Build], options: &SweepOptions) -> Vec<VersionReport> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>8} {bar:30} {pos:>7}/{len:7} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut reports = Vec::new();
    for backend in backends {
        let mut report = sweep_backend(backend, options, &mut |e| match e {
            Event::Topology(version, index, label, planned) => {
                bar.set_prefix(version.to_string());
                bar.set_length(planned as u64);
                bar.set_position(0);
                bar.set_message(format!("topology {index}: {label}"));
            }
            Event::Requests(n) => bar.set_position(n as u64),
            Event::Done(0) => {}
            Event::Done(n) => bar.println(format!("  {n} mismatches")),
            Event::Fault(index, kind) => bar.println(format!("  topology {index}: {}", kind.name())),
        });
        // Containers hide the client's source port; check the stream module with the local build instead.
        let stream = options.stream_sessions > 0 && options.only.is_none() && !report.stopped(options);
        if let (Build::Docker(image), true) = (backend, stream) {
            let root = args.nginx_dir.clone().unwrap_or_else(Installation::default_root);
            let hidden = "stream check skipped: a container hides the client's source port, which the stream \
                          upstream hashes";
            match image.origin {
                ImageOrigin::Built => match Installation::discover(&root)
                    .into_iter()
                    .find(|i| i.version == image.version && i.libc == image.libc)
                {
                    Some(install) => {
                        bar.set_message(format!("stream module, local nginx {}", install.label()));
                        nginx_ketama_harness::proofs::sweep::stream_into(&Build::Local(install), options, &mut report);
                    }
                    None => {
                        report.stream_skipped =
                            Some(format!("{hidden}, and the build the image was made from is not provisioned here"))
                    }
                },
                // A named image is its own build: a provisioned one of the same version may differ from it.
                ImageOrigin::Named => {
                    report.stream_skipped =
                        Some(format!("{hidden}; a named image is its own build, not checked on a provisioned one"))
                }
            }
        }
        let stopped = report.stopped(options);
        reports.push(report);
        if stopped {
            break;
        }
    }
    bar.finish_and_clear();
    reports
}

fn print_faults(reports: &[VersionReport]) {
    for f in reports.iter().flat_map(|r| &r.faults) {
        let what = match f.topology {
            Some(i) => format!("topology {i}"),
            None => "stream check".to_string(),
        };
        println!("{}: nginx {} ({}), {what} (seed {}):", f.kind.name(), f.version, f.backend, f.topology_seed);
        for line in f.cause.lines() {
            println!("    {line}");
        }
        println!("  replay: {}", f.replay);
    }
}

/// How many characters of an answer a printed mismatch shows (the mismatch file holds it whole).
const SHOWN: usize = 300;

/// The first five mismatches, each with the prediction named for whom it is: the library's is what nginx
/// was `expected` to do; a shim's is the `shim`'s answer.
fn print_findings(reports: &[VersionReport], shim: bool) {
    let predictor = if shim { "shim" } else { "expected" };
    for f in reports.iter().flat_map(|r| &r.findings).take(5) {
        let shown = |o: &nginx_ketama_harness::run::observation::Observation| {
            format!("{} {:?}", o.status, clip(&o.upstream_addr, SHOWN))
        };
        println!(
            "  nginx {} topology {} key {}: {predictor} {}, nginx {}\n  replay: {}",
            f.version,
            f.topology,
            show_key(&f.mismatch.key),
            shown(&f.mismatch.expected),
            shown(&f.mismatch.actual),
            f.replay
        );
    }
}

/// One row of the soak table.
#[derive(Debug, Clone)]
struct RunSummary {
    run: u32,
    verdict: Verdict,
    elapsed: Duration,
    requests: usize,
    arcs: usize,
    mismatches: usize,
    faults: usize,
}

impl RunSummary {
    fn of(run: u32, verdict: Verdict, elapsed: Duration, reports: &[VersionReport]) -> RunSummary {
        RunSummary {
            run,
            verdict,
            elapsed,
            requests: reports.iter().map(|r| r.requests + r.stream_sessions).sum(),
            arcs: reports.iter().map(|r| r.arcs_proven).sum(),
            mismatches: reports.iter().map(|r| r.findings.len()).sum(),
            faults: reports.iter().map(|r| r.faults.len()).sum(),
        }
    }
}

fn soak_table(runs: &[RunSummary]) -> String {
    let mut out = format!(
        "{:>4} {:<14} {:>10} {:>12} {:>11} {:>7} {:>8}\n",
        "run", "verdict", "requests", "arcs proven", "mismatches", "faults", "seconds"
    );
    for r in runs {
        out.push_str(&format!(
            "{:>4} {:<14} {:>10} {:>12} {:>11} {:>7} {:>8.1}\n",
            r.run,
            r.verdict.word(),
            r.requests,
            r.arcs,
            r.mismatches,
            r.faults,
            r.elapsed.as_secs_f64()
        ));
    }
    let proven = runs.iter().filter(|r| r.verdict == Verdict::Proven).count();
    let mut secs: Vec<f64> = runs.iter().map(|r| r.elapsed.as_secs_f64()).collect();
    secs.sort_by(f64::total_cmp);
    out.push_str(&format!(
        "{proven} of {} runs proven; {} failed; seconds per run: min {:.1}, median {:.1}, max {:.1}\n",
        runs.len(),
        runs.len() - proven,
        secs.first().copied().unwrap_or(0.0),
        secs.get(secs.len() / 2).copied().unwrap_or(0.0),
        secs.last().copied().unwrap_or(0.0)
    ));
    out
}

/// A run of `verify`, as its mismatch file names it: when it started, and its process.
#[derive(Debug)]
pub(crate) struct Run {
    started: SystemTime,
    /// `2026-05-01T10:15:02Z pid 4242`.
    id: String,
}

static RUN: OnceLock<Run> = OnceLock::new();

impl Run {
    /// This process's run, which starts the first time this is asked.
    pub(crate) fn this() -> &'static Run {
        RUN.get_or_init(|| {
            let started = SystemTime::now();
            Run { started, id: format!("{} pid {}", utc_time(started), std::process::id()) }
        })
    }
}

/// How `--mismatches` is written: its directories created, never over a file `verify` reads (`--config` and
/// the files it includes, `--nginx` binaries).
fn mismatch_file_options(args: &VerifyArgs) -> nginx_ketama_output::Options {
    let mut inputs = args.nginx.clone();
    if let Some(file) = &args.config {
        let options = LoadOptions { resolve: false, ..LoadOptions::default() };
        match Config::load(file, &options) {
            Ok(config) => inputs.extend(config.files().iter().cloned()),
            // verify --config reports why it cannot read the file.
            Err(_) => inputs.push(file.clone()),
        }
    }
    nginx_ketama_output::Options { create_dirs: true, inputs }
}

/// Puts this run's mismatches in `--mismatches` and says where, or, when the run proved everything,
/// removes the mismatch file an earlier run left there: the file at that path always holds the findings
/// of one run, the one each of its lines names. Says whether it wrote mismatches there.
pub(crate) fn save_findings(args: &VerifyArgs, findings: &[Finding], verdict: Verdict) -> bool {
    let run = Run::this();
    if !findings.is_empty() {
        match write_findings(args, run, findings) {
            Ok(()) => {
                println!(
                    "{} mismatches; all of them are in {} (run {})",
                    findings.len(),
                    args.mismatches.display(),
                    run.id
                );
                return true;
            }
            Err(e) => eprintln!("nginx-ketama: {e:#}"),
        }
    } else if verdict == Verdict::Proven {
        match remove_stale(&args.mismatches, run) {
            Ok(Some(note)) => println!("{note}"),
            Ok(None) => {}
            Err(e) => eprintln!("nginx-ketama: {e:#}"),
        }
    }
    false
}

/// A passing run and the mismatch file at `path`: one an earlier run wrote (last written before this run
/// started) is removed; one a run wrote while this one ran is kept; anything else (not a regular file,
/// not a mismatch file) is not touched. Says what it did, if anything.
fn remove_stale(path: &Path, run: &Run) -> Result<Option<String>> {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(None) };
    if !meta.is_file() {
        return Ok(None);
    }
    let Some(writer) = mismatch_file_run(path) else { return Ok(None) };
    if meta.modified()? >= run.started {
        return Ok(Some(format!(
            "{} holds the mismatches of {writer}, written while this run ran; left in place",
            path.display()
        )));
    }
    Ok(nginx_ketama_output::remove_if(path, FileId::of(&meta))?
        .then(|| format!("removed {}: it held the mismatches of an earlier run ({writer})", path.display())))
}

/// If the file at `path` is a mismatch file (its first line is a mismatch of `verify`), the run that wrote
/// it: `run <id>`, or `a run of an older nginx-ketama` for files written before lines named their run.
fn mismatch_file_run(path: &Path) -> Option<String> {
    let mut first = Vec::new();
    let file = std::fs::File::open(path).ok()?;
    // A mismatch line is short; a file whose first MiB holds no whole line is not a mismatch file.
    std::io::BufReader::new(file.take(1 << 20)).read_until(b'\n', &mut first).ok()?;
    let line: serde_json::Value = serde_json::from_slice(&first).ok()?;
    if line.get("replay").is_none() || line.get("nginx_said").is_none() {
        return None;
    }
    Some(match line.get("run").and_then(serde_json::Value::as_str) {
        Some(id) => format!("run {id}"),
        None => "a run of an older nginx-ketama".to_string(),
    })
}

fn write_findings(args: &VerifyArgs, run: &Run, findings: &[Finding]) -> Result<()> {
    let mut file = Vec::new();
    for f in findings {
        let m = &f.mismatch;
        let mut line = serde_json::json!({
            "schema": crate::schema::MISMATCH,
            "run": run.id,
            "nginx": f.version,
            "backend": f.backend,
            "seed": args.seed,
            "topology": f.topology,
            "topology_seed": f.topology_seed,
            "request_index": m.index,
            "kind": format!("{:?}", m.kind),
            "key": String::from_utf8_lossy(&m.key),
            "key_hex": m.key.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "expected": {"status": m.expected.status, "upstream_addr": m.expected.upstream_addr},
            "nginx_said": {"status": m.actual.status, "upstream_addr": m.actual.upstream_addr},
            "upstream_block": f.upstream_block,
            "replay": f.replay,
        });
        // In --shim mode the prediction is the shim's answer, and is named so.
        if let (Some(shim), Some(entry)) = (&args.shim, line.as_object_mut()) {
            let answer = entry.remove("expected").unwrap_or_default();
            entry.insert("shim".into(), answer);
            entry.insert("shim_command".into(), shim.as_str().into());
        }
        serde_json::to_writer(&mut file, &line)?;
        file.push(b'\n');
    }
    nginx_ketama_output::write(&args.mismatches, &file, &mismatch_file_options(args))?;
    Ok(())
}
