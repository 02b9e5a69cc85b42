//! `nginx-ketama forge`: keys that land on a chosen server.

use crate::args::{ConfigArgs, Failed, FormatArg};
use crate::render::rows::{self, Cell, Column, Rows};
use crate::render::{Format, json};
use crate::schema::Schema;
use anyhow::Result;
use nginx_ketama::Server;
use nginx_ketama::analysis::forge::{Target, forge_keys};
use std::io::{BufWriter, Write};

/// The schema of `forge --format json` (docs/schemas/forge.v1.json).
const SCHEMA: Schema = Schema("nginx-ketama/forge/v1");

/// `forge`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArgs,
    /// The server (its configured server string) the keys must land on.
    #[arg(long)]
    server: String,
    /// How many keys.
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// What every key starts with (8 characters of `@A-Z[\]^_` follow).
    #[arg(long, default_value = "")]
    prefix: String,
    /// Aim inside the arc this ring point closes (consistent hash).
    #[arg(long, value_name = "INDEX")]
    point: Option<usize>,
    /// Aim at both ends of the server's arcs (of --point's arc only, if given).
    #[arg(long)]
    edges: bool,
    #[command(flatten)]
    failed: Failed,
    #[command(flatten)]
    format: FormatArg,
}

/// The JSON document of `forge`.
#[derive(serde::Serialize)]
struct ForgeJson<'a> {
    schema: Schema,
    /// The server the keys land on.
    server: &'a str,
    /// `key`, `crc32`, `point` (`null` for plain hash).
    keys: rows::Json<'a>,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    let loaded = args.config.load()?;
    let up = &loaded.upstream;
    let fails = args.failed.in_upstream(up)?;
    let target = match (args.point, args.edges) {
        (point, true) => Target::Edges { point },
        (Some(point), false) => Target::Arc { point },
        (None, false) => Target::Anywhere,
    };
    let server = Server::new(args.server.clone());
    let keys = forge_keys(up, fails, &server, args.count, args.prefix.as_bytes(), target)?;
    // The ring point is left out (`null`) for plain hash.
    let mut rows = Rows::new(vec![Column::text("key"), Column::text("crc32"), Column::number("point")]);
    for k in &keys {
        rows.push(vec![
            Cell::Text(String::from_utf8_lossy(&k.key).into_owned()),
            Cell::Text(format!("{:08x}", k.crc32)),
            k.point.map_or(Cell::Empty, |p| Cell::Count(p as u64)),
        ]);
    }
    let mut out = BufWriter::new(crate::stdout::stdout());
    match args.format.format {
        Format::Json => json(&mut out, &ForgeJson { schema: SCHEMA, server: &args.server, keys: rows.json() })?,
        format => rows.write(format, &mut out)?,
    }
    out.flush()?;
    Ok(())
}
