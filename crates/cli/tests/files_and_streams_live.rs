//! What `verify` writes when the files and streams around it are hostile but fair, on a provisioned nginx
//! (moved from `files_and_streams.rs`, whose offline half stays there): a `--mismatches` path that is a
//! device, a FIFO, a symbolic link or stdout; runs that share a mismatch file; a stdout that is full or
//! whose reader goes away. Each test skips through the shared helper (`testkit::newest_glibc_or_skip`; a
//! failure under `NGINX_PARITY=require`).

#[path = "support/common.rs"]
mod common;
#[path = "support/files.rs"]
mod files;
#[path = "support/processes.rs"]
mod processes;

use common::CLI;
use files::{dev_full, is_fifo, is_full_device, mkfifo, mknod_full, names, read_fifo, scratch};
use nginx_ketama_harness::testkit::{TempFile, skip};
use processes::{WRONG_SHIM, run_bounded};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

/// The newest provisioned glibc build's version, or `None` after a loud skip.
fn local_version() -> Option<String> {
    nginx_ketama_harness::testkit::newest_glibc_or_skip().map(|i| i.version.to_string())
}

/// `verify` of `shim` on one small topology of the local nginx `version` (`keys` random keys, no ring proof,
/// no stream check: about half a second), mismatches to `mismatches`.
fn verify_shim(version: &str, shim: &str, keys: usize, mismatches: &Path) -> Command {
    let mut cmd = Command::new(CLI);
    cmd.args(["verify", "--backend", "local", "--versions", version, "--topologies", "1", "--no-ring-proof"])
        .args(["--stream-sessions", "0", "--keys", &keys.to_string(), "--shim", shim, "--mismatches"])
        .arg(mismatches)
        .stdin(Stdio::null());
    cmd
}

/// A run of `verify` with findings: its exit code, what it printed, and its message
/// `N mismatches; all of them are in FILE (run ID)` read back as (N, FILE, ID).
struct Findings {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    saved: Option<(usize, String, String)>,
}

fn findings(out: &Output) -> Findings {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let saved = stdout.lines().find_map(|l| {
        let (n, rest) = l.split_once(" mismatches; all of them are in ")?;
        let (file, run) = rest.rsplit_once(" (run ")?;
        Some((n.parse().ok()?, file.to_string(), run.strip_suffix(')')?.to_string()))
    });
    Findings { code: out.status.code(), stdout, stderr: String::from_utf8_lossy(&out.stderr).into_owned(), saved }
}

/// The `run` of every line of a mismatch file's text.
fn runs_of(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line")["run"].as_str().unwrap().into())
        .collect()
}

/// Issue 18, item 1: `--mismatches` onto a device, a FIFO, a symbolic link or stdout writes through it (or
/// says why it cannot) and never replaces it; no temporary file is left.
#[test]
fn mismatches_go_through_what_is_not_a_regular_file() {
    let Some(version) = local_version() else { return };
    let shim_file = TempFile::new("wrong_shim.py", WRONG_SHIM);
    let wrong = format!("python3 {}", shim_file.display());
    let dir = scratch();
    let d = dir.path();
    let run = |target: &Path, stdout: Stdio| {
        let mut cmd = verify_shim(&version, &wrong, 30, target);
        cmd.stdout(stdout);
        findings(&run_bounded(cmd, Duration::from_secs(120)))
    };

    // A device whose every write fails (/dev/full's numbers): the error names it; the node stays.
    let full = d.join("full");
    if !mknod_full(&full) {
        skip("making a device node needs root");
        return;
    }
    let f = run(&full, Stdio::piped());
    assert_eq!(f.code, Some(1), "{}{}", f.stdout, f.stderr);
    assert!(
        f.stderr.contains(&format!("nginx-ketama: writing {}: No space left on device", full.display())),
        "{}",
        f.stderr
    );
    assert!(f.saved.is_none(), "no claim that the mismatches were saved:\n{}", f.stdout);
    assert!(is_full_device(&full), "the device node is still a device node");

    // A FIFO with a waiting reader: the reader gets every line; the FIFO stays.
    let fifo = d.join("fifo");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    let f = run(&fifo, Stdio::piped());
    let (n, file, id) = f.saved.unwrap_or_else(|| panic!("{}{}", f.stdout, f.stderr));
    assert_eq!(file, fifo.display().to_string());
    let runs = runs_of(&reader.join().unwrap());
    assert_eq!(runs.len(), n);
    assert!(runs.iter().all(|r| *r == id));
    assert!(is_fifo(&fifo));

    // A FIFO nobody reads: an error at once, not a wait for a reader that never comes.
    let lonely = d.join("lonely");
    mkfifo(&lonely);
    let f = run(&lonely, Stdio::piped());
    assert_eq!(f.code, Some(1));
    assert!(
        f.stderr.contains(&format!("not writing {}: it is a FIFO that no process is reading", lonely.display())),
        "{}",
        f.stderr
    );
    assert!(is_fifo(&lonely));

    // A symbolic link stays a link; its target holds the file.
    std::fs::write(d.join("real.jsonl"), "old\n").unwrap();
    let link = d.join("link.jsonl");
    std::os::unix::fs::symlink("real.jsonl", &link).unwrap();
    let f = run(&link, Stdio::piped());
    let (n, _, id) = f.saved.unwrap_or_else(|| panic!("{}{}", f.stdout, f.stderr));
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("real.jsonl"));
    let runs = runs_of(&std::fs::read_to_string(d.join("real.jsonl")).unwrap());
    assert!(runs.len() == n && runs.iter().all(|r| *r == id));

    // A link to the process's own stdout (what /dev/stdout is): the lines go to stdout; the link stays.
    let stdout = d.join("stdout");
    std::os::unix::fs::symlink("/proc/self/fd/1", &stdout).unwrap();
    let f = run(&stdout, Stdio::piped());
    let (n, _, id) = f.saved.as_ref().unwrap_or_else(|| panic!("{}{}", f.stdout, f.stderr));
    let on_stdout = f.stdout.lines().filter(|l| l.starts_with('{')).collect::<Vec<_>>().join("\n");
    let runs = runs_of(&on_stdout);
    assert!(runs.len() == *n && runs.iter().all(|r| r == id), "{}", f.stdout);
    assert_eq!(std::fs::read_link(&stdout).unwrap(), Path::new("/proc/self/fd/1"));

    let want: BTreeSet<String> =
        ["full", "fifo", "lonely", "real.jsonl", "link.jsonl", "stdout"].map(String::from).into();
    assert_eq!(names(d), want, "no temporary file left, nothing replaced");
}

/// Issue 18, item 2: a mismatch file holds the findings of one run, which each line names (as does the
/// message that points to it); a passing run removes an earlier run's file and says so, but keeps one
/// written while it ran and anything that is not a mismatch file.
#[test]
fn a_mismatch_file_belongs_to_one_run() {
    let Some(version) = local_version() else { return };
    let shim_file = TempFile::new("wrong_shim.py", WRONG_SHIM);
    let wrong = format!("python3 {}", shim_file.display());
    let good = format!("{CLI} shim");
    let dir = scratch();
    let m = dir.path().join("m.jsonl");
    let run = |shim: &str| findings(&run_bounded(verify_shim(&version, shim, 30, &m), Duration::from_secs(120)));

    let f = run(&wrong);
    assert_eq!(f.code, Some(1));
    let (n, file, id) = f.saved.unwrap_or_else(|| panic!("{}{}", f.stdout, f.stderr));
    assert_eq!(file, m.display().to_string());
    // `2026-05-01T10:15:02Z pid 4242`: when the run started, and its process.
    let (started, pid) = id.split_once(" pid ").unwrap_or_else(|| panic!("{id}"));
    assert!(started.len() == 20 && started.as_bytes()[10] == b'T' && started.ends_with('Z'), "{id}");
    assert!(pid.parse::<u32>().is_ok(), "{id}");
    let text = std::fs::read_to_string(&m).unwrap();
    assert_eq!(runs_of(&text), vec![id.clone(); n]);

    let f = run(&good);
    assert_eq!(f.code, Some(0), "{}{}", f.stdout, f.stderr);
    assert!(
        f.stdout.contains(&format!("removed {}: it held the mismatches of an earlier run (run {id})", m.display())),
        "{}",
        f.stdout
    );
    assert!(!m.exists());

    // Written "while the run ran": its modification time is after the run's start.
    std::fs::write(&m, &text).unwrap();
    let later = SystemTime::now() + Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&m).unwrap().set_modified(later).unwrap();
    let f = run(&good);
    assert_eq!(f.code, Some(0));
    assert!(f.stdout.contains("written while this run ran; left in place"), "{}", f.stdout);
    assert_eq!(std::fs::read_to_string(&m).unwrap(), text);

    // Not a mismatch file: never touched.
    std::fs::write(&m, "my notes\n").unwrap();
    let f = run(&good);
    assert_eq!(f.code, Some(0));
    assert_eq!(std::fs::read_to_string(&m).unwrap(), "my notes\n", "{}", f.stdout);
    assert_eq!(names(dir.path()), BTreeSet::from(["m.jsonl".to_string()]));
}

/// Issue 18, item 2: runs that share a mismatch file at the same time each write a whole file of their own
/// (no lost lines, no torn line, no "No such file or directory"); the file left is one run's, all of it.
#[test]
fn concurrent_runs_never_mix_their_mismatch_files() {
    let Some(version) = local_version() else { return };
    let shim_file = TempFile::new("wrong_shim.py", WRONG_SHIM);
    let wrong = format!("python3 {}", shim_file.display());
    let dir = scratch();
    let m = dir.path().join("m.jsonl");
    let runs: Vec<_> = [40, 80, 120, 160]
        .into_iter()
        .map(|keys| {
            let cmd = verify_shim(&version, &wrong, keys, &m);
            std::thread::spawn(move || findings(&run_bounded(cmd, Duration::from_secs(300))))
        })
        .collect();
    let saved: Vec<(usize, String, String)> = runs
        .into_iter()
        .map(|r| {
            let f = r.join().unwrap();
            assert_eq!(f.code, Some(1), "{}{}", f.stdout, f.stderr);
            f.saved.unwrap_or_else(|| panic!("{}{}", f.stdout, f.stderr))
        })
        .collect();
    let runs = runs_of(&std::fs::read_to_string(&m).unwrap());
    let (n, _, id) = saved.iter().find(|(_, _, id)| *id == runs[0]).expect("the file is one of the runs'");
    assert_eq!(runs, vec![id.clone(); *n], "all of that run's lines and no other's");
    assert_eq!(names(dir.path()), BTreeSet::from(["m.jsonl".to_string()]), "no temporary file left");
}

/// Issue 18, item 13: an error writing stdout names stdout for `verify` too (exit 3, whose codes 0 to 2 are
/// verdicts), never a panic (the offline commands: `files_and_streams`'s `errors_writing_stdout_name_stdout`).
#[test]
fn verify_errors_writing_stdout_name_stdout() {
    let shim = format!("{CLI} shim");
    let Some(version) = local_version() else { return };
    let dir = scratch();
    let mut cmd = verify_shim(&version, &shim, 30, &dir.path().join("m.jsonl"));
    let out = cmd.stdout(dev_full()).stderr(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).ends_with("nginx-ketama: writing stdout: No space left on device\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 18, item 13: when stdout's reader goes away, `verify` (whose exit code is its verdict) ends the
/// way `cat` does, killed by SIGPIPE: quietly, and never with an exit code that reads as a verdict. (The
/// offline commands end with 0: `cli_io`'s `a_reader_that_stops_early_is_not_an_error`.)
#[test]
fn verify_ends_by_sigpipe_when_its_reader_goes_away() {
    let Some(version) = local_version() else { return };
    let dir = scratch();
    let mut cmd = verify_shim(&version, &format!("{CLI} shim"), 30, &dir.path().join("m.jsonl"));
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("implementation under test"), "{first}");
    // The read end is closed here (like `head -1` exiting).
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}
