//! The analysis commands: a thin layer over `nginx_ketama::analysis` that loads the configuration, calls the
//! library and writes the answer as a table, JSON or CSV from one row model (`render::rows`). Each command
//! is a module holding its arguments (flattened from the shared groups of `args`), its rows and JSON
//! document (documented in docs/commands.md), and `run`; [`Analysis`] lists them. `diff`, `share` and
//! `compare` have gates (`gate`): limits that make the command exit 1.

mod compare;
mod diff;
mod explain;
mod forge;
mod hottest;
mod migrate;
mod share;

pub(crate) use migrate::Tried;

use crate::gate::Verdict;
use anyhow::Result;
use nginx_ketama::analysis::share::Unit;
use nginx_ketama::analysis::{Basis, ServerHealth};

/// The analysis commands, in the order `--help` lists them (between `ring` and `verify`). A variant's doc
/// comment is the command's help.
#[derive(clap::Subcommand)]
pub(crate) enum Analysis {
    /// Explain keys step by step: CRC32, ring point and arc (or plain-hash slot), every point or rehash
    /// step nginx walks, skipped peers and why, the round-robin fallback, the attempts (as `route`).
    Explain(explain::Args),
    /// Each server's exact share of first picks over all 2^32 CRC32 values, failing servers walked past.
    Share(share::Args),
    /// The exact part of the hash space whose first pick changes between two configurations.
    Diff(diff::Args),
    /// Keys whose first pick is a given server, each checked through the ring and a worker.
    Forge(forge::Args),
    /// How many keys another ketama implementation sends to the same server as nginx.
    Compare(compare::Args),
    /// Leaving nginx: per hash upstream and proxy, the share of keys that keep their server under each
    /// setting of the proxy tried, and the best one.
    Migrate(migrate::Args),
}

impl Analysis {
    /// Runs the command: its answer is written, and its gates (if any) say whether it passes.
    pub(crate) fn run(&self) -> Result<Verdict> {
        match self {
            Analysis::Explain(args) => explain::run(args).map(|()| Verdict::Within),
            Analysis::Share(args) => share::run(args),
            Analysis::Diff(args) => diff::run(args),
            Analysis::Forge(args) => forge::run(args).map(|()| Verdict::Within),
            Analysis::Compare(args) => compare::run(args),
            Analysis::Migrate(args) => migrate::run(args),
        }
    }
}

/// What a count counts, in words for a heading.
pub(crate) fn unit_words(unit: Unit) -> String {
    match unit {
        Unit::HashSpace(Basis::Ring) => "exact over all 2^32 CRC32 values".into(),
        Unit::HashSpace(Basis::PlainFirstStep) => {
            "exact over the 32,768 values of the first step (2^17 CRC32 values each)".into()
        }
        Unit::HashSpace(Basis::PlainRehash { key_len }) => format!(
            "exact over the 32,768 values of the first step, rehash steps for keys of {key_len} bytes (--key-length)"
        ),
        Unit::Keys => "over the listed keys".into(),
    }
}

/// The JSON spelling of a basis.
pub(crate) fn basis_name(unit: Unit) -> String {
    match unit {
        Unit::HashSpace(Basis::Ring) => "ring".into(),
        Unit::HashSpace(Basis::PlainFirstStep) => "plain-first-step".into(),
        Unit::HashSpace(Basis::PlainRehash { key_len }) => format!("plain-rehash-{key_len}-byte-keys"),
        Unit::Keys => "keys".into(),
    }
}

/// The spelling of a server's health.
pub(crate) fn health_name(h: ServerHealth) -> &'static str {
    match h {
        ServerHealth::Up => "up",
        ServerHealth::Partial => "partly-failing",
        ServerHealth::Down => "down",
        ServerHealth::Failing => "failing",
    }
}
