//! What the command writes and reads when the files and streams around it are hostile but fair: a
//! `--mismatches` or `--svg` path that is a device, a FIFO, a symbolic link or stdout; runs that share a
//! mismatch file; a stdout that is full or whose reader goes away; a key that never ends.
//!
//! Device nodes are made by the test in its own directory (with /dev/full's numbers), so even a regression
//! that replaced its target could never replace the machine's /dev/full.

use nginx_ketama_harness::testkit::{TempFile, skip};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

const CLI: &str = env!("CARGO_BIN_EXE_nginx-ketama");

/// A shim that always names the first peer: a wrong implementation, so `verify` finds mismatches.
const WRONG_SHIM: &str = r#"import sys, json
peers = []
for line in sys.stdin:
    m = json.loads(line)
    if m["op"] == "upstream":
        peers = m["peers"]
        out = {"ok": True}
    elif m["op"] == "reset":
        out = {"ok": True}
    else:
        out = {"attempts": [peers[0]["address"]], "outcome": "answered"}
    print(json.dumps(out), flush=True)
"#;

/// A fresh directory under the target directory: /tmp may be mounted `nodev`, where a device node made by
/// the test could not be opened.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("nk-files-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn c_path(path: &Path) -> std::ffi::CString {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap()
}

/// A character device at `path` with /dev/full's numbers (every write fails with ENOSPC); `false` when this
/// process may not make device nodes (not root).
fn mknod_full(path: &Path) -> bool {
    // SAFETY: mknod with a valid C string.
    unsafe { libc::mknod(c_path(path).as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 7)) == 0 }
}

fn is_full_device(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == libc::makedev(1, 7))
}

fn mkfifo(path: &Path) {
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c_path(path).as_ptr(), 0o600) }, 0, "{}", std::io::Error::last_os_error());
}

fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

/// Reads the FIFO at `path` to its end in a thread (which waits for a writer).
/// A reader of the FIFO `path` that has it open when this returns (so a writer that refuses a FIFO no
/// process is reading finds it: opening in the thread raced the writer, which then refused about one run in
/// fifteen), and reads everything the writer writes.
fn read_fifo(path: &Path) -> std::thread::JoinHandle<String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking: with no writer yet, a blocking open would wait for one.
    let mut f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).unwrap();
    std::thread::spawn(move || {
        let fd = f.as_raw_fd();
        // Linux reports POLLHUP to this reader only once a writer has come (the pipe's writer counter), so
        // poll waits for the writer's first bytes or its close; then read blocking, to the end.
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; fcntl on an open descriptor.
        unsafe {
            assert_eq!(libc::poll(&mut p, 1, -1), 1);
            let flags = libc::fcntl(fd, libc::F_GETFL);
            assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK), 0);
        }
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        s
    })
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

/// Runs `cmd` to its end, failing the test if it takes more than `limit` (a hang is a failure, not a
/// stuck test run).
fn output_within(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

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
        findings(&output_within(cmd, Duration::from_secs(120)))
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
    let run = |shim: &str| findings(&output_within(verify_shim(&version, shim, 30, &m), Duration::from_secs(120)));

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
            std::thread::spawn(move || findings(&output_within(cmd, Duration::from_secs(300))))
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

/// Before anything runs, `--mismatches` onto a file `verify` reads (the `--config` file or a file it
/// includes) or onto a directory is a usage error.
#[test]
fn mismatches_onto_an_input_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("up.inc"), "hash $arg_k consistent;\nserver 127.0.0.1:9001;\n").unwrap();
    std::fs::write(d.join("nginx.conf"), "events {}\nhttp {\n upstream app {\n  include up.inc;\n }\n}\n").unwrap();
    let before = std::fs::read(d.join("up.inc")).unwrap();
    let conf = d.join("nginx.conf");
    for (target, why) in [
        (conf.clone(), "it is an input of this command".to_string()),
        (d.join("up.inc"), "it is an input of this command".to_string()),
        (d.to_path_buf(), "it is a directory".to_string()),
    ] {
        let out = Command::new(CLI)
            .args(["verify", "--config"])
            .arg(&conf)
            .arg("--mismatches")
            .arg(&target)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("nginx-ketama: --mismatches: not writing {}: {why}\n", target.display())
        );
        assert!(out.stdout.is_empty(), "nothing ran");
    }
    assert_eq!(std::fs::read(d.join("up.inc")).unwrap(), before);
}

/// Issue 18, item 1 (the same class): `--svg` onto a device, a FIFO or a link writes through it, never
/// replacing it.
#[test]
fn svg_goes_through_what_is_not_a_regular_file() {
    let conf = TempFile::new(
        "nginx.conf",
        "events {}\nhttp { upstream a { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; } }\n",
    );
    let dir = scratch();
    let d = dir.path();
    let share = |svg: &Path| {
        let mut cmd = Command::new(CLI);
        cmd.args(["share", "--config"]).arg(&*conf).arg("--svg").arg(svg).stdin(Stdio::null());
        output_within(cmd, Duration::from_secs(60))
    };
    let full = d.join("full");
    if !mknod_full(&full) {
        skip("making a device node needs root");
        return;
    }
    let out = share(&full);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("nginx-ketama: writing {}: No space left on device (os error 28)\n", full.display())
    );
    assert!(is_full_device(&full));

    let fifo = d.join("fifo");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    let out = share(&fifo);
    assert!(out.status.success(), "share --svg FIFO: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(reader.join().unwrap().starts_with("<svg"));
    assert!(is_fifo(&fifo));

    let lonely = d.join("lonely");
    mkfifo(&lonely);
    let out = share(&lonely);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("it is a FIFO that no process is reading"));
    assert!(is_fifo(&lonely));

    std::os::unix::fs::symlink("ring.svg", d.join("link.svg")).unwrap();
    std::fs::write(d.join("ring.svg"), "old").unwrap();
    assert!(share(&d.join("link.svg")).status.success());
    assert!(std::fs::symlink_metadata(d.join("link.svg")).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(d.join("ring.svg")).unwrap().starts_with("<svg"));

    std::os::unix::fs::symlink("gone.svg", d.join("dangling.svg")).unwrap();
    let out = share(&d.join("dangling.svg"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a symbolic link to gone.svg, which does not exist"));

    let want: BTreeSet<String> =
        ["full", "fifo", "lonely", "link.svg", "ring.svg", "dangling.svg"].map(String::from).into();
    assert_eq!(names(d), want);
}

/// A child's stdout on /dev/full: the child holds only a descriptor, so nothing can replace the device.
fn dev_full() -> Stdio {
    Stdio::from(std::fs::File::options().write(true).open("/dev/full").unwrap())
}

/// Issue 18, item 13: an error writing stdout names stdout, for every command that writes it (exit 2;
/// 3 for `verify` and `replay-vectors`, whose codes 0 to 2 are verdicts), never a panic.
#[test]
fn errors_writing_stdout_name_stdout() {
    let conf = TempFile::new(
        "nginx.conf",
        "events {}\nhttp { upstream a { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; } }\n",
    );
    let c = conf.to_str().unwrap();
    let shim = format!("{CLI} shim");
    let commands: Vec<(Vec<&str>, i32)> = vec![
        (vec!["route", "--config", c], 2),
        (vec!["ring", "--config", c], 2),
        (vec!["explain", "--config", c, "k"], 2),
        (vec!["share", "--config", c], 2),
        (vec!["diff", "--from", c], 2),
        (vec!["forge", "--config", c, "--server", "127.0.0.1:9001"], 2),
        (vec!["compare", "--config", c, "--against", "pingora-ketama"], 2),
        (vec!["completions", "bash"], 2),
        (vec!["man"], 2),
        (vec!["resolve-hosts", "localhost"], 2),
        (vec!["replay-vectors", "--shim", &shim], 3),
    ];
    for (args, code) in commands {
        let mut cmd = Command::new(CLI);
        cmd.args(&args).stdin(std::fs::File::open(conf.parent().unwrap().join("nginx.conf")).unwrap());
        let out = cmd.stdout(dev_full()).stderr(Stdio::piped()).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "nginx-ketama: writing stdout: No space left on device\n",
            "{args:?}"
        );
    }
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

/// With an address-space limit of 1 GiB: an endless line cannot grow past it unnoticed.
fn limited(mut cmd: Command) -> Command {
    // SAFETY: setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 1 << 30, rlim_max: 1 << 30 };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Issue 18, item 10: one endless key (`/dev/zero`) on stdin or in `--keys` is an error naming its line,
/// within an address space of 1 GiB and a minute; a key of exactly the limit (16 MiB) is still read.
#[test]
fn an_endless_key_is_an_error_naming_its_line() {
    let conf = TempFile::new(
        "nginx.conf",
        "events {}\nhttp { upstream a { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; } }\n",
    );
    let c = conf.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("long.txt");
    let mut text = b"a\nb\n".to_vec();
    text.extend(std::iter::repeat_n(b'x', (16 << 20) + 1));
    text.push(b'\n');
    std::fs::write(&long, &text).unwrap();
    let limit = dir.path().join("limit.txt");
    std::fs::write(&limit, vec![b'y'; 16 << 20]).unwrap();
    let l = long.to_str().unwrap();
    let too_long = "a key longer than 16 MiB (16777216 bytes)";
    let cases: Vec<(Vec<&str>, Option<&str>, String)> = vec![
        (vec!["route", "--config", c], Some("/dev/zero"), format!("stdin:1: {too_long}")),
        (vec!["share", "--config", c, "--keys", "/dev/zero"], None, format!("/dev/zero:1: {too_long}")),
        (vec!["diff", "--from", c, "--keys", "/dev/zero"], None, format!("/dev/zero:1: {too_long}")),
        (
            vec!["compare", "--config", c, "--against", "pingora-ketama", "--keys", "/dev/zero"],
            None,
            format!("/dev/zero:1: {too_long}"),
        ),
        (vec!["share", "--config", c, "--keys", l], None, format!("{l}:3: {too_long}")),
        (vec!["route", "--config", c], Some(l), format!("stdin:3: {too_long}")),
        (vec!["shim"], Some("/dev/zero"), "stdin:1: a shim message longer than 64 MiB (67108864 bytes)".into()),
    ];
    for (args, stdin, message) in cases {
        let mut cmd = Command::new(CLI);
        cmd.args(&args);
        cmd.stdin(stdin.map_or_else(Stdio::null, |f| Stdio::from(std::fs::File::open(f).unwrap())));
        let out = output_within(limited(cmd), Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stderr), format!("nginx-ketama: {message}\n"), "{args:?}");
    }
    let mut cmd = Command::new(CLI);
    cmd.args(["share", "--config", c, "--format", "json", "--keys"]).arg(&limit).stdin(Stdio::null());
    let out = output_within(limited(cmd), Duration::from_secs(60));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["keys"]["total"], 1, "a key of exactly 16 MiB is read");
}

/// The peak resident set (VmHWM, KiB) of process `pid`.
fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap();
    line.trim().trim_end_matches(" kB").parse().unwrap()
}

/// Issue 18, item 10: `--keys` is streamed through the count, so memory does not grow with the file: three
/// million keys fit in the same few MiB as a thousand (held in memory, they took about 160 MiB more). The
/// keys come through a FIFO, so the peak is read while `share` still waits for the end of its input.
#[test]
fn keys_files_are_streamed() {
    use std::io::Write;
    let conf = TempFile::new(
        "nginx.conf",
        "events {}\nhttp { upstream a { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; } }\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("keys");
    mkfifo(&fifo);
    let peak = |n: usize| {
        let mut cmd = Command::new(CLI);
        cmd.args(["share", "--config"]).arg(&*conf).args(["--format", "json", "--keys"]).arg(&fifo);
        let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut keys = std::io::BufWriter::new(std::fs::File::options().write(true).open(&fifo).unwrap());
        for i in 0..n {
            writeln!(keys, "/item/{i}").unwrap();
        }
        keys.flush().unwrap();
        let kib = vm_hwm_kib(child.id());
        drop(keys);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["keys"]["total"], n, "every key counted");
        kib
    };
    let small = peak(1_000);
    let large = peak(3_000_000);
    assert!(large < small + 8 * 1024, "peak RSS {small} KiB for 1e3 keys, {large} KiB for 3e6 keys");
}
