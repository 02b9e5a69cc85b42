//! `nginx-ketama verify`: checks where it will write before anything runs, runs the sweep on random
//! topologies ([`super::sweep`]) or the proof of a config ([`super::own_config`]), and writes its reports.

use super::findings::{Run, mismatch_file_options};
use super::verify_args::VerifyArgs;
use nginx_ketama_harness::proofs::verdict::Verdict;

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
    if let Err(message) = super::report::check(&args.reports, &args.mismatches, &super::report::options(&options)) {
        eprintln!("nginx-ketama: {message}");
        return Verdict::Usage;
    }
    if let Some(target) = &args.engine.engine {
        return super::engine::verify_engine(args, target);
    }
    let (verdict, report) = match &args.config {
        Some(file) => super::own_config::verify_config(args, file),
        None => super::sweep::sweep(args),
    };
    match report {
        Some(report) if !report.write_all(&args.reports, verdict, &super::report::options(&options)) => {
            // A proof whose report is lost does not pass a pipeline that reads the report.
            if verdict == Verdict::Proven { Verdict::HarnessFault } else { verdict }
        }
        _ => verdict,
    }
}
