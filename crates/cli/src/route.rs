//! `nginx-ketama route`: keys from stdin as consecutive requests to one fresh worker, one JSON line each; or
//! requests (`--requests`, `--log`), each sent where nginx sends it and hashed by that upstream's key.

use crate::args::{ConfigArgs, FailArgs, Failed};
use crate::lines::{self, BoundedLines};
use crate::render::key_text;
use crate::schema::{self, Schema};
use crate::traffic::Traffic;
use anyhow::Result;
use nginx_ketama::Worker;
use nginx_ketama::failure::ClientRequest;
use std::borrow::Cow;
use std::io::{BufWriter, Write};

/// nginx's clock for the offline commands: every request within the same second (failed peers stay
/// failed for the whole run).
pub(crate) const NOW: u64 = 1_000_000_000;

/// `route`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArgs,
    #[command(flatten)]
    failed: Failed,
    #[command(flatten)]
    failures: FailArgs,
    #[command(flatten)]
    traffic: Traffic,
}

/// One line of `route` output, fields in the documented order.
#[derive(serde::Serialize)]
struct RouteLine<'a> {
    schema: Schema,
    #[serde(flatten)]
    picked: Picked<'a>,
    /// With --fail, --method or --location: what the client gets.
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    /// With --fail, --method or --location: each attempt's `$upstream_status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_status: Option<Vec<u16>>,
}

/// A key and what one worker did with it: its first pick, the round-robin fallback, every attempt (the
/// fields `route` and `route --requests` share).
#[derive(serde::Serialize)]
struct Picked<'a> {
    key: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_hex: Option<String>,
    server: Option<&'a str>,
    fallback: Option<&'a str>,
    attempts: Vec<&'a str>,
}

impl<'a> Picked<'a> {
    fn new(key: &'a [u8], upstream: &'a nginx_ketama::Upstream, outcome: &nginx_ketama::Outcome) -> Picked<'a> {
        let attempts: Vec<&str> = outcome.attempts.iter().map(|&id| upstream.peer(id).server().as_str()).collect();
        let (key, key_hex) = key_text(key);
        Picked {
            key,
            key_hex,
            server: attempts.first().copied(),
            fallback: outcome.round_robin.then_some("round-robin"),
            attempts,
        }
    }
}

/// `$upstream_status` of a request: one entry per attempt, and nginx's 502 when no live upstream was left.
pub(crate) fn upstream_statuses(outcome: &nginx_ketama::Outcome) -> Vec<u16> {
    let mut s: Vec<u16> = outcome.results.iter().map(|r| r.upstream_status).collect();
    if outcome.status == nginx_ketama::Status::NoLiveUpstreams {
        s.push(502);
    }
    s
}

pub(crate) fn run(args: &Args) -> Result<()> {
    if args.traffic.given() {
        return requests(args);
    }
    let loaded = args.config.load()?;
    let upstream = &loaded.upstream;
    let fails = args.failed.in_upstream(upstream)?;
    let failures = if args.failures.given() { Some(args.failures.resolve(&loaded, &args.failed)?) } else { None };
    let mut worker = Worker::new(upstream);
    let mut input = BoundedLines::new(std::io::stdin().lock(), "stdin", "a key", lines::MAX_KEY_BYTES);
    let mut out = BufWriter::new(crate::stdout::stdout());
    let mut key = Vec::new();
    while input.next_into(&mut key)? {
        let outcome = match &failures {
            None => worker.request(&key, NOW, fails),
            Some(f) => worker.request_with(&key, NOW, &f.policy, &f.client, |p| f.reply(p)),
        };
        let statuses = failures.as_ref().map(|_| (outcome.client_status, upstream_statuses(&outcome)));
        let line = RouteLine {
            schema: schema::ROUTE,
            picked: Picked::new(&key, upstream, &outcome),
            status: statuses.as_ref().map(|s| s.0),
            upstream_status: statuses.map(|s| s.1),
        };
        serde_json::to_writer(&mut out, &line).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        // Answer as keys arrive: flush whenever no further input is waiting.
        if input.drained() {
            out.flush()?;
        }
    }
    out.flush()?;
    Ok(())
}

/// One line of `route --requests`/`--log` output (`nginx-ketama/route-request/v1`).
#[derive(serde::Serialize)]
struct RequestLine<'a> {
    schema: Schema,
    line: u64,
    request: Cow<'a, str>,
    #[serde(flatten)]
    goes: Goes<'a>,
}

/// Where a request goes.
#[derive(serde::Serialize)]
#[serde(tag = "goes", rename_all = "kebab-case")]
enum Goes<'a> {
    /// To a hash upstream: its pick, and with --fail or --failed what the client gets and each attempt's
    /// `$upstream_status`, under the retry rules of the request's location.
    Hash {
        upstream: &'a str,
        #[serde(flatten)]
        picked: Picked<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        upstream_status: Option<Vec<u16>>,
    },
    /// Answered by nginx itself (`return`, a 400, no location): the status.
    Answered { status: u16, why: String },
    /// Elsewhere: another balancer, a URL, files.
    Elsewhere { why: String },
    /// Not computed: something on its way is not modelled.
    NotModelled { why: String },
}

/// Where a request goes that does not reach a hash upstream: the one wording of `route --requests` and
/// `explain --request`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "goes", rename_all = "kebab-case")]
pub(crate) enum NotHashed {
    /// nginx answers it itself (`return`, a 400, no location): the status, and why.
    Answered { status: u16, why: String },
    /// Elsewhere: another balancer, a URL, files.
    Elsewhere { why: String },
}

impl std::fmt::Display for NotHashed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotHashed::Answered { status, why } => write!(f, "nginx answers {status} itself: {why}"),
            NotHashed::Elsewhere { why } => write!(f, "elsewhere: {why}"),
        }
    }
}

/// [`NotHashed`] of a dispatch (a [`Dispatch::Hash`] is not one: said as such, never expected here).
pub(crate) fn not_hashed(d: &nginx_ketama::dispatch::Dispatch) -> NotHashed {
    use nginx_ketama::dispatch::Dispatch;
    match d {
        Dispatch::Return { status } => NotHashed::Answered { status: *status, why: "return".into() },
        Dispatch::BadRequest(b) => NotHashed::Answered { status: b.status().unwrap_or(400), why: b.to_string() },
        Dispatch::NoLocation => NotHashed::Answered { status: 404, why: "no location matches".into() },
        Dispatch::NoServer(addr) => NotHashed::Elsewhere { why: format!("no server listens on {addr}") },
        Dispatch::NotHash { upstream } => {
            NotHashed::Elsewhere { why: format!("upstream \"{upstream}\" does not hash") }
        }
        Dispatch::Proxy { url } => NotHashed::Elsewhere { why: format!("proxy_pass {url}") },
        Dispatch::NoProxy => NotHashed::Elsewhere { why: "the location serves it itself".into() },
        other => NotHashed::Elsewhere { why: format!("{other:?}") },
    }
}

fn requests(args: &Args) -> Result<()> {
    use nginx_ketama::dispatch::{Dispatch, Dispatcher};
    let config = args.config.load_config()?;
    let dispatcher = Dispatcher::new(&config);
    let failures = args.failures.for_requests(&config, &args.failed)?;
    // Statuses as for keys: with --fail, --method or --location (here only --fail can be given).
    let statuses = args.failures.given();
    let mut input = args.traffic.open(&config)?;
    let mut workers: Vec<(String, Worker<'_>)> = Vec::new();
    let mut out = BufWriter::new(crate::stdout::stdout());
    let (mut read, mut bad) = (0u64, 0u64);
    while let Some(item) = input.next()? {
        read += 1;
        let request = match item.request {
            Ok(r) => r,
            Err(why) => {
                bad += 1;
                let msg = format!("{}:{}: {why}", input.path.display(), item.line);
                if args.traffic.strict {
                    anyhow::bail!(msg);
                }
                eprintln!("nginx-ketama: {msg}");
                continue;
            }
        };
        let (request_text, _) = key_text(request.line());
        // The key outlives the match: the line borrows it.
        let key: Vec<u8>;
        let goes = match dispatcher.dispatch(&request) {
            Ok(Dispatch::Hash { upstream, key: k, retry }) => {
                key = k;
                let up = config.hash_upstream(Some(&upstream))?.upstream;
                let i = match workers.iter().position(|(n, _)| *n == upstream) {
                    Some(i) => i,
                    None => {
                        workers.push((upstream.clone(), Worker::new(up)));
                        workers.len() - 1
                    }
                };
                // The request's own method; its body as nginx's default `proxy_request_buffering on` leaves it.
                // (The request was parsed to be dispatched, so its line starts with the method.)
                let method = request.line().split(|&c| c == b' ').next().unwrap_or_default();
                let method = std::str::from_utf8(method).unwrap_or("").parse().unwrap_or_default();
                let client = ClientRequest { method, ..ClientRequest::default() };
                let outcome = workers[i].1.request_with(&key, NOW, &retry, &client, |p| failures.reply(p));
                let (status, upstream_status) = match statuses {
                    true => (Some(outcome.client_status), Some(upstream_statuses(&outcome))),
                    false => (None, None),
                };
                Goes::Hash { upstream: up.name(), picked: Picked::new(&key, up, &outcome), status, upstream_status }
            }
            Ok(other) => match not_hashed(&other) {
                NotHashed::Answered { status, why } => Goes::Answered { status, why },
                NotHashed::Elsewhere { why } => Goes::Elsewhere { why },
            },
            Err(e) => Goes::NotModelled { why: e.to_string() },
        };
        let line = RequestLine { schema: schema::ROUTE_REQUEST, line: item.line, request: request_text, goes };
        serde_json::to_writer(&mut out, &line).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    if bad > 0 {
        eprintln!("nginx-ketama: {bad} of {read} lines of {} could not be read as requests", input.path.display());
    }
    Ok(())
}
