//! `verify --report FORMAT=FILE`: what a run of `verify` checked, as JUnit XML for a CI system's test view
//! and as a JSON document (`nginx-ketama/verify/v1`), each case one topology (random topologies) or one
//! upstream (`--config`) on one nginx build.
//!
//! Both are deterministic: no timestamps, no durations, no host names, so two runs of the same seed on the
//! same builds write the same bytes. Both carry the run's one verdict, decided by `verify` (the report never
//! judges the run again). The paths are checked before any work starts (a missing directory, a directory
//! that refuses a new file, one of the command's inputs: exit 2), and written whole, as the mismatch file is
//! (`nginx_ketama_output`: never by replacing something that is not a regular file).

use crate::render::xml::{attr, text};
use nginx_ketama_harness::proofs::sweep::Finding;
use nginx_ketama_harness::proofs::verdict::Verdict;
use nginx_ketama_harness::run::observation::Observation;
use nginx_ketama_output::Options;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A report format `--report` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReportFormat {
    /// JUnit XML, as Jenkins (xunit's `junit-10.xsd`), GitLab and GitHub's test-report actions read it.
    Junit,
    /// The JSON document described by `docs/schemas/verify.v1.json`.
    Json,
}

impl ReportFormat {
    fn as_str(self) -> &'static str {
        match self {
            ReportFormat::Junit => "junit",
            ReportFormat::Json => "json",
        }
    }
}

/// One `--report FORMAT=FILE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReportTarget {
    pub(crate) format: ReportFormat,
    pub(crate) path: PathBuf,
}

impl ReportTarget {
    /// Parses `junit=FILE` or `json=FILE`.
    ///
    /// # Errors
    ///
    /// A message naming the accepted forms.
    pub(crate) fn parse(s: &str) -> Result<ReportTarget, String> {
        const FORMS: &str = "expected junit=FILE or json=FILE";
        let Some((format, path)) = s.split_once('=') else {
            return Err(format!("{FORMS}, got {s:?}"));
        };
        let format = match format {
            "junit" => ReportFormat::Junit,
            "json" => ReportFormat::Json,
            other => return Err(format!("unknown report format {other:?}: {FORMS}")),
        };
        if path.is_empty() {
            return Err(format!("no file after {}=: {FORMS}", format.as_str()));
        }
        Ok(ReportTarget { format, path: PathBuf::from(path) })
    }
}

/// How `--report` files are written: as the mismatch file (`mismatches`), but into directories that exist.
pub(crate) fn options(mismatches: &Options) -> Options {
    Options { create_dirs: false, ..mismatches.clone() }
}

/// Checks every `--report` path before any work starts: no two the same, none the mismatch file, each one
/// `nginx_ketama_output` would write (not a directory, not an input of the command) in a directory that
/// exists and takes a new file.
///
/// # Errors
///
/// The message for the usage error (exit 2).
pub(crate) fn check(targets: &[ReportTarget], mismatches: &Path, options: &Options) -> Result<(), String> {
    for (i, t) in targets.iter().enumerate() {
        let flag = format!("--report {}={}", t.format.as_str(), t.path.display());
        if targets[..i].iter().any(|u| same_file(&u.path, &t.path)) {
            return Err(format!("{flag}: another --report names the same file"));
        }
        if same_file(mismatches, &t.path) {
            return Err(format!("{flag}: it is the mismatch file (--mismatches)"));
        }
        nginx_ketama_output::check(&t.path, options).map_err(|e| format!("{flag}: {e}"))?;
        writable_dir(&t.path).map_err(|why| format!("{flag}: {why}"))?;
    }
    Ok(())
}

/// Whether `a` and `b` name one file: the same spelling, or the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => nginx_ketama_output::FileId::of(&x) == nginx_ketama_output::FileId::of(&y),
        _ => false,
    }
}

/// For a path that names a regular file or nothing: its directory exists and a new file can be made in it
/// (tried, with a probe file removed at once). A device or FIFO is written through and needs neither.
fn writable_dir(path: &Path) -> Result<(), String> {
    let target = match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => return Ok(()),
        // A regular file is replaced beside the last link's target.
        Ok(_) => std::fs::canonicalize(path).map_err(|e| format!("cannot resolve it: {e}"))?,
        Err(_) => path.to_path_buf(),
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{} is not a directory", dir.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("the directory {} does not exist (reports do not create directories)", dir.display()));
        }
        Err(e) => return Err(format!("cannot look at the directory {}: {e}", dir.display())),
    }
    let probe = dir.join(format!(".nginx-ketama-report-probe.{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot make a file in the directory {}: {e}", dir.display())),
    }
}

/// What the run proved: the implementation under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Implementation {
    /// This library.
    Library,
    /// A shim command (`--shim`).
    Shim(String),
}

/// What kind of run it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Proof {
    /// Random topologies (`verify`, `--shim`, `--nginx`, `--image`).
    Topologies,
    /// The upstreams of a configuration (`verify --config FILE`).
    Config(PathBuf),
    /// Another proxy's model against the real engine (`verify --engine ENGINE`): a suite per release, a
    /// case per kind of topology (a HAProxy hash type, a Caddy policy).
    Engine(String),
}

/// A whole report: every suite (one per build, and per run with `--repeat`) with its cases, and the verdict
/// `verify` reached.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub(crate) proof: Proof,
    pub(crate) implementation: Implementation,
    pub(crate) seed: u64,
    pub(crate) suites: Vec<Suite>,
    /// Where the run's mismatches were written, when there were any.
    pub(crate) mismatches_file: Option<PathBuf>,
}

impl Report {
    /// The report of a run that could not start: one case, an error saying why.
    pub(crate) fn refused(proof: Proof, implementation: Implementation, seed: u64, cause: String) -> Report {
        Report {
            proof,
            implementation,
            seed,
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
}

/// The cases of one nginx build (in one run).
#[derive(Debug, Clone)]
pub(crate) struct Suite {
    /// The build's label (`1.26.3`, `1.26.3-musl`, or the version of a named binary or image).
    pub(crate) build: String,
    /// The build and what its `nginx -V` says.
    pub(crate) description: String,
    /// With `--repeat`: which run (from 1).
    pub(crate) run: Option<u32>,
    pub(crate) cases: Vec<Case>,
}

/// One topology or upstream on one build.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// `topology 3`, `stream check`, or the upstream's name.
    pub(crate) name: String,
    /// What it was (`12 servers, consistent, 1920 points`), when known.
    pub(crate) detail: Option<String>,
    pub(crate) counts: Counts,
    pub(crate) outcome: Outcome,
}

/// What a case compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Requests (or stream sessions) sent.
    pub(crate) requests: usize,
    /// Ring arcs proven at both ends.
    pub(crate) arcs_proven: usize,
    /// Requests that went through at least one retry.
    pub(crate) failovers: usize,
    /// Requests not compared: their route depends on when nginx's clock ticked (`--config` only).
    pub(crate) not_comparable: usize,
}

/// How a case ended.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Everything compared matched.
    Passed { replay: String },
    /// nginx and the implementation differed: the first [`SHOWN`] mismatches, and how many in all.
    Failed { total: usize, shown: Vec<Shown>, replay: String },
    /// The shim broke the protocol of `ports/SHIM.md`: the implementation under test failed.
    ProtocolFault { cause: String, replay: String },
    /// The harness could not run or finish the check: nothing learnt.
    Error { cause: String, replay: Option<String> },
    /// Not run, or not modelled: why.
    Skipped { reason: String },
}

/// Mismatches a case lists (all of them are in the mismatch file).
pub(crate) const SHOWN: usize = 20;

/// One mismatch as a report shows it.
#[derive(Debug, Clone)]
pub(crate) struct Shown {
    pub(crate) key: Vec<u8>,
    pub(crate) predicted: Observation,
    pub(crate) nginx: Observation,
}

impl Outcome {
    /// The case's outcome from its mismatches: failed if any, else passed.
    pub(crate) fn of<'a>(findings: impl Iterator<Item = &'a Finding>, replay: String) -> Outcome {
        let findings: Vec<&Finding> = findings.collect();
        if findings.is_empty() {
            return Outcome::Passed { replay };
        }
        let shown = findings
            .iter()
            .take(SHOWN)
            .map(|f| Shown {
                key: f.mismatch.key.clone(),
                predicted: f.mismatch.expected.clone(),
                nginx: f.mismatch.actual.clone(),
            })
            .collect();
        Outcome::Failed { total: findings.len(), shown, replay }
    }

    fn word(&self) -> &'static str {
        match self {
            Outcome::Passed { .. } => "passed",
            Outcome::Failed { .. } => "failed",
            Outcome::ProtocolFault { .. } => "protocol_fault",
            Outcome::Error { .. } => "error",
            Outcome::Skipped { .. } => "skipped",
        }
    }
}

/// Tests, failures (mismatches and protocol faults), errors, skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

impl Totals {
    fn of<'a>(cases: impl Iterator<Item = &'a Case>) -> Totals {
        let mut t = Totals::default();
        for c in cases {
            t.tests += 1;
            match c.outcome {
                Outcome::Passed { .. } => {}
                Outcome::Failed { .. } | Outcome::ProtocolFault { .. } => t.failures += 1,
                Outcome::Error { .. } => t.errors += 1,
                Outcome::Skipped { .. } => t.skipped += 1,
            }
        }
        t
    }
}

impl Suite {
    fn name(&self, proof: &Proof) -> String {
        let build = match proof {
            Proof::Engine(engine) => format!("{engine} {}", self.build),
            _ => format!("nginx {}", self.build),
        };
        match self.run {
            Some(run) => format!("{build}, run {run}"),
            None => build,
        }
    }

    /// JUnit's class name: `verify.nginx-1_26_3` (dots would split it into packages), with the run.
    fn classname(&self, proof: &Proof) -> String {
        let (command, what) = match proof {
            Proof::Topologies => ("verify", "nginx"),
            Proof::Config(_) => ("verify-config", "nginx"),
            Proof::Engine(engine) => ("verify-engine", engine.as_str()),
        };
        let build = self.build.replace('.', "_");
        match self.run {
            Some(run) => format!("{command}.run{run}.{what}-{build}"),
            None => format!("{command}.{what}-{build}"),
        }
    }
}

impl Report {
    /// The report in `format`.
    pub(crate) fn render(&self, format: ReportFormat, verdict: Verdict) -> Vec<u8> {
        match format {
            ReportFormat::Junit => self.junit(verdict).into_bytes(),
            ReportFormat::Json => {
                let mut out = serde_json::to_vec_pretty(&self.json(verdict)).unwrap_or_default();
                out.push(b'\n');
                out
            }
        }
    }

    /// Writes every report `targets` names; says on stderr which could not be written, and whether all were.
    pub(crate) fn write_all(&self, targets: &[ReportTarget], verdict: Verdict, options: &Options) -> bool {
        let mut ok = true;
        for t in targets {
            if let Err(e) = nginx_ketama_output::write(&t.path, &self.render(t.format, verdict), options) {
                eprintln!("nginx-ketama: --report {}: {e}", t.format.as_str());
                ok = false;
            }
        }
        ok
    }

    fn junit(&self, verdict: Verdict) -> String {
        let all = Totals::of(self.suites.iter().flat_map(|s| &s.cases));
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites name=\"nginx-ketama verify\" tests=\"{}\" failures=\"{}\" errors=\"{}\">",
            all.tests, all.failures, all.errors
        );
        for suite in &self.suites {
            let t = Totals::of(suite.cases.iter());
            let _ = writeln!(
                out,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
                attr(&suite.name(&self.proof)),
                t.tests,
                t.failures,
                t.errors,
                t.skipped
            );
            out.push_str("    <properties>\n");
            let mut properties = vec![
                ("verdict", verdict.word().to_string()),
                ("exit code", verdict.code().to_string()),
                ("build", suite.description.clone()),
                ("seed", self.seed.to_string()),
                (
                    "implementation",
                    match &self.implementation {
                        Implementation::Library => "this library".to_string(),
                        Implementation::Shim(command) => format!("the shim {command}"),
                    },
                ),
            ];
            if let Proof::Config(file) = &self.proof {
                properties.push(("config", file.display().to_string()));
            }
            if let Proof::Engine(engine) = &self.proof {
                properties.push(("engine", engine.clone()));
            }
            if let Some(file) = &self.mismatches_file {
                properties.push(("mismatch file", file.display().to_string()));
            }
            for (name, value) in properties {
                let _ = writeln!(out, "      <property name=\"{name}\" value=\"{}\"/>", attr(&value));
            }
            out.push_str("    </properties>\n");
            let classname = suite.classname(&self.proof);
            for case in &suite.cases {
                let _ = write!(out, "    <testcase name=\"{}\" classname=\"{}\">", attr(&case.name), attr(&classname));
                self.junit_outcome(&mut out, case);
                let mut said = Vec::new();
                if let Some(detail) = &case.detail {
                    said.push(detail.clone());
                }
                if !matches!(case.outcome, Outcome::Skipped { .. } | Outcome::Error { .. }) {
                    let c = case.counts;
                    said.push(format!(
                        "requests {}, arcs proven {}, failovers {}, not comparable {}",
                        c.requests, c.arcs_proven, c.failovers, c.not_comparable
                    ));
                }
                if let Outcome::Passed { replay } = &case.outcome {
                    said.push(format!("replay: {replay}"));
                }
                if !said.is_empty() {
                    let _ = write!(out, "\n      <system-out>{}</system-out>\n    ", text(&said.join("\n")));
                }
                out.push_str("</testcase>\n");
            }
            out.push_str("  </testsuite>\n");
        }
        out.push_str("</testsuites>\n");
        out
    }

    fn junit_outcome(&self, out: &mut String, case: &Case) {
        let predictor = match self.implementation {
            Implementation::Library => "expected",
            Implementation::Shim(_) => "shim",
        };
        match &case.outcome {
            Outcome::Passed { .. } => {}
            Outcome::Failed { total, shown, replay } => {
                let by = match &self.proof {
                    Proof::Engine(engine) => format!("the real {engine}"),
                    _ => "nginx".to_string(),
                };
                let message =
                    format!("{total} of {} requests routed differently from {by}", case.counts.requests.max(*total));
                let mut body = String::new();
                for s in shown {
                    let _ = writeln!(
                        body,
                        "key {} (hex {}): {predictor} {}, nginx {}",
                        nginx_ketama_harness::run::parity::show_key(&s.key),
                        hex(&s.key),
                        observed(&s.predicted),
                        observed(&s.nginx)
                    );
                }
                if *total > shown.len() {
                    let _ = writeln!(body, "… and {} more (all of them are in the mismatch file)", total - shown.len());
                }
                let _ = write!(body, "replay: {replay}");
                let _ = write!(
                    out,
                    "\n      <failure type=\"mismatch\" message=\"{}\">{}</failure>",
                    attr(&message),
                    text(&body)
                );
            }
            Outcome::ProtocolFault { cause, replay } => {
                let _ = write!(
                    out,
                    "\n      <failure type=\"protocol fault\" message=\"{}\">{}\nreplay: {}</failure>",
                    attr(first_line(cause)),
                    text(cause),
                    text(replay)
                );
            }
            Outcome::Error { cause, replay } => {
                let mut body = cause.clone();
                if let Some(replay) = replay {
                    let _ = write!(body, "\nreplay: {replay}");
                }
                let _ = write!(
                    out,
                    "\n      <error type=\"harness fault\" message=\"{}\">{}</error>",
                    attr(first_line(cause)),
                    text(&body)
                );
            }
            Outcome::Skipped { reason } => {
                let _ = write!(out, "\n      <skipped message=\"{}\"/>", attr(reason));
            }
        }
    }

    fn json(&self, verdict: Verdict) -> serde_json::Value {
        use serde_json::json;
        let all = Totals::of(self.suites.iter().flat_map(|s| &s.cases));
        let suites: Vec<serde_json::Value> = self
            .suites
            .iter()
            .map(|s| {
                let cases: Vec<serde_json::Value> = s
                    .cases
                    .iter()
                    .map(|c| {
                        let mut result = json!({"outcome": c.outcome.word()});
                        match &c.outcome {
                            Outcome::Passed { replay } => result["replay"] = replay.as_str().into(),
                            Outcome::Failed { total, shown, replay } => {
                                result["mismatches"] = (*total).into();
                                result["shown"] = shown
                                    .iter()
                                    .map(|m| {
                                        json!({
                                            "key": String::from_utf8_lossy(&m.key),
                                            "key_hex": hex(&m.key),
                                            "predicted": observation_json(&m.predicted),
                                            "nginx": observation_json(&m.nginx),
                                        })
                                    })
                                    .collect();
                                result["replay"] = replay.as_str().into();
                            }
                            Outcome::ProtocolFault { cause, replay } => {
                                result["cause"] = cause.as_str().into();
                                result["replay"] = replay.as_str().into();
                            }
                            Outcome::Error { cause, replay } => {
                                result["cause"] = cause.as_str().into();
                                result["replay"] = replay.as_deref().into();
                            }
                            Outcome::Skipped { reason } => result["reason"] = reason.as_str().into(),
                        }
                        json!({
                            "name": c.name,
                            "detail": c.detail,
                            "requests": c.counts.requests,
                            "arcs_proven": c.counts.arcs_proven,
                            "failovers": c.counts.failovers,
                            "not_comparable": c.counts.not_comparable,
                            "result": result,
                        })
                    })
                    .collect();
                json!({"build": s.build, "description": s.description, "run": s.run, "cases": cases})
            })
            .collect();
        let implementation = match &self.implementation {
            Implementation::Library => json!({"kind": "library"}),
            Implementation::Shim(command) => json!({"kind": "shim", "command": command}),
        };
        let proof = match &self.proof {
            Proof::Topologies => json!({"kind": "topologies"}),
            Proof::Config(file) => json!({"kind": "config", "file": file.display().to_string()}),
            Proof::Engine(engine) => json!({"kind": "engine", "engine": engine}),
        };
        json!({
            "schema": crate::schema::VERIFY,
            "verdict": verdict.word().replace(' ', "_"),
            "exit_code": verdict.code(),
            "proof": proof,
            "implementation": implementation,
            "seed": self.seed,
            "mismatch_file": self.mismatches_file.as_ref().map(|p| p.display().to_string()),
            "totals": {
                "tests": all.tests,
                "passed": all.tests - all.failures - all.errors - all.skipped,
                "failures": all.failures,
                "errors": all.errors,
                "skipped": all.skipped,
            },
            "suites": suites,
        })
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn hex(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// `200 "127.0.0.1:9001"` (a stream session has no status: just the address).
fn observed(o: &Observation) -> String {
    let addr = nginx_ketama_harness::run::parity::clip(&o.upstream_addr, 300);
    let text = match o.status {
        0 => format!("{addr:?}"),
        status => format!("{status} {addr:?}"),
    };
    match &o.upstream_status {
        Some(s) => format!("{text} (upstream status {s:?})"),
        None => text,
    }
}

/// An observation in the JSON report: `upstream_status` only where it was compared (failure kinds).
fn observation_json(o: &Observation) -> serde_json::Value {
    let mut v = serde_json::json!({"status": o.status, "upstream_addr": o.upstream_addr});
    if let Some(s) = &o.upstream_status {
        v["upstream_status"] = s.as_str().into();
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_flags_parse_into_a_format_and_a_path() {
        assert_eq!(
            ReportTarget::parse("junit=out/v.xml"),
            Ok(ReportTarget { format: ReportFormat::Junit, path: "out/v.xml".into() })
        );
        assert_eq!(
            ReportTarget::parse("json=a=b.json"),
            Ok(ReportTarget { format: ReportFormat::Json, path: "a=b.json".into() })
        );
        let e = ReportTarget::parse("xml=v.xml").unwrap_err();
        assert!(e.contains("unknown report format \"xml\"") && e.contains("junit=FILE or json=FILE"), "{e}");
        assert!(ReportTarget::parse("v.xml").unwrap_err().contains("junit=FILE or json=FILE"));
        assert!(ReportTarget::parse("junit=").unwrap_err().contains("no file after junit="));
    }

    fn sample() -> Report {
        let obs = |addr: &str| Observation { status: 200, upstream_addr: addr.into(), upstream_status: None };
        let case = |name: &str, outcome| Case {
            name: name.into(),
            detail: Some("3 servers, plain".into()),
            counts: Counts { requests: 100, arcs_proven: 0, failovers: 2, not_comparable: 0 },
            outcome,
        };
        Report {
            proof: Proof::Topologies,
            implementation: Implementation::Library,
            seed: 7,
            mismatches_file: Some("m.jsonl".into()),
            suites: vec![Suite {
                build: "1.26.3".into(),
                description: "local 1.26.3".into(),
                run: None,
                cases: vec![
                    case("topology 0", Outcome::Passed { replay: "r0".into() }),
                    case(
                        "topology 1",
                        Outcome::Failed {
                            total: 1,
                            shown: vec![Shown { key: b"k\x01<".to_vec(), predicted: obs("a:1"), nginx: obs("b:2") }],
                            replay: "r1".into(),
                        },
                    ),
                    case("topology 2", Outcome::Error { cause: "nginx died\nlog".into(), replay: Some("r2".into()) }),
                    case("stream check", Outcome::Skipped { reason: "no stream module".into() }),
                ],
            }],
        }
    }

    /// Each outcome is its JUnit element, with the counts, the key (escaped), both answers and the replay.
    #[test]
    fn junit_has_one_element_per_outcome() {
        let text = String::from_utf8(sample().render(ReportFormat::Junit, Verdict::Mismatches)).unwrap();
        assert!(text.contains("<testsuites name=\"nginx-ketama verify\" tests=\"4\" failures=\"1\" errors=\"1\">"));
        assert!(text.contains("tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\">"), "{text}");
        assert!(text.contains("<failure type=\"mismatch\" message=\"1 of 100 requests routed differently from nginx\">key \"k\\u{1}&lt;\" (hex 6b013c): expected 200 \"a:1\", nginx 200 \"b:2\"\nreplay: r1</failure>"), "{text}");
        assert!(
            text.contains("<error type=\"harness fault\" message=\"nginx died\">nginx died\nlog\nreplay: r2</error>"),
            "{text}"
        );
        assert!(text.contains("<skipped message=\"no stream module\"/>"), "{text}");
        assert!(text.contains("<property name=\"verdict\" value=\"mismatches\"/>"), "{text}");
        assert!(text.contains("classname=\"verify.nginx-1_26_3\""), "{text}");
        assert!(!text.contains("time=") && !text.contains("timestamp") && !text.contains("hostname"));
    }

    /// With `--repeat`, each run is a suite of its own, named and classed by its run.
    #[test]
    fn runs_of_a_soak_are_suites_of_their_own() {
        let mut r = sample();
        let mut second = r.suites[0].clone();
        second.run = Some(2);
        r.suites[0].run = Some(1);
        r.suites.push(second);
        let text = String::from_utf8(r.render(ReportFormat::Junit, Verdict::Mismatches)).unwrap();
        assert!(text.contains("<testsuite name=\"nginx 1.26.3, run 2\""), "{text}");
        assert!(text.contains("classname=\"verify.run2.nginx-1_26_3\""), "{text}");
        assert!(text.contains("<testsuites name=\"nginx-ketama verify\" tests=\"8\" failures=\"2\" errors=\"2\">"));
        assert_eq!(r.json(Verdict::Mismatches)["suites"][1]["run"], 2);
    }

    /// The JSON carries the verdict it is given, not one of its own.
    #[test]
    fn the_verdict_is_the_one_given() {
        let doc = sample().json(Verdict::HarnessFault);
        assert_eq!(doc["verdict"], "harness_fault");
        assert_eq!(doc["exit_code"], 3);
        assert_eq!(doc["totals"]["passed"], 1);
        assert_eq!(doc["suites"][0]["cases"][1]["result"]["shown"][0]["key_hex"], "6b013c");
    }
}
