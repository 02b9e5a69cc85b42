//! Helpers shared by the integration-test binaries: the live report `scripts/test` prints at the end of a
//! run, the `NGINX_PARITY=require` switch, insta settings for `snapshots/`, and running a command with
//! bytes on its stdin.
//!
//! Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// `target/nginx-ketama/live-report.txt` (or under `$CARGO_TARGET_DIR`).
pub(crate) fn report_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target")));
    target.join("nginx-ketama/live-report.txt")
}

/// Prints `text` and appends it to the live report, so a passing run still shows what it verified.
pub(crate) fn report(text: &str) {
    eprintln!("{text}");
    let path = report_path();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
        let _ = writeln!(f, "{}", text.trim_end());
    }
}

/// `NGINX_PARITY=require` (set by `.ci/run`): a live test that cannot run fails instead of skipping.
pub(crate) fn parity_required() -> bool {
    std::env::var("NGINX_PARITY").is_ok_and(|v| v == "require")
}

/// Skips a live test with a loud `SKIP:` line in the report, or fails under `NGINX_PARITY=require`.
pub(crate) fn skip(why: &str) {
    assert!(!parity_required(), "NGINX_PARITY=require but {why}");
    report(&format!("SKIP: {why} (set NGINX_PARITY=require to make this a failure)"));
}

/// insta settings for the committed snapshots in `snapshots/` (no module prefix, no expression).
pub(crate) fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s
}

/// Runs `cmd` with `input` on its stdin (written from a thread, so a large input cannot deadlock against
/// a full stdout pipe) and collects its status, stdout and stderr. A failed write (the command exited
/// without reading everything) is left to the caller to see in the status and stderr.
pub(crate) fn run_with_stdin(mut cmd: Command, input: &[u8]) -> std::io::Result<Output> {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output()?;
    writer.join().expect("the stdin writer does not panic");
    Ok(out)
}
