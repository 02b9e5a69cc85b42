//! `verify` and its shims on a provisioned nginx (moved from `cli_io.rs`, whose offline half stays there):
//! a shim that breaks the protocol stops the run, a shim's mismatch names the shim's answer, and a run
//! stopped by a signal, killed, or unable to set up its namespace leaves nothing behind. Each test skips
//! through the shared helper (`testkit::newest_glibc_or_skip`; a failure under `NGINX_PARITY=require`).

#[path = "support/common.rs"]
mod common;
#[path = "support/processes.rs"]
mod processes;
#[path = "support/schemas.rs"]
mod schemas;

use common::{CLI, conf};
use processes::{Sleepers, marker, run_bounded, sleepers, wait_bounded, within, wrong_shim};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The newest provisioned glibc build, or a skip (a failure under `NGINX_PARITY=require`).
fn provisioned_glibc() -> Option<nginx_ketama_harness::nginx::install::Installation> {
    nginx_ketama_harness::testkit::newest_glibc_or_skip()
}

/// `verify --shim` on the newest provisioned build with `args` and the answer timeout `timeout`, bounded.
fn verify_shim(shim: &str, timeout: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let install = provisioned_glibc().expect("checked by the caller");
    let mut cmd = Command::new(CLI);
    cmd.args(["verify", "--backend", "local", "--versions", &install.version.to_string(), "--shim", shim])
        .args(args)
        .env("NGINX_KETAMA_SHIM_TIMEOUT", timeout)
        .stdin(Stdio::null());
    let out = run_bounded(cmd, Duration::from_secs(120));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// A shim that breaks the protocol stops `verify` at the first fault (a hung shim would otherwise cost the
/// timeout on every topology); `--keep-going` runs the rest. Either way the exit code is 1: the
/// implementation under test failed.
#[test]
fn verify_stops_at_the_first_protocol_fault() {
    if provisioned_glibc().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mismatches = tmp.path().join("m.jsonl");
    let args = ["--topologies", "3", "--keys", "100", "--stream-sessions", "10", "--mismatches"];
    let mut args = args.to_vec();
    args.push(mismatches.to_str().unwrap());
    let (code, out, err) = verify_shim("cat > /dev/null", "1", &args);
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(out.matches("\nprotocol fault: nginx ").count(), 1, "{out}");
    assert!(out.contains("gave no answer within 1 s") && out.contains("stopped at the first protocol fault"), "{out}");
    args.push("--keep-going");
    let (code, out, err) = verify_shim("cat > /dev/null", "1", &args);
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(out.matches("\nprotocol fault: nginx ").count(), 4, "3 topologies and the stream check:\n{out}");
    assert!(!out.contains("stopped at the first"), "{out}");
    assert!(!mismatches.exists(), "a protocol fault is no mismatch");
}

/// In `--shim` mode a mismatch names the shim's answer as the shim's, on stdout and in the mismatch file.
#[test]
fn a_shim_mismatch_names_the_shims_answer() {
    if provisioned_glibc().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mismatches = tmp.path().join("m.jsonl");
    let (_file, wrong) = wrong_shim();
    let args = ["--topologies", "1", "--keys", "200", "--stream-sessions", "0", "--mismatches"];
    let mut args = args.to_vec();
    args.push(mismatches.to_str().unwrap());
    let (code, out, err) = verify_shim(&wrong, "30", &args);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains(": shim 200 \"") && out.contains(", nginx 200 \""), "{out}");
    assert!(!out.contains(": expected "), "{out}");
    let text = std::fs::read_to_string(&mismatches).unwrap();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v.get("shim").is_some() && v.get("expected").is_none(), "{line}");
        assert_eq!(v["shim_command"], wrong.as_str());
        assert_eq!(schemas::check(&v), "nginx-ketama/mismatch/v1");
    }
}

/// Every process descended from `pid`, with its start time.
fn descendants(pid: i32) -> Vec<(i32, u64)> {
    let all: Vec<(i32, nginx_ketama_harness::nginx::owner::Stat)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|p| Some((p, nginx_ketama_harness::nginx::owner::stat(p)?)))
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(all.iter().filter(|(_, s)| s.ppid == parent).map(|(p, _)| *p));
        i += 1;
    }
    all.iter().filter(|(p, _)| *p != pid && found.contains(p)).map(|(p, s)| (*p, s.start)).collect()
}

fn running(pid: i32, start: u64) -> bool {
    nginx_ketama_harness::nginx::owner::stat(pid).is_some_and(|s| s.start == start && s.running())
}

fn is_worker(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains("worker process"))
}

/// A `verify --shim` run caught while nginx runs and its hung shim waits (a shim that also started a
/// process in a session of its own, which ignores SIGHUP and SIGTERM): the run, and everything it started.
fn a_busy_verify(m: &str, tmp: &std::path::Path) -> (std::process::Child, Vec<(i32, u64)>) {
    let install = provisioned_glibc().expect("checked by the caller");
    let shim = format!("(trap '' HUP TERM INT; setsid sleep {m}) & sleep {m}; true");
    let mut child = Command::new(CLI)
        .args(["verify", "--backend", "local", "--versions", &install.version.to_string(), "--topologies", "1"])
        .args(["--keys", "50", "--stream-sessions", "0", "--shim", &shim, "--mismatches"])
        .arg(tmp.join("m.jsonl"))
        .env("NGINX_KETAMA_SHIM_TIMEOUT", "300")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let started = within(Duration::from_secs(60), || {
        sleepers(m).len() == 2 && descendants(pid).iter().any(|&(p, _)| is_worker(p))
            || child.try_wait().unwrap().is_some()
    });
    if !started || child.try_wait().unwrap().is_some() {
        let out = wait_bounded(child, Duration::from_secs(10));
        panic!(
            "nginx's worker and the shim's two sleeps did not start:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut all = descendants(pid);
    for p in sleepers(m) {
        if let Some(s) = nginx_ketama_harness::nginx::owner::stat(p) {
            all.push((p, s.start));
        }
    }
    (child, all)
}

/// The scratch directories of run `pid` (`/tmp/nk-<pid>-N`, `/tmp/nk-oc-<pid>-N`).
fn scratch_of(pid: i32) -> Vec<std::path::PathBuf> {
    let mine = |name: &str| {
        let rest = name.strip_prefix("nk-").map(|r| r.strip_prefix("oc-").unwrap_or(r));
        rest.and_then(|r| r.split_once('-')).is_some_and(|(p, _)| p == pid.to_string())
    };
    nginx_ketama_harness::nginx::scratch::PLACES
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(mine))
        .map(|e| e.path())
        .collect()
}

/// `SIGTERM` or `SIGINT` to a running `verify`: it kills everything it started — nginx's master and
/// worker, the shim and what the shim started, even in a session of its own — removes its scratch
/// directories and exits 143 or 130.
#[test]
fn verify_stopped_by_a_signal_leaves_nothing_behind() {
    if provisioned_glibc().is_none() {
        return;
    }
    if !nginx_ketama_harness::nginx::netns::available() {
        nginx_ketama_harness::testkit::skip("not root: a shim's process in a session of its own survives");
        return;
    }
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let m = marker();
        let _guard = Sleepers(m.clone());
        let tmp = tempfile::tempdir().unwrap();
        let (child, started) = a_busy_verify(&m, tmp.path());
        let pid = child.id() as i32;
        assert!(!scratch_of(pid).is_empty(), "the run has scratch directories");
        // SAFETY: a signal to the child this test started.
        unsafe { libc::kill(pid, signal) };
        let out = wait_bounded(child, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert!(err.contains("stopped by SIG") && err.contains("killed 2 process trees"), "{err}");
        let left = || started.iter().filter(|&&(p, s)| running(p, s)).count();
        assert!(within(Duration::from_secs(5), || left() == 0), "{} processes outlived signal {signal}", left());
        assert_eq!(scratch_of(pid), Vec::<std::path::PathBuf>::new(), "scratch directories left");
    }
}

/// `SIGKILL` to a running `verify` (no handler runs): as root, nginx's worker and everything the shim
/// started die with it all the same (each process tree is a PID namespace whose keeper dies with the
/// run); the scratch directories it could not remove are removed by `nginx-ketama cleanup`, which says so.
#[test]
fn verify_killed_leaves_nothing_running() {
    if provisioned_glibc().is_none() {
        return;
    }
    if !nginx_ketama_harness::nginx::netns::available() {
        nginx_ketama_harness::testkit::skip("not root: without PID namespaces a SIGKILLed run can leave a worker");
        return;
    }
    let m = marker();
    let _guard = Sleepers(m.clone());
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, started) = a_busy_verify(&m, tmp.path());
    let pid = child.id() as i32;
    child.kill().unwrap();
    let out = wait_bounded(child, Duration::from_secs(30));
    assert_eq!(out.status.signal(), Some(libc::SIGKILL));
    let left = || started.iter().filter(|&&(p, s)| running(p, s)).count();
    assert!(within(Duration::from_secs(5), || left() == 0), "{} processes outlived SIGKILL", left());
    let dirs = scratch_of(pid);
    assert!(!dirs.is_empty(), "a SIGKILLed run cannot remove its directories");
    let out = Command::new(CLI).arg("cleanup").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for d in &dirs {
        assert!(!d.exists() && text.contains(&format!("removed {} (its run is gone)", d.display())), "{text}");
    }
}

/// A `verify --config` whose namespace cannot be set up (here: no `sleep` to hold it, with an empty
/// `PATH`) is a harness fault that leaves no scratch directory behind.
#[test]
fn a_namespace_setup_error_leaves_no_scratch_directory() {
    if provisioned_glibc().is_none() {
        return;
    }
    if !nginx_ketama_harness::nginx::netns::available() {
        nginx_ketama_harness::testkit::skip("not root: verify --config makes no namespace");
        return;
    }
    let install = provisioned_glibc().unwrap();
    let conf = conf("setup.conf", "upstream a { hash $arg_k consistent; server 10.9.8.7:80; server 10.9.8.6:80; }");
    let empty = tempfile::tempdir().unwrap();
    let child = Command::new(CLI)
        .args(["verify", "--config", conf.to_str().unwrap(), "--versions", &install.version.to_string()])
        .args(["--libc", "glibc", "--keys", "10", "--failure-runs", "0"])
        .env("PATH", empty.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let out = wait_bounded(child, Duration::from_secs(120));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("creating the private network and mount namespaces"), "{err}");
    assert_eq!(scratch_of(pid), Vec::<std::path::PathBuf>::new(), "scratch directories left");
}
