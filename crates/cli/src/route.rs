//! `nginx-ketama route`: keys from stdin as consecutive requests to one fresh worker, one JSON line each.

use crate::args::{ConfigArgs, Failed};
use crate::lines::{self, BoundedLines};
use crate::render::key_text;
use crate::schema::{self, Schema};
use anyhow::Result;
use nginx_ketama::Worker;
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
}

/// One line of `route` output, fields in the documented order.
#[derive(serde::Serialize)]
struct RouteLine<'a> {
    schema: Schema,
    key: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_hex: Option<String>,
    server: Option<&'a str>,
    fallback: Option<&'a str>,
    attempts: Vec<&'a str>,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let loaded = args.config.load()?;
    let upstream = &loaded.upstream;
    let fails = args.failed.in_upstream(upstream)?;
    let mut worker = Worker::new(upstream);
    let mut input = BoundedLines::new(std::io::stdin().lock(), "stdin", "a key", lines::MAX_KEY_BYTES);
    let mut out = BufWriter::new(crate::stdout::stdout());
    let mut key = Vec::new();
    while input.next_into(&mut key)? {
        let outcome = worker.request(&key, NOW, fails);
        let attempts: Vec<&str> = outcome.attempts.iter().map(|&id| upstream.peer(id).server().as_str()).collect();
        let (text, key_hex) = key_text(&key);
        let line = RouteLine {
            schema: schema::ROUTE,
            key: text,
            key_hex,
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
