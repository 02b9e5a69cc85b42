//! How the `nginx-ketama` command behaves as a Unix tool: `route` answers key by key in a pipeline, a reader
//! that stops early is not an error, a closed stdout is, output stays one line per record, and `verify`
//! tells usage errors and harness faults apart from mismatches by its exit code; shims that misbehave in
//! `replay-vectors`. Offline: what needs a provisioned nginx is in `shims_and_signals_live.rs`.

#[path = "support/common.rs"]
mod common;
#[path = "support/processes.rs"]
mod processes;

use common::{CLI, conf};
use nginx_ketama_harness::testkit::TempFile;
use processes::{Sleepers, marker, run_bounded, sleepers, wrong_shim};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `route --config conf` with piped stdin and stdout.
fn spawn_route(conf: &std::path::Path) -> std::process::Child {
    Command::new(CLI)
        .args(["route", "--config", conf.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

const THREE: &str = "upstream a { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; \
                     server 127.0.0.1:9003; }";

/// Each answer arrives before the next key is sent: `route` works as a coprocess in a pipeline.
#[test]
fn route_answers_each_key_as_it_arrives() {
    let conf = conf("three.conf", THREE);
    let mut child = spawn_route(&conf);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for key in ["k0", "k1", "k2"] {
        stdin.write_all(format!("{key}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["key"], key, "answer for {key} while stdin is still open");
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// `ring … | head -1` and `route … | head -1`: the reader goes away, the command ends quietly with 0.
#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    // 2 × 160 × 200 points: far more than a pipe buffer holds.
    let conf = conf(
        "big.conf",
        "upstream a { hash $arg_k consistent; server 127.0.0.1:9001 weight=200; server 127.0.0.1:9002 weight=200; }",
    );
    let c = conf.to_str().unwrap();
    for (args, input) in [(vec!["ring", "--config", c], Vec::new()), (vec!["route", "--config", c], keys(200_000))] {
        let mut child = Command::new(CLI)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(!first.is_empty());
        // The read end is closed here (like `head -1` exiting).
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        assert!(out.status.success(), "{args:?}: {:?}", out.status);
        assert!(out.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

fn keys(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| format!("key-{i}\n").into_bytes()).collect()
}

/// A closed stdout (`>&-`) is an error, said on stderr with exit code 2.
#[test]
fn a_closed_stdout_is_an_error() {
    let conf = conf("closed.conf", THREE);
    let mut cmd = Command::new(CLI);
    cmd.args(["ring", "--config", conf.to_str().unwrap()]).stderr(Stdio::piped());
    // SAFETY: close(2) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("nginx-ketama: ") && err.contains("Bad file descriptor"), "{err}");
}

/// Memory does not grow with the number of keys: route streams.
#[test]
fn route_memory_does_not_grow_with_the_input() {
    let conf = conf("stream.conf", THREE);
    let peak = |n: usize| -> u64 {
        let mut child = spawn_route(&conf);
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || stdin.write_all(&keys(n)).unwrap());
        let mut out = child.stdout.take().unwrap();
        let pid = child.id();
        let mut hwm = 0;
        let mut buf = vec![0; 1 << 16];
        while out.read(&mut buf).unwrap() > 0 {
            hwm = hwm.max(vm_hwm_kib(pid).unwrap_or(0));
        }
        feeder.join().unwrap();
        assert!(child.wait().unwrap().success());
        hwm
    };
    let small = peak(1_000);
    let large = peak(1_000_000);
    // A million keys (about 13 MB in, 90 MB out) fit in the same few MiB as a thousand.
    assert!(large < small + 4 * 1024, "peak RSS {small} KiB for 1e3 keys, {large} KiB for 1e6 keys");
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
}

/// A server string with a tab or a newline (nginx's `"\t"` and `"\n"` escapes in quotes) stays one line per
/// point in `ring`: control characters are escaped.
#[test]
fn ring_escapes_control_characters() {
    let conf = conf("tab.conf", "upstream a { hash $arg_k consistent; server \"x\\ty\\nz:80\"; }");
    let out = Command::new(CLI).args(["ring", "--config", conf.to_str().unwrap(), "--no-resolve"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 161, "a header and 160 points, one line each");
    assert!(rows[1..].iter().all(|r| r.split('\t').nth(2) == Some("x\\ty\\nz:80")), "{}", rows[1]);
}

fn verify(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(CLI).arg("verify").args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// `verify` refuses to claim a proof when nothing would be compared, and rejects impossible ranges.
#[test]
fn verify_usage_errors_exit_2() {
    let (code, _, err) = verify(&["--topologies", "0", "--stream-sessions", "0"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("nothing checked"), "{err}");
    let (code, _, err) = verify(&["--topologies", "3", "--only", "3"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--only 3 is out of range") && err.contains("0 to 2"), "{err}");
    for n in ["0", "1"] {
        let (code, _, err) = verify(&["--max-servers", n]);
        assert_eq!(code, Some(2), "--max-servers {n}");
        assert!(err.contains("at least 2 server lines"), "{err}");
    }
    let (code, _, err) = verify(&["--backend", "podman"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("possible values: auto, local, docker"), "{err}");
    let (code, _, err) = verify(&["--libc", "bionic"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("possible values: glibc, musl"), "{err}");
    let (code, _, err) = verify(&["--shim", "true", "--libc", "musl"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--shim proves glibc builds only"), "{err}");
}

/// An nginx that cannot run is a harness fault (exit 3), never a mismatch and never a pass: each topology
/// is reported with its cause, at most the last 20 lines of nginx's error log, and a replay command.
#[test]
fn a_harness_fault_is_reported_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("fake-nginx");
    let tree = root.join("1.30.6");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("version.txt"), "1.30.6-fake\n").unwrap();
    std::fs::write(tree.join("nginx-V.txt"), "nginx version: nginx/1.30.6\nconfigure arguments: --with-stream\n")
        .unwrap();
    // The harness tells a build's C library from its binary: this one claims glibc's symbol versions.
    std::fs::create_dir_all(tree.join("root/usr/sbin")).unwrap();
    std::fs::write(tree.join("root/usr/sbin/nginx"), "not ELF, but names memcpy@GLIBC_2.14\n").unwrap();
    let script = "#!/bin/sh\nfor i in $(seq 1 30); do echo \"nginx: [emerg] broken line $i\" >&2; done\nexit 1\n";
    let nginx = tree.join("nginx");
    std::fs::write(&nginx, script).unwrap();
    std::fs::set_permissions(&nginx, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let started = Instant::now();
    let (code, out, _) = verify(&[
        "--backend",
        "local",
        "--nginx-dir",
        root.to_str().unwrap(),
        "--topologies",
        "2",
        "--stream-sessions",
        "0",
        "--mismatches",
        tmp.path().join("none.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{out}");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(out.matches("harness fault: nginx 1.30.6").count(), 2, "{out}");
    assert!(out.contains("nginx exited during startup"), "{out}");
    assert!(out.contains("broken line 30") && !out.contains("broken line 10\n"), "the last 20 lines only:\n{out}");
    assert!(out.contains("[... 10 earlier lines]"), "{out}");
    assert!(
        out.contains("replay: nginx-ketama verify --backend local --versions 1.30.6 --seed 2026 --keys 3000 --only 1"),
        "{out}"
    );
    assert!(!out.contains("0 mismatches"), "a fault is never a pass:\n{out}");
    assert!(!tmp.path().join("none.jsonl").exists(), "no mismatch file for faults");
}

/// An executable script at `dir/name` with `body`.
fn script(dir: &std::path::Path, name: &str, body: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// `verify --nginx PATH` reads the version from `PATH -V` and refuses one this library does not model
/// (exit 2, the library's message), naming the build; a binary that is not nginx, or does not run, is a
/// harness fault (exit 3). Nothing is started in either case.
#[test]
fn verify_refuses_an_nginx_it_does_not_model() {
    let tmp = tempfile::tempdir().unwrap();
    // The harness tells the C library from the executable: this one names glibc's symbol versions.
    let old = script(tmp.path(), "nginx", "# memcpy@GLIBC_2.14\necho 'nginx version: nginx/1.16.1' >&2\n");
    let (code, out, err) = verify(&["--nginx", old.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        err.contains(&format!(
            "{}: nginx 1.16.1, glibc, no stream module: nginx 1.16.1 is not modelled: this build models nginx",
            old.display()
        )),
        "{err}"
    );
    assert!(out.is_empty(), "nothing run: {out}");
    let other = script(tmp.path(), "openresty", "echo 'nginx version: openresty/1.21.4.1' >&2\n");
    let (code, _, err) = verify(&["--nginx", other.to_str().unwrap()]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("not an nginx release of the form nginx/MAJOR.MINOR.PATCH"), "{err}");
    let (code, _, err) = verify(&["--nginx", tmp.path().join("absent").to_str().unwrap()]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("absent -V"), "{err}");
    let musl = script(tmp.path(), "musl", "# /lib/ld-musl-x86_64.so.1\necho 'nginx version: nginx/1.26.3' >&2\n");
    let (code, _, err) = verify(&["--nginx", musl.to_str().unwrap(), "--shim", "true"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--shim proves glibc builds only") && err.contains("nginx 1.26.3, musl"), "{err}");
    let (code, _, err) = verify(&["--nginx", old.to_str().unwrap(), "--versions", "1.26.3"]);
    assert_eq!(code, Some(2), "--nginx names the build; --versions picks provisioned ones: {err}");
    assert!(err.contains("cannot be used with"), "{err}");
}

/// `verify --image REF` never pulls: an image that is not present locally is an error naming it (exit 3).
#[test]
fn verify_never_pulls_an_image() {
    let (code, out, err) = verify(&["--image", "nginx-ketama/absent:0.0.0"]);
    assert_eq!(code, Some(3), "{out}{err}");
    let docker = Command::new("docker").args(["version"]).output().is_ok_and(|o| o.status.success());
    let want = if docker {
        "image nginx-ketama/absent:0.0.0 is not present locally (docker pull nginx-ketama/absent:0.0.0 first)"
    } else {
        "no Docker engine answers"
    };
    assert!(err.contains(want), "{err}");
}

/// Completions and the manual page come from the same definition as the command line.
#[test]
fn completions_and_man_page_are_generated() {
    let out = Command::new(CLI).args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(script.contains("complete -F _nginx__ketama") && script.contains("--stream-sessions"), "{script}");
    let out = Command::new(CLI).arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.starts_with(".ie") && page.contains(".TH nginx-ketama 1") && page.contains("verify"), "{page}");
}

/// The golden vectors replayed through a shim: the library behind the protocol passes them all (the failure
/// groups by protocol 2), a wrong implementation fails with one line per test (and, speaking protocol 1
/// only, leaves the failure groups not proven), and a shim that dies is a protocol fault (exit 1: the
/// implementation under test failed), not a pass.
#[test]
fn vectors_replay_through_a_shim() {
    let replay = |shim: &str| Command::new(CLI).args(["replay-vectors", "--shim", shim]).output().unwrap();
    let out = replay(&format!("{CLI} shim"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2769 passed, 0 failed, 485 skipped (groups that need musl's tie rule; shims model glibc)\n"
    );
    let (_file, wrong) = wrong_shim();
    let out = replay(&wrong);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap();
    let failed: usize = last.split(", ").nth(1).unwrap().trim_end_matches(" failed").parse().unwrap();
    assert!(failed > 1000 && text.contains("FAIL ") && last.contains(" failed, 485 skipped"), "{last}");
    assert!(last.ends_with(", 637 not proven (failure groups the shim answered unsupported: protocol 2)"), "{last}");
    // The reference shim with one rule changed fails the failure groups recorded from nginx.
    for mutation in ["no-give-back", "post-retried"] {
        let out = replay(&format!("{CLI} shim --mutation {mutation}"));
        assert_eq!(out.status.code(), Some(1), "{mutation}");
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text.lines().last().unwrap();
        assert!(!last.starts_with("2769 passed") && last.contains(" failed, 485 skipped"), "{mutation}: {last}");
    }
    let out = replay("true");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("protocol fault: ") && err.contains("exited (exit status: 0)"), "{err}");
}

/// A shim that answers nothing is a protocol fault (exit 1); one that says it does not support an upstream
/// is not proven (exit 3), with its reason.
#[test]
fn a_silent_or_unsupporting_shim_is_a_fault() {
    let unsupported = TempFile::new(
        "unsupported_shim.py",
        "import sys, json\nfor line in sys.stdin:\n    print(json.dumps({'unsupported': 'no such port'}), flush=True)\n",
    );
    let out = Command::new(CLI)
        .args(["replay-vectors", "--shim", &format!("python3 {}", unsupported.display())])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported by the shim"), "{out:?}");
    // Reads its input and never answers: the harness must not wait forever.
    let out = Command::new(CLI)
        .args(["replay-vectors", "--shim", "cat > /dev/null"])
        .env("NGINX_KETAMA_SHIM_TIMEOUT", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("protocol fault: ") && err.contains("gave no answer within 1 s"), "{err}");
}

// ---- Misbehaving shims, processes and signals (docs/reliability.md, "Processes, shims and signals") ----

/// `replay-vectors --shim SHIM FILES` with the answer timeout at 1 s (for shims that misbehave), bounded to
/// 60 s.
fn replay_bounded(shim: &str, files: &[&std::path::Path]) -> (Option<i32>, String, String) {
    replay_bounded_within(shim, files, "1")
}

/// [`replay_bounded`] with the answer timeout at `timeout` seconds: a shim expected to answer gets the
/// default's 60, since one second includes its start and fails a correct shim on a loaded machine.
fn replay_bounded_within(shim: &str, files: &[&std::path::Path], timeout: &str) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(CLI);
    cmd.args(["replay-vectors", "--shim", shim])
        .args(files)
        .env("NGINX_KETAMA_SHIM_TIMEOUT", timeout)
        .stdin(Stdio::null());
    let out = run_bounded(cmd, Duration::from_secs(60));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// A vector file holding one glibc group of `vectors/v1/plain.json`, recorded on one version: one shim
/// process replays it.
fn one_group_vectors(dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(nginx_ketama_harness::golden::vectors_dir().join("plain.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let groups = doc["testGroups"].as_array_mut().unwrap();
    let glibc = |g: &serde_json::Value| g["libc"].as_array().is_none_or(|l| l.iter().any(|x| x == "glibc"));
    let mut group = groups.iter().find(|g| glibc(g)).unwrap().clone();
    let first = group["source"]["versions"][0].clone();
    group["source"]["versions"] = serde_json::json!([first]);
    *groups = vec![group];
    let file = dir.join("one-group.json");
    std::fs::write(&file, serde_json::to_string(&doc).unwrap()).unwrap();
    file
}

/// A shim that writes part of a line and stalls is a protocol fault when the answer timeout runs out —
/// the timeout covers the whole line, not only its first byte — and the stalled shim is killed with what
/// it started; so is a shim that writes nothing.
#[test]
fn a_shim_that_stalls_is_a_protocol_fault_and_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let vectors = one_group_vectors(tmp.path());
    let m = marker();
    let _guard = Sleepers(m.clone());
    let (code, out, err) = replay_bounded(&format!("printf '{{\"ok\":tr'; sleep {m}; true"), &[&vectors]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("protocol fault: ")
            && err.contains(r#"gave no whole answer within 1 s: 8 bytes without a newline, "{\"ok\":tr""#),
        "{err}"
    );
    assert!(sleepers(&m).is_empty(), "the stalled shim's sleep still runs");
    let (code, _, err) = replay_bounded(&format!("sleep {m}; true"), &[&vectors]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("gave no answer within 1 s"), "{err}");
    assert!(sleepers(&m).is_empty(), "a timed-out shim's child still runs");
}

/// A shim that answers each message twice is one protocol fault, not a mismatch per request.
#[test]
fn a_shim_that_answers_twice_is_a_protocol_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let vectors = one_group_vectors(tmp.path());
    let twice = r#"while read l; do printf '%s\n%s\n' '{"ok":true}' '{"ok":true}'; done"#;
    let (code, out, err) = replay_bounded(twice, &[&vectors]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains(r#"wrote "{\"ok\":true}\n" that answers no message (one answer per message)"#), "{err}");
    assert!(!out.contains("FAIL"), "reported as mismatches:\n{out}");
}

/// An endless answer line is read up to the protocol's limit and no further: a protocol fault whose
/// message quotes 200 characters of it, not the line.
#[test]
fn an_endless_answer_is_cut_at_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let vectors = one_group_vectors(tmp.path());
    let (code, out, err) = replay_bounded(r"read l; yes a | tr -d '\n'", &[&vectors]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("wrote a line longer than 1048576 bytes (the protocol's limit for an answer)"), "{err}");
    assert!(out.len() + err.len() < 1000, "{} bytes of output", out.len() + err.len());
}

/// Answers that name an address no peer has, or more attempts than the upstream has peers (nginx tries a
/// peer at most once per request), are protocol faults.
#[test]
fn answers_naming_no_peer_are_protocol_faults() {
    let tmp = tempfile::tempdir().unwrap();
    let vectors = one_group_vectors(tmp.path());
    let shim = |attempts: &str| {
        let script = format!(
            "import sys, json\nfor line in sys.stdin:\n    m = json.loads(line)\n    if m['op'] == 'upstream':\n        \
             peers = [p['address'] for p in m['peers']]\n    out = {{'ok': True}} if m['op'] != 'request' else \
             {{'attempts': {attempts}, 'outcome': 'answered'}}\n    print(json.dumps(out), flush=True)\n"
        );
        let file = tmp.path().join(format!("shim{}.py", attempts.len()));
        std::fs::write(&file, script).unwrap();
        format!("python3 {}", file.display())
    };
    let (code, _, err) = replay_bounded(&shim("['192.0.2.1:80']"), &[&vectors]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(r#"answered the attempt "192.0.2.1:80", which is no peer's address"#), "{err}");
    let (code, _, err) = replay_bounded(&shim("peers * 2"), &[&vectors]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("attempts for an upstream of") && err.contains("at most once per request"), "{err}");
}

/// A shim that does not exit when its input ends (here: its shell goes on sleeping) does not survive a
/// passing run: its process tree is killed when the harness is done with it.
#[test]
fn a_shim_that_ignores_the_end_of_its_input_does_not_outlive_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let vectors = one_group_vectors(tmp.path());
    let m = marker();
    let _guard = Sleepers(m.clone());
    // `; true`: the shell waits for `sleep` instead of becoming it.
    let (code, out, err) = replay_bounded_within(&format!("{CLI} shim; sleep {m}; true"), &[&vectors], "60");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(" passed, 0 failed"), "{out}");
    assert!(sleepers(&m).is_empty(), "the shim's sleep outlived a passing run");
}

// ---- Shim protocol 2 (ports/SHIM.md, "Version 2"): failure kinds ----

/// A **protocol test, not a golden vector**: failure groups in the vector format, written by hand. Each group
/// has one peer, so the hash decides nothing (a `single` list goes to round robin, which returns its only
/// peer with no `tried` and no failure check: docs/nginx-algorithm.md §5), and each expectation follows from
/// §5 and §5.1 alone:
///
/// * `p2-stale-keepalive` (stateful, the clock advancing): the first request opens a connection (200) and
///   leaves it cached; the next GET meets it closed — an `error` on a cached connection, given back, so the
///   single peer is tried again on a new connection (§5.1 item 2): `["502", "200"]`. A POST on a stale
///   connection was sent, and `non_idempotent` is not listed: not retried, 502 (§5.1 item 3); the next POST
///   opens a new connection (200).
/// * `p2-single-502`: a listed 502 is a failure only when `pc.tries > 1`; a single peer's budget is 1, so the
///   502 is passed to the client (§5.1, statuses).
/// * `p2-single-timeout` (stateless): a read timeout with no budget left ends the request: 504 (§5.1 item 3).
fn protocol_2_groups() -> serde_json::Value {
    let peer = |answer: &str| {
        serde_json::json!([{"server": "127.0.3.1:9001", "address": "127.0.3.1:9001", "weight": 1, "down": false,
            "backup": false, "maxFails": 1, "failTimeout": 10, "refuses": false, "answer": answer}])
    };
    let group = |name: &str, stateful: bool, words: &[&str], answer: &str, tests: serde_json::Value| {
        serde_json::json!({"name": name, "method": "consistent", "libc": ["glibc"], "stateful": stateful,
            "source": {"name": "hand-written protocol test", "versions": ["1.30.6"]},
            "policy": {"nextUpstream": words, "tries": 0}, "peers": peer(answer), "tests": tests})
    };
    let test =
        |id: u32, method: &str, clock: Option<u32>, attempts: usize, outcome: &str, status: u16, ups: &[&str]| {
            let mut t = serde_json::json!({"tcId": id, "keyHex": "6b", "requestMethod": method,
            "attempts": vec!["127.0.3.1:9001"; attempts], "outcome": outcome, "status": status,
            "upstreamStatuses": ups});
            if let Some(c) = clock {
                t["clock"] = c.into();
            }
            t
        };
    serde_json::json!({"testGroups": [
        group("p2-stale-keepalive", true, &["error", "timeout"], "stale_keepalive", serde_json::json!([
            test(1, "GET", Some(0), 1, "answered", 200, &["200"]),
            test(2, "GET", Some(0), 2, "answered", 200, &["502", "200"]),
            test(3, "POST", Some(1), 1, "failed", 502, &["502"]),
            test(4, "POST", Some(1), 1, "answered", 200, &["200"]),
            test(5, "GET", Some(5), 2, "answered", 200, &["502", "200"]),
        ])),
        group("p2-single-502", true, &["error", "timeout", "http_502"], "http_502", serde_json::json!([
            test(6, "GET", None, 1, "answered", 502, &["502"]),
            test(7, "POST", None, 1, "answered", 502, &["502"]),
        ])),
        group("p2-single-timeout", false, &["error", "timeout", "non_idempotent"], "timeout", serde_json::json!([
            test(8, "GET", None, 1, "failed", 504, &["504"]),
            test(9, "POST", None, 1, "failed", 504, &["504"]),
        ])),
    ]})
}

/// [`protocol_2_groups`] in a vector file under `dir`, with `extra` groups after them.
fn protocol_2_file(dir: &std::path::Path, extra: &[serde_json::Value]) -> std::path::PathBuf {
    let mut doc = protocol_2_groups();
    doc["testGroups"].as_array_mut().unwrap().extend(extra.iter().cloned());
    let file = dir.join(format!("protocol-2-{}.json", extra.len()));
    std::fs::write(&file, serde_json::to_string(&doc).unwrap()).unwrap();
    file
}

/// The reference shim reproduces the hand-written failure groups; with one of nginx's rules changed
/// (`--mutation`: a stale connection's attempt not given back, `non_idempotent` ignored) it fails exactly
/// the tests that rule decides.
#[test]
fn protocol_2_failure_groups_replay_through_the_reference_shim() {
    let tmp = tempfile::tempdir().unwrap();
    let file = protocol_2_file(tmp.path(), &[]);
    let (code, out, err) = replay_bounded_within(&format!("{CLI} shim"), &[&file], "60");
    assert_eq!((code, out.as_str()), (Some(0), "9 passed, 0 failed\n"), "{err}");
    let failed_ids = |out: &str| -> Vec<String> {
        out.lines().filter(|l| l.starts_with("FAIL ")).map(|l| l.split(' ').nth(2).unwrap().to_string()).collect()
    };
    let (code, out, err) = replay_bounded_within(&format!("{CLI} shim --mutation no-give-back"), &[&file], "60");
    assert_eq!(code, Some(1), "{out}{err}");
    // From tcId 2 on, the cached connection is out of step: every later request of the group differs.
    assert_eq!(failed_ids(&out), ["tcId=2", "tcId=3", "tcId=4", "tcId=5"], "{out}");
    let stale = r#"tcId=2 nginx 1.30.6: expected ["127.0.3.1:9001", "127.0.3.1:9001"] answered 200 ["502", "200"], shim ["127.0.3.1:9001"] failed 502 ["502"]"#;
    assert!(out.contains(stale), "{out}");
    assert!(out.ends_with("5 passed, 4 failed\n"), "{out}");
    let (code, out, err) = replay_bounded_within(&format!("{CLI} shim --mutation post-retried"), &[&file], "60");
    assert_eq!(code, Some(1), "{out}{err}");
    // The POST retried on a new connection leaves one cached: the next POST meets it stale, and is retried.
    assert_eq!(failed_ids(&out), ["tcId=3", "tcId=4"], "{out}");
}

/// A shim that speaks protocol 1 answers a failure group `unsupported`: its tests are not proven, with the
/// reason — not passed, not failed, no fault; the protocol-1 groups beside them are still replayed. With
/// nothing else to replay, nothing is proven (exit 3).
#[test]
fn a_protocol_1_shim_leaves_failure_groups_not_proven() {
    let tmp = tempfile::tempdir().unwrap();
    let only = protocol_2_file(tmp.path(), &[]);
    let v1 = format!("{CLI} shim --mutation protocol-1");
    let (code, out, err) = replay_bounded_within(&v1, &[&only], "60");
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(
        out.contains("not proven: the shim speaks protocol 1")
            && out.contains(r#"protocol 2 (this shim speaks 1)"#)
            && out.ends_with(
                "0 passed, 0 failed, 9 not proven (failure groups the shim answered unsupported: protocol 2)\n"
            ),
        "{out}"
    );
    assert!(!err.contains("protocol fault"), "{err}");
    // Beside a protocol-1 group (one of vectors/v1/plain.json's), which still passes.
    let plain = one_group_vectors(tmp.path());
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plain).unwrap()).unwrap();
    let group = doc["testGroups"][0].clone();
    let n = group["tests"].as_array().unwrap().len();
    let mixed = protocol_2_file(tmp.path(), &[group]);
    let (code, out, err) = replay_bounded_within(&v1, &[&mixed], "60");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.ends_with(&format!(
            "{n} passed, 0 failed, 9 not proven (failure groups the shim answered unsupported: protocol 2)\n"
        )),
        "{out}"
    );
}

/// A shim that answers `{"ok":true}` to everything and each request with `answer`, logging every message
/// it gets to `log`.
fn logging_shim(dir: &std::path::Path, log: &std::path::Path, answer: &str) -> String {
    let script = format!(
        "import sys, json\nlog = open({log:?}, 'a')\nfor line in sys.stdin:\n    log.write(line); log.flush()\n    \
         m = json.loads(line)\n    out = {answer} if m['op'] == 'request' else {{'ok': True}}\n    \
         print(json.dumps(out), flush=True)\n"
    );
    let file = dir.join(format!("logging{}.py", answer.len()));
    std::fs::write(&file, script).unwrap();
    format!("python3 {}", file.display())
}

/// What the harness sends: protocol 2 with the group's policy and each peer's answer for a failure group,
/// each request with its method and, where the test has a clock, `now` = the upstream's `now` + clock; a
/// protocol-1 group exactly as before (no policy, requests with `keyHex` alone).
#[test]
fn protocol_2_messages_carry_policy_answers_methods_and_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = one_group_vectors(tmp.path());
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plain).unwrap()).unwrap();
    let file = protocol_2_file(tmp.path(), &[doc["testGroups"][0].clone()]);
    let log = tmp.path().join("messages.jsonl");
    let shim = logging_shim(
        tmp.path(),
        &log,
        "{'attempts': [], 'outcome': 'noLiveUpstreams', 'status': 502, 'upstreamStatuses': ['502']}",
    );
    let (code, out, err) = replay_bounded_within(&shim, &[&file], "60");
    assert_eq!(code, Some(1), "mismatches: {out}{err}");
    let messages: Vec<serde_json::Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let upstreams: Vec<&serde_json::Value> = messages.iter().filter(|m| m["op"] == "upstream").collect();
    assert_eq!(upstreams.len(), 4, "one per group and version");
    assert_eq!(upstreams[0]["protocol"], 2);
    assert_eq!(upstreams[0]["policy"], serde_json::json!({"nextUpstream": ["error", "timeout"], "tries": 0}));
    assert_eq!(upstreams[0]["peers"][0]["answer"], "stale_keepalive");
    assert_eq!(upstreams[0]["now"], 1_000_000_000u64);
    assert_eq!(upstreams[3]["protocol"], 1);
    assert!(upstreams[3].get("policy").is_none());
    let requests: Vec<&serde_json::Value> = messages.iter().filter(|m| m["op"] == "request").collect();
    let first: Vec<(String, Option<u64>)> = requests[..5]
        .iter()
        .map(|r| (r["method"].as_str().unwrap().to_string(), r.get("now").and_then(serde_json::Value::as_u64)))
        .collect();
    let t0 = 1_000_000_000;
    assert_eq!(
        first,
        [("GET", Some(t0)), ("GET", Some(t0)), ("POST", Some(t0 + 1)), ("POST", Some(t0 + 1)), ("GET", Some(t0 + 5))]
            .map(|(m, n)| (m.to_string(), n))
    );
    assert_eq!((requests[5]["method"].as_str(), requests[5].get("now")), (Some("GET"), None), "no clock, no now");
    for r in &requests[9..] {
        let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["keyHex", "op"], "a protocol-1 request: {r}");
    }
}

/// Under protocol 2 an answer must carry the client's status and `$upstream_status`: one without is a
/// protocol fault that says what is missing, as is one with more attempts than twice the peers.
#[test]
fn a_protocol_2_answer_without_statuses_is_a_protocol_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let file = protocol_2_file(tmp.path(), &[]);
    let log = tmp.path().join("log.jsonl");
    let cases = [
        ("{'attempts': ['127.0.3.1:9001'], 'outcome': 'answered'}", r#"no "status""#),
        ("{'attempts': ['127.0.3.1:9001'], 'outcome': 'answered', 'status': 200}", r#"no "upstreamStatuses" list"#),
        (
            "{'attempts': ['127.0.3.1:9001'] * 3, 'outcome': 'answered', 'status': 200, 'upstreamStatuses': ['200']}",
            "answered 3 attempts for a protocol-2 upstream of 1 peers",
        ),
    ];
    for (answer, says) in cases {
        let (code, out, err) = replay_bounded_within(&logging_shim(tmp.path(), &log, answer), &[&file], "60");
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(err.contains("protocol fault: ") && err.contains(says), "{says}: {err}");
        assert!(!out.contains("FAIL"), "reported as mismatches:\n{out}");
    }
    // Two attempts at one peer are within the limit (a stale connection gives an attempt back): a mismatch.
    let two = "{'attempts': ['127.0.3.1:9001'] * 2, 'outcome': 'answered', 'status': 200, 'upstreamStatuses': ['502', '200']}";
    let (code, out, err) = replay_bounded_within(&logging_shim(tmp.path(), &log, two), &[&file], "60");
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("FAIL ") && !err.contains("protocol fault"), "{out}{err}");
}
