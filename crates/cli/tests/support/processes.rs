//! Running the binary under watch (included with `#[path]`): bounded runs (a hang fails the test instead
//! of stalling the run), the processes a test started (`sleep MARKER`), and a wrong shim.
#![allow(dead_code)]

use nginx_ketama_harness::testkit::TempFile;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A number for `sleep` that no other process has in its command line: `sleep MARKER` finds the processes a
/// test started, and only those.
pub(crate) fn marker() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!("900.{}{:03}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The processes whose command line is exactly `sleep MARKER`.
pub(crate) fn sleepers(marker: &str) -> Vec<i32> {
    let wanted = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted.as_bytes()))
        .filter(|&pid| nginx_ketama_harness::nginx::owner::stat(pid).is_some_and(|s| s.running()))
        .collect()
}

/// Kills, when dropped, whatever `sleep MARKER` a failed test leaves (its own processes only).
pub(crate) struct Sleepers(pub(crate) String);

impl Drop for Sleepers {
    fn drop(&mut self) {
        for pid in sleepers(&self.0) {
            // SAFETY: a process whose command line carries this test's own marker.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Whether `done` holds within `limit` (looked at every 20 ms).
pub(crate) fn within(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `cmd` (stdout and stderr piped, stdin as `cmd` has it) to its end, or fails the test (killing it) if it is still running after `limit`: a hang is
/// a failure, not a stuck test run.
pub(crate) fn run_bounded(mut cmd: Command, limit: Duration) -> std::process::Output {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_bounded(child, limit)
}

/// Waits for `child` (stdout and stderr piped) to exit, or fails the test (killing it) after `limit`; its
/// output is what it wrote by then — a process it left behind holding the pipes cannot block the test.
pub(crate) fn wait_bounded(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    use std::sync::{Arc, Mutex};
    let drain = |mut r: Box<dyn Read + Send>| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        (buf, reader)
    };
    let (out, out_reader) = drain(Box::new(child.stdout.take().unwrap()));
    let (err, err_reader) = drain(Box::new(child.stderr.take().unwrap()));
    let mut status = None;
    let ended = within(limit, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if !ended {
        let _ = child.kill();
        let _ = child.wait();
        panic!("still running after {limit:?}: a hang");
    }
    within(Duration::from_secs(2), || out_reader.is_finished() && err_reader.is_finished());
    let take = |b: &Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *b.lock().unwrap());
    std::process::Output { status: status.unwrap(), stdout: take(&out), stderr: take(&err) }
}

/// A shim that always names the first peer: a wrong implementation the proof must catch (`verify` finds
/// mismatches). It speaks protocol 1 only: a protocol-2 upstream (failure kinds) is `unsupported`.
pub(crate) const WRONG_SHIM: &str = r#"import sys, json
peers = []
for line in sys.stdin:
    m = json.loads(line)
    if m["op"] == "upstream" and m.get("protocol", 1) != 1:
        out = {"unsupported": "protocol %s (this shim speaks 1)" % m["protocol"]}
    elif m["op"] == "upstream":
        peers = m["peers"]
        out = {"ok": True}
    elif m["op"] == "reset":
        out = {"ok": True}
    else:
        out = {"attempts": [peers[0]["address"]], "outcome": "answered"}
    print(json.dumps(out), flush=True)
"#;

/// The wrong shim's file (kept while the returned value lives) and the command that runs it.
pub(crate) fn wrong_shim() -> (TempFile, String) {
    let file = TempFile::new("wrong_shim.py", WRONG_SHIM);
    let command = format!("python3 {}", file.display());
    (file, command)
}
