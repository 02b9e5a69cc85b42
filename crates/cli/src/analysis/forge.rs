//! `nginx-ketama forge`: keys that land on a chosen server.

use super::{Format, csv_line, json, table};
use crate::UpstreamArgs;
use anyhow::Result;
use nginx_ketama::Server;
use nginx_ketama::analysis::forge::{Target, forge_keys};
use std::io::{BufWriter, Write};

#[derive(clap::Args)]
pub(crate) struct ForgeArgs {
    #[command(flatten)]
    upstream: UpstreamArgs,
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
    /// A server that refuses connections: keys then land on S through nginx's failover walk. Repeatable.
    #[arg(long = "failed", value_name = "SERVER")]
    failed: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// One key of `forge --format json`.
#[derive(serde::Serialize)]
struct KeyJson {
    key: String,
    crc32: String,
    /// The ring point it lands on (consistent hash).
    point: Option<usize>,
}

pub(crate) fn run(args: &ForgeArgs) -> Result<()> {
    let (config, name) = crate::load(&args.upstream)?;
    let up = config.hash_upstream(Some(&name))?.upstream;
    let fails = crate::failing(up, &args.failed)?;
    let target = match (args.point, args.edges) {
        (point, true) => Target::Edges { point },
        (Some(point), false) => Target::Arc { point },
        (None, false) => Target::Anywhere,
    };
    let server = Server::new(args.server.clone());
    let keys = forge_keys(up, fails, &server, args.count, args.prefix.as_bytes(), target)?;
    let rows: Vec<KeyJson> = keys
        .iter()
        .map(|k| KeyJson {
            key: String::from_utf8_lossy(&k.key).into_owned(),
            crc32: format!("{:08x}", k.crc32),
            point: k.point,
        })
        .collect();
    let mut out = BufWriter::new(crate::stdout::stdout());
    let point = |p: Option<usize>| p.map_or_else(String::new, |p| p.to_string());
    match args.format {
        Format::Table => {
            let cells: Vec<Vec<String>> =
                rows.iter().map(|r| vec![r.key.clone(), r.crc32.clone(), point(r.point)]).collect();
            table(&mut out, &["key", "crc32", "point"], &[false, false, true], &cells)?;
        }
        Format::Json => json(&mut out, &rows)?,
        Format::Csv => {
            csv_line(&mut out, &["key", "crc32", "point"].map(String::from))?;
            for r in &rows {
                csv_line(&mut out, &[r.key.clone(), r.crc32.clone(), point(r.point)])?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
