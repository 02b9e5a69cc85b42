//! `nginx-ketama explain`: every step nginx takes for each key.

use crate::args::{self, ConfigArgs, FailArgs, Failed, FormatArg};
use crate::render::{Format, json, key_text};
use crate::route::NOW;
use crate::schema::Schema;
use anyhow::{Result, bail};
use nginx_ketama::analysis::explain::{Explanation, Landing, explain, explain_with};
use nginx_ketama::worker::{Step, Verdict};
use nginx_ketama::{List, PeerId, Status, Upstream, Worker};
use std::ffi::OsString;
use std::io::{BufWriter, Write};

/// The schema of `explain --format json` (docs/schemas/explain.v1.json).
const SCHEMA: Schema = Schema("nginx-ketama/explain/v1");

/// `explain`'s arguments.
#[derive(clap::Args)]
#[command(mut_args(args::help_of(
    "format",
    "Output format (`table` prints the explanation as text; `csv` is not offered)"
)))]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArgs,
    #[command(flatten)]
    failed: Failed,
    #[command(flatten)]
    failures: FailArgs,
    #[command(flatten)]
    format: FormatArg,
    /// The keys, explained as consecutive requests to one fresh worker (as `route` reads them).
    #[arg(required_unless_present = "request", value_name = "KEY")]
    keys: Vec<OsString>,
    /// Explain a request instead of a key: its request line (`GET /a?x=1 HTTP/1.1`; the protocol may be left
    /// out). Shows the server block and location nginx chooses, the upstream, and each part of its key.
    #[arg(long, value_name = "LINE", conflicts_with = "keys")]
    request: Option<String>,
    /// A header line of --request (`Host: shop.example`; repeatable, in order).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", requires = "request")]
    headers: Vec<String>,
    /// The client address of --request.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:40000", requires = "request")]
    client: std::net::SocketAddr,
    /// The address --request arrives on (default: the first `listen` of the first server).
    #[arg(long, value_name = "ADDR:PORT", requires = "request")]
    server_addr: Option<std::net::SocketAddr>,
}

/// The JSON document of `explain`.
#[derive(serde::Serialize)]
struct ExplainJson {
    schema: Schema,
    /// One per key, in order.
    keys: Vec<KeyJson>,
}

/// One key of `explain --format json`.
#[derive(serde::Serialize)]
struct KeyJson {
    key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_hex: Option<String>,
    crc32: String,
    landing: LandingJson,
    steps: Vec<StepJson>,
    /// Configured server strings, in order (as `route` prints them).
    attempts: Vec<String>,
    /// `answered`, `failed` or `no-live-upstreams`.
    status: &'static str,
    /// `round-robin` when nginx's round-robin code chose at least once.
    fallback: Option<&'static str>,
    /// With --fail, --method or --location: what the client gets.
    #[serde(skip_serializing_if = "Option::is_none")]
    client_status: Option<u16>,
    /// With --fail, --method or --location: each attempt's `$upstream_status` (and nginx's 502 when no
    /// live upstream was left).
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_status: Option<Vec<u16>>,
}

#[derive(serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum LandingJson {
    Point { index: usize, hash: String, server: String, arc_start: String, arc_end: String, arc_length: u64 },
    Slot { value: u32, slot: u64, peer: PeerJson },
    NotHashed { reason: String },
}

#[derive(serde::Serialize)]
struct PeerJson {
    server: String,
    address: String,
    backup: bool,
}

#[derive(serde::Serialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
enum StepJson {
    Point {
        index: usize,
        hash: String,
        server: String,
        #[serde(flatten)]
        verdict: VerdictJson,
    },
    Rehash {
        rehash: u64,
        crc32: String,
        value: u32,
        sum: u32,
        slot: u64,
        backup: bool,
        #[serde(flatten)]
        verdict: VerdictJson,
    },
    Fallback {
        reason: String,
    },
    RoundRobin {
        backup: bool,
        chosen: Option<PeerJson>,
    },
    SwitchToBackup,
    Attempt {
        #[serde(flatten)]
        peer: PeerJson,
        failed: bool,
    },
    End {
        status: &'static str,
    },
}

#[derive(serde::Serialize)]
struct VerdictJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    chosen: Option<PeerJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    miss: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    passed: Vec<PassedJson>,
}

#[derive(serde::Serialize)]
struct PassedJson {
    #[serde(flatten)]
    peer: PeerJson,
    why: String,
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Answered => "answered",
        Status::Failed => "failed",
        Status::NoLiveUpstreams => "no-live-upstreams",
    }
}

fn to_json(up: &Upstream, e: &Explanation, statuses: bool) -> KeyJson {
    let peer = |id: PeerId| {
        let p = up.peer(id);
        PeerJson { server: p.server().to_string(), address: p.name().to_string(), backup: id.list == List::Backup }
    };
    let ring_server = |s: usize| up.ring().map_or_else(String::new, |r| r.servers()[s].to_string());
    let verdict = |v: &Verdict| match v {
        Verdict::Chosen(id) => VerdictJson { chosen: Some(peer(*id)), miss: None, passed: Vec::new() },
        Verdict::Miss { misses, passed } => VerdictJson {
            chosen: None,
            miss: Some(*misses),
            passed: passed.iter().map(|(id, why)| PassedJson { peer: peer(*id), why: why.to_string() }).collect(),
        },
    };
    let landing = match e.landing {
        Landing::Point { index, hash, server, arc } => LandingJson::Point {
            index,
            hash: format!("{hash:08x}"),
            server: ring_server(server),
            arc_start: format!("{:08x}", arc.start),
            arc_end: format!("{:08x}", arc.end),
            arc_length: arc.len,
        },
        Landing::Slot { step, slot, owner } => {
            LandingJson::Slot { value: step.step, slot, peer: peer(PeerId { list: List::Primary, index: owner }) }
        }
        Landing::NotHashed(reason) => LandingJson::NotHashed { reason: reason.to_string() },
    };
    let steps = e
        .steps
        .iter()
        .map(|s| match s {
            Step::Point { index, hash, server, verdict: v } => StepJson::Point {
                index: *index,
                hash: format!("{hash:08x}"),
                server: ring_server(*server),
                verdict: verdict(v),
            },
            Step::Rehash { step, slot, list, verdict: v, .. } => StepJson::Rehash {
                rehash: step.rehash,
                crc32: format!("{:08x}", step.crc),
                value: step.step,
                sum: step.sum,
                slot: *slot,
                backup: *list == List::Backup,
                verdict: verdict(v),
            },
            Step::Fallback(reason) => StepJson::Fallback { reason: reason.to_string() },
            Step::RoundRobin { list, chosen } => StepJson::RoundRobin {
                backup: *list == List::Backup,
                chosen: chosen.map(|index| peer(PeerId { list: *list, index })),
            },
            Step::SwitchToBackup => StepJson::SwitchToBackup,
            Step::Attempt { peer: id, failed } => StepJson::Attempt { peer: peer(*id), failed: *failed },
            Step::End(status) => StepJson::End { status: status_name(*status) },
        })
        .collect();
    let (key, key_hex) = key_text(&e.key);
    KeyJson {
        key: key.into_owned(),
        key_hex,
        crc32: format!("{:08x}", e.crc32),
        landing,
        steps,
        attempts: e.outcome.attempts.iter().map(|&id| up.peer(id).server().to_string()).collect(),
        status: status_name(e.outcome.status),
        fallback: e.outcome.round_robin.then_some("round-robin"),
        client_status: statuses.then_some(e.outcome.client_status),
        upstream_status: statuses.then(|| crate::route::upstream_statuses(&e.outcome)),
    }
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let format = args.format.format;
    if format == Format::Csv {
        bail!("explain has no CSV form (its steps are not a table): use --format table or json");
    }
    if let Some(line) = &args.request {
        return explain_request(args, line);
    }
    let loaded = args.config.load()?;
    let up = &loaded.upstream;
    let fails = args.failed.in_upstream(up)?;
    let failures = if args.failures.given() { Some(args.failures.resolve(&loaded, &args.failed)?) } else { None };
    let mut worker = Worker::new(up);
    let explanations: Vec<Explanation> = args
        .keys
        .iter()
        .map(|k| {
            let key = std::os::unix::ffi::OsStrExt::as_bytes(k.as_os_str());
            match &failures {
                None => explain(&mut worker, key, NOW, fails),
                Some(f) => explain_with(&mut worker, key, NOW, &f.policy, &f.client, |p| f.reply(p)),
            }
        })
        .collect();
    let statuses = failures.is_some();
    let mut out = BufWriter::new(crate::stdout::stdout());
    match format {
        Format::Json => {
            let keys = explanations.iter().map(|e| to_json(up, e, statuses)).collect();
            json(&mut out, &ExplainJson { schema: SCHEMA, keys })?
        }
        _ => {
            for (i, e) in explanations.iter().enumerate() {
                if i > 0 {
                    writeln!(out)?;
                }
                write!(out, "{}", e.render(up))?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// The schema of `explain --request --format json` (docs/schemas/explain-request.v1.json).
const REQUEST_SCHEMA: Schema = Schema("nginx-ketama/explain-request/v1");

/// The JSON document of `explain --request`.
#[derive(serde::Serialize)]
struct RequestJson {
    schema: Schema,
    /// The request line (invalid UTF-8 replaced).
    request: String,
    /// The header lines, in order, as `[name, value]`.
    headers: Vec<(String, String)>,
    client: String,
    server_addr: String,
    /// `FILE:LINE` of the `server` block chosen, once one is.
    server_block: Option<String>,
    /// `FILE:LINE` of the `location` chosen, once one is.
    location: Option<String>,
    #[serde(flatten)]
    goes: RequestGoes,
}

/// Where the request goes: to a hash upstream (how its key is built, then the key's explanation), or as
/// `route --requests` says it.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum RequestGoes {
    Hash {
        /// Always `hash`.
        goes: &'static str,
        upstream: String,
        /// The `hash` directive's expression as written.
        expression: String,
        /// Each part of the expression and the bytes it gave, in order.
        parts: Vec<PartJson>,
        /// The key's explanation, as `explain KEY` gives it (`nginx-ketama/explain/v1`'s `keys` item).
        explanation: Box<KeyJson>,
    },
    Other(crate::route::NotHashed),
}

/// One part of a key expression.
#[derive(serde::Serialize)]
struct PartJson {
    /// `text`, `variable` or `capture`.
    part: &'static str,
    /// The variable's name (without `$`) or the capture's number; absent for text.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    value: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_hex: Option<String>,
}

/// `explain --request`: where nginx sends the request, how its key is built, then the key's steps.
fn explain_request(args: &Args, line: &str) -> Result<()> {
    use nginx_ketama::config::expression::Part;
    use nginx_ketama::dispatch::{Dispatch, trace};
    use nginx_ketama::request::Request;
    let config = args.config.load_config()?;
    let mut head = line.to_string();
    if line.split(' ').count() == 2 {
        head.push_str(" HTTP/1.1");
    }
    for h in &args.headers {
        head.push_str("\r\n");
        head.push_str(h);
    }
    let server = args.server_addr.unwrap_or_else(|| crate::traffic::first_listen(&config));
    let request = Request::from_head(head.as_bytes(), args.client, server, nginx_ketama::request::Scheme::Http)
        .map_err(|e| anyhow::anyhow!("--request: {e}"))?;
    let (dispatched, t) = trace(&config, &request)?;
    let hashed = match &dispatched {
        Dispatch::Hash { upstream, key, .. } => {
            let chosen = config.hash_upstream(Some(upstream))?;
            let up = chosen.upstream;
            let fails = args.failed.in_upstream(up)?;
            let explanation = explain(&mut Worker::new(up), key, NOW, fails);
            Some((upstream.as_str(), chosen.key, up, explanation))
        }
        _ => None,
    };
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut out = BufWriter::new(crate::stdout::stdout());
    if args.format.format == Format::Json {
        let goes = match hashed {
            Some((upstream, expression, up, e)) => RequestGoes::Hash {
                goes: "hash",
                upstream: upstream.to_string(),
                expression: expression.to_string(),
                parts: t
                    .key_parts
                    .iter()
                    .map(|(part, bytes)| {
                        let (part, name) = match part {
                            Part::Literal(_) => ("text", None),
                            Part::Variable(name) => ("variable", Some(name.to_string())),
                            Part::Capture(n) => ("capture", Some(n.to_string())),
                        };
                        let (value, value_hex) = key_text(bytes);
                        PartJson { part, name, value: value.into_owned(), value_hex }
                    })
                    .collect(),
                explanation: Box::new(to_json(up, &e, false)),
            },
            None => RequestGoes::Other(crate::route::not_hashed(&dispatched)),
        };
        let doc = RequestJson {
            schema: REQUEST_SCHEMA,
            request: lossy(request.line()),
            headers: request.headers().iter().map(|h| (lossy(&h.name), lossy(&h.value))).collect(),
            client: args.client.to_string(),
            server_addr: server.to_string(),
            server_block: t.server.as_ref().map(ToString::to_string),
            location: t.location.as_ref().map(ToString::to_string),
            goes,
        };
        json(&mut out, &doc)?;
        out.flush()?;
        return Ok(());
    }
    writeln!(out, "request {:?} from {} to {server}", lossy(request.line()), args.client)?;
    for h in request.headers() {
        writeln!(out, "  {}: {}", lossy(&h.name), lossy(&h.value))?;
    }
    if let Some(at) = &t.server {
        writeln!(out, "server block at {at}")?;
    }
    if let Some(at) = &t.location {
        writeln!(out, "location at {at}")?;
    }
    let Some((upstream, expression, up, e)) = hashed else {
        writeln!(out, "goes: {}", crate::route::not_hashed(&dispatched))?;
        out.flush()?;
        return Ok(());
    };
    writeln!(out, "upstream {upstream}: hash {expression}")?;
    for (part, bytes) in &t.key_parts {
        let value = String::from_utf8_lossy(bytes);
        match part {
            Part::Literal(_) => writeln!(out, "  text       {value:?}")?,
            Part::Variable(name) => writeln!(out, "  ${name:<9} {value:?}")?,
            Part::Capture(n) => writeln!(out, "  ${n:<9} {value:?}")?,
        }
    }
    write!(out, "{}", e.render(up))?;
    out.flush()?;
    Ok(())
}
