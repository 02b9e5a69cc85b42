//! `nginx-ketama`: ask which upstream server nginx picks for a key, dump a ring, or prove the library
//! against a real nginx.
//!
//! The offline commands (`route`, `ring`, the analysis commands `explain`, `share`, `diff`, `forge` and
//! `compare`, `completions`, `man`) need only the core library; the commands
//! that run nginx or a port (`verify`, `replay-vectors`, `shim`, and the hidden `record-vectors` and
//! `cleanup`) come with the `live` feature, on by default.

// `print!` and `println!` for the whole crate: defined before the modules, they take the place of std's
// there. A failed write to stdout unwinds to `main`, which ends the command as `stdout` says, instead of
// panicking with "failed printing to stdout". (Only the `live` commands print this way.)
#[cfg_attr(not(feature = "live"), allow(unused_macros))]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::stdout::print(format_args!($($arg)*))
    };
}

#[cfg_attr(not(feature = "live"), allow(unused_macros))]
macro_rules! println {
    () => {
        $crate::stdout::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod analysis;
mod lines;
#[cfg(feature = "live")]
mod live;
mod stdout;

use anyhow::{Context, Result, bail};
use clap::builder::TypedValueParser as _;
use clap::{CommandFactory, Parser, Subcommand};
use lines::BoundedLines;
use nginx_ketama::config::{Config, Input, LoadOptions};
use nginx_ketama::{Libc, NginxVersion, Peer, Upstream, Worker};
use std::io::{BufWriter, ErrorKind, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Parser)]
#[command(
    name = "nginx-ketama",
    version = VERSION.as_str(),
    about = "nginx's `hash $key [consistent]` upstream choice, bit for bit"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `--version`: the crate's version and the nginx releases whose routing it models
/// (`0.1.0 (models nginx 1.18.0 to 1.30.x)`), from [`nginx_ketama::version::MODELLED`].
static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let (first, last) = (nginx_ketama::version::MODELLED.start(), nginx_ketama::version::MODELLED.end());
    let patch = if last.patch == u32::MAX { "x".to_string() } else { last.patch.to_string() };
    format!("{} (models nginx {first} to {}.{}.{patch})", env!("CARGO_PKG_VERSION"), last.major, last.minor)
});

#[derive(clap::Args)]
struct UpstreamArgs {
    /// nginx configuration file (includes are followed). Host names in its `server` lines are resolved with
    /// this machine's system resolver (getaddrinfo: /etc/hosts, DNS), as nginx resolves them at start-up, unless
    /// --no-resolve.
    #[arg(long)]
    config: PathBuf,
    /// The upstream to use (`NAME`, or `http:NAME` / `stream:NAME` when both contexts have one); may be left
    /// out when the file has exactly one.
    #[arg(long)]
    upstream: Option<String>,
    /// Make every `server` line exactly one peer, with no DNS lookups. Without it a host name is resolved
    /// with the system resolver, as nginx does at start-up, and each of its addresses is a peer.
    #[arg(long)]
    no_resolve: bool,
    /// Follow the rules of this nginx version (modelled: 1.18.0 to 1.30.x).
    #[arg(long, default_value_t = NginxVersion::LATEST, value_parser = modelled_version)]
    nginx_version: NginxVersion,
    /// The C library nginx was built with: glibc (Debian, Ubuntu, RHEL, nginx.org packages) or musl (Alpine,
    /// the `-alpine` images). It decides which server keeps a ring point two servers share.
    #[arg(long, default_value_t = Libc::Glibc, value_parser = libc_parser())]
    libc: Libc,
    /// Read the file as a fragment (a `conf.d` include holding `upstream` blocks) that would sit inside
    /// `http { }` (the default) or `stream { }`, instead of a whole nginx.conf. This reads less than nginx.
    #[arg(long, value_enum, value_name = "CONTEXT", num_args = 0..=1, default_missing_value = "http")]
    fragment: Option<FragmentOf>,
}

/// `--libc`: one of [`Libc::ALL`] by name (listed in `--help` and the completions).
fn libc_parser() -> impl clap::builder::TypedValueParser<Value = Libc> {
    clap::builder::PossibleValuesParser::new(Libc::ALL.map(Libc::as_str)).try_map(|s| s.parse::<Libc>())
}

/// Where a `--fragment` file's directives would sit.
#[derive(Clone, Copy, clap::ValueEnum)]
enum FragmentOf {
    Http,
    Stream,
}

fn modelled_version(s: &str) -> Result<NginxVersion, String> {
    let v: NginxVersion = s.parse().map_err(|e| format!("{e}"))?;
    v.modelled().map_err(|e| e.to_string())
}

#[derive(Subcommand)]
enum Command {
    /// Route keys read from stdin (one per line, split on \n only) as consecutive requests to one fresh
    /// nginx worker; print one JSON line per key.
    Route {
        #[command(flatten)]
        upstream: UpstreamArgs,
        /// A server that refuses connections: a configured server string (every peer of that line) or one
        /// peer address as nginx prints it in $upstream_addr (e.g. `127.0.0.9:8080`, `[::1]:8080`). Repeatable.
        #[arg(long = "failed", value_name = "SERVER")]
        failed: Vec<String>,
    },
    /// Dump the consistent-hash ring: point index, hash, server.
    Ring {
        #[command(flatten)]
        upstream: UpstreamArgs,
    },
    /// Explain keys step by step: CRC32, ring point and arc (or plain-hash slot), every point or rehash
    /// step nginx walks, skipped peers and why, the round-robin fallback, the attempts (as `route`).
    Explain(analysis::explain::ExplainArgs),
    /// Each server's exact share of first picks over all 2^32 CRC32 values, failing servers walked past.
    Share(analysis::share::ShareArgs),
    /// The exact part of the hash space whose first pick changes between two configurations.
    Diff(analysis::diff::DiffArgs),
    /// Keys whose first pick is a given server, each checked through the ring and a worker.
    Forge(analysis::forge::ForgeArgs),
    /// How many keys another ketama implementation sends to the same server as nginx.
    Compare(analysis::compare::CompareArgs),
    /// Prove the library against real nginx: random topologies, keys and every ring arc, per version.
    #[cfg(feature = "live")]
    Verify(live::verify::VerifyArgs),
    /// Replay the golden vectors through a port's shim (`ports/SHIM.md`); ends with `N passed, M failed`.
    #[cfg(feature = "live")]
    ReplayVectors {
        /// The shim command, run by `sh -c`.
        #[arg(long, value_name = "COMMAND")]
        shim: String,
        /// Vector files (default: vectors/v1/*.json of this repository).
        files: Vec<PathBuf>,
    },
    /// Answer the shim protocol (`ports/SHIM.md`) with this library, on stdin and stdout: the reference
    /// shim, e.g. `nginx-ketama verify --shim "nginx-ketama shim"`.
    #[cfg(feature = "live")]
    Shim,
    /// Print a shell completion script (e.g. `nginx-ketama completions bash > /etc/bash_completion.d/nginx-ketama`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `nginx-ketama man | man -l -`.
    Man,
    /// Resolve names like nginx at startup, one line per name: NAME ADDRESS... (used by the harness).
    #[command(hide = true)]
    ResolveHosts { names: Vec<String> },
    /// Record the golden vectors from every provisioned nginx (run it through scripts/record-vectors).
    #[cfg(feature = "live")]
    #[command(hide = true)]
    RecordVectors(live::RecordVectorsArgs),
    /// Stop what killed parity runs left behind: process groups (nginx, shims), scratch directories and
    /// containers whose owner is gone.
    #[cfg(feature = "live")]
    #[command(hide = true)]
    Cleanup,
}

impl Command {
    /// Whether the exit code is a verdict (`verify`, `replay-vectors`): then a reader that goes away does
    /// not end the command with 0 (see `stdout`).
    fn exits_with_a_verdict(&self) -> bool {
        #[cfg(feature = "live")]
        if matches!(self, Command::Verify(_) | Command::ReplayVectors { .. }) {
            return true;
        }
        false
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = stdout_is_open() {
        eprintln!("nginx-ketama: writing stdout: {e}");
        return ExitCode::from(2);
    }
    #[cfg(feature = "live")]
    if matches!(cli.command, Command::Verify(_) | Command::ReplayVectors { .. } | Command::RecordVectors(_)) {
        // What these commands start is stopped when they are interrupted.
        live::interrupt::install();
    }
    let verdict = cli.command.exits_with_a_verdict();
    // `println!` unwinds with `stdout::Failed` when stdout fails; any other panic goes on as a panic.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli.command))) {
        Ok(code) => code,
        Err(payload) => match payload.downcast::<stdout::Failed>() {
            Ok(failed) => failed.exit(verdict),
            Err(payload) => std::panic::resume_unwind(payload),
        },
    }
}

/// Runs a command and says how it ended.
fn run(command: Command) -> ExitCode {
    // What `print!` left in stdout's buffer is written before the command counts as done.
    #[cfg(feature = "live")]
    let verdict = command.exits_with_a_verdict();
    #[cfg(feature = "live")]
    let flushed = |code: ExitCode| match stdout::flush() {
        Ok(()) => code,
        Err(failed) => failed.exit(verdict),
    };
    let result = match command {
        Command::Route { upstream, failed } => route(&upstream, &failed),
        Command::Ring { upstream } => ring(&upstream),
        Command::Explain(args) => analysis::explain::run(&args),
        Command::Share(args) => analysis::share::run(&args),
        Command::Diff(args) => analysis::diff::run(&args),
        Command::Forge(args) => analysis::forge::run(&args),
        Command::Compare(args) => analysis::compare::run(&args),
        Command::ResolveHosts { names } => resolve_hosts(&names),
        Command::Completions { shell } => completions(shell),
        Command::Man => man(),
        #[cfg(feature = "live")]
        Command::Verify(args) => return flushed(ExitCode::from(live::verify::verify(&args).code())),
        #[cfg(feature = "live")]
        Command::ReplayVectors { shim, files } => return flushed(live::replay_vectors(&shim, files)),
        #[cfg(feature = "live")]
        Command::Shim => live::shim(),
        #[cfg(feature = "live")]
        Command::RecordVectors(args) => return flushed(live::record_vectors(args)),
        #[cfg(feature = "live")]
        Command::Cleanup => live::cleanup(),
    };
    match result.and_then(|()| Ok(stdout::stdout().flush()?)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match stdout::failure(&e) {
            // A reader that stops early (`| head -1`) is not an error.
            Some(ErrorKind::BrokenPipe) => ExitCode::SUCCESS,
            _ => {
                eprintln!("nginx-ketama: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}

/// Whether descriptor 1 was closed when the process started (`>&-`).
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Runs before Rust's runtime starts, which silently reopens a closed stdout on `/dev/null`.
#[used]
#[unsafe(link_section = ".init_array")]
static CHECK_STDOUT: extern "C" fn() = {
    extern "C" fn check() {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        if unsafe { libc::fcntl(1, libc::F_GETFD) } == -1 {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
        }
    }
    check
};

/// The output is this command's answer, so a closed stdout is an error (Rust would drop the writes).
fn stdout_is_open() -> std::io::Result<()> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    Ok(())
}

fn load(args: &UpstreamArgs) -> Result<(Config, String)> {
    let input = match args.fragment {
        None => Input::Config,
        Some(FragmentOf::Http) => Input::Fragment,
        Some(FragmentOf::Stream) => Input::StreamFragment,
    };
    let options = LoadOptions { resolve: !args.no_resolve, version: args.nginx_version, libc: args.libc, input };
    let config = Config::load(&args.config, &options)?;
    for w in &config.warnings {
        eprintln!("nginx-ketama: [warn] {w}");
    }
    let name = config.hash_upstream(args.upstream.as_deref())?.config.name.clone();
    Ok((config, name))
}

/// The peers `--failed` names (each a configured server string or a peer address), as a predicate; an
/// argument that names no peer is an error.
fn failing<'a>(upstream: &Upstream, failed: &'a [String]) -> Result<impl Fn(&Peer) -> bool + Copy + 'a> {
    let all_peers = || upstream.primary().iter().chain(upstream.backup());
    for f in failed {
        if !all_peers().any(|p| p.server().as_str() == f || p.name() == f) {
            let known: Vec<String> = all_peers().map(|p| format!("{} ({})", p.server(), p.name())).collect();
            bail!(
                "--failed {f:?} matches no server string or peer address in upstream \"{}\"; peers: {}",
                upstream.name(),
                known.join(", ")
            );
        }
    }
    Ok(move |p: &Peer| failed.iter().any(|f| f == p.server().as_str() || f == p.name()))
}

/// nginx's clock for the offline commands: every request within the same second (failed peers stay
/// failed for the whole run).
const NOW: u64 = 1_000_000_000;

fn route(args: &UpstreamArgs, failed: &[String]) -> Result<()> {
    let (config, name) = load(args)?;
    let upstream: &Upstream = config.hash_upstream(Some(&name))?.upstream;
    let fails = failing(upstream, failed)?;
    let mut worker = Worker::new(upstream);
    let mut input = BoundedLines::new(std::io::stdin().lock(), "stdin", "a key", lines::MAX_KEY_BYTES);
    let mut out = BufWriter::new(stdout::stdout());
    let mut key = Vec::new();
    while input.next_into(&mut key)? {
        let outcome = worker.request(&key, NOW, fails);
        let attempts: Vec<&str> = outcome.attempts.iter().map(|&id| upstream.peer(id).server().as_str()).collect();
        let line = RouteLine {
            key: String::from_utf8_lossy(&key),
            key_hex: std::str::from_utf8(&key).is_err().then(|| key.iter().map(|b| format!("{b:02x}")).collect()),
            server: attempts.first().copied(),
            fallback: outcome.round_robin.then_some("round-robin"),
            attempts,
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

fn ring(args: &UpstreamArgs) -> Result<()> {
    let (config, name) = load(args)?;
    let Some(ring) = config.hash_upstream(Some(&name))?.upstream.ring() else {
        bail!("upstream \"{name}\" uses plain `hash`, which has no ring (add `consistent`)");
    };
    let mut out = BufWriter::new(stdout::stdout());
    writeln!(out, "index\thash\tserver")?;
    for (i, p) in ring.points().enumerate() {
        writeln!(out, "{i}\t{:08x}\t{}", p.hash, escape_field(p.server.as_str()))?;
    }
    out.flush()?;
    Ok(())
}

/// A server string as one tab-separated field on one line: `\\`, `\t`, `\n`, `\r` and `\xNN` for other
/// control characters.
fn escape_field(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
}

fn completions(shell: clap_complete::Shell) -> Result<()> {
    // Into memory first: clap_complete panics on a write error (a closed pipe is not one for us).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "nginx-ketama", &mut script);
    let mut out = stdout::stdout();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}

fn man() -> Result<()> {
    // Into memory first, as for the completions.
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    let mut out = stdout::stdout();
    out.write_all(&page)?;
    out.flush()?;
    Ok(())
}

fn resolve_hosts(names: &[String]) -> Result<()> {
    let mut out = stdout::stdout();
    for name in names {
        let addrs = nginx_ketama::resolve::resolve_host(name).with_context(|| format!("resolving {name}"))?;
        let addrs: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        writeln!(out, "{name} {}", addrs.join(" "))?;
    }
    out.flush()?;
    Ok(())
}
