//! `nginx-ketama ring`: the consistent-hash ring's points, one tab-separated line each.

use crate::args::ConfigArgs;
use crate::render::escape_field;
use anyhow::{Result, bail};
use std::io::{BufWriter, Write};

/// `ring`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArgs,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let loaded = args.config.load()?;
    let Some(ring) = loaded.upstream.ring() else {
        bail!("upstream \"{}\" uses plain `hash`, which has no ring (add `consistent`)", loaded.name);
    };
    let mut out = BufWriter::new(crate::stdout::stdout());
    writeln!(out, "index\thash\tserver")?;
    for (i, p) in ring.points().enumerate() {
        writeln!(out, "{i}\t{:08x}\t{}", p.hash, escape_field(p.server.as_str()))?;
    }
    out.flush()?;
    Ok(())
}
