//! `nginx-ketama verify` on random topologies: the sweep with a progress bar, a summary table, a soak
//! table with `--repeat`, and the findings.

use super::findings::save_findings;
use super::report::{Case, Counts, Outcome, Proof, Report, Suite};
use super::verify_args::{VerifyArgs, refuse};
use indicatif::{ProgressBar, ProgressStyle};
use nginx_ketama_harness::nginx::build::Build;
use nginx_ketama_harness::proofs::sweep::{
    Event, Fault, FaultKind, SweepOptions, VersionReport, replay_command, sweep_backend,
};
use nginx_ketama_harness::proofs::verdict::Verdict;
use nginx_ketama_harness::run::parity::{clip, show_key};
use std::time::{Duration, Instant};

/// `verify` on random topologies: its verdict, and its report (none for a usage error of the command line).
pub(crate) fn sweep(args: &VerifyArgs) -> (Verdict, Option<Report>) {
    if let Err(message) = args.validate() {
        eprintln!("nginx-ketama: {message}");
        return (Verdict::Usage, None);
    }
    let backends = match args.selection().builds() {
        Ok(b) => b,
        Err(e) => {
            let (verdict, cause) = refuse(args, &e);
            let report = Report::refused(Proof::Topologies, args.implementation(), args.seed, cause);
            return (verdict, Some(report));
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
        let reports = run_once(&backends, &options);
        let stopped = reports.iter().any(|r| r.stopped(&options));
        let elapsed = started.elapsed();
        print!("{}", VersionReport::table(&reports));
        if reports.iter().any(|r| r.libc_points > 0) {
            println!(
                "libc pts: ring points whose owner the C library decides (two servers share the hash; every 4th \
                 topology has 3 such pairs); other libc: requests the other C library's tie rule would get wrong."
            );
        }
        let verdict = Verdict::of(&VersionReport::tally(&reports));
        print_faults(&reports);
        print_not_proven(&reports);
        print_findings(&reports, options.shim.is_some());
        match verdict {
            Verdict::Proven => {
                println!(
                    "0 mismatches: {} routes exactly like nginx on every request above.",
                    if options.shim.is_some() { "the shim" } else { "the library" }
                );
                let unproven: usize = reports.iter().map(|r| r.not_proven.len()).sum();
                if unproven > 0 {
                    println!("{unproven} topologies not proven (the shim answered unsupported; see above).");
                }
            }
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
        implementation: args.implementation(),
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
                    let unproven = report.and_then(|r| r.not_proven.iter().find(|n| n.topology == index));
                    let (detail, counts, outcome) = match (ran, faulted, report) {
                        _ if unproven.is_some() => (
                            None,
                            Counts::default(),
                            Outcome::Skipped { reason: unproven.map(|n| n.reason.clone()).unwrap_or_default() },
                        ),
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
fn run_once(backends: &[Build], options: &SweepOptions) -> Vec<VersionReport> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>8} {bar:30} {pos:>7}/{len:7} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut reports = Vec::new();
    for backend in backends {
        let report = sweep_backend(backend, options, &mut |e| match e {
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
            Event::NotProven(index) => bar.println(format!("  topology {index}: not proven")),
            Event::Stream(build) => bar.set_message(format!("stream module, local nginx {build}")),
        });
        let stopped = report.stopped(options);
        reports.push(report);
        if stopped {
            break;
        }
    }
    bar.finish_and_clear();
    reports
}

/// The topologies the shim answered `unsupported` for: not proven, with the reason (neither a pass nor a
/// fault).
fn print_not_proven(reports: &[VersionReport]) {
    for r in reports {
        for n in &r.not_proven {
            println!(
                "not proven: nginx {} ({}), topology {} (seed {}):",
                r.version, r.backend, n.topology, n.topology_seed
            );
            println!("    {}", n.reason);
            println!("  replay: {}", n.replay);
        }
    }
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
        // `$upstream_status` too where it is compared (failure kinds), since it may be all that differs.
        let shown = |o: &nginx_ketama_harness::run::observation::Observation| match &o.upstream_status {
            Some(statuses) => format!("{} {:?} [{}]", o.status, clip(&o.upstream_addr, SHOWN), clip(statuses, SHOWN)),
            None => format!("{} {:?}", o.status, clip(&o.upstream_addr, SHOWN)),
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
