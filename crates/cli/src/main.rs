//! `nginx-ketama`: ask which upstream server nginx picks for a key, dump a ring, or prove the library
//! against a real nginx.
//!
//! This file parses the command line and dispatches: [`Command`] is the list of commands (the analysis
//! commands flattened in from `analysis::Analysis`), from which clap derives `--help`, the completions and
//! the man page; each command is a module. The offline commands (`route`, `ring`, the analysis commands,
//! `completions`, `man`) need only the core library; the commands that run nginx or a port (`verify`,
//! `replay-vectors`, `shim`, and the hidden `record-vectors` and `cleanup`) come with the `live` feature, on
//! by default.

#![deny(clippy::mod_module_files)]

// First, so that its `print!` and `println!` take the place of std's in every module after it.
#[macro_use]
mod stdout;

mod analysis;
mod args;
mod gate;
mod generated;
mod ingress;
mod lines;
#[cfg(feature = "live")]
mod live;
mod render;
mod resolve_hosts;
mod ring;
mod route;
mod schema;
mod target;
mod traffic;

use clap::{CommandFactory, Parser, Subcommand};
use std::io::{ErrorKind, Write};
use std::process::ExitCode;

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
static VERSION: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{} (models nginx {})", env!("CARGO_PKG_VERSION"), args::modelled_range()));

#[derive(Subcommand)]
enum Command {
    /// Route keys read from stdin (one per line, split on \n only) as consecutive requests to one fresh
    /// nginx worker; print one JSON line per key.
    Route(route::Args),
    /// Dump the consistent-hash ring: point index, hash, server.
    Ring(ring::Args),
    // The analysis commands, listed in `analysis::Analysis`.
    #[command(flatten)]
    Analysis(analysis::Analysis),
    /// Prove the library against real nginx: random topologies, keys and every ring arc, per version.
    #[cfg(feature = "live")]
    Verify(live::verify_args::VerifyArgs),
    /// Replay the golden vectors through a port's shim (`ports/SHIM.md`); ends with `N passed, M failed`.
    #[cfg(feature = "live")]
    ReplayVectors {
        /// The shim command, run by `sh -c`.
        #[arg(long, value_name = "COMMAND")]
        shim: String,
        /// Vector files (default: vectors/v1/*.json of this repository).
        files: Vec<std::path::PathBuf>,
    },
    /// Answer the shim protocol (`ports/SHIM.md`) with this library, on stdin and stdout: the reference
    /// shim, e.g. `nginx-ketama verify --shim "nginx-ketama shim"`.
    #[cfg(feature = "live")]
    Shim {
        /// A test tool: one of nginx's rules changed on purpose (`post-retried`, `no-give-back`,
        /// `protocol-1`), so that tests can show the proof catches a wrong shim.
        #[arg(long, hide = true, value_name = "NAME")]
        mutation: Option<nginx_ketama_harness::proofs::shim::ShimMutation>,
    },
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
    if let Err(e) = stdout::is_open() {
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
        Command::Route(args) => route::run(&args),
        Command::Ring(args) => ring::run(&args),
        Command::Analysis(command) => match command.run() {
            // The answer is written; each limit crossed is one line, and the exit code says it.
            Ok(gate::Verdict::Crossed(lines)) => {
                let flushed = stdout::stdout().flush().map_err(anyhow::Error::from);
                if let Err(e) = &flushed
                    && stdout::failure(e) != Some(ErrorKind::BrokenPipe)
                {
                    return finish(flushed);
                }
                for line in lines {
                    eprintln!("nginx-ketama: {line}");
                }
                return ExitCode::from(1);
            }
            Ok(gate::Verdict::Within) => Ok(()),
            Err(e) => Err(e),
        },
        Command::ResolveHosts { names } => resolve_hosts::run(&names),
        Command::Completions { shell } => generated::completions(Cli::command(), shell),
        Command::Man => generated::man(Cli::command()),
        #[cfg(feature = "live")]
        Command::Verify(args) => return flushed(ExitCode::from(live::verify::verify(&args).code())),
        #[cfg(feature = "live")]
        Command::ReplayVectors { shim, files } => return flushed(live::replay_vectors(&shim, files)),
        #[cfg(feature = "live")]
        Command::Shim { mutation } => live::shim(mutation),
        #[cfg(feature = "live")]
        Command::RecordVectors(args) => return flushed(live::record_vectors(args)),
        #[cfg(feature = "live")]
        Command::Cleanup => live::cleanup(),
    };
    finish(result.and_then(|()| Ok(stdout::stdout().flush()?)))
}

/// How a command that wrote its answer (or failed) ends: 0, or 2 with the error on stderr.
fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
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
