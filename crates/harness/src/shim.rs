//! Any implementation, in any language, proven through a shim: a program that speaks the line protocol
//! described in `ports/SHIM.md` (JSON lines on stdin and stdout) answers instead of this library, in the live
//! proof (`verify --shim CMD`) and in the offline replay of the golden vectors (`replay-vectors --shim CMD`).
//!
//! The harness sends one `upstream` message per topology (a fresh worker), then one `request` per key in
//! nginx's order; `reset` gives a fresh worker for the same upstream (stateless vector groups). The shim
//! answers each message with one line. An `error` answer, a malformed line or a dead shim is a harness fault,
//! never a pass; `unsupported` (with its reason) is reported apart, as rustls's BoGo shim does.

use super::golden::{Observation, Outcome, PeerRecord, peers_of, upstream_of_peers};
use super::parity::{Model, RUN_CLOCK};
use super::topology::{Topology, UPSTREAM};
use anyhow::{Context, Result, bail};
use nginx_ketama::upstream::Method;
use nginx_ketama::version::NginxVersion;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The protocol version this harness speaks (`ports/SHIM.md`).
pub const PROTOCOL: u32 = 1;

/// How long the harness waits for one answer before it calls the shim hung (a fault, never a hang):
/// `$NGINX_KETAMA_SHIM_TIMEOUT` seconds, default 60.
pub fn answer_timeout() -> std::time::Duration {
    let secs = std::env::var("NGINX_KETAMA_SHIM_TIMEOUT").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    std::time::Duration::from_secs(secs)
}

/// Whether `pipe` has something to read (or its end) within `timeout`.
fn readable_within(pipe: &BufReader<ChildStdout>, timeout: std::time::Duration) -> bool {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd { fd: pipe.get_ref().as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    loop {
        // SAFETY: poll on one descriptor we own, with a valid pollfd.
        let r = unsafe { libc::poll(&mut fd, 1, ms) };
        if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return r > 0;
        }
    }
}

/// A running shim.
#[derive(Debug)]
pub struct Shim {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    command: String,
    line: String,
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
    /// upstream was left), as [`super::parity::expect_with`] renders the library's.
    pub fn rendered(&self) -> Observation {
        let mut names: Vec<&str> = self.attempts.iter().map(String::as_str).collect();
        if self.outcome == Outcome::NoLiveUpstreams {
            names.push(UPSTREAM);
        }
        Observation {
            status: if self.outcome == Outcome::Answered { 200 } else { 502 },
            upstream_addr: names.join(", "),
        }
    }
}

impl Shim {
    /// Starts `command` (run by `sh -c`).
    ///
    /// # Errors
    ///
    /// The shell could not be started.
    pub fn start(command: &str) -> Result<Shim> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting the shim {command:?}"))?;
        let stdin = child.stdin.take().context("shim stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("shim stdout")?);
        Ok(Shim { child, stdin, stdout, command: command.to_string(), line: String::new() })
    }

    fn exchange(&mut self, message: &Value) -> Result<Value> {
        let mut text = serde_json::to_vec(message)?;
        text.push(b'\n');
        self.stdin.write_all(&text).and_then(|()| self.stdin.flush()).with_context(|| self.gone())?;
        self.line.clear();
        let timeout = answer_timeout();
        if self.stdout.buffer().is_empty() && !readable_within(&self.stdout, timeout) {
            bail!("the shim {:?} gave no answer within {} s", self.command, timeout.as_secs());
        }
        if self.stdout.read_line(&mut self.line).with_context(|| self.gone())? == 0 {
            bail!("{}", self.gone());
        }
        let answer: Value = serde_json::from_str(&self.line).with_context(|| {
            format!("the shim {:?} answered with something that is not JSON: {:?}", self.command, self.line)
        })?;
        if let Some(e) = answer.get("error") {
            bail!("the shim {:?} reported an error: {e}", self.command);
        }
        if let Some(reason) = answer.get("unsupported") {
            bail!("unsupported by the shim {:?}: {reason}", self.command);
        }
        Ok(answer)
    }

    /// Why the shim stopped answering. A shim whose output ended is normally exiting: wait (up to 5 s) for
    /// its exit status, so the message does not depend on who is faster.
    fn gone(&mut self) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return format!("the shim {:?} exited ({status})", self.command),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                _ => return format!("the shim {:?} stopped answering and is still running", self.command),
            }
        }
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
        self.exchange(&json!({
            "op": "upstream",
            "protocol": PROTOCOL,
            "name": UPSTREAM,
            "method": method,
            "version": version,
            "rules": rules,
            "now": RUN_CLOCK,
            "peers": peers,
        }))
        .map(drop)
    }

    /// A fresh worker for the same upstream.
    ///
    /// # Errors
    ///
    /// As [`Shim::upstream`].
    pub fn reset(&mut self) -> Result<()> {
        self.exchange(&json!({"op": "reset"})).map(drop)
    }

    /// One request with `key` on the current worker.
    ///
    /// # Errors
    ///
    /// The shim failed or answered something that is not an answer.
    pub fn request(&mut self, key: &[u8]) -> Result<ShimAnswer> {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let answer = self.exchange(&json!({"op": "request", "keyHex": hex}))?;
        let attempts = answer
            .get("attempts")
            .and_then(Value::as_array)
            .context("an answer without \"attempts\"")?
            .iter()
            .map(|a| a.as_str().map(str::to_string).context("an attempt that is not a string"))
            .collect::<Result<Vec<_>>>()?;
        let outcome = answer.get("outcome").context("an answer without \"outcome\"")?;
        let outcome: Outcome = serde_json::from_value(outcome.clone())
            .with_context(|| format!("unknown outcome {outcome} from the shim {:?}", self.command))?;
        Ok(ShimAnswer { attempts, outcome })
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A shim as the [`Model`] of a live run. The first failure is kept (the run is then a harness fault, not a
/// list of mismatches).
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

    /// The first protocol failure, if any.
    pub fn take_failure(&mut self) -> Option<anyhow::Error> {
        self.failure.take()
    }
}

impl Model for ShimModel {
    fn expect(&mut self, key: &[u8]) -> Observation {
        // After a failure the run's answers no longer matter: the failure is reported instead.
        let nothing = || Observation { status: 0, upstream_addr: String::new() };
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
/// A file that cannot be read or is not a vector file; the shim failing (an `error` or `unsupported`
/// answer, a malformed line, an exit).
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
                        shim.reset()?;
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
