//! `nginx-ketama`: ask which upstream server nginx picks for a key, dump a ring, or prove the library
//! against a real nginx.

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use nginx_ketama::config::{Config, LoadOptions};
use nginx_ketama::{NginxVersion, Upstream, Worker};
use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "nginx-ketama", version, about = "nginx's `hash $key [consistent]` upstream choice, bit for bit")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct UpstreamArgs {
    /// nginx configuration file (includes are followed).
    #[arg(long)]
    config: PathBuf,
    /// The upstream to use; may be left out when the file has exactly one.
    #[arg(long)]
    upstream: Option<String>,
    /// Make every `server` line exactly one peer, with no DNS lookups.
    #[arg(long)]
    no_resolve: bool,
    /// Follow the rules of this nginx version (they differ only for plain `hash` with one primary plus backups).
    #[arg(long, default_value_t = NginxVersion::LATEST)]
    nginx_version: NginxVersion,
}

#[derive(Subcommand)]
enum Command {
    /// Route keys read from stdin (one per line, split on \n only) as consecutive requests to one fresh
    /// nginx worker; print one JSON line per key.
    Route {
        #[command(flatten)]
        upstream: UpstreamArgs,
        /// A server that refuses connections: a configured server string (every peer of that line) or one
        /// peer address as nginx prints it in $upstream_addr (e.g. 127.0.0.9:8080, [::1]:8080). Repeatable.
        #[arg(long = "failed", value_name = "SERVER")]
        failed: Vec<String>,
    },
    /// Dump the consistent-hash ring: point index, hash, server.
    Ring {
        #[command(flatten)]
        upstream: UpstreamArgs,
    },
    /// Prove the library against real nginx: random topologies, keys and every ring arc, per version.
    Verify(nginx_ketama::harness::cli::VerifyArgs),
    /// Resolve names like nginx at startup, one line per name: NAME ADDRESS... (used by the harness).
    #[command(hide = true)]
    ResolveHosts { names: Vec<String> },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Route { upstream, failed } => route(&upstream, &failed),
        Command::Ring { upstream } => ring(&upstream),
        Command::Verify(args) => nginx_ketama::harness::cli::verify(args),
        Command::ResolveHosts { names } => resolve_hosts(&names),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("nginx-ketama: {e:#}");
            std::process::exit(2);
        }
    }
}

fn load(args: &UpstreamArgs) -> Result<(Config, String)> {
    let options = LoadOptions { resolve: !args.no_resolve, version: args.nginx_version, ..LoadOptions::default() };
    let config = Config::load(&args.config, &options)?;
    for w in &config.warnings {
        eprintln!("nginx-ketama: [warn] {w}");
    }
    let name = config.hash_upstream(args.upstream.as_deref())?.config.name.clone();
    Ok((config, name))
}

fn route(args: &UpstreamArgs, failed: &[String]) -> Result<i32> {
    let (config, name) = load(args)?;
    let upstream: &Upstream = config.hash_upstream(Some(&name))?.upstream;
    let all_peers = || upstream.primary().iter().chain(upstream.backup());
    for f in failed {
        if !all_peers().any(|p| p.server().as_str() == f || p.name() == f) {
            let known: Vec<String> = all_peers().map(|p| format!("{} ({})", p.server(), p.name())).collect();
            bail!(
                "--failed {f:?} matches no server string or peer address in upstream \"{name}\"; peers: {}",
                known.join(", ")
            );
        }
    }
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).context("reading keys from stdin")?;
    let mut keys: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if input.is_empty() || input.ends_with(b"\n") {
        keys.pop();
    }
    let mut worker = Worker::new(upstream);
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    // All keys arrive within the same second of nginx's clock (failed peers stay failed for the run).
    let now = 1_000_000_000;
    for key in keys {
        let outcome = worker.request(key, now, |p| failed.iter().any(|f| f == p.server().as_str() || f == p.name()));
        let attempts: Vec<&str> = outcome.attempts.iter().map(|&id| upstream.peer(id).server().as_str()).collect();
        let line = RouteLine {
            key: String::from_utf8_lossy(key),
            key_hex: std::str::from_utf8(key).is_err().then(|| key.iter().map(|b| format!("{b:02x}")).collect()),
            server: attempts.first().copied(),
            fallback: outcome.round_robin.then_some("round-robin"),
            attempts,
        };
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(0)
}

/// One line of `route` output, fields in the documented order.
#[derive(serde::Serialize)]
struct RouteLine<'a> {
    key: std::borrow::Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_hex: Option<String>,
    server: Option<&'a str>,
    fallback: Option<&'a str>,
    attempts: Vec<&'a str>,
}

fn ring(args: &UpstreamArgs) -> Result<i32> {
    let (config, name) = load(args)?;
    let Some(ring) = config.hash_upstream(Some(&name))?.upstream.ring() else {
        bail!("upstream \"{name}\" uses plain `hash`, which has no ring (add `consistent`)");
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    writeln!(out, "index\thash\tserver")?;
    for (i, p) in ring.points().enumerate() {
        writeln!(out, "{i}\t{:08x}\t{}", p.hash, p.server)?;
    }
    out.flush()?;
    Ok(0)
}

fn resolve_hosts(names: &[String]) -> Result<i32> {
    for name in names {
        let addrs = nginx_ketama::resolve::resolve_host(name).with_context(|| format!("resolving {name}"))?;
        let addrs: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        println!("{name} {}", addrs.join(" "));
    }
    Ok(0)
}
