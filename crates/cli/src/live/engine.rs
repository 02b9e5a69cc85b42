//! `nginx-ketama verify --engine ENGINE[@RELEASE]`: another proxy's model against the real engine, on every
//! provisioned release of it (or the one named) — random topologies with progress on stderr, one row per
//! release, the mismatches in `--mismatches` as `verify` writes nginx's.

use super::findings::{Run, save_lines};
use super::report::{Case, Counts, Implementation, Outcome, Proof, Report, Suite};
use super::verify_args::VerifyArgs;
use crate::args::EngineTarget;
use indicatif::{ProgressBar, ProgressStyle};
use nginx_ketama_harness::engines::backends::EchoBackends;
use nginx_ketama_harness::engines::install::{Build, Live, default_root, select};
use nginx_ketama_harness::engines::proof::{self, BACKENDS, Mismatch, ModelRule, Options, ReleaseReport};
use nginx_ketama_harness::proofs::verdict::{Tally, Verdict};
use nginx_ketama_harness::run::parity::show_key;

/// Runs `verify --engine` and says how it ended (see [`Verdict`] for the exit codes).
pub(crate) fn verify_engine(args: &VerifyArgs, target: &EngineTarget) -> Verdict {
    let (engine, release) = match target {
        EngineTarget::Live { engine, release } => (*engine, release.as_deref()),
        EngineTarget::Modelled(engine) => {
            eprintln!(
                "nginx-ketama: {}: modelled from {} source, not proven live: it does not run here (verify --engine \
                 proves haproxy and caddy, the engines scripts/provision-engines provisions)",
                engine.name(),
                engine.modelled_from()
            );
            return Verdict::Usage;
        }
    };
    let builds = match select(engine, release, &default_root()) {
        Ok(builds) => builds,
        Err(e) => {
            eprintln!("nginx-ketama: {e}");
            return Verdict::HarnessFault;
        }
    };
    let options = Options {
        seed: args.seed,
        topologies: args.topologies,
        keys: args.keys,
        only: args.only,
        model: if args.engine.wrong_model { ModelRule::Wrong } else { ModelRule::Right },
    };
    if let Err(message) = check_only(&builds, &options) {
        eprintln!("nginx-ketama: {message}");
        return Verdict::Usage;
    }
    if options.model == ModelRule::Wrong {
        println!("model under test: a deliberately wrong {engine} rule (--wrong-model), not the library's");
    }
    let backends = match EchoBackends::start(BACKENDS) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("nginx-ketama: echo backends on 127.0.0.1 to 127.0.0.{BACKENDS}: {e}");
            return Verdict::HarnessFault;
        }
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>14} {bar:30} {pos:>3}/{len:3} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut reports = Vec::new();
    let mut faults = Vec::new();
    for build in &builds {
        bar.set_prefix(format!("{engine} {}", build.release));
        bar.set_position(0);
        let result = proof::prove(build, &backends, &options, &mut |p| {
            bar.set_length(if options.only.is_some() { 1 } else { p.of as u64 });
            bar.inc(1);
            bar.set_message(format!("topology {}: {}", p.index, p.label));
            if p.mismatches > 0 {
                bar.println(format!(
                    "  {engine} {} topology {} ({}): {} mismatches",
                    build.release, p.index, p.label, p.mismatches
                ));
            }
        });
        match result {
            Ok(report) => reports.push(report),
            Err(e) => faults.push(e),
        }
    }
    bar.finish_and_clear();
    print!("{}", table(&reports));
    // Why a release was not proven, with what the engine said (its stderr, its configuration).
    for e in &faults {
        println!("harness fault: {}", e.at);
        for line in e.cause.to_string().lines() {
            println!("    {line}");
        }
    }
    let mismatches: Vec<(&ReleaseReport, &Mismatch)> =
        reports.iter().flat_map(|r| r.mismatches.iter().map(move |m| (r, m))).collect();
    for (r, m) in mismatches.iter().take(5) {
        println!(
            "  {engine} {} topology {} ({}) key {}: model {}, {engine} {}\n  replay: {}",
            r.release,
            m.topology,
            m.label,
            show_key(&m.key),
            said(m.model_said),
            said(m.engine_said),
            replay(args, engine, &r.release, m.topology)
        );
    }
    let tally = Tally {
        mismatches: mismatches.len(),
        harness_faults: faults.len(),
        compared: reports.iter().map(|r| r.requests).sum(),
        ..Tally::default()
    };
    let verdict = Verdict::of(&tally);
    let lines: Vec<serde_json::Value> =
        mismatches.iter().map(|(r, m)| line(args, engine, &r.release, m, options.model)).collect();
    save_lines(args, &lines, verdict);
    let verdict = if args.reports.is_empty() {
        verdict
    } else {
        let report = report(args, engine, &reports, &faults, !lines.is_empty());
        let options = super::report::options(&super::findings::mismatch_file_options(args));
        match report.write_all(&args.reports, verdict, &options) {
            // A proof whose report is lost does not pass a pipeline that reads the report.
            false if verdict == Verdict::Proven => Verdict::HarnessFault,
            _ => verdict,
        }
    };
    match verdict {
        Verdict::Proven => println!(
            "0 mismatches: the {engine} model picks the server the real {engine} picks on every request above."
        ),
        Verdict::HarnessFault => println!("harness fault: this run proves nothing (see above)"),
        _ => {}
    }
    verdict
}

/// The `--report` of an engine run: a suite per release, a case per kind of topology (HAProxy's hash
/// types, Caddy's policies) with its topologies, requests and mismatches; a release that could not be
/// proven is a suite with one error.
fn report(
    args: &VerifyArgs,
    engine: Live,
    reports: &[ReleaseReport],
    faults: &[proof::ProofError],
    mismatch_file: bool,
) -> Report {
    let mut suites: Vec<Suite> = reports
        .iter()
        .map(|r| Suite {
            build: r.release.clone(),
            description: format!("{engine} {} ({} topologies, {} requests)", r.release, r.topologies, r.requests),
            run: None,
            cases: r
                .kinds
                .iter()
                .map(|k| {
                    let replay = replay_release(args, engine, &r.release);
                    Case {
                        name: k.kind.clone(),
                        detail: Some(format!("{} topologies", k.topologies)),
                        counts: Counts { requests: k.requests, ..Counts::default() },
                        outcome: if k.mismatches == 0 {
                            Outcome::Passed { replay }
                        } else {
                            Outcome::Failed { total: k.mismatches, shown: Vec::new(), replay }
                        },
                    }
                })
                .collect(),
        })
        .collect();
    for e in faults {
        suites.push(Suite {
            build: e.at.clone(),
            description: format!("{engine}: not proven"),
            run: None,
            cases: vec![Case {
                name: "start".into(),
                detail: None,
                counts: Counts::default(),
                outcome: Outcome::Error { cause: e.cause.to_string(), replay: None },
            }],
        });
    }
    Report {
        proof: Proof::Engine(engine.name().to_string()),
        implementation: Implementation::Library,
        seed: args.seed,
        suites,
        mismatches_file: mismatch_file.then(|| args.mismatches.clone()),
    }
}

/// The command that runs one release again, every topology.
fn replay_release(args: &VerifyArgs, engine: Live, release: &str) -> String {
    let mut cmd = format!("nginx-ketama verify --engine {engine}@{release} --seed {}", args.seed);
    if let Some(n) = args.topologies {
        cmd += &format!(" --topologies {n}");
    }
    if let Some(n) = args.keys {
        cmd += &format!(" --keys {n}");
    }
    if args.engine.wrong_model {
        cmd += " --wrong-model";
    }
    cmd
}

/// `--only I` must name a topology of every release run.
fn check_only(builds: &[Build], options: &Options) -> Result<(), String> {
    let Some(i) = options.only else { return Ok(()) };
    for build in builds {
        let count = match options.topologies {
            Some(n) => n,
            None => proof::default_topologies(build).map_err(|e| e.to_string())?,
        };
        if i >= count {
            return Err(format!(
                "--only {i} is out of range: {} {} runs {count} topologies (numbered from 0)",
                build.engine, build.release
            ));
        }
    }
    Ok(())
}

/// One row per release; for Caddy, then one per release and policy.
fn table(reports: &[ReleaseReport]) -> String {
    let mut out =
        format!("{:<8} {:<8} {:>10} {:>9} {:>10}\n", "engine", "release", "topologies", "requests", "mismatches");
    for r in reports {
        out.push_str(&format!(
            "{:<8} {:<8} {:>10} {:>9} {:>10}\n",
            r.engine.name(),
            r.release,
            r.topologies,
            r.requests,
            r.mismatches.len()
        ));
    }
    let caddy: Vec<&ReleaseReport> = reports.iter().filter(|r| r.engine == Live::Caddy).collect();
    if !caddy.is_empty() {
        let width = caddy.iter().flat_map(|r| &r.kinds).map(|k| k.kind.len()).max().unwrap_or(0).max(6);
        out.push_str(&format!(
            "\n{:<8} {:<width$} {:>10} {:>9} {:>10}\n",
            "release", "policy", "topologies", "requests", "mismatches"
        ));
        for r in &caddy {
            for k in &r.kinds {
                out.push_str(&format!(
                    "{:<8} {:<width$} {:>10} {:>9} {:>10}\n",
                    r.release, k.kind, k.topologies, k.requests, k.mismatches
                ));
            }
        }
        if caddy.iter().any(|r| r.release == "2.6.2") {
            out.push_str("(2.6.2 has no query nor client_ip_hash policy: they came in 2.7)\n");
        }
    }
    out
}

/// A backend as output names it: its address, or `no server`.
fn said(addr: Option<std::net::SocketAddr>) -> String {
    addr.map_or_else(|| "no server".to_string(), |a| a.to_string())
}

/// The command that runs one topology of one release again.
fn replay(args: &VerifyArgs, engine: Live, release: &str, topology: usize) -> String {
    let mut cmd = format!("nginx-ketama verify --engine {engine}@{release} --seed {}", args.seed);
    if let Some(n) = args.topologies {
        cmd += &format!(" --topologies {n}");
    }
    if let Some(n) = args.keys {
        cmd += &format!(" --keys {n}");
    }
    cmd += &format!(" --only {topology}");
    if args.engine.wrong_model {
        cmd += " --wrong-model";
    }
    cmd
}

/// One line of the mismatch file (`nginx-ketama/engine-mismatch/v1`).
fn line(args: &VerifyArgs, engine: Live, release: &str, m: &Mismatch, model: ModelRule) -> serde_json::Value {
    serde_json::json!({
        "schema": crate::schema::ENGINE_MISMATCH,
        "run": Run::this().id(),
        "engine": engine.name(),
        "release": release,
        "model": match model { ModelRule::Right => "library", ModelRule::Wrong => "wrong (--wrong-model)" },
        "seed": args.seed,
        "topology": m.topology,
        "topology_kind": m.label,
        "key": String::from_utf8_lossy(&m.key),
        "key_hex": m.key.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "model_said": m.model_said.map(|a| a.to_string()),
        "engine_said": m.engine_said.map(|a| a.to_string()),
        "config": m.config,
        "replay": replay(args, engine, release, m.topology),
    })
}
