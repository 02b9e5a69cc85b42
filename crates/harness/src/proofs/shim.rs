//! Any implementation, in any language, proven through a shim: a program that speaks the line protocol
//! described in `ports/SHIM.md` (JSON lines on stdin and stdout) answers instead of this library, in the live
//! proof (`verify --shim CMD`) and in the offline replay of the golden vectors (`replay-vectors --shim CMD`).
//!
//! The harness sends one `upstream` message per topology (a fresh worker), then one `request` per key in
//! nginx's order; `reset` gives a fresh worker for the same upstream (stateless vector groups). Upstreams
//! whose servers fail in other ways than refusing (failure kinds: statuses, timeouts, invalid headers, stale
//! keepalive connections) and their retry policy go by protocol 2, whose answers also carry the client's
//! status and `$upstream_status`; a shim that speaks only protocol 1 answers those `unsupported` and they are
//! reported as not proven ([`Unsupported`]). The shim
//! answers each message with exactly one line, within `$NGINX_KETAMA_SHIM_TIMEOUT` for the whole exchange
//! (writing the message, reading the whole line), and at most [`MAX_ANSWER`] bytes long. Anything else — an
//! `error` answer, a line that is not an answer, a line too long, no whole line in time, a line nobody asked
//! for, an attempt that is no peer's address, an exit — is a [`ProtocolFault`]: the implementation under
//! test failed, never a pass and never the harness's fault. `unsupported` (with its reason) is reported
//! apart, as rustls's BoGo shim does. The shim runs as a [`ProcessTree`]: whatever it starts is killed with
//! it when the harness is done with it, whichever way.

use crate::golden::{PeerRecord, failing_peers_of, peers_of, upstream_of_peers};
use crate::nginx::tree::ProcessTree;
use crate::run::client::Method as HttpMethod;
use crate::run::observation::{Observation, Outcome};
use crate::run::parity::{Model, PlannedRequest, RUN_CLOCK, clip};
use crate::site::failures::Failures;
use crate::site::topology::{Topology, UPSTREAM};
use anyhow::{Context, Result};
use nginx_ketama::failure::{ClientRequest, Condition, NextUpstream, Proxying, Reply, RequestMethod, RetryPolicy};
use nginx_ketama::upstream::Method;
use nginx_ketama::version::NginxVersion;
use serde_json::{Value, json};
use std::io::{BufRead, Read, Write};
use std::os::fd::AsRawFd;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The newest protocol version this harness speaks (`ports/SHIM.md`): 1 for upstreams whose servers only
/// refuse or answer `200 OK`, 2 for upstreams with failure kinds and a retry policy.
pub const PROTOCOL: u32 = 2;

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

/// The shim answered `{"unsupported": …}` to an `upstream` message: that upstream is not proven, with the
/// reason — never a pass, and no fault of the shim's or of the harness's. To a protocol-2 upstream it is
/// what a shim that speaks only protocol 1 answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Unsupported {
    /// The shim's command.
    pub command: String,
    /// The protocol of the upstream it did not take.
    pub protocol: u32,
    /// Its reason, as it wrote it (at most 200 characters of it).
    pub reason: String,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.protocol {
            1 => write!(f, "unsupported by the shim {:?}: {}", self.command, self.reason),
            _ => write!(
                f,
                "not proven: the shim speaks protocol 1, or does not model this upstream (the shim {:?} answered \
                 \"unsupported\" to a protocol-{} upstream, one with failure kinds: {})",
                self.command, self.protocol, self.reason
            ),
        }
    }
}

impl Unsupported {
    /// The `unsupported` answer `e` is (or was caused by), if any.
    pub fn in_chain(e: &anyhow::Error) -> Option<&Unsupported> {
        e.chain().find_map(|c| c.downcast_ref::<Unsupported>())
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
    /// The protocol of the current upstream (1 or 2).
    protocol: u32,
}

/// What the shim said a request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimAnswer {
    /// Addresses tried, in order.
    pub attempts: Vec<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// The client's status (protocol 2; `None` under protocol 1, which has none).
    pub status: Option<u16>,
    /// `$upstream_status` split on `", "` (protocol 2; `None` under protocol 1).
    pub upstream_statuses: Option<Vec<String>>,
}

impl ShimAnswer {
    /// nginx's status and `$upstream_addr` for this answer (the upstream's name ends the list when no live
    /// upstream was left), as [`crate::run::parity::expect_with`] renders the library's; under protocol 2
    /// the shim's status and `$upstream_status`, as [`crate::run::observation::failure_observation`]
    /// renders the library's.
    pub fn rendered(&self) -> Observation {
        let mut names: Vec<&str> = self.attempts.iter().map(String::as_str).collect();
        if self.outcome == Outcome::NoLiveUpstreams {
            names.push(UPSTREAM);
        }
        Observation {
            status: self.status.unwrap_or(if self.outcome == Outcome::Answered { 200 } else { 502 }),
            upstream_addr: names.join(", "),
            upstream_status: self.upstream_statuses.as_ref().map(|s| s.join(", ")),
        }
    }
}

/// The `policy` of a protocol-2 `upstream` message: `proxy_next_upstream`'s words in nginx's order (`["off"]`
/// for off) and `proxy_next_upstream_tries`.
pub fn policy_json(policy: &RetryPolicy) -> Value {
    let words: Vec<&str> = policy.next_upstream.iter().map(Condition::word).collect();
    json!({"nextUpstream": words, "tries": policy.tries})
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
            protocol: 1,
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
            let protocol = message.get("protocol").and_then(Value::as_u64).map_or(self.protocol, |p| p as u32);
            let reason = clip(&reason.to_string(), QUOTE).into_owned();
            return Err(Unsupported { command: self.command.clone(), protocol, reason }.into());
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
        self.upstream_message(method, version, peers, None)
    }

    /// A protocol-2 upstream (failure kinds): [`Shim::upstream_json`] with the retry `policy`
    /// (`{"nextUpstream": [...], "tries": N}`, [`policy_json`]), each peer of `peers` that does not answer
    /// `200 OK` carrying its `answer`. A shim that speaks only protocol 1 answers it with
    /// [`Unsupported`].
    ///
    /// # Errors
    ///
    /// As [`Shim::upstream`].
    pub fn upstream_failing_json(&mut self, method: &str, version: &str, peers: &Value, policy: &Value) -> Result<()> {
        self.upstream_message(method, version, peers, Some(policy))
    }

    fn upstream_message(&mut self, method: &str, version: &str, peers: &Value, policy: Option<&Value>) -> Result<()> {
        let rules: serde_json::Map<String, Value> = match version.parse::<NginxVersion>() {
            Ok(v) => v.rules().routing().into_iter().map(|(k, v)| (k.to_string(), Value::from(v))).collect(),
            Err(_) => serde_json::Map::new(),
        };
        self.peers = peers
            .as_array()
            .map(|ps| ps.iter().filter_map(|p| p.get("address")?.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        self.protocol = if policy.is_some() { 2 } else { 1 };
        let mut message = json!({
            "op": "upstream",
            "protocol": self.protocol,
            "name": UPSTREAM,
            "method": method,
            "version": version,
            "rules": rules,
            "now": RUN_CLOCK,
            "peers": peers,
        });
        if let (Some(policy), Some(m)) = (policy, message.as_object_mut()) {
            m.insert("policy".into(), policy.clone());
        }
        self.expect_ok(&message)
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
        self.request_as(key, None, None)
    }

    /// One request with `key` on the current worker, sent with `method` (`GET`, `POST`; protocol 2 only,
    /// where it is always sent: absent means `GET`) at the worker's clock `now` (protocol 2 only; `None`:
    /// the upstream's `now`).
    ///
    /// # Errors
    ///
    /// As [`Shim::request`]; under protocol 2 an answer without `status` or `upstreamStatuses` is a
    /// [`ProtocolFault`] too.
    pub fn request_as(&mut self, key: &[u8], method: Option<&str>, now: Option<u64>) -> Result<ShimAnswer> {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let mut message = json!({"op": "request", "keyHex": hex});
        if self.protocol >= 2
            && let Some(m) = message.as_object_mut()
        {
            m.insert("method".into(), Value::from(method.unwrap_or("GET")));
            if let Some(now) = now {
                m.insert("now".into(), Value::from(now));
            }
        }
        let answer = self.exchange(&message)?;
        let shown = || clip(&answer.to_string(), QUOTE).into_owned();
        let Some(attempts) = answer.get("attempts").and_then(Value::as_array) else {
            return Err(self.fault(format!("answered {} to a request: no \"attempts\" list", shown())));
        };
        let Some(attempts) = attempts.iter().map(|a| a.as_str().map(str::to_string)).collect::<Option<Vec<_>>>() else {
            return Err(self.fault(format!("answered {} to a request: an attempt that is not a string", shown())));
        };
        if self.protocol < 2 && attempts.len() > self.peers.len() {
            return Err(self.fault(format!(
                "answered {} attempts for an upstream of {} peers (nginx tries a peer at most once per request)",
                attempts.len(),
                self.peers.len()
            )));
        }
        if attempts.len() > 2 * self.peers.len() {
            return Err(self.fault(format!(
                "answered {} attempts for a protocol-2 upstream of {} peers (at most twice as many attempts as \
                 peers: only a stale cached connection gives an attempt back)",
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
        if self.protocol < 2 {
            return Ok(ShimAnswer { attempts, outcome, status: None, upstream_statuses: None });
        }
        let status = answer.get("status").and_then(Value::as_u64).filter(|s| (100..=599).contains(s));
        let Some(status) = status.map(|s| s as u16) else {
            return Err(self.fault(format!(
                "answered {} to a request on a protocol-2 upstream: no \"status\" (the client's status, 100 to 599)",
                shown()
            )));
        };
        let statuses = answer
            .get("upstreamStatuses")
            .and_then(Value::as_array)
            .and_then(|l| l.iter().map(|s| s.as_str().map(str::to_string)).collect::<Option<Vec<String>>>());
        let Some(statuses) = statuses else {
            return Err(self.fault(format!(
                "answered {} to a request on a protocol-2 upstream: no \"upstreamStatuses\" list of strings \
                 ($upstream_status split on \", \")",
                shown()
            )));
        };
        Ok(ShimAnswer { attempts, outcome, status: Some(status), upstream_statuses: Some(statuses) })
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
    /// A protocol-2 run (failure kinds): requests carry their method, answers the client's status and
    /// `$upstream_status`, compared with nginx's as the library's
    /// [`FailureModel`](crate::run::parity::FailureModel) is.
    failing: bool,
}

impl ShimModel {
    /// Starts `command` and gives it `topology` (as nginx `version` runs it) with a fresh worker: protocol 1,
    /// the topology's dead servers refusing.
    ///
    /// # Errors
    ///
    /// As [`Shim::start`] and [`Shim::upstream`].
    pub fn start(command: &str, topology: &Topology, version: NginxVersion) -> Result<ShimModel> {
        let mut shim = Shim::start(command)?;
        shim.upstream(topology.method, version, &peers_of(topology))?;
        Ok(ShimModel { shim, failure: None, failing: false })
    }

    /// [`ShimModel::start`] for a run with failure kinds: protocol 2, each live server answering as
    /// `failures` says, under their retry policy.
    ///
    /// # Errors
    ///
    /// As [`ShimModel::start`]; a shim that speaks only protocol 1 answers [`Unsupported`].
    pub fn failing(
        command: &str,
        topology: &Topology,
        failures: &Failures,
        version: NginxVersion,
    ) -> Result<ShimModel> {
        let mut shim = Shim::start(command)?;
        let peers = serde_json::to_value(failing_peers_of(topology, failures))?;
        let started = shim.upstream_failing_json(
            topology.method.as_str(),
            &version.to_string(),
            &peers,
            &policy_json(&failures.policy),
        );
        match started {
            Ok(()) => Ok(ShimModel { shim, failure: None, failing: true }),
            // Not proven, and the shim is done with: its exit is still checked (a line after its last
            // answer is a fault of its own).
            Err(e) if Unsupported::in_chain(&e).is_some() => {
                shim.finish()?;
                Err(e)
            }
            Err(e) => Err(e),
        }
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

impl ShimModel {
    fn ask(&mut self, key: &[u8], method: Option<&str>) -> Observation {
        // After a failure the run's answers no longer matter: the failure is reported instead.
        let nothing = || Observation { status: 0, upstream_addr: String::new(), upstream_status: None };
        if self.failure.is_some() {
            return nothing();
        }
        match self.shim.request_as(key, method, None) {
            Ok(answer) => answer.rendered(),
            Err(e) => {
                self.failure = Some(e);
                nothing()
            }
        }
    }
}

impl Model for ShimModel {
    fn expect(&mut self, key: &[u8]) -> Observation {
        self.ask(key, None)
    }

    fn expect_request(&mut self, request: &PlannedRequest) -> Observation {
        let method = match request.method {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
        };
        self.ask(&request.key, self.failing.then_some(method))
    }

    fn predicts_upstream_status(&self) -> bool {
        self.failing
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
    /// Tests of failure groups (protocol 2) the shim answered `unsupported` for: not proven, never passed.
    pub not_proven: usize,
    /// Why, once per distinct reason ([`Unsupported`]'s message).
    pub not_proven_reasons: Vec<String>,
    /// One line per test and version it did not reproduce.
    pub failures: Vec<String>,
}

/// What the shim must reproduce of one test: its attempts and outcome, and in a failure group the client's
/// status and `$upstream_status`.
fn expected_of(test: &Value, failing: bool) -> Result<String> {
    let attempts: Vec<&str> = test
        .get("attempts")
        .and_then(Value::as_array)
        .context("a test without attempts")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let outcome = test.get("outcome").and_then(Value::as_str).unwrap_or("?");
    if !failing {
        return Ok(format!("{attempts:?} {outcome}"));
    }
    let status = test.get("status").and_then(Value::as_u64).context("a failure test without status")?;
    let statuses: Vec<&str> = test
        .get("upstreamStatuses")
        .and_then(Value::as_array)
        .context("a failure test without upstreamStatuses")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    Ok(format!("{attempts:?} {outcome} {status} {statuses:?}"))
}

/// [`expected_of`] for the shim's answer.
fn answered(answer: &ShimAnswer, failing: bool) -> String {
    let base = format!("{:?} {}", answer.attempts, answer.outcome.name());
    match (failing, answer.status, &answer.upstream_statuses) {
        (true, Some(status), Some(statuses)) => format!("{base} {status} {statuses:?}"),
        _ => base,
    }
}

/// Replays the golden vectors in `files` (the `vectors/v1/*.json` format) through the shim `command`: one shim
/// process per group and version; stateless groups get a fresh worker (`reset`) before each test. A test
/// passes when the shim's attempts (by address) and outcome equal nginx's on every version its group lists.
///
/// A failure group (one with a `policy`) goes by protocol 2: the policy and each peer's `answer` in the
/// `upstream` message, each test's `requestMethod` and, where the group's clock advances, its `now` (the
/// upstream's `now` plus the test's `clock`); the client's status and `$upstream_status` must match too. A
/// shim that answers such a group `unsupported` (one that speaks only protocol 1) leaves its tests not
/// proven ([`ReplayReport::not_proven`]).
///
/// # Errors
///
/// A file that cannot be read or is not a vector file; the shim failing: a [`ProtocolFault`], or an
/// `unsupported` answer to a protocol-1 group.
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
            let policy = group.get("policy");
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
            let mut unsupported = None;
            for version in &versions {
                let at = || format!("group {name}, nginx {version}");
                let mut shim = Shim::start(command)?;
                let started = match policy {
                    Some(policy) => shim.upstream_failing_json(method, version, peers, policy),
                    None => shim.upstream_json(method, version, peers),
                };
                match started {
                    Err(e) if policy.is_some() && Unsupported::in_chain(&e).is_some() => {
                        unsupported = Unsupported::in_chain(&e).map(ToString::to_string);
                        shim.finish().with_context(at)?;
                        break;
                    }
                    other => other.with_context(at)?,
                }
                for (i, test) in tests.iter().enumerate() {
                    if i > 0 && !stateful {
                        shim.reset().with_context(at)?;
                    }
                    let hex = test.get("keyHex").and_then(Value::as_str).context("a test without keyHex")?;
                    let key = unhex(hex).with_context(|| format!("bad keyHex {hex:?}"))?;
                    let request_method = test.get("requestMethod").and_then(Value::as_str);
                    let now = test.get("clock").and_then(Value::as_u64).map(|c| RUN_CLOCK + c);
                    let answer = shim.request_as(&key, request_method, now).with_context(at)?;
                    let want = expected_of(test, policy.is_some())?;
                    let got = answered(&answer, policy.is_some());
                    if got != want {
                        ok[i] = false;
                        report.failures.push(format!(
                            "FAIL {}:{name} tcId={} nginx {version}: expected {want}, shim {got}",
                            file.display(),
                            test.get("tcId").unwrap_or(&Value::Null),
                        ));
                    }
                }
                shim.finish().with_context(at)?;
            }
            let failed = ok.iter().filter(|&&o| !o).count();
            report.failed += failed;
            match unsupported {
                Some(reason) => {
                    report.not_proven += tests.len() - failed;
                    if !report.not_proven_reasons.contains(&reason) {
                        report.not_proven_reasons.push(reason);
                    }
                }
                None => report.passed += tests.len() - failed,
            }
        }
    }
    Ok(report)
}

/// One of nginx's rules changed on purpose in the reference shim ([`serve_mutated`]), to show that the
/// replay and the live proof catch a shim that gets protocol 2 wrong (`nginx-ketama shim --mutation NAME`,
/// hidden: a test tool, not a feature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShimMutation {
    /// `non_idempotent` is ignored: a sent POST is retried like a GET.
    PostRetried,
    /// An error on a cached keepalive connection does not give the attempt back.
    NoGiveBack,
    /// Speaks protocol 1 only: answers a protocol-2 upstream `unsupported`, as a shim written before
    /// protocol 2 does.
    ProtocolOne,
}

impl std::str::FromStr for ShimMutation {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "post-retried" => Ok(ShimMutation::PostRetried),
            "no-give-back" => Ok(ShimMutation::NoGiveBack),
            "protocol-1" => Ok(ShimMutation::ProtocolOne),
            other => Err(format!("unknown mutation {other:?} (post-retried, no-give-back, protocol-1)")),
        }
    }
}

/// The library behind the shim protocol (`nginx-ketama shim`): the reference implementation of the protocol,
/// and the way the harness's shim path is itself tested. Reads messages from `input` until it ends.
///
/// # Errors
///
/// Reading or writing failed. A malformed message is answered with `{"error": …}`, not returned.
pub fn serve(input: impl BufRead, output: impl Write) -> Result<()> {
    serve_mutated(input, output, None)
}

/// How a peer of a protocol-2 upstream answers (`answer`; absent: `200 OK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerAnswer {
    Status(u16),
    Timeout,
    InvalidHeader,
    StaleKeepalive,
}

/// What a protocol-2 `upstream` message adds: the retry policy and each answering peer's answer, by address.
#[derive(Debug, Clone)]
struct FailureSpec {
    policy: RetryPolicy,
    answers: Vec<(String, PeerAnswer)>,
}

/// What one `upstream` message asks for.
struct Setup {
    upstream: nginx_ketama::Upstream,
    refuses: Vec<String>,
    now: u64,
    failures: Option<FailureSpec>,
}

/// Why an `upstream` message is not taken: `unsupported` (a protocol or answer this shim does not model) or
/// `error` (a malformed message).
enum Refusal {
    Unsupported(String),
    Error(anyhow::Error),
}

impl From<anyhow::Error> for Refusal {
    fn from(e: anyhow::Error) -> Refusal {
        Refusal::Error(e)
    }
}

/// The worker of the current upstream, with the keepalive connections it holds to `stale_keepalive` peers
/// (by address: one bool per address, `ports/SHIM.md`).
struct ServedWorker<'u> {
    worker: nginx_ketama::worker::Worker<'u>,
    cached: std::collections::BTreeSet<String>,
}

/// [`serve`] with one of nginx's rules changed ([`ShimMutation`]); `None` is the reference shim.
///
/// # Errors
///
/// As [`serve`].
pub fn serve_mutated(input: impl BufRead, mut output: impl Write, mutation: Option<ShimMutation>) -> Result<()> {
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
        let setup = match upstream_of(&msg, mutation) {
            Ok(u) => u,
            Err(Refusal::Unsupported(why)) => {
                reply(&mut output, json!({"unsupported": why}))?;
                continue;
            }
            Err(Refusal::Error(e)) => {
                reply(&mut output, json!({"error": format!("{e:#}")}))?;
                continue;
            }
        };
        reply(&mut output, json!({"ok": true}))?;
        let fresh = || ServedWorker {
            worker: nginx_ketama::worker::Worker::new(&setup.upstream),
            cached: std::collections::BTreeSet::new(),
        };
        let mut served = fresh();
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
                    let answer = match serve_request(&setup, &mut served, &msg, mutation) {
                        Ok(answer) => answer,
                        Err(e) => json!({"error": format!("{e:#}")}),
                    };
                    reply(&mut output, answer)?;
                }
                Some("reset") => {
                    served = fresh();
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

/// The answer to one `request` message on `served`.
fn serve_request(
    setup: &Setup,
    served: &mut ServedWorker<'_>,
    msg: &Value,
    mutation: Option<ShimMutation>,
) -> Result<Value> {
    use nginx_ketama::worker::Status;
    let hex = msg.get("keyHex").and_then(Value::as_str).unwrap_or("");
    let key = unhex(hex).with_context(|| format!("bad keyHex {hex:?}"))?;
    let upstream = &setup.upstream;
    let refuses = |p: &nginx_ketama::Peer| setup.refuses.iter().any(|r| r == p.name());
    let outcome_of = |status: Status| match status {
        Status::Answered => Outcome::Answered,
        Status::Failed => Outcome::Failed,
        Status::NoLiveUpstreams => Outcome::NoLiveUpstreams,
    };
    let Some(failures) = &setup.failures else {
        let out = served.worker.request(&key, setup.now, refuses);
        let attempts: Vec<&str> = out.attempts.iter().map(|&id| upstream.peer(id).name()).collect();
        return Ok(json!({"attempts": attempts, "outcome": outcome_of(out.status)}));
    };
    let method = match msg.get("method") {
        None => RequestMethod::Get,
        Some(m) => m.as_str().context("a method that is not a string")?.parse().unwrap_or_default(),
    };
    let now = match msg.get("now") {
        None => setup.now,
        Some(n) => n.as_u64().context("a now that is not a whole number of seconds")?,
    };
    let client = ClientRequest { method, ..ClientRequest::default() };
    let policy = failures.policy;
    let cached = &mut served.cached;
    // How the attempt at `peer` ends; a stale_keepalive peer's cached connection is used up or made.
    let mut reply_of = |peer: &nginx_ketama::Peer| -> Reply {
        if refuses(peer) {
            return Reply::Refused;
        }
        match failures.answers.iter().find(|(a, _)| a == peer.name()).map(|&(_, a)| a) {
            None => Reply::OK,
            Some(PeerAnswer::Status(s)) => Reply::Status(s),
            Some(PeerAnswer::Timeout) => Reply::ReadTimeout,
            Some(PeerAnswer::InvalidHeader) => Reply::InvalidHeader,
            Some(PeerAnswer::StaleKeepalive) => {
                if cached.remove(peer.name()) {
                    Reply::StaleConnection
                } else {
                    cached.insert(peer.name().to_string());
                    Reply::OK
                }
            }
        }
    };
    let out = match mutation {
        None | Some(ShimMutation::ProtocolOne) => {
            served.worker.request_with(&key, now, &policy, &client, &mut reply_of)
        }
        Some(m) => served.worker.request_judged(&key, now, &policy, |peer, left| {
            let reply = reply_of(peer);
            let as_get = ClientRequest { method: RequestMethod::Get, ..client };
            let judged = if m == ShimMutation::PostRetried { &as_get } else { &client };
            let mut d = nginx_ketama::failure::decide(reply, &policy, judged, left, 0);
            if m == ShimMutation::NoGiveBack {
                d.given_back = false;
            }
            d
        }),
    };
    let attempts: Vec<&str> = out.attempts.iter().map(|&id| upstream.peer(id).name()).collect();
    let mut statuses: Vec<String> = out.results.iter().map(|r| r.upstream_status.to_string()).collect();
    if out.status == Status::NoLiveUpstreams {
        statuses.push("502".into());
    }
    Ok(json!({
        "attempts": attempts,
        "outcome": outcome_of(out.status),
        "status": out.client_status,
        "upstreamStatuses": statuses,
    }))
}

/// The bytes of a `keyHex` string (`None` unless it is an even number of hex digits).
fn unhex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|j| hex.get(j..j + 2).and_then(|b| u8::from_str_radix(b, 16).ok())).collect()
}

/// The library's upstream for an `upstream` message, the addresses that refuse, the clock and, under
/// protocol 2, the failure kinds.
fn upstream_of(msg: &Value, mutation: Option<ShimMutation>) -> std::result::Result<Setup, Refusal> {
    let protocol = msg.get("protocol").and_then(Value::as_u64).unwrap_or(1);
    let speaks = if mutation == Some(ShimMutation::ProtocolOne) { 1 } else { PROTOCOL as u64 };
    if protocol == 0 || protocol > speaks {
        let spoken = if speaks == 1 { "1" } else { "1 and 2" };
        return Err(Refusal::Unsupported(format!("protocol {protocol} (this shim speaks {spoken})")));
    }
    let method = match msg.get("method").and_then(Value::as_str) {
        Some("consistent") => Method::Consistent,
        Some("plain") => Method::Plain,
        other => return Err(anyhow::anyhow!("unknown method {other:?}").into()),
    };
    let version: NginxVersion =
        msg.get("version").and_then(Value::as_str).context("no version")?.parse().context("version")?;
    let now = msg.get("now").and_then(Value::as_u64).unwrap_or(RUN_CLOCK);
    let mut peer_values: Vec<Value> = msg.get("peers").and_then(Value::as_array).context("no peers (a list)")?.clone();
    // Each peer's `answer` (protocol 2) is read here; the rest is a vector group's peer.
    let mut answers = Vec::new();
    for p in &mut peer_values {
        let Some(fields) = p.as_object_mut() else { continue };
        let Some(answer) = fields.remove("answer") else { continue };
        if protocol < 2 {
            return Err(anyhow::anyhow!("a peer with an answer in a protocol-1 upstream").into());
        }
        let word = answer.as_str().context("an answer that is not a string")?;
        let parsed = match word {
            "timeout" => PeerAnswer::Timeout,
            "invalid_header" => PeerAnswer::InvalidHeader,
            "stale_keepalive" => PeerAnswer::StaleKeepalive,
            _ => match word.strip_prefix("http_").and_then(|n| n.parse::<u16>().ok()) {
                Some(status) if (100..=599).contains(&status) => PeerAnswer::Status(status),
                _ => return Err(Refusal::Unsupported(format!("the answer {word:?}"))),
            },
        };
        let address = fields.get("address").and_then(Value::as_str).context("a peer without address")?;
        answers.push((address.to_string(), parsed));
    }
    let peers: Vec<PeerRecord> = serde_json::from_value(Value::Array(peer_values)).context("peers")?;
    let refuses = peers.iter().filter(|p| p.refuses).map(|p| p.address.clone()).collect();
    let failures = if protocol >= 2 {
        let policy = msg.get("policy").context("a protocol-2 upstream without policy")?;
        let words = policy.get("nextUpstream").and_then(Value::as_array).context("policy without nextUpstream")?;
        let mut next_upstream = NextUpstream::EMPTY;
        for w in words {
            let w = w.as_str().context("a nextUpstream word that is not a string")?;
            let c = Proxying::Proxy.condition(w).with_context(|| format!("unknown nextUpstream word {w:?}"))?;
            next_upstream = next_upstream.with(c);
        }
        let tries = policy.get("tries").and_then(Value::as_u64).context("policy without tries")?;
        let tries = u32::try_from(tries).context("tries")?;
        Some(FailureSpec { policy: RetryPolicy { next_upstream, tries, timeout_ms: 0 }, answers })
    } else {
        None
    };
    // The shim protocol has no C library: shims model glibc (nginx-ketama verify --shim proves glibc builds).
    let upstream = upstream_of_peers(method, version, nginx_ketama::Libc::Glibc, &peers)?;
    Ok(Setup { upstream, refuses, now, failures })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference shim's answers to `messages`, one per line.
    fn served(messages: &[Value], mutation: Option<ShimMutation>) -> Vec<Value> {
        let input: String = messages.iter().map(|m| format!("{m}\n")).collect();
        let mut out = Vec::new();
        serve_mutated(input.as_bytes(), &mut out, mutation).unwrap();
        String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn upstream(protocol: u32, answer: Option<&str>, policy: Option<Value>) -> Value {
        let mut peer = json!({"server": "127.0.3.1:9001", "address": "127.0.3.1:9001", "weight": 1, "down": false,
            "backup": false, "maxFails": 1, "failTimeout": 10, "refuses": false});
        if let Some(a) = answer {
            peer["answer"] = a.into();
        }
        let mut m = json!({"op": "upstream", "protocol": protocol, "name": UPSTREAM, "method": "consistent",
            "version": "1.30.6", "rules": {}, "now": RUN_CLOCK, "peers": [peer]});
        if let Some(p) = policy {
            m["policy"] = p;
        }
        m
    }

    /// The reference shim takes protocols 1 and 2 and refuses the rest as `unsupported`; as a protocol-1
    /// shim (`--mutation protocol-1`) it refuses 2 the way the version-1 ports do. What protocol 2 adds is an
    /// error in a protocol-1 upstream, and a protocol-2 upstream needs its policy.
    #[test]
    fn the_reference_shim_speaks_protocols_1_and_2() {
        let policy = json!({"nextUpstream": ["error", "timeout"], "tries": 0});
        let v2 = upstream(2, Some("http_502"), Some(policy.clone()));
        assert_eq!(served(&[upstream(1, None, None)], None), [json!({"ok": true})]);
        assert_eq!(served(std::slice::from_ref(&v2), None), [json!({"ok": true})]);
        assert_eq!(
            served(&[upstream(3, None, Some(policy.clone()))], None),
            [json!({"unsupported": "protocol 3 (this shim speaks 1 and 2)"})]
        );
        assert_eq!(
            served(std::slice::from_ref(&v2), Some(ShimMutation::ProtocolOne)),
            [json!({"unsupported": "protocol 2 (this shim speaks 1)"})]
        );
        assert_eq!(
            served(&[upstream(2, Some("http_999x"), Some(policy))], None),
            [json!({"unsupported": "the answer \"http_999x\""})]
        );
        assert!(served(&[upstream(1, Some("timeout"), None)], None)[0].get("error").is_some());
        assert!(served(&[upstream(2, None, None)], None)[0].get("error").is_some());
        // A protocol-2 request's answer carries the status and $upstream_status.
        let answers = served(&[v2, json!({"op": "request", "keyHex": "6b", "method": "POST"})], None);
        assert_eq!(
            answers[1],
            json!({"attempts": ["127.0.3.1:9001"], "outcome": "answered", "status": 502, "upstreamStatuses": ["502"]})
        );
    }

    #[test]
    fn policies_are_sent_as_nginx_words_in_nginx_order() {
        let p = RetryPolicy { next_upstream: NextUpstream::DEFAULT.with(Condition::Http404), tries: 3, timeout_ms: 0 };
        assert_eq!(policy_json(&p), json!({"nextUpstream": ["error", "timeout", "http_404"], "tries": 3}));
        let off = RetryPolicy { next_upstream: NextUpstream::OFF, ..p };
        assert_eq!(policy_json(&off)["nextUpstream"], json!(["off"]));
    }
}
