//! The commands that run nginx or a port, through the harness crate (feature `live`).

pub(crate) mod engine;
pub(crate) mod findings;
pub(crate) mod interrupt;
pub(crate) mod own_config;
pub(crate) mod report;
pub(crate) mod sweep;
pub(crate) mod verify;
pub(crate) mod verify_args;

use anyhow::Result;
use nginx_ketama::NginxVersion;
use nginx_ketama_harness::golden::{self, Layout, RecordArgs};
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::nginx::selection::{Place, Selection, Source};
use std::path::PathBuf;
use std::process::ExitCode;

/// `record-vectors`'s arguments (run it through `scripts/record-vectors`).
#[derive(Debug, clap::Args)]
pub(crate) struct RecordVectorsArgs {
    /// Record nothing: refresh the records' prose from the catalog and regenerate the fixtures.
    #[arg(long, conflicts_with_all = ["versions", "nginx", "image"])]
    offline: bool,
    /// Record only this case (repeatable); records of other cases are kept.
    #[arg(long = "case", value_name = "NAME")]
    cases: Vec<String>,
    /// Record only on these provisioned nginx versions (comma-separated); runs of the others are kept.
    #[arg(long, value_delimiter = ',', value_name = "V1,V2,...")]
    versions: Vec<NginxVersion>,
    /// Record on this nginx binary instead of the provisioned builds (repeatable), as `verify --nginx`;
    /// runs of other builds are kept.
    #[arg(long = "nginx", value_name = "PATH", conflicts_with_all = ["versions", "image"])]
    nginx: Vec<PathBuf>,
    /// Record in containers of this local image instead (repeatable; never pulled), as `verify --image`;
    /// runs of other builds are kept.
    #[arg(long = "image", value_name = "REF", conflicts_with = "versions")]
    image: Vec<String>,
    /// The directory holding `vectors/` and `snapshots/` (default: this repository).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
}

/// Records the golden vectors; exits 0 clean, 1 on an unexplained version difference, 2 on an error.
pub(crate) fn record_vectors(args: RecordVectorsArgs) -> ExitCode {
    let source = if args.image.is_empty() && args.nginx.is_empty() {
        Source::Provisioned { root: Installation::default_root(), versions: args.versions, place: Place::Local }
    } else {
        Source::Named { binaries: args.nginx, images: args.image }
    };
    let builds = Selection::to_record(source);
    let layout = args.root.as_deref().map(Layout::at);
    let args = RecordArgs { offline: args.offline, cases: args.cases, builds, layout };
    match golden::record_vectors(&args) {
        Ok(status) => ExitCode::from(status.code()),
        Err(e) => {
            eprintln!("nginx-ketama: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Replays the golden vectors through a shim; exits 0 when all pass, 1 on a failure or a protocol fault (the
/// shim broke `ports/SHIM.md`), 3 when the replay could not run (a vector file unreadable, no shell, the
/// shim answering `unsupported` to a protocol-1 group) or proved nothing. Failure groups a shim answers
/// `unsupported` (protocol 2, to a shim that speaks only protocol 1) are counted as not proven, with the
/// reason: never passed.
pub(crate) fn replay_vectors(shim: &str, mut files: Vec<PathBuf>) -> ExitCode {
    if files.is_empty() {
        let dir = golden::vectors_dir();
        files = ["consistent.json", "plain.json"].iter().map(|f| dir.join(f)).collect();
    }
    match nginx_ketama_harness::proofs::shim::replay_vectors(shim, &files) {
        Ok(report) => {
            for line in &report.failures {
                println!("{line}");
            }
            for reason in &report.not_proven_reasons {
                println!("{reason}");
            }
            let mut summary = format!("{} passed, {} failed", report.passed, report.failed);
            if report.skipped > 0 {
                summary.push_str(&format!(
                    ", {} skipped (groups that need musl's tie rule; shims model glibc)",
                    report.skipped
                ));
            }
            if report.not_proven > 0 {
                summary.push_str(&format!(
                    ", {} not proven (failure groups the shim answered unsupported: protocol 2)",
                    report.not_proven
                ));
            }
            println!("{summary}");
            match (report.failed, report.passed, report.not_proven) {
                (0, 1.., _) => ExitCode::SUCCESS,
                // Nothing proven, nothing failed: the shim answered every group `unsupported`.
                (0, 0, 1..) => ExitCode::from(3),
                _ => ExitCode::from(1),
            }
        }
        Err(e) if nginx_ketama_harness::proofs::shim::ProtocolFault::in_chain(&e) => {
            eprintln!("nginx-ketama: protocol fault: {e:#}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("nginx-ketama: {e:#}");
            ExitCode::from(3)
        }
    }
}

/// The reference shim: this library answering the shim protocol on stdin and stdout (a message longer than
/// [`crate::lines::MAX_SHIM_MESSAGE_BYTES`] is an error, not a process that grows without end).
pub(crate) fn shim(mutation: Option<nginx_ketama_harness::proofs::shim::ShimMutation>) -> Result<()> {
    let input = crate::lines::BoundedLines::new(
        std::io::stdin().lock(),
        "stdin",
        "a shim message",
        crate::lines::MAX_SHIM_MESSAGE_BYTES,
    );
    nginx_ketama_harness::proofs::shim::serve_mutated(input, crate::stdout::stdout(), mutation)
}

/// Removes what killed runs left behind, printing one line per thing removed.
pub(crate) fn cleanup() -> Result<()> {
    for removed in nginx_ketama_harness::nginx::cleanup::run()? {
        println!("{removed}");
    }
    Ok(())
}
