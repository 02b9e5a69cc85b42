//! `nginx-ketama share`: each server's exact share of first picks.

use super::{Format, csv_line, fraction, health_name, json, percent, table, unit_words};
use crate::UpstreamArgs;
use crate::lines::count_keys;
use crate::render::svg;
use anyhow::Result;
use nginx_ketama::analysis::{PickMap, Share};
use std::io::{BufWriter, Write};
use std::num::NonZeroUsize;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct ShareArgs {
    #[command(flatten)]
    upstream: UpstreamArgs,
    /// A server that refuses connections (a configured server string or a peer address); its keys go
    /// where nginx walks them. Repeatable.
    #[arg(long = "failed", value_name = "SERVER")]
    failed: Vec<String>,
    /// Plain hash with unusable slots: the key length the rehash steps are computed for (they depend on
    /// the key's CRC32 and its length).
    #[arg(long, value_name = "BYTES", default_value_t = NonZeroUsize::new(16).unwrap())]
    key_length: NonZeroUsize,
    /// Also count these keys (one per line), next to the uniform figure.
    #[arg(long, value_name = "FILE")]
    keys: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Write a picture of the ring (SVG): arcs coloured by server.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// The JSON document of `share`.
#[derive(serde::Serialize)]
struct ShareJson {
    upstream: String,
    method: &'static str,
    nginx: String,
    /// `ring`, `plain-first-step` or `plain-rehash-N-byte-keys`.
    basis: String,
    /// 2^32.
    total: u64,
    servers: Vec<ServerJson>,
    round_robin: u64,
    round_robin_fraction: f64,
    /// `false` when no peer answers at all.
    answerable: bool,
    /// With `--keys`.
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<KeysJson>,
}

#[derive(serde::Serialize)]
struct ServerJson {
    server: String,
    /// `up`, `partly-failing`, `failing` or `down`.
    health: &'static str,
    /// Ring points (consistent) or slots (plain).
    points: u64,
    arcs: usize,
    /// CRC32 values answered, out of 2^32.
    share: u64,
    fraction: f64,
}

#[derive(serde::Serialize)]
struct KeysJson {
    file: String,
    total: u64,
    round_robin: u64,
    servers: Vec<KeyCountJson>,
}

#[derive(serde::Serialize)]
struct KeyCountJson {
    server: String,
    keys: u64,
    fraction: f64,
}

pub(crate) fn run(args: &ShareArgs) -> Result<()> {
    let (config, name) = crate::load(&args.upstream)?;
    let up = config.hash_upstream(Some(&name))?.upstream;
    let fails = crate::failing(up, &args.failed)?;
    let map = PickMap::with_failing(up, fails, args.key_length);
    let share = Share::of(&map);
    let keys = match &args.keys {
        Some(path) => Some((path, count_keys(path, |keys| Share::of_keys(&map, keys))?)),
        None => None,
    };
    if let Some(path) = &args.svg {
        let title = format!("upstream {name}: share of first picks");
        let inputs = config.files().iter().cloned().chain(args.keys.clone()).collect();
        svg::write(path, &svg::share_svg(&map, &title), inputs)?;
    }
    let method = up.method().as_str();
    let mut out = BufWriter::new(crate::stdout::stdout());
    match args.format {
        Format::Table => {
            writeln!(out, "upstream {name} ({method}, nginx {}): {}", up.version(), unit_words(share.unit))?;
            let mut header = vec![
                "server",
                "health",
                if method == "plain" { "slots" } else { "points" },
                "arcs",
                "share",
                "percent",
            ];
            let mut right = vec![false, false, true, true, true, true];
            if keys.is_some() {
                header.extend(["keys", "keys %"]);
                right.extend([true, true]);
            }
            let mut rows: Vec<Vec<String>> = Vec::new();
            for (i, s) in share.servers.iter().enumerate() {
                let mut row = vec![
                    s.server.to_string(),
                    health_name(s.health).to_string(),
                    s.points.to_string(),
                    s.arcs.to_string(),
                    s.count.to_string(),
                    percent(s.count, share.total),
                ];
                if let Some((_, k)) = &keys {
                    row.extend([k.servers[i].count.to_string(), percent(k.servers[i].count, k.total)]);
                }
                rows.push(row);
            }
            let mut rr = vec![
                "round-robin".into(),
                String::new(),
                String::new(),
                String::new(),
                share.round_robin.to_string(),
                percent(share.round_robin, share.total),
            ];
            let mut total = vec![
                "total".into(),
                String::new(),
                String::new(),
                String::new(),
                share.total.to_string(),
                percent(share.total, share.total),
            ];
            if let Some((_, k)) = &keys {
                rr.extend([k.round_robin.to_string(), percent(k.round_robin, k.total)]);
                total.extend([k.total.to_string(), percent(k.total, k.total)]);
            }
            rows.extend([rr, total]);
            table(&mut out, &header, &right, &rows)?;
            if !share.answerable {
                writeln!(out, "no peer answers: every request fails")?;
            }
        }
        Format::Json => {
            let doc = ShareJson {
                upstream: name.clone(),
                method,
                nginx: up.version().to_string(),
                basis: super::basis_name(share.unit),
                total: share.total,
                servers: share
                    .servers
                    .iter()
                    .map(|s| ServerJson {
                        server: s.server.to_string(),
                        health: health_name(s.health),
                        points: s.points,
                        arcs: s.arcs,
                        share: s.count,
                        fraction: fraction(s.count, share.total),
                    })
                    .collect(),
                round_robin: share.round_robin,
                round_robin_fraction: fraction(share.round_robin, share.total),
                answerable: share.answerable,
                keys: keys.as_ref().map(|(path, k)| KeysJson {
                    file: path.display().to_string(),
                    total: k.total,
                    round_robin: k.round_robin,
                    servers: k
                        .servers
                        .iter()
                        .map(|s| KeyCountJson {
                            server: s.server.to_string(),
                            keys: s.count,
                            fraction: fraction(s.count, k.total),
                        })
                        .collect(),
                }),
            };
            json(&mut out, &doc)?;
        }
        Format::Csv => {
            let mut header: Vec<String> =
                ["server", "health", "points", "arcs", "share", "fraction"].map(String::from).to_vec();
            if keys.is_some() {
                header.extend(["keys".into(), "keys_fraction".into()]);
            }
            csv_line(&mut out, &header)?;
            let mut rows: Vec<Vec<String>> = share
                .servers
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let mut row = vec![
                        s.server.to_string(),
                        health_name(s.health).into(),
                        s.points.to_string(),
                        s.arcs.to_string(),
                        s.count.to_string(),
                        fraction(s.count, share.total).to_string(),
                    ];
                    if let Some((_, k)) = &keys {
                        row.extend([k.servers[i].count.to_string(), fraction(k.servers[i].count, k.total).to_string()]);
                    }
                    row
                })
                .collect();
            let mut rr = vec![
                "round-robin".into(),
                String::new(),
                String::new(),
                String::new(),
                share.round_robin.to_string(),
                fraction(share.round_robin, share.total).to_string(),
            ];
            if let Some((_, k)) = &keys {
                rr.extend([k.round_robin.to_string(), fraction(k.round_robin, k.total).to_string()]);
            }
            rows.push(rr);
            for row in rows {
                csv_line(&mut out, &row)?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
