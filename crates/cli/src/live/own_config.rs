//! `nginx-ketama verify --config FILE [--upstream NAME]...`: the user's own upstreams, proven on every
//! provisioned nginx with their addresses made local in a private network namespace. Three steps:
//! [`Prepared::new`] chooses the builds, reads the config with each, prepares the namespace and says what
//! will run; [`Prepared::run`] proves each upstream on each build; [`Prepared::report`] prints the tables
//! and findings and judges the run.

use super::findings::save_findings;
use super::report::{Case, Counts, Implementation, Outcome, Proof, Report, Suite};
use super::verify_args::{BackendChoice, VerifyArgs, refuse};
use indicatif::{ProgressBar, ProgressStyle};
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::nginx::netns;
use nginx_ketama_harness::proofs::own_config::plan::{NameSource, Unhostable, summarize};
use nginx_ketama_harness::proofs::own_config::{
    self, Choice, ConfigUpstream, ExpressionReport, Progress, ProveOptions, Prover, UpstreamReport, replay_command,
};
use nginx_ketama_harness::proofs::verdict::Verdict;
use nginx_ketama_harness::run::clock::Unclocked;
use nginx_ketama_harness::run::parity::show_key;
use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Requests per second this harness reached with a debug build on the project's 2-core machine (a release
/// build is faster): used only to say up front about how long a long run takes; progress lines use the real
/// rate.
const TYPICAL_RATE: f64 = 20_000.0;

/// Runs that send more requests than this are announced as long, with an estimate and how to shorten them.
const LONG_RUN: usize = 2_000_000;

/// Runs `verify --config`: its verdict, and its report (none for a usage error of the command line).
pub(crate) fn verify_config(args: &VerifyArgs, file: &Path) -> (Verdict, Option<Report>) {
    match Prepared::new(args, file) {
        Ok(prepared) => {
            let reports = prepared.run();
            prepared.report(&reports)
        }
        Err(end) => end,
    }
}

/// How `verify --config` ends before anything runs: a verdict and, unless the command line itself is
/// wrong, a report saying why.
type Refused = (Verdict, Option<Report>);

/// A build with what it read from the config: the upstreams to prove and those skipped, or why it
/// rejects the config.
type BuildChoice = (Installation, Result<Choice, String>);

/// One upstream proof that can run here: the build (an index into [`Prepared::choices`]), the upstream
/// as that build read it, and the requests each of its runs sends.
#[derive(Debug, Clone)]
struct Planned {
    build: usize,
    upstream: ConfigUpstream,
    per_run: usize,
}

/// An upstream proof that cannot run here, and why.
#[derive(Debug, Clone)]
struct Unrunnable {
    build: String,
    upstream: String,
    why: String,
}

/// Everything `verify --config` decided before it runs nginx.
struct Prepared<'a> {
    args: &'a VerifyArgs,
    file: &'a Path,
    options: ProveOptions,
    choices: Vec<BuildChoice>,
    prover: Prover,
    planned: Vec<Planned>,
    unrunnable: Vec<Unrunnable>,
    /// Builds that reject the config.
    rejected: usize,
}

impl<'a> Prepared<'a> {
    /// Chooses the builds, reads the config with each build's rules, prepares the namespace, and says what
    /// will run and how much.
    fn new(args: &'a VerifyArgs, file: &'a Path) -> Result<Prepared<'a>, Refused> {
        if args.shim.is_some() || args.only.is_some() || args.repeat > 1 {
            eprintln!(
                "nginx-ketama: --config proves this library on your upstreams; --shim, --only and --repeat do not \
                 apply"
            );
            return Err((Verdict::Usage, None));
        }
        if args.backend == BackendChoice::Docker || !args.image.is_empty() {
            eprintln!("nginx-ketama: --config runs nginx as local processes (the provisioned builds, or --nginx PATH)");
            return Err((Verdict::Usage, None));
        }
        let refused = |verdict: Verdict, cause: String| {
            let report = Report::refused(Proof::Config(file.to_path_buf()), Implementation::Library, args.seed, cause);
            (verdict, Some(report))
        };
        let local = VerifyArgs { backend: BackendChoice::Local, ..args.clone() };
        let installs = local.selection().installations().map_err(|e| {
            let (verdict, cause) = refuse(args, &e);
            refused(verdict, cause)
        })?;
        // Each build reads the file with its own version's rules.
        let choices: Vec<BuildChoice> = installs
            .into_iter()
            .map(|install| {
                let choice = own_config::load(file, install.version, install.libc)
                    .map_err(|e| e.to_string())
                    .and_then(|c| own_config::choose(&c, &args.upstream, args.seed).map_err(|e| format!("{e:#}")));
                (install, choice)
            })
            .collect();
        let options = args.prove_options();
        let usage = |choices: &[BuildChoice]| {
            (Verdict::Usage, Some(config_report(args, file, &options, choices, &[], &[], false)))
        };
        let Some(first) = choices.iter().find_map(|(_, c)| c.as_ref().ok()).cloned() else {
            for (install, c) in &choices {
                if let Err(e) = c {
                    eprintln!("nginx-ketama: nginx {}: {e}", install.label());
                }
            }
            return Err(usage(&choices));
        };
        print_choice(file, &first);
        if first.prove.is_empty() {
            eprintln!(
                "nginx-ketama: nothing to prove: {} has no upstream this proof can run (a `hash` upstream without \
                 servers resolved at run time; see the skipped ones above)",
                file.display()
            );
            return Err(usage(&choices));
        }
        let exe = std::env::current_exe().map_err(|e| {
            let cause = format!("locating this executable (it resolves names in the namespace): {e}");
            eprintln!("nginx-ketama: {cause}");
            refused(Verdict::HarnessFault, cause)
        })?;
        let upstream_refs: Vec<&ConfigUpstream> = first.prove.iter().collect();
        let install_refs: Vec<&Installation> = choices.iter().map(|(i, _)| i).collect();
        let prover = Prover::new(&upstream_refs, &install_refs, &exe).map_err(|e| {
            let (verdict, cause) = if e.downcast_ref::<Unhostable>().is_some() {
                (Verdict::Usage, format!("{} cannot be hosted: {e:#}", file.display()))
            } else {
                (Verdict::HarnessFault, format!("preparing the namespace for {}: {e:#}", file.display()))
            };
            eprintln!("nginx-ketama: {cause}");
            refused(verdict, cause)
        })?;
        print_environment(&prover);
        let mut prepared =
            Prepared { args, file, options, choices, prover, planned: Vec::new(), unrunnable: Vec::new(), rejected: 0 };
        prepared.plan();
        Ok(prepared)
    }

    /// What will run, and how much: said before anything runs.
    fn plan(&mut self) {
        let mut not_run: Vec<String> = Vec::new();
        for (b, (install, choice)) in self.choices.iter().enumerate() {
            let choice = match choice {
                Ok(c) => c,
                Err(e) => {
                    println!("harness fault: nginx {} rejects the config: {e}", install.label());
                    self.rejected += 1;
                    continue;
                }
            };
            for upstream in &choice.prove {
                match self.prover.runnable(upstream) {
                    Ok(()) => self.planned.push(Planned {
                        build: b,
                        upstream: upstream.clone(),
                        per_run: own_config::requests_per_run(upstream, &self.options),
                    }),
                    Err(why) => {
                        self.unrunnable.push(Unrunnable {
                            build: install.label(),
                            upstream: upstream.name.clone(),
                            why: why.to_string(),
                        });
                        if !not_run.iter().any(|n| n.starts_with(&format!("{}:", upstream.name))) {
                            not_run.push(format!("{}: {why}", upstream.name));
                        }
                    }
                }
            }
        }
        for n in &not_run {
            println!("  not run: {n}");
        }
        if !self.planned.is_empty() {
            let planned: Vec<(&Installation, &ConfigUpstream, usize)> =
                self.planned.iter().map(|p| (self.install(p), &p.upstream, p.per_run)).collect();
            println!("{}", estimate(&planned, self.runs(), self.options.prove_ring));
        }
    }

    /// Runs of each upstream: every server live, then the failure runs.
    fn runs(&self) -> usize {
        1 + self.options.failure_runs
    }

    fn install(&self, p: &Planned) -> &Installation {
        &self.choices[p.build].0
    }

    /// Proves each planned upstream on its build, with progress on stderr.
    fn run(&self) -> Vec<UpstreamReport> {
        let runs = self.runs();
        let mut progress = Reporter::new(self.planned.iter().map(|p| p.per_run * runs).sum());
        let mut reports = Vec::new();
        for p in &self.planned {
            let (install, upstream) = (self.install(p), &p.upstream);
            let replay = replay_command(self.file, &upstream.name, install, &self.options);
            let label = format!("{} {}", install.label(), upstream.name);
            let report = self.prover.prove(install, upstream, &self.options, &replay, &mut |progressed| {
                if let Some(line) = progress.update(&label, progressed) {
                    eprintln!("{line}");
                }
            });
            progress.finished(report.requests, p.per_run * runs);
            reports.push(report);
        }
        progress.finish();
        reports
    }

    /// Prints the table, nginx's address order, faults, what was not comparable and the first findings;
    /// judges the run, saves its findings, and returns its verdict and report.
    fn report(&self, reports: &[UpstreamReport]) -> (Verdict, Option<Report>) {
        if !reports.is_empty() {
            print!("{}", table(reports));
        }
        print_address_order(reports);
        print_failure_kinds(reports);
        print_expressions(reports);
        for r in reports {
            if let Some(f) = &r.fault {
                println!("harness fault: nginx {}, upstream {}:", r.build, r.upstream);
                for line in f.lines() {
                    println!("    {line}");
                }
                if let Some((install, _)) = self.choices.iter().find(|(i, _)| i.label() == r.build) {
                    println!("  replay: {}", replay_command(self.file, &r.upstream, install, &self.options));
                }
            }
        }
        let not_compared: usize = reports.iter().map(UpstreamReport::not_compared).sum();
        print_not_comparable(reports, not_compared);
        let findings: Vec<_> = reports.iter().flat_map(|r| r.findings.iter().cloned()).collect();
        for f in findings.iter().take(5) {
            println!(
                "  nginx {} upstream {} key {}: expected {:?}, nginx {:?}\n  replay: {}",
                f.version,
                reports.iter().find(|r| r.findings.iter().any(|g| g.replay == f.replay)).map_or("", |r| &r.upstream),
                show_key(&f.mismatch.key),
                f.mismatch.expected,
                f.mismatch.actual,
                f.replay
            );
        }
        let unhostable = self.prover.plan().is_some_and(|p| !p.refused.is_empty());
        let tally = UpstreamReport::tally(reports, self.rejected, unhostable);
        let verdict = Verdict::of(&tally);
        match verdict {
            Verdict::Proven if not_compared > 0 => println!(
                "0 mismatches: the library routes exactly like nginx on every compared request above ({} \
                 compared, {not_compared} not comparable).",
                tally.compared
            ),
            Verdict::Proven => println!("0 mismatches: the library routes exactly like nginx on every request above."),
            Verdict::Usage => eprintln!(
                "nginx-ketama: nothing to prove: no upstream of {} can be hosted here (see \"not run\" above)",
                self.file.display()
            ),
            Verdict::HarnessFault if tally.harness_faults == 0 => println!("nothing checked: no request was compared"),
            Verdict::HarnessFault => println!("harness fault: this run proves nothing (see above)"),
            // --config proves the library (no shim), so there is no protocol to break.
            Verdict::Mismatches | Verdict::ProtocolFault => {}
        }
        let written = save_findings(self.args, &findings, verdict);
        let report =
            config_report(self.args, self.file, &self.options, &self.choices, reports, &self.unrunnable, written);
        (verdict, Some(report))
    }
}

/// What the config holds: the upstreams to prove, those skipped and why, and the keys the proof sends.
fn print_choice(file: &Path, choice: &Choice) {
    println!(
        "config: {}: {} hash upstream{} to prove, {} skipped",
        file.display(),
        choice.prove.len(),
        if choice.prove.len() == 1 { "" } else { "s" },
        choice.skipped.len()
    );
    for s in &choice.skipped {
        println!("  skipped: {} ({}): {}", s.name, s.location, s.why);
    }
    if !choice.prove.is_empty() {
        let keys: Vec<String> = choice.prove.iter().map(|u| format!("{} ({})", u.key, u.name)).collect();
        println!(
            "  keys: the ring is proven with raw keys in place of each key expression ({}); then a run of each \
             upstream hashes its expression as written, on generated requests",
            keys.join(", ")
        );
    }
}

/// How nginx ordered each hostname's addresses, as nginx itself said (the first build that resolved it).
fn print_address_order(reports: &[UpstreamReport]) {
    let mut order: Vec<(String, String)> = Vec::new();
    for r in reports {
        for (name, ips) in &r.resolution {
            if !order.iter().any(|(n, _)| n == name) {
                let ips: Vec<String> = ips.iter().map(ToString::to_string).collect();
                order.push((name.clone(), format!("{name} → {} (nginx {})", ips.join(", "), r.build)));
            }
        }
    }
    if !order.is_empty() {
        let order: Vec<String> = order.into_iter().map(|(_, o)| o).collect();
        println!("nginx's address order, asked from nginx: {}", order.join("; "));
    }
}

/// Prints `title` and one line per distinct text of `lines` (per report: its build and its line, `None`
/// for none), naming together the builds that printed the same.
fn print_by_build<'a>(title: &str, lines: impl Iterator<Item = (&'a str, Option<String>)>) {
    let mut grouped: Vec<(String, Vec<&str>)> = Vec::new();
    for (build, line) in lines {
        let Some(line) = line else { continue };
        match grouped.iter_mut().find(|(l, _)| *l == line) {
            Some((_, builds)) => builds.push(build),
            None => grouped.push((line, vec![build])),
        }
    }
    if grouped.is_empty() {
        return;
    }
    println!("{title}");
    for (line, builds) in grouped {
        println!("  {line} [nginx {}]", builds.join(", "));
    }
}

/// The key expression runs, per upstream (builds with the same outcome named together).
fn print_expressions(reports: &[UpstreamReport]) {
    let line = |r: &UpstreamReport| match &r.expression {
        ExpressionReport::NotRun => None,
        ExpressionReport::NotProven(why) => Some(format!("{}: not proven: {why}", r.upstream)),
        ExpressionReport::Run { requests, refused, mismatches, variables } => Some(format!(
            "{}: {requests} generated requests ({refused} refused by nginx), {mismatches} mismatches; variables: {}",
            r.upstream,
            variables.iter().map(|v| format!("${v}")).collect::<Vec<_>>().join(", ")
        )),
    };
    print_by_build(
        "key expressions (each hashed as written, on requests from 127.0.0.0/8 clients):",
        reports.iter().map(|r| (r.build.as_str(), line(r))),
    );
}

/// What the failure-kind runs met, per upstream and build (builds that met the same are named together),
/// and the rules they ran under.
fn print_failure_kinds(reports: &[UpstreamReport]) {
    let line = |r: &UpstreamReport| {
        let k = &r.failure_kinds;
        let met: Vec<String> = k.met.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
        (k.runs > 0).then(|| {
            format!(
                "{}: {} run{}, {} requests ({} POST): {}; under {}",
                r.upstream,
                k.runs,
                if k.runs == 1 { "" } else { "s" },
                k.requests,
                k.posts,
                if met.is_empty() { "none met".to_string() } else { met.join(", ") },
                k.rules
            )
        })
    };
    print_by_build(
        "failure kinds (requests that met each, in the runs with failure kinds):",
        reports.iter().map(|r| (r.build.as_str(), line(r))),
    );
}

/// The requests whose route depends on when nginx's clock ticked, by why; none is counted as compared.
fn print_not_comparable(reports: &[UpstreamReport], not_compared: usize) {
    if not_compared == 0 {
        return;
    }
    let mut why: Vec<(Unclocked, usize)> = Vec::new();
    for (w, n) in reports.iter().flat_map(|r| &r.not_comparable) {
        match why.iter_mut().find(|(x, _)| x == w) {
            Some((_, m)) => *m += n,
            None => why.push((*w, *n)),
        }
    }
    let why: Vec<String> = why.iter().map(|(w, n)| format!("{n}: {w}")).collect();
    println!(
        "not comparable: {not_compared} request{} ({}); nginx's clock (whole seconds) decides when a failed server \
         comes back, and a second can end inside a request; none of them is counted as compared",
        if not_compared == 1 { "" } else { "s" },
        why.join("; ")
    );
}

/// The report of `verify --config`: a suite per build, a case per upstream of the config (proven, not
/// run here, or skipped as the config reader decided), or one error case for a build that rejects the
/// config.
fn config_report(
    args: &VerifyArgs,
    file: &Path,
    options: &ProveOptions,
    choices: &[BuildChoice],
    reports: &[UpstreamReport],
    unrunnable: &[Unrunnable],
    mismatches_written: bool,
) -> Report {
    let suites = choices
        .iter()
        .map(|(install, choice)| {
            let build = install.label();
            let cases = match choice {
                Err(e) => vec![Case {
                    name: "config".into(),
                    detail: None,
                    counts: Counts::default(),
                    outcome: Outcome::Error { cause: format!("nginx {build} rejects the config: {e}"), replay: None },
                }],
                Ok(choice) => {
                    let mut cases: Vec<Case> = choice
                        .prove
                        .iter()
                        .map(|u| {
                            let replay = replay_command(file, &u.name, install, options);
                            let report = reports.iter().find(|r| r.build == build && r.upstream == u.name);
                            let why = unrunnable.iter().find(|n| n.build == build && n.upstream == u.name);
                            let (counts, outcome) = match (report, why) {
                                (Some(r), _) => (
                                    Counts {
                                        requests: r.requests,
                                        arcs_proven: r.arcs_proven,
                                        failovers: r.failovers,
                                        not_comparable: r.not_compared(),
                                    },
                                    match &r.fault {
                                        Some(cause) => Outcome::Error { cause: cause.clone(), replay: Some(replay) },
                                        None => Outcome::of(r.findings.iter(), replay),
                                    },
                                ),
                                (None, Some(Unrunnable { why, .. })) => {
                                    (Counts::default(), Outcome::Skipped { reason: format!("not run: {why}") })
                                }
                                (None, None) => (Counts::default(), Outcome::Skipped { reason: "not run".into() }),
                            };
                            let detail = report.map(|r| {
                                format!(
                                    "{} hash, {} servers, {} peers, {} ring points, {} runs",
                                    r.method.as_str(),
                                    r.servers,
                                    r.peers,
                                    r.points,
                                    r.runs
                                )
                            });
                            Case { name: u.name.clone(), detail, counts, outcome }
                        })
                        .collect();
                    cases.extend(choice.skipped.iter().map(|s| Case {
                        name: s.name.clone(),
                        detail: None,
                        counts: Counts::default(),
                        outcome: Outcome::Skipped { reason: format!("not proven ({}): {}", s.location, s.why) },
                    }));
                    cases
                }
            };
            Suite { build, description: install.summary(), run: None, cases }
        })
        .collect();
    Report {
        proof: Proof::Config(file.to_path_buf()),
        implementation: Implementation::Library,
        seed: args.seed,
        suites,
        mismatches_file: mismatches_written.then(|| args.mismatches.clone()),
    }
}

/// What the proof will send, said up front: requests per run for each upstream and in all; for a long
/// run, about how long it takes and how to shorten it.
fn estimate(planned: &[(&Installation, &own_config::ConfigUpstream, usize)], runs: usize, ring: bool) -> String {
    let builds = {
        let mut b: Vec<String> = planned.iter().map(|(i, _, _)| i.label()).collect();
        b.dedup();
        b.len()
    };
    let total: usize = planned.iter().map(|(_, _, n)| n * runs).sum();
    let mut per: Vec<String> = Vec::new();
    for (_, u, n) in planned {
        let item = format!("{} {}", u.name, thousands(*n));
        if !per.contains(&item) {
            per.push(item);
        }
    }
    let mut out = format!(
        "plan: {} requests in all: {builds} build{} × {runs} run{} of each upstream (requests per run: {})",
        thousands(total),
        if builds == 1 { "" } else { "s" },
        if runs == 1 { "" } else { "s" },
        per.join(", ")
    );
    if total > LONG_RUN {
        let secs = total as f64 / TYPICAL_RATE;
        let _ = write!(
            out,
            "\n  a long run: about {} at {} requests/s (the progress line estimates from the real rate)",
            duration(secs),
            thousands(TYPICAL_RATE as usize)
        );
        if ring {
            out.push_str("; --no-ring-proof drops the two forged keys per ring point");
        }
        out.push_str("; --upstream NAME, --versions or --failure-runs make it shorter");
    }
    out
}

/// `1234567` as `1,234,567`.
fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Seconds as `45 s`, `12 min`, `2.5 h`.
fn duration(secs: f64) -> String {
    if secs < 90.0 {
        format!("{secs:.0} s")
    } else if secs < 5400.0 {
        format!("{:.0} min", secs / 60.0)
    } else {
        format!("{:.1} h", secs / 3600.0)
    }
}

/// Progress on stderr: a bar on a terminal; otherwise a line every [`Reporter::EVERY`], so that a long run
/// in CI is never silent.
struct Reporter {
    bar: ProgressBar,
    plain: bool,
    started: Instant,
    last_line: Instant,
    /// Requests of finished proofs.
    done: usize,
    /// Requests expected in all (estimates, corrected as proofs finish).
    total: usize,
}

impl Reporter {
    const EVERY: Duration = Duration::from_secs(10);

    fn new(total: usize) -> Reporter {
        let plain = !std::io::stderr().is_terminal();
        let bar = if plain { ProgressBar::hidden() } else { ProgressBar::new(total as u64) };
        bar.set_style(
            ProgressStyle::with_template("{prefix:>11} {bar:30} {pos:>9}/{len:9} {elapsed:>4} (eta {eta}) {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let now = Instant::now();
        Reporter { bar, plain, started: now, last_line: now, done: 0, total }
    }

    /// Moves the bar; without one, returns the line to print when one is due.
    fn update(&mut self, label: &str, p: Progress) -> Option<String> {
        let done = self.done + p.run * p.total + p.done;
        self.bar.set_message(format!("{label}, run {}/{}", p.run + 1, p.runs));
        self.bar.set_position(done as u64);
        if !self.plain || self.last_line.elapsed() < Self::EVERY {
            return None;
        }
        self.last_line = Instant::now();
        let elapsed = self.started.elapsed().as_secs_f64();
        let left = if done > 0 && self.total > done {
            format!(", about {} left", duration(elapsed * (self.total - done) as f64 / done as f64))
        } else {
            String::new()
        };
        Some(format!(
            "nginx-ketama: {label}, run {}/{}: {}/{} requests; {} of about {} in all, {} elapsed{left}",
            p.run + 1,
            p.runs,
            thousands(p.done),
            thousands(p.total),
            thousands(done),
            thousands(self.total),
            duration(elapsed)
        ))
    }

    /// A proof planned at `estimate` requests sent `requests`.
    fn finished(&mut self, requests: usize, estimate: usize) {
        self.done += requests;
        self.total = (self.total + requests).saturating_sub(estimate).max(self.done);
        self.bar.set_length(self.total as u64);
        self.bar.set_position(self.done as u64);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn print_environment(prover: &Prover) {
    let Some(plan) = prover.plan() else {
        println!(
            "  network: no private namespaces (not root, or ${} set): the config's addresses cannot be made \
             local; only upstreams whose servers are all loopback literals run, on this machine's loopback",
            netns::NO_NAMESPACES_ENV
        );
        return;
    };
    let on_lo = match plan.on_lo.len() {
        0 => "no address added to its lo".to_string(),
        n => format!("{n} addresses added to its lo ({})", summarize(plan.on_lo.iter(), 5)),
    };
    println!(
        "  network: a private network namespace; {on_lo}; front {}; ephemeral ports {}-{} (no port of the config); \
         names resolved with a private name service (the hosts file only)",
        plan.front,
        plan.ephemeral.start(),
        plan.ephemeral.end()
    );
    const NAMES_SHOWN: usize = 10;
    for n in plan.names.iter().take(NAMES_SHOWN) {
        let ips = summarize(n.addresses.iter(), 5);
        match n.source {
            NameSource::Machine => println!(
                "  hostname {}: {ips} (resolves on this machine; resolved inside a private namespace from the hosts \
                 file, so no query left it)",
                n.name
            ),
            NameSource::StandIn => {
                println!("  hostname {}: does not resolve on this machine; stand-in address {ips}", n.name)
            }
        }
    }
    if plan.names.len() > NAMES_SHOWN {
        println!("  … and {} more hostnames", plan.names.len() - NAMES_SHOWN);
    }
    for s in &plan.shadows {
        println!(
            "  unix sockets {}: in a private directory mounted over {} (inside the namespace only)",
            summarize(s.sockets.iter().map(|p| p.path.display()), 5),
            s.target.display()
        );
    }
    if !plan.relative.is_empty() {
        println!(
            "  unix sockets {}: relative paths, in the namespace's private working directory",
            summarize(plan.relative.iter().map(|p| p.display()), 5)
        );
    }
}

/// One row per build and upstream.
pub(crate) fn table(reports: &[UpstreamReport]) -> String {
    let mut out = format!(
        "{:<11} {:<12} {:<10} {:>7} {:>5} {:>6} {:>11} {:>8} {:>4} {:>9} {:>14} {:>10}\n",
        "nginx",
        "upstream",
        "method",
        "servers",
        "peers",
        "points",
        "arcs proven",
        "requests",
        "runs",
        "failovers",
        "not comparable",
        "mismatches"
    );
    for r in reports {
        let _ = writeln!(
            out,
            "{:<11} {:<12} {:<10} {:>7} {:>5} {:>6} {:>11} {:>8} {:>4} {:>9} {:>14} {:>10}",
            r.build,
            r.upstream,
            r.method.as_str(),
            r.servers,
            r.peers,
            r.points,
            r.arcs_proven,
            r.requests,
            r.runs,
            r.failovers,
            r.not_compared(),
            if r.fault.is_some() { "fault".to_string() } else { r.findings.len().to_string() }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use nginx_ketama::{Libc, Method};
    use nginx_ketama_harness::nginx::install::Origin;

    #[derive(Debug, Parser)]
    struct Wrap {
        #[command(flatten)]
        args: VerifyArgs,
    }

    /// The replay command names the config, the upstream and everything that changes the keys.
    #[test]
    fn replay_names_the_config_and_the_upstream() {
        let args =
            Wrap::parse_from(["x", "--config", "a/nginx.conf", "--seed", "7", "--keys", "50", "--no-ring-proof"]).args;
        let install = Installation {
            version: "1.26.3".parse().unwrap(),
            libc: Libc::Musl,
            stream: nginx_ketama_harness::nginx::install::Stream::BuiltIn,
            configure: Vec::new(),
            origin: Origin::Provisioned { dir: "/nowhere".into(), package: "1.26.3-3".into() },
        };
        assert_eq!(
            replay_command(Path::new("a/nginx.conf"), "app", &install, &args.prove_options()),
            "nginx-ketama verify --config a/nginx.conf --upstream app --versions 1.26.3 --libc musl --seed 7 --keys 50 \
             --failure-runs 4 --no-ring-proof"
        );
        assert!(Wrap::try_parse_from(["x", "--upstream", "app"]).is_err(), "--upstream needs --config");
    }

    fn install() -> Installation {
        Installation {
            version: "1.30.6".parse().unwrap(),
            libc: Libc::Glibc,
            stream: nginx_ketama_harness::nginx::install::Stream::BuiltIn,
            configure: Vec::new(),
            origin: Origin::Provisioned { dir: "/nowhere".into(), package: "1.30.6-1".into() },
        }
    }

    fn upstream(text: &str) -> own_config::ConfigUpstream {
        let options =
            nginx_ketama::config::LoadOptions { resolve: false, ..nginx_ketama::config::LoadOptions::fragment() };
        let config = nginx_ketama::config::Config::parse_str(text, "t.conf", &options).unwrap();
        own_config::choose(&config, &[], 1).unwrap().prove.remove(0)
    }

    /// What will be sent is said up front; a long run also says about how long and how to shorten it
    /// (200 servers at weight=100: 3.2 million ring points, two forged keys each).
    #[test]
    fn long_runs_are_estimated_up_front() {
        let heavy: String = (0..200).map(|i| format!("server 10.1.{i}.1:8080 weight=100;\n")).collect();
        let heavy = upstream(&format!("upstream w100 {{ hash $uri consistent;\n{heavy}}}"));
        let options = ProveOptions {
            seed: 1,
            keys: 3000,
            prove_ring: true,
            failure_runs: 4,
            failure_pause: None,
            failure_kinds: true,
            model_key: None,
        };
        let per_run = own_config::requests_per_run(&heavy, &options);
        assert_eq!(per_run, 3000 + 60 + 2 * 160 * 200 * 100 + 2);
        let i = install();
        let text = estimate(&[(&i, &heavy, per_run)], 5, true);
        assert!(text.starts_with("plan: 32,015,310 requests in all: 1 build × 5 runs of each upstream"), "{text}");
        assert!(text.contains("a long run: about") && text.contains("--no-ring-proof"), "{text}");
        let small = upstream("upstream s { hash $uri; server 10.0.0.1; server 10.0.0.2; }");
        let text = estimate(&[(&i, &small, 3060)], 5, true);
        assert!(!text.contains("long run"), "{text}");
    }

    /// Without a terminal, progress is a line every ten seconds (a bar on a terminal).
    #[test]
    fn progress_without_a_terminal_is_a_line_every_ten_seconds() {
        let mut r = Reporter::new(1000);
        r.plain = true;
        let p = Progress { run: 1, runs: 5, done: 50, total: 200 };
        assert_eq!(r.update("1.30.6 app", p), None, "not yet due");
        r.last_line -= Reporter::EVERY;
        r.started -= Duration::from_secs(25);
        let line = r.update("1.30.6 app", p).unwrap();
        assert!(
            line.starts_with(
                "nginx-ketama: 1.30.6 app, run 2/5: 50/200 requests; 250 of about 1,000 in all, 25 s elapsed, about"
            ),
            "{line}"
        );
        assert_eq!(r.update("1.30.6 app", p), None, "one line per period");
        r.finished(1000, 1000);
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(duration(7200.0), "2.0 h");
    }

    #[test]
    fn the_table_has_one_row_per_build_and_upstream() {
        let r = UpstreamReport {
            peers: 6,
            points: 1440,
            arcs_proven: 1440,
            requests: 100,
            runs: 5,
            failovers: 3,
            ..UpstreamReport::new("1.30.6".into(), "app".into(), Method::Consistent, 6)
        };
        let t = table(&[r]);
        let rows: Vec<&str> = t.lines().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[1].split_whitespace().collect::<Vec<_>>(),
            ["1.30.6", "app", "consistent", "6", "6", "1440", "1440", "100", "5", "3", "0", "0"]
        );
    }
}
