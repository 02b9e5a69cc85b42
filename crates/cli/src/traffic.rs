//! Requests as input (`--requests FILE`, `--log FILE`): each line read in bounded memory into a
//! [`Request`], or a message naming the file and line. `--requests` takes one JSON object per line;
//! `--log` an access log in a `log_format` of the configuration (`combined` by default) or given as text.

use crate::lines::{BoundedLines, MAX_KEY_BYTES};
use anyhow::{Context, Result, bail};
use nginx_ketama::access_log::{self, Defaults, LogLine};
use nginx_ketama::config::expression::Expression;
use nginx_ketama::config::log_format::{Escape, LogFormat};
use nginx_ketama::config::{Balancer, Config, Context as UpstreamContext};
use nginx_ketama::dispatch;
use nginx_ketama::failure::Proxying;
use nginx_ketama::request::{Request, Scheme};
use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;

/// `--requests FILE | --log FILE` and how to read them.
#[derive(clap::Args)]
pub(crate) struct Traffic {
    /// Route requests instead of keys: one JSON object per line, `{"target": "/a?x=1"}` at least, with
    /// `method` (GET), `version` (HTTP/1.1), `headers` (`[["Host", "shop.example"], …]`, in order),
    /// `client` and `server` (`ADDR:PORT`) and `scheme` (`http`) as needed. Each goes where nginx would send
    /// it (server block, location, upstream) and is hashed by that upstream's key.
    #[arg(long, value_name = "FILE", conflicts_with = "log")]
    pub(crate) requests: Option<PathBuf>,
    /// Route the requests an access log records: each line read back with --log-format (the request line,
    /// Host and other logged headers, cookies, addresses). A key variable the format does not log is an
    /// error before anything is read.
    #[arg(long, value_name = "FILE")]
    pub(crate) log: Option<PathBuf>,
    /// The log's format: a `log_format` name of --config (default `combined`), or the format's text itself
    /// when it contains a `$` (`'$remote_addr "$request" "$http_host"'`).
    #[arg(long, value_name = "NAME|TEXT", requires = "log")]
    pub(crate) log_format: Option<String>,
    /// The address and port requests arrive on when a line does not say (default: the first `listen` of the
    /// configuration's first server, 127.0.0.1 for a wildcard).
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) server_addr: Option<SocketAddr>,
    /// The `Host` of logged requests when the log format has neither `$http_host` nor `$host` (default: the
    /// first `server_name` of the configuration's first server).
    #[arg(long, value_name = "NAME", requires = "log")]
    pub(crate) host: Option<String>,
    /// Stop at the first line that cannot be read (exit 2, naming it) instead of reporting and counting it.
    #[arg(long)]
    pub(crate) strict: bool,
}

/// Where the requests come from.
pub(crate) enum Source {
    Json,
    Log(LogFormat),
}

/// One request read, or why its line could not be.
pub(crate) struct Input {
    pub(crate) line: u64,
    pub(crate) request: Result<Request, String>,
}

/// The lines of `--requests` or `--log` as requests, in bounded memory.
pub(crate) struct Requests {
    lines: BoundedLines<File>,
    source: Source,
    defaults: Defaults,
    buf: Vec<u8>,
    line: u64,
    pub(crate) path: PathBuf,
}

impl Traffic {
    /// Whether requests are the input.
    pub(crate) fn given(&self) -> bool {
        self.requests.is_some() || self.log.is_some()
    }

    /// Opens the input; for a log, checks first that the format carries what every proxied hash key needs.
    pub(crate) fn open(&self, config: &Config) -> Result<Requests> {
        let (path, source) = match (&self.requests, &self.log) {
            (Some(p), _) => (p.clone(), Source::Json),
            (None, Some(p)) => (p.clone(), Source::Log(self.format(config)?)),
            (None, None) => bail!("neither --requests nor --log"),
        };
        if let Source::Log(format) = &source {
            check_format(config, format)?;
        }
        let file = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        let server = self.server_addr.unwrap_or_else(|| first_listen(config));
        let mut defaults = Defaults { server, ..Defaults::default() };
        if let Source::Log(format) = &source
            && !format.variables().any(|v| v == "host" || v == "http_host")
        {
            let first = config.sites().first().map(|s| s.server_name().to_vec()).filter(|n| !n.is_empty());
            let host = self.host.clone().map(String::into_bytes).or(first).with_context(|| {
                format!(
                    "log_format \"{}\" logs no host and the first server has no server_name: give --host",
                    format.name
                )
            })?;
            defaults.host = Some(host);
        }
        let lines = BoundedLines::new(file, path.display().to_string(), "a line", MAX_KEY_BYTES);
        Ok(Requests { lines, source, defaults, buf: Vec::new(), line: 0, path })
    }

    fn format(&self, config: &Config) -> Result<LogFormat> {
        match self.log_format.as_deref() {
            None => Ok(LogFormat::combined()),
            Some(text) if text.contains('$') => LogFormat::from_text("--log-format", Escape::Default, text.as_bytes())
                .map_err(|e| anyhow::anyhow!("--log-format: {e}")),
            Some(name) => {
                config.log_format(name).with_context(|| format!("no log_format \"{name}\" in the configuration"))
            }
        }
    }
}

impl Requests {
    /// The next line's request; `None` at the end.
    ///
    /// # Errors
    ///
    /// Reading the file (a line over the limit included): fatal, unlike a line that is not a request.
    pub(crate) fn next(&mut self) -> Result<Option<Input>> {
        if !self.lines.next_into(&mut self.buf)? {
            return Ok(None);
        }
        self.line += 1;
        let line = self.line;
        let text = self.buf.strip_suffix(b"\r").unwrap_or(&self.buf);
        let request = match &self.source {
            Source::Json => json_request(text, &self.defaults),
            Source::Log(format) => {
                LogLine::parse(format, text).and_then(|l| l.request(&self.defaults)).map_err(|e| e.to_string())
            }
        };
        Ok(Some(Input { line, request }))
    }
}

/// A `--requests` line.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    #[serde(default = "get")]
    method: String,
    target: String,
    #[serde(default = "http11")]
    version: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    client: Option<SocketAddr>,
    server: Option<SocketAddr>,
    #[serde(default)]
    scheme: JsonScheme,
}

#[derive(serde::Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum JsonScheme {
    #[default]
    Http,
    Https,
}

fn get() -> String {
    "GET".into()
}

fn http11() -> String {
    "HTTP/1.1".into()
}

fn json_request(text: &[u8], defaults: &Defaults) -> Result<Request, String> {
    let j: JsonRequest = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    let mut b = Request::builder(&j.method, &j.target)
        .version(&j.version)
        .client(j.client.unwrap_or(SocketAddr::new(defaults.client.ip(), 40000)))
        .server(j.server.unwrap_or(defaults.server))
        .scheme(match j.scheme {
            JsonScheme::Http => Scheme::Http,
            JsonScheme::Https => Scheme::Https,
        });
    for (name, value) in &j.headers {
        b = b.header(name, value);
    }
    Ok(b.build())
}

/// The first `listen` of the first server (127.0.0.1 for a wildcard), else 127.0.0.1:80.
pub(crate) fn first_listen(config: &Config) -> SocketAddr {
    let lo = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    let l = config.sites().first().and_then(|s| s.listen.first());
    l.map_or(SocketAddr::new(lo, 80), |l| SocketAddr::new(l.addr.unwrap_or(lo), l.port))
}

/// Every hash upstream a `proxy_pass` reaches: the variables its key needs must be in the log.
fn check_format(config: &Config, format: &LogFormat) -> Result<()> {
    for up in &config.upstreams {
        let Balancer::Hash { key, .. } = &up.balancer else { continue };
        let proxied =
            config.proxied.iter().any(|p| p.module == Proxying::Proxy && p.upstream.eq_ignore_ascii_case(&up.name));
        if up.context != UpstreamContext::Http || !proxied {
            continue;
        }
        let expr = Expression::parse(key.as_bytes()).map_err(|e| anyhow::anyhow!("upstream \"{}\": {e}", up.name))?;
        let missing = access_log::missing(format, &dispatch::needs(config, &expr));
        if !missing.is_empty() {
            let carried: Vec<String> = format.variables().map(|v| format!("${v}")).collect();
            let missing: Vec<String> = missing.iter().map(|v| format!("${v}")).collect();
            let at = format.at.as_ref().map(|l| format!(" ({l})")).unwrap_or_default();
            bail!(
                "upstream \"{}\" hashes \"{key}\", which needs {} that log_format \"{}\"{at} does not log (it logs {})",
                up.name,
                missing.join(", "),
                format.name,
                carried.join(", ")
            );
        }
    }
    Ok(())
}

/// What a run over requests saw besides the keys it counted.
#[derive(Default)]
struct Tally {
    read: u64,
    bad: u64,
    elsewhere: u64,
}

/// How often a long input says how far it is (on stderr, when stderr is a terminal).
const PROGRESS_EVERY: u64 = 1_000_000;

/// The keys of the requests of `traffic` that reach the named upstream in every one of `sides` (one key
/// per side, in order), streamed to `count`; what was read, not readable and not reaching the upstream is
/// said on stderr at the end.
///
/// # Errors
///
/// Opening or reading the file, a log format that cannot carry a key, a bad line under `--strict`.
pub(crate) fn keys<T>(
    traffic: &Traffic,
    sides: &[(&Config, &str)],
    count: impl FnOnce(&mut dyn Iterator<Item = Vec<Vec<u8>>>) -> T,
) -> Result<T> {
    use nginx_ketama::dispatch::{Dispatch, Dispatcher};
    use std::io::IsTerminal;
    let mut inputs = Vec::new();
    for (config, _) in sides {
        inputs.push(traffic.open(config)?);
    }
    let mut input = inputs.swap_remove(0);
    let dispatchers: Vec<Dispatcher<'_>> = sides.iter().map(|(c, _)| Dispatcher::new(c)).collect();
    let path = input.path.clone();
    let mut tally = Tally::default();
    let mut error = None;
    let progress = std::io::stderr().is_terminal();
    let mut keys = std::iter::from_fn(|| {
        loop {
            let item = match input.next() {
                Ok(Some(item)) => item,
                Ok(None) => return None,
                Err(e) => {
                    error = Some(e);
                    return None;
                }
            };
            tally.read += 1;
            if progress && tally.read % PROGRESS_EVERY == 0 {
                eprintln!("nginx-ketama: {} lines of {} read", tally.read, path.display());
            }
            let request = match item.request {
                Ok(r) => r,
                Err(why) => {
                    tally.bad += 1;
                    let msg = format!("{}:{}: {why}", path.display(), item.line);
                    if traffic.strict {
                        error = Some(anyhow::anyhow!(msg));
                        return None;
                    }
                    eprintln!("nginx-ketama: {msg}");
                    continue;
                }
            };
            let mut keys = Vec::with_capacity(sides.len());
            for (dispatcher, (_, upstream)) in dispatchers.iter().zip(sides) {
                match dispatcher.dispatch(&request) {
                    Ok(Dispatch::Hash { upstream: u, key, .. }) if u.eq_ignore_ascii_case(upstream) => keys.push(key),
                    _ => break,
                }
            }
            if keys.len() == sides.len() {
                return Some(keys);
            }
            tally.elsewhere += 1;
        }
    });
    let counted = count(&mut keys);
    if let Some(e) = error {
        return Err(e);
    }
    let mut upstreams: Vec<String> = sides.iter().map(|(_, u)| format!("\"{u}\"")).collect();
    upstreams.dedup();
    eprintln!(
        "nginx-ketama: {} of {} requests of {} counted; {} could not be read, {} do not reach upstream {}",
        tally.read - tally.bad - tally.elsewhere,
        tally.read,
        path.display(),
        tally.bad,
        tally.elsewhere,
        upstreams.join(" and ")
    );
    Ok(counted)
}
