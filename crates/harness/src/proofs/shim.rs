//! Any implementation, in any language, proven through a shim: a program that speaks the line protocol
//! described in `ports/SHIM.md` (JSON lines on stdin and stdout) answers instead of this library, in the live
//! proof (`verify --shim CMD`) and in the offline replay of the golden vectors (`replay-vectors --shim CMD`).
//!
//! The harness sends one `upstream` message per topology (a fresh worker), then one `request` per key in
//! nginx's order; `reset` gives a fresh worker for the same upstream (stateless vector groups). The shim
//! answers each message with exactly one line, within `$NGINX_KETAMA_SHIM_TIMEOUT` for the whole exchange
//! (writing the message, reading the whole line), and at most [`MAX_ANSWER`] bytes long. Anything else — an
//! `error` answer, a line that is not an answer, a line too long, no whole line in time, a line nobody asked
//! for, an attempt that is no peer's address, an exit — is a [`ProtocolFault`]: the implementation under
//! test failed, never a pass and never the harness's fault. `unsupported` (with its reason) is reported
//! apart, as rustls's BoGo shim does. The shim runs as a [`ProcessTree`]: whatever it starts is killed with
//! it when the harness is done with it, whichever way.

use crate::golden::{PeerRecord, peers_of, upstream_of_peers};
use crate::nginx::tree::ProcessTree;
use crate::run::observation::{Observation, Outcome};
use crate::run::parity::{Model, RUN_CLOCK, clip};
use crate::site::topology::{Topology, UPSTREAM};
use anyhow::{Context, Result, bail};
use nginx_ketama::upstream::Method;
use nginx_ketama::version::NginxVersion;
use serde_json::{Value, json};
use std::io::{BufRead, Read, Write};
use std::os::fd::AsRawFd;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The protocol version this harness speaks (`ports/SHIM.md`).
pub const PROTOCOL: u32 = 1;

/// The longest answer the harness reads, in bytes without the newline; a longer line is a protocol fault.
/// Far above any honest answer: an answer names each peer at most once, and a peer's address is at most a
/// unix socket path (107 bytes) long.
pub const MAX_ANSWER: usize = 1 << 20;

/// How much of a shim's line a message quotes.
const QUOTE: usize = 200;

/// How long the harness waits, after closing a shim's stdin, for the shim to end its output (any line it
/// writes then is a protocol fault) before it kills the shim's process tree: this or the answer timeout,
/// whichever is shorter.
pub const EXIT_GRACE: Duration = Duration::from_secs(1);

/// How long the harness gives one exchange — writing a message and reading the whole answer line — before
/// it calls the shim hung (a protocol fault, never a hang): `$NGINX_KETAMA_SHIM_TIMEOUT` seconds (a
/// decimal number), default 60.
pub fn answer_timeout() -> Duration {
    std::env::var("NGINX_KETAMA_SHIM_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(60), |s| Duration::from_secs_f64(s.min(1e9)))
}

/// The implementation under test broke the shim protocol (`ports/SHIM.md`): a failure of the shim, not of
/// the harness, and never a pass. `verify` and `replay-vectors` exit 1 on it, as on a mismatch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shim {command:?} {what}")]
pub struct ProtocolFault {
    /// The shim's command.
    pub command: String,
    /// What it did.
    pub what: String,
}

impl ProtocolFault {
    /// Whether `e` is (or was caused by) a protocol fault.
    pub fn in_chain(e: &anyhow::Error) -> bool {
        e.chain().any(|c| c.is::<ProtocolFault>())
    }
}

/// `text` as a message quotes it: at most [`QUOTE`] characters.
fn quote(bytes: &[u8]) -> String {
    format!("{:?}", clip(&String::from_utf8_lossy(bytes), QUOTE))
}

/// Sets `O_NONBLOCK` on a pipe end this process alone holds.
fn nonblocking(fd: &impl AsRawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Waits until `fd` is ready for `events` (or has hung up), at most until `deadline`; whether it is.
fn ready(fd: &impl AsRawFd, events: libc::c_short, deadline: Instant) -> bool {
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Rounded up, so that a wait never ends before the deadline.
        let ms = libc::c_int::try_from(left.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX);
        // SAFETY: poll on one descriptor we own, with a valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return r > 0;
        }
    }
}

/// What one look at the shim's stdout found.
enum Fill {
    /// Bytes were added to the buffer.
    Data,
    /// Nothing within the wait.
    Nothing,
    /// The shim's stdout ended.
    End,
}

/// How reading one answer line ended.
enum LineRead {
    Line(Vec<u8>),
    /// The output ended after this many bytes of an unfinished line.
    End(usize),
    /// The deadline passed after this many bytes of an unfinished line.
    TimedOut(usize),
    TooLong,
}

/// The shim's stdout, read against deadlines, never holding much more than [`MAX_ANSWER`] bytes.
#[derive(Debug)]
struct Answers {
    pipe: ChildStdout,
    buf: Vec<u8>,
}

impl Answers {
    /// Reads what is there within `deadline`, once.
    fn fill(&mut self, deadline: Instant) -> std::io::Result<Fill> {
        if !ready(&self.pipe, libc::POLLIN, deadline) {
            return Ok(Fill::Nothing);
        }
        let mut chunk = [0u8; 64 * 1024];
        match self.pipe.read(&mut chunk) {
            Ok(0) => Ok(Fill::End),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(Fill::Data)
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => {
                Ok(Fill::Nothing)
            }
            Err(e) => Err(e),
        }
    }

    /// The next line (without its newline), read until `deadline`.
    fn line(&mut self, deadline: Instant) -> std::io::Result<LineRead> {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                if end > MAX_ANSWER {
                    return Ok(LineRead::TooLong);
                }
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                return Ok(LineRead::Line(line));
            }
            if self.buf.len() > MAX_ANSWER {
                return Ok(LineRead::TooLong);
            }
            if Instant::now() >= deadline {
                return Ok(LineRead::TimedOut(self.buf.len()));
            }
            if let Fill::End = self.fill(deadline)? {
                return Ok(LineRead::End(self.buf.len()));
            }
        }
    }
}

/// A running shim.
#[derive(Debug)]
pub struct Shim {
    // Declared first: the tree is killed before the pipes close.
    tree: ProcessTree,
    stdin: Option<ChildStdin>,
    answers: Answers,
    command: String,
    /// The `address` of every peer of the current upstream.
    peers: Vec<String>,
}

/// What the shim said a request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimAnswer {
    /// Addresses tried, in order.
    pub attempts: Vec<String>,
    /// How it ended.
    pub outcome: Outcome,
}

impl ShimAnswer {
    /// nginx's status and `$upstream_addr` for this answer (the upstream's name ends the list when no live
    /// upstream was left), as [`crate::run::parity::expect_with`] renders the library's.
    pub fn rendered(&self) -> Observation {
        let mut names: Vec<&str> = self.attempts.iter().map(String::as_str).collect();
        if self.outcome == Outcome::NoLiveUpstreams {
            names.push(UPSTREAM);
        }
        Observation {
            status: if self.outcome == Outcome::Answered { 200 } else { 502 },
            upstream_addr: names.join(", "),
            upstream_status: None,
        }
    }
}

impl Shim {
    /// Starts `command` (run by `sh -c`) as a process tree of its own.
    ///
    /// # Errors
    ///
    /// The shell could not be started.
    pub fn start(command: &str) -> Result<Shim> {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(command).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut tree =
            ProcessTree::spawn(&mut cmd, "shim").with_context(|| format!("starting the shim {command:?}"))?;
        let stdin = tree.take_stdin().context("shim stdin")?;
        let stdout = tree.take_stdout().context("shim stdout")?;
        nonblocking(&stdin).and_then(|()| nonblocking(&stdout)).context("shim pipes")?;
        Ok(Shim {
            tree,
            stdin: Some(stdin),
            answers: Answers { pipe: stdout, buf: Vec::new() },
            command: command.to_string(),
            peers: Vec::new(),
        })
    }

    fn fault(&self, what: impl Into<String>) -> anyhow::Error {
        ProtocolFault { command: self.command.clone(), what: what.into() }.into()
    }

    fn exchange(&mut self, message: &Value) -> Result<Value> {
        // One answer per message: a whole line already waiting answers nothing the harness asked. (Part of a
        // line is taken as the start of the answer: a shim may write before the message arrives, and whether
        // it did depends on who is faster; the rest of that line decides.)
        self.answers.fill(Instant::now())?;
        if self.answers.buf.contains(&b'\n') {
            let extra = quote(&self.answers.buf);
            return Err(self.fault(format!("wrote {extra} that answers no message (one answer per message)")));
        }
        let timeout = answer_timeout();
        let deadline = Instant::now() + timeout;
        let mut text = serde_json::to_vec(message)?;
        text.push(b'\n');
        self.send(&text, deadline, timeout)?;
        let line = match self.answers.line(deadline)? {
            LineRead::Line(line) => line,
            LineRead::End(0) => return Err(self.gone("before answering")),
            LineRead::End(n) => return Err(self.gone(&format!("after {n} bytes of an answer without its newline"))),
            LineRead::TimedOut(0) => {
                return Err(self.fault(format!("gave no answer within {} s", timeout.as_secs_f64())));
            }
            LineRead::TimedOut(n) => {
                return Err(self.fault(format!(
                    "gave no whole answer within {} s: {n} bytes without a newline, {}",
                    timeout.as_secs_f64(),
                    quote(&self.answers.buf)
                )));
            }
            LineRead::TooLong => {
                return Err(self.fault(format!(
                    "wrote a line longer than {MAX_ANSWER} bytes (the protocol's limit for an answer), starting {}",
                    quote(&self.answers.buf[..QUOTE.min(self.answers.buf.len())])
                )));
            }
        };
        let answer: Value = serde_json::from_slice(&line)
            .map_err(|e| self.fault(format!("answered with something that is not JSON ({e}): {}", quote(&line))))?;
        if let Some(e) = answer.get("error") {
            return Err(self.fault(format!("reported an error: {}", clip(&e.to_string(), QUOTE))));
        }
        if let Some(reason) = answer.get("unsupported") {
            bail!("unsupported by the shim {:?}: {}", self.command, clip(&reason.to_string(), QUOTE));
        }
        Ok(answer)
    }

    /// Writes `text` to the shim's stdin by `deadline`.
    fn send(&mut self, mut text: &[u8], deadline: Instant, timeout: Duration) -> Result<()> {
        while !text.is_empty() {
            let stdin = self.stdin.as_mut().context("the shim's stdin is closed")?;
            match stdin.write(text) {
                Ok(n) => text = &text[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if !ready(stdin, libc::POLLOUT, deadline) && Instant::now() >= deadline {
                        return Err(self.fault(format!("did not read its input within {} s", timeout.as_secs_f64())));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Err(self.gone("before reading")),
                Err(e) => return Err(e).context("writing to the shim"),
            }
        }
        Ok(())
    }

    /// The shim stopped answering (its output ended, its input closed): a shim whose output ended is
    /// normally exiting, so its exit status is waited for (up to 5 s), and the message does not depend on
    /// who is faster.
    fn gone(&self, when: &str) -> anyhow::Error {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.tree.exited() {
                Some(status) => return self.fault(format!("exited ({status}) {when}")),
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                None => return self.fault(format!("closed its output {when} and is still running")),
            }
        }
    }

    /// Expects `{"ok":true}` as the answer to `message` (`upstream`, `reset`).
    fn expect_ok(&mut self, message: &Value) -> Result<()> {
        let answer = self.exchange(message)?;
        if answer.get("ok") != Some(&Value::Bool(true)) {
            let op = message.get("op").and_then(Value::as_str).unwrap_or("?");
            return Err(self.fault(format!(
                "answered {} to an `{op}` message, not {{\"ok\":true}}",
                clip(&answer.to_string(), QUOTE)
            )));
        }
        Ok(())
    }

    /// Gives the shim an upstream and a fresh worker for it.
    ///
    /// # Errors
    ///
    /// The shim failed, refused (`error`) or does not support this upstream (`unsupported`).
    pub fn upstream(&mut self, method: Method, version: NginxVersion, peers: &[PeerRecord]) -> Result<()> {
        self.upstream_json(method.as_str(), &version.to_string(), &serde_json::to_value(peers)?)
    }

    /// [`Shim::upstream`] with the method, version and peers as a vector group spells them.
    ///
    /// # Errors
    ///
    /// As [`Shim::upstream`].
    pub fn upstream_json(&mut self, method: &str, version: &str, peers: &Value) -> Result<()> {
        let rules: serde_json::Map<String, Value> = match version.parse::<NginxVersion>() {
            Ok(v) => v.rules().routing().into_iter().map(|(k, v)| (k.to_string(), Value::from(v))).collect(),
            Err(_) => serde_json::Map::new(),
        };
        self.peers = peers
            .as_array()
            .map(|ps| ps.iter().filter_map(|p| p.get("address")?.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        self.expect_ok(&json!({
            "op": "upstream",
            "protocol": PROTOCOL,
            "name": UPSTREAM,
            "method": method,
            "version": version,
            "rules": rules,
            "now": RUN_CLOCK,
            "peers": peers,
        }))
    }

    /// A fresh worker for the same upstream.
    ///
    /// # Errors
    ///
    /// As [`Shim::upstream`].
    pub fn reset(&mut self) -> Result<()> {
        self.expect_ok(&json!({"op": "reset"}))
    }

    /// One request with `key` on the current worker.
    ///
    /// # Errors
    ///
    /// The shim failed or answered something that is not an answer: a [`ProtocolFault`].
    pub fn request(&mut self, key: &[u8]) -> Result<ShimAnswer> {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let answer = self.exchange(&json!({"op": "request", "keyHex": hex}))?;
        let shown = || clip(&answer.to_string(), QUOTE).into_owned();
        let Some(attempts) = answer.get("attempts").and_then(Value::as_array) else {
            return Err(self.fault(format!("answered {} to a request: no \"attempts\" list", shown())));
        };
        let Some(attempts) = attempts.iter().map(|a| a.as_str().map(str::to_string)).collect::<Option<Vec<_>>>() else {
            return Err(self.fault(format!("answered {} to a request: an attempt that is not a string", shown())));
        };
        if attempts.len() > self.peers.len() {
            return Err(self.fault(format!(
                "answered {} attempts for an upstream of {} peers (nginx tries a peer at most once per request)",
                attempts.len(),
                self.peers.len()
            )));
        }
        if let Some(stranger) = attempts.iter().find(|a| !self.peers.contains(a)) {
            return Err(self.fault(format!(
                "answered the attempt {:?}, which is no peer's address (attempts name peers by their `address`)",
                clip(stranger, QUOTE)
            )));
        }
        let outcome = match answer.get("outcome").map(|o| serde_json::from_value::<Outcome>(o.clone())) {
            Some(Ok(outcome)) => outcome,
            _ => return Err(self.fault(format!("answered {} to a request: no known \"outcome\"", shown()))),
        };
        Ok(ShimAnswer { attempts, outcome })
    }

    /// Closes the shim's input and gives it [`EXIT_GRACE`] to end its output; then kills its process tree.
    ///
    /// # Errors
    ///
    /// A [`ProtocolFault`]: it wrote something after its last answer.
    pub fn finish(mut self) -> Result<()> {
        self.stdin = None;
        let deadline = Instant::now() + EXIT_GRACE.min(answer_timeout());
        while self.answers.buf.is_empty() && Instant::now() < deadline {
            if let Fill::End = self.answers.fill(deadline)? {
                break;
            }
        }
        if !self.answers.buf.is_empty() {
            let extra = quote(&self.answers.buf);
            return Err(self.fault(format!("wrote {extra} after its last answer (one answer per message)")));
        }
        Ok(())
    }
}

/// A shim as the [`Model`] of a live run. The first failure is kept (the run is then a fault, not a list of
/// mismatches).
#[derive(Debug)]
pub struct ShimModel {
    shim: Shim,
    failure: Option<anyhow::Error>,
}

impl ShimModel {
    /// Starts `command` and gives it `topology` (as nginx `version` runs it) with a fresh worker.
    ///
    /// # Errors
    ///
    /// As [`Shim::start`] and [`Shim::upstream`].
    pub fn start(command: &str, topology: &Topology, version: NginxVersion) -> Result<ShimModel> {
        let mut shim = Shim::start(command)?;
        shim.upstream(topology.method, version, &peers_of(topology))?;
        Ok(ShimModel { shim, failure: None })
    }

    /// Ends the shim ([`Shim::finish`]).
    ///
    /// # Errors
    ///
    /// The first failure of the run, or what ending the shim found.
    pub fn finish(self) -> Result<()> {
        match self.failure {
            Some(e) => Err(e),
            None => self.shim.finish(),
        }
    }
}

impl Model for ShimModel {
    fn expect(&mut self, key: &[u8]) -> Observation {
        // After a failure the run's answers no longer matter: the failure is reported instead.
        let nothing = || Observation { status: 0, upstream_addr: String::new(), upstream_status: None };
        if self.failure.is_some() {
            return nothing();
        }
        match self.shim.request(key) {
            Ok(answer) => answer.rendered(),
            Err(e) => {
                self.failure = Some(e);
                nothing()
            }
        }
    }
}

/// What replaying vector files through a shim found.
#[derive(Debug, Default)]
pub struct ReplayReport {
    /// Tests the shim reproduced on every version of their group.
    pub passed: usize,
    /// Tests it did not reproduce on at least one version.
    pub failed: usize,
    /// Tests of groups that hold only under musl's tie rule (their `libc` lacks `glibc`): not sent, since the
    /// shim protocol has no C library and shims model glibc.
    pub skipped: usize,
    /// One line per test and version it did not reproduce.
    pub failures: Vec<String>,
}

/// Replays the golden vectors in `files` (the `vectors/v1/*.json` format) through the shim `command`: one shim
/// process per group and version; stateless groups get a fresh worker (`reset`) before each test. A test
/// passes when the shim's attempts (by address) and outcome equal nginx's on every version its group lists.
///
/// # Errors
///
/// A file that cannot be read or is not a vector file; the shim failing: a [`ProtocolFault`], or an
/// `unsupported` answer.
pub fn replay_vectors(command: &str, files: &[std::path::PathBuf]) -> Result<ReplayReport> {
    let mut report = ReplayReport::default();
    for file in files {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let doc: Value = serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        let groups = doc.get("testGroups").and_then(Value::as_array).context("no testGroups")?;
        for group in groups {
            let name = group.get("name").and_then(Value::as_str).unwrap_or("?");
            let method = group.get("method").and_then(Value::as_str).context("a group without method")?;
            let stateful = group.get("stateful").and_then(Value::as_bool).unwrap_or(false);
            let peers = group.get("peers").context("a group without peers")?;
            let tests = group.get("tests").and_then(Value::as_array).context("a group without tests")?;
            // Files from before the field existed hold glibc recordings only.
            let glibc = group
                .get("libc")
                .and_then(Value::as_array)
                .is_none_or(|libcs| libcs.iter().any(|l| l.as_str() == Some("glibc")));
            if !glibc {
                report.skipped += tests.len();
                continue;
            }
            let versions: Vec<&str> = group
                .pointer("/source/versions")
                .and_then(Value::as_array)
                .context("a group without source.versions")?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let mut ok = vec![true; tests.len()];
            for version in &versions {
                let mut shim = Shim::start(command)?;
                shim.upstream_json(method, version, peers).with_context(|| format!("group {name}, nginx {version}"))?;
                for (i, test) in tests.iter().enumerate() {
                    if i > 0 && !stateful {
                        shim.reset().with_context(|| format!("group {name}, nginx {version}"))?;
                    }
                    let hex = test.get("keyHex").and_then(Value::as_str).context("a test without keyHex")?;
                    let key = unhex(hex).with_context(|| format!("bad keyHex {hex:?}"))?;
                    let answer = shim.request(&key).with_context(|| format!("group {name}, nginx {version}"))?;
                    let want: Vec<&str> = test
                        .get("attempts")
                        .and_then(Value::as_array)
                        .context("a test without attempts")?
                        .iter()
                        .filter_map(Value::as_str)
                        .collect();
                    let want_outcome = test.get("outcome").and_then(Value::as_str).unwrap_or("?");
                    if answer.attempts != want || answer.outcome.name() != want_outcome {
                        ok[i] = false;
                        report.failures.push(format!(
                            "FAIL {}:{name} tcId={} nginx {version}: expected {want:?} {want_outcome}, shim {:?} {}",
                            file.display(),
                            test.get("tcId").unwrap_or(&Value::Null),
                            answer.attempts,
                            answer.outcome.name()
                        ));
                    }
                }
                shim.finish().with_context(|| format!("group {name}, nginx {version}"))?;
            }
            report.passed += ok.iter().filter(|&&o| o).count();
            report.failed += ok.iter().filter(|&&o| !o).count();
        }
    }
    Ok(report)
}

/// The library behind the shim protocol (`nginx-ketama shim`): the reference implementation of the protocol,
/// and the way the harness's shim path is itself tested. Reads messages from `input` until it ends.
///
/// # Errors
///
/// Reading or writing failed. A malformed message is answered with `{"error": …}`, not returned.
pub fn serve(input: impl BufRead, mut output: impl Write) -> Result<()> {
    let mut lines = input.lines();
    let mut pending: Option<Value> = None;
    let reply = |out: &mut dyn Write, v: Value| -> Result<()> {
        serde_json::to_writer(&mut *out, &v)?;
        out.write_all(b"\n")?;
        out.flush()?;
        Ok(())
    };
    loop {
        let msg = match pending.take() {
            Some(m) => m,
            None => match lines.next() {
                None => return Ok(()),
                Some(line) => match serde_json::from_str::<Value>(&line?) {
                    Ok(v) => v,
                    Err(e) => {
                        reply(&mut output, json!({"error": format!("not JSON: {e}")}))?;
                        continue;
                    }
                },
            },
        };
        if msg.get("op").and_then(Value::as_str) != Some("upstream") {
            reply(&mut output, json!({"error": "the first message must be an upstream"}))?;
            continue;
        }
        let (upstream, refuses, now) = match upstream_of(&msg) {
            Ok(u) => u,
            Err(e) => {
                reply(&mut output, json!({"error": format!("{e:#}")}))?;
                continue;
            }
        };
        reply(&mut output, json!({"ok": true}))?;
        let mut worker = nginx_ketama::worker::Worker::new(&upstream);
        for line in lines.by_ref() {
            let msg: Value = match serde_json::from_str(&line?) {
                Ok(v) => v,
                Err(e) => {
                    reply(&mut output, json!({"error": format!("not JSON: {e}")}))?;
                    continue;
                }
            };
            match msg.get("op").and_then(Value::as_str) {
                Some("request") => {
                    let hex = msg.get("keyHex").and_then(Value::as_str).unwrap_or("");
                    let Some(key) = unhex(hex) else {
                        reply(&mut output, json!({"error": format!("bad keyHex {hex:?}")}))?;
                        continue;
                    };
                    let out = worker.request(&key, now, |p| refuses.iter().any(|r| r == p.name()));
                    let attempts: Vec<&str> = out.attempts.iter().map(|&id| upstream.peer(id).name()).collect();
                    let outcome = match out.status {
                        nginx_ketama::worker::Status::Answered => Outcome::Answered,
                        nginx_ketama::worker::Status::Failed => Outcome::Failed,
                        nginx_ketama::worker::Status::NoLiveUpstreams => Outcome::NoLiveUpstreams,
                    };
                    reply(&mut output, json!({"attempts": attempts, "outcome": outcome}))?;
                }
                Some("reset") => {
                    worker = nginx_ketama::worker::Worker::new(&upstream);
                    reply(&mut output, json!({"ok": true}))?;
                }
                Some("upstream") => {
                    pending = Some(msg);
                    break;
                }
                other => reply(&mut output, json!({"error": format!("unknown op {other:?}")}))?,
            }
        }
        if pending.is_none() {
            return Ok(());
        }
    }
}

/// The bytes of a `keyHex` string (`None` unless it is an even number of hex digits).
fn unhex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|j| hex.get(j..j + 2).and_then(|b| u8::from_str_radix(b, 16).ok())).collect()
}

/// The library's upstream for an `upstream` message, the addresses that refuse, and the clock.
fn upstream_of(msg: &Value) -> Result<(nginx_ketama::Upstream, Vec<String>, u64)> {
    let method = match msg.get("method").and_then(Value::as_str) {
        Some("consistent") => Method::Consistent,
        Some("plain") => Method::Plain,
        other => bail!("unknown method {other:?}"),
    };
    let version: NginxVersion =
        msg.get("version").and_then(Value::as_str).context("no version")?.parse().context("version")?;
    let now = msg.get("now").and_then(Value::as_u64).unwrap_or(RUN_CLOCK);
    let peers: Vec<PeerRecord> =
        serde_json::from_value(msg.get("peers").context("no peers")?.clone()).context("peers")?;
    let refuses = peers.iter().filter(|p| p.refuses).map(|p| p.address.clone()).collect();
    // The shim protocol has no C library: shims model glibc (nginx-ketama verify --shim proves glibc builds).
    Ok((upstream_of_peers(method, version, nginx_ketama::Libc::Glibc, &peers)?, refuses, now))
}
