//! The mismatch file of `verify` (`--mismatches`): each line names its run; a passing run removes the
//! file an earlier run left, never one a run wrote while it ran, and never a file `verify` reads.

use super::verify_args::VerifyArgs;
use anyhow::Result;
use nginx_ketama::config::{Config, LoadOptions};
use nginx_ketama_harness::golden::utc_time;
use nginx_ketama_harness::proofs::sweep::Finding;
use nginx_ketama_harness::proofs::verdict::Verdict;
use nginx_ketama_output::FileId;
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::OnceLock;
use std::time::SystemTime;

/// A run of `verify`, as its mismatch file names it: when it started, and its process.
#[derive(Debug)]
pub(crate) struct Run {
    started: SystemTime,
    /// `2026-05-01T10:15:02Z pid 4242`.
    id: String,
}

static RUN: OnceLock<Run> = OnceLock::new();

impl Run {
    /// How a mismatch line names the run: `2026-05-01T10:15:02Z pid 4242`.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

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
pub(crate) fn mismatch_file_options(args: &VerifyArgs) -> nginx_ketama_output::Options {
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
    save(args, findings.len(), || findings_file(args, Run::this(), findings), verdict)
}

/// As [`save_findings`], for mismatch lines already made (`verify --engine`'s).
pub(crate) fn save_lines(args: &VerifyArgs, lines: &[serde_json::Value], verdict: Verdict) -> bool {
    let file = || {
        let mut file = Vec::new();
        for line in lines {
            serde_json::to_writer(&mut file, line)?;
            file.push(b'\n');
        }
        Ok(file)
    };
    save(args, lines.len(), file, verdict)
}

/// Writes `count` mismatches (`file` makes the file's bytes) to `--mismatches`, or removes a stale file
/// when the run proved everything; says whether it wrote mismatches.
fn save(args: &VerifyArgs, count: usize, file: impl FnOnce() -> Result<Vec<u8>>, verdict: Verdict) -> bool {
    let run = Run::this();
    if count > 0 {
        let written = file().and_then(|bytes| {
            nginx_ketama_output::write(&args.mismatches, &bytes, &mismatch_file_options(args))?;
            Ok(())
        });
        match written {
            Ok(()) => {
                println!("{count} mismatches; all of them are in {} (run {})", args.mismatches.display(), run.id);
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

/// If the file at `path` is a mismatch file (its first line is a mismatch of `verify` or `verify --engine`), the run that wrote
/// it: `run <id>`, or `a run of an older nginx-ketama` for files written before lines named their run.
fn mismatch_file_run(path: &Path) -> Option<String> {
    let mut first = Vec::new();
    let file = std::fs::File::open(path).ok()?;
    // A mismatch line is short; a file whose first MiB holds no whole line is not a mismatch file.
    std::io::BufReader::new(file.take(1 << 20)).read_until(b'\n', &mut first).ok()?;
    let line: serde_json::Value = serde_json::from_slice(&first).ok()?;
    // nginx's mismatches (`nginx_said`) or an engine's (`engine_said`, `verify --engine`).
    if line.get("replay").is_none() || (line.get("nginx_said").is_none() && line.get("engine_said").is_none()) {
        return None;
    }
    Some(match line.get("run").and_then(serde_json::Value::as_str) {
        Some(id) => format!("run {id}"),
        None => "a run of an older nginx-ketama".to_string(),
    })
}

fn findings_file(args: &VerifyArgs, run: &Run, findings: &[Finding]) -> Result<Vec<u8>> {
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
    Ok(file)
}
