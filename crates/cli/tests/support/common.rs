//! What every test file of the CLI shares (included with `#[path]`, as `schemas.rs` is): the binary, one
//! way to run it, one way to write a configuration, and reading its answers. Each file uses part of it.
#![allow(dead_code)]

use nginx_ketama_harness::testkit::{TempFile, run_with_stdin};
use serde_json::Value;
use std::process::{Command, Output};

/// The `nginx-ketama` binary under test.
pub(crate) const CLI: &str = env!("CARGO_BIN_EXE_nginx-ketama");

/// Runs the binary with `args` and `stdin`, to its end: status, stdout and stderr.
pub(crate) fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(CLI);
    cmd.args(args);
    run_with_stdin(cmd, stdin).unwrap()
}

/// A configuration file `name` in a fresh temporary directory: `text` right after `events {}` (a blank
/// between them unless `text` starts with a line break), wrapped in `http { … }` unless it has its own
/// `http` block; the wrapping adds no line, so line numbers in messages are those of `text`.
pub(crate) fn conf(name: &str, text: &str) -> TempFile {
    let whole = if text.trim_start().starts_with("http") {
        let blank = if text.starts_with(char::is_whitespace) { "" } else { " " };
        format!("events {{}}{blank}{text}")
    } else {
        format!("events {{}} http {{ {text} }}")
    };
    TempFile::new(name, whole)
}

/// The stdout of a run that succeeded (the test fails with its stderr otherwise).
pub(crate) fn ok(out: &Output) -> String {
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The stdout of a run that succeeded, as one JSON document.
pub(crate) fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).unwrap()
}

/// The stdout of a run that succeeded, as JSON lines.
pub(crate) fn lines(out: &Output) -> Vec<Value> {
    ok(out).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Whatever stdout holds as JSON lines, whether the run succeeded or not (a run stopped part way).
pub(crate) fn stdout_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The stderr of a run refused as a usage or input error (exit 2).
pub(crate) fn fails(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(2), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr.clone()).unwrap()
}
