//! `nginx-ketama compare`: how many keys another ketama implementation sends to the same server.

use super::{Format, csv_line, fraction, json, percent, table, unit_words};
use crate::UpstreamArgs;
use crate::lines::count_keys;
use anyhow::Result;
use nginx_ketama::analysis::PickMap;
use nginx_ketama::analysis::compare::{Against, Comparison, Method, wilson};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// The implementations `--against` names.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Other {
    /// pingora-ketama 0.9.1 (exact).
    PingoraKetama,
    /// libketama's MD5 ring (sampled).
    Libketama,
    /// "MD5 of server:i, 160 virtual nodes" (sampled).
    Md5Vnodes,
}

#[derive(clap::Args)]
pub(crate) struct CompareArgs {
    #[command(flatten)]
    upstream: UpstreamArgs,
    /// The other implementation.
    #[arg(long, value_enum)]
    against: Other,
    /// MD5 rings: how many random keys to sample.
    #[arg(long, default_value_t = 100_000)]
    samples: u64,
    /// MD5 rings: the sample's seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also count these keys (one per line), next to the uniform figure.
    #[arg(long, value_name = "FILE")]
    keys: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// The JSON document of `compare`.
#[derive(serde::Serialize)]
struct CompareJson {
    upstream: String,
    against: String,
    /// Over the hash space: exact (pingora-ketama) or sampled (MD5 rings).
    uniform: ReportJson,
    /// With `--keys`.
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<ReportJson>,
}

#[derive(serde::Serialize)]
struct ReportJson {
    /// `exact`, `sampled` or `keys`.
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    total: u64,
    agree: u64,
    agree_fraction: f64,
    /// 95% Wilson interval (sampled only).
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<(f64, f64)>,
    /// MD5 rings: the agreement if CRC32 and MD5 of a key were independent.
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_if_independent: Option<f64>,
    /// What nginx hands to round-robin (never agreement).
    round_robin: u64,
    servers: Vec<ServerJson>,
}

#[derive(serde::Serialize)]
struct ServerJson {
    server: String,
    nginx: u64,
    other: u64,
    both: u64,
    /// `both / nginx`: the part of this server's keys the other keeps on it.
    agreement: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<(f64, f64)>,
}

fn report(c: &Comparison) -> ReportJson {
    let sampled = matches!(c.method, Method::Sampled { .. });
    ReportJson {
        method: match c.method {
            Method::Exact => "exact",
            Method::Sampled { .. } => "sampled",
            Method::Keys => "keys",
        },
        seed: match c.method {
            Method::Sampled { seed, .. } => Some(seed),
            _ => None,
        },
        total: c.total,
        agree: c.agree,
        agree_fraction: fraction(c.agree, c.total),
        interval: sampled.then(|| wilson(c.agree, c.total)),
        expected_if_independent: c.expected,
        round_robin: c.round_robin,
        servers: c
            .servers
            .iter()
            .map(|s| ServerJson {
                server: s.server.to_string(),
                nginx: s.nginx,
                other: s.other,
                both: s.both,
                agreement: fraction(s.both, s.nginx),
                interval: sampled.then(|| wilson(s.both, s.nginx)),
            })
            .collect(),
    }
}

fn pct(x: f64) -> String {
    format!("{:.3}%", x * 100.0)
}

fn print_table(out: &mut impl Write, c: &Comparison, other: &str) -> Result<()> {
    let interval =
        |k: u64, n: u64| c.interval(k, n).map_or_else(String::new, |(lo, hi)| format!("{}–{}", pct(lo), pct(hi)));
    match c.method {
        Method::Sampled { keys, seed } => {
            writeln!(out, "sampled: {keys} random keys (seed {seed}), 95% intervals")?;
        }
        Method::Exact | Method::Keys => {}
    }
    let ci = interval(c.agree, c.total);
    writeln!(
        out,
        "agree: {} of {} ({}{})",
        c.agree,
        c.total,
        percent(c.agree, c.total),
        if ci.is_empty() { String::new() } else { format!(", {ci}") }
    )?;
    if let Some(e) = c.expected {
        writeln!(out, "expected if CRC32 and MD5 were independent: {}", pct(e))?;
    }
    if c.round_robin > 0 {
        writeln!(out, "nginx hands {} to round-robin ({})", c.round_robin, percent(c.round_robin, c.total))?;
    }
    let sampled = matches!(c.method, Method::Sampled { .. });
    let mut header = vec!["server", "nginx", other, "both", "agreement"];
    let mut right = vec![false, true, true, true, true];
    if sampled {
        header.push("95% interval");
        right.push(false);
    }
    let rows: Vec<Vec<String>> = c
        .servers
        .iter()
        .map(|s| {
            let mut row = vec![
                s.server.to_string(),
                s.nginx.to_string(),
                s.other.to_string(),
                s.both.to_string(),
                percent(s.both, s.nginx),
            ];
            if sampled {
                row.push(interval(s.both, s.nginx));
            }
            row
        })
        .collect();
    table(out, &header, &right, &rows)
}

pub(crate) fn run(args: &CompareArgs) -> Result<()> {
    let (config, name) = crate::load(&args.upstream)?;
    let up = config.hash_upstream(Some(&name))?.upstream;
    let map = PickMap::new(up);
    let against = match args.against {
        Other::PingoraKetama => Against::PingoraKetama,
        Other::Libketama => Against::Libketama,
        Other::Md5Vnodes => Against::Md5Vnodes,
    };
    let uniform = match against {
        Against::PingoraKetama => Comparison::exact(up, &map)?,
        _ => Comparison::sampled(up, &map, against, args.samples, args.seed)?,
    };
    let keys = match &args.keys {
        Some(path) => Some((path, count_keys(path, |keys| Comparison::of_keys(up, &map, against, keys))??)),
        None => None,
    };
    let mut out = BufWriter::new(crate::stdout::stdout());
    let other = against.to_string();
    match args.format {
        Format::Table => {
            let how = match uniform.method {
                Method::Exact => unit_words(uniform.unit),
                _ => "over random keys".into(),
            };
            writeln!(out, "upstream {name} (nginx {}) against {other}: {how}", up.version())?;
            print_table(&mut out, &uniform, &other)?;
            if let Some((path, k)) = &keys {
                writeln!(out, "\nover the {} keys of {}:", k.total, path.display())?;
                print_table(&mut out, k, &other)?;
            }
        }
        Format::Json => {
            let doc = CompareJson {
                upstream: name.clone(),
                against: other,
                uniform: report(&uniform),
                keys: keys.as_ref().map(|(_, k)| report(k)),
            };
            json(&mut out, &doc)?;
        }
        Format::Csv => {
            csv_line(&mut out, &["measure", "server", "nginx", "other", "both", "agreement"].map(String::from))?;
            let mut all = vec![("uniform", &uniform)];
            if let Some((_, k)) = &keys {
                all.push(("keys", k));
            }
            for (measure, c) in all {
                for s in &c.servers {
                    csv_line(
                        &mut out,
                        &[
                            measure.into(),
                            s.server.to_string(),
                            s.nginx.to_string(),
                            s.other.to_string(),
                            s.both.to_string(),
                            fraction(s.both, s.nginx).to_string(),
                        ],
                    )?;
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}
