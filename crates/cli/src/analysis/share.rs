//! `nginx-ketama share`: each server's exact share of first picks.

use super::hottest::{self, Hottest, Place};
use super::{basis_name, health_name, unit_words};
use crate::args::{ConfigArgs, FailArgs, FailSkewAbove, Failed, FormatArg, KeyLength, KeysFile, SvgFile, fail_kind};
use crate::gate::{self, Verdict};
use crate::render::rows::{self, Cell, Column, Rows};
use crate::render::{Format, json, svg};
use crate::schema::Schema;
use anyhow::Result;
use nginx_ketama::Method;
use nginx_ketama::analysis::{PickMap, ServerHealth, Share, first_attempt};
use nginx_ketama::failure::Freed;
use std::io::{BufWriter, Write};

/// The schema of `share --format json` (docs/schemas/share.v2.json; v1 had no `keys.hottest`).
const SCHEMA: Schema = Schema("nginx-ketama/share/v2");

/// `share`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArgs,
    #[command(flatten)]
    failed: Failed,
    #[command(flatten)]
    failures: FailArgs,
    #[command(flatten)]
    key_length: KeyLength,
    #[command(flatten)]
    keys: KeysFile,
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    svg: SvgFile,
    #[command(flatten)]
    gate: FailSkewAbove,
}

/// The JSON document of `share`.
#[derive(serde::Serialize)]
struct ShareJson<'a> {
    schema: Schema,
    upstream: &'a str,
    method: &'static str,
    nginx: String,
    /// `ring`, `plain-first-step` or `plain-rehash-N-byte-keys`.
    basis: String,
    /// 2^32.
    total: u64,
    /// `server`, `health` (`up`, `partly-failing`, `failing` or `down`), `points` (ring points, or slots
    /// for plain hash), `arcs`, `share` (CRC32 values answered, out of 2^32), `fraction`.
    servers: rows::Json<'a>,
    round_robin: u64,
    round_robin_fraction: f64,
    /// `false` when no peer answers at all.
    answerable: bool,
    /// With `--fail`, `--method` or `--location`: how each server that does not answer `200` is freed on a
    /// request's first attempt, which decides whether it keeps its keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    replies: Option<Vec<ReplyJson>>,
    /// With `--keys`.
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<KeysJson<'a>>,
}

/// How one server that does not answer `200` is treated in the steady state.
#[derive(serde::Serialize)]
struct ReplyJson {
    server: String,
    /// As `--fail` spells it.
    reply: String,
    /// `failed` (passed over once `max_fails` fall in `fail_timeout`), `next` (retried, keeps its keys) or
    /// `success` (its answer is passed on to the client).
    freed: &'static str,
    /// What the client gets when the request ends there.
    client_status: u16,
}

impl ReplyJson {
    fn line(&self) -> String {
        let what = match self.freed {
            "failed" => "a failure, the request moves on; passed over once max_fails of them fall within fail_timeout"
                .to_string(),
            "next" => "retried on the next server and not counted: keeps its first picks".to_string(),
            _ => format!("passed on to the client ({}): keeps its keys", self.client_status),
        };
        format!("{} answers {}: {what}", self.server, self.reply)
    }
}

#[derive(serde::Serialize)]
struct KeysJson<'a> {
    file: String,
    total: u64,
    round_robin: u64,
    /// `server`, `keys`, `fraction`.
    servers: rows::Json<'a>,
    /// With `--hottest N`.
    #[serde(skip_serializing_if = "Option::is_none")]
    hottest: Option<&'a Hottest>,
}

/// The rows of a share: one per server, round-robin, the total.
fn share_rows(share: &Share, method: Method) -> Rows {
    let points = match method {
        Method::Plain => "slots",
        Method::Consistent => "points",
    };
    let mut rows = Rows::new(vec![
        Column::text("server"),
        Column::text("health"),
        Column::number("points").headed(points),
        Column::number("arcs"),
        Column::number("share"),
        Column::number("fraction").headed("percent"),
    ]);
    let part = |n: u64| Cell::Fraction { n, total: share.total };
    for s in &share.servers {
        rows.push(vec![
            Cell::Text(s.server.to_string()),
            Cell::Text(health_name(s.health).to_string()),
            Cell::Count(s.points),
            Cell::Count(s.arcs as u64),
            Cell::Count(s.count),
            part(s.count),
        ]);
    }
    let summary = |label: &str, n: u64| {
        vec![Cell::Text(label.to_string()), Cell::Empty, Cell::Empty, Cell::Empty, Cell::Count(n), part(n)]
    };
    rows.push_summary(summary("round-robin", share.round_robin));
    rows.push_total(summary("total", share.total));
    rows
}

/// The rows of the keys' share, row for row beside [`share_rows`].
fn key_rows(keys: &Share) -> Rows {
    let mut rows = Rows::new(vec![
        Column::text("server").not_in_table().not_in_csv(),
        Column::number("keys"),
        Column::number("keys_fraction").headed("keys %").json_named("fraction"),
    ]);
    let part = |n: u64| Cell::Fraction { n, total: keys.total };
    for s in &keys.servers {
        rows.push(vec![Cell::Text(s.server.to_string()), Cell::Count(s.count), part(s.count)]);
    }
    rows.push_summary(vec![Cell::Empty, Cell::Count(keys.round_robin), part(keys.round_robin)]);
    rows.push_total(vec![Cell::Empty, Cell::Count(keys.total), part(keys.total)]);
    rows
}

/// The share's rows with the keys' beside them, if any.
fn with_keys(rows: Rows, key_rows: Option<Rows>) -> Rows {
    match key_rows {
        Some(keys) => rows.beside(keys),
        None => rows,
    }
}

/// The most loaded server and how many times its fair share it answers: the hashed part (the whole but
/// round-robin) × its points (its weight) ÷ the points of every server that is not failing or down. `None`
/// when nothing is hashed.
fn largest_over_fair(share: &Share) -> Option<(String, f64)> {
    let takes = |h: ServerHealth| !matches!(h, ServerHealth::Failing | ServerHealth::Down);
    let points: u64 = share.servers.iter().filter(|s| takes(s.health)).map(|s| s.points).sum();
    let hashed = share.total - share.round_robin;
    if points == 0 || hashed == 0 {
        return None;
    }
    share
        .servers
        .iter()
        .filter(|s| s.points > 0 && s.count > 0)
        .map(|s| (s.server.to_string(), s.count as f64 * points as f64 / (hashed as f64 * s.points as f64)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

pub(crate) fn run(args: &Args) -> Result<Verdict> {
    let n = args.keys.hottest(args.format.format)?;
    let loaded = args.config.load()?;
    let (up, name) = (&loaded.upstream, &loaded.name);
    let refused = args.failed.in_upstream(up)?;
    let (map, replies) = if args.failures.given() {
        let f = args.failures.resolve(&loaded, &args.failed)?;
        let map = PickMap::with_replies(up, |p| f.reply(p), &f.policy, &f.client, args.key_length.key_length);
        let replies = up
            .primary()
            .iter()
            .chain(up.backup())
            .filter(|p| f.reply(p) != nginx_ketama::failure::Reply::OK)
            .map(|p| {
                let reply = f.reply(p);
                let d = first_attempt(up, reply, &f.policy, &f.client);
                let freed = match d.freed {
                    Freed::Failed => "failed",
                    Freed::Next => "next",
                    Freed::Success => "success",
                };
                ReplyJson {
                    server: p.name().to_string(),
                    reply: fail_kind(reply),
                    freed,
                    client_status: d.client_status,
                }
            })
            .collect();
        (map, Some(replies))
    } else {
        (PickMap::with_failing(up, refused, args.key_length.key_length), None)
    };
    let share = Share::of(&map);
    let keys = args.keys.count(&loaded, |keys| match n {
        None => (Share::of_keys(&map, keys), None),
        Some(n) => {
            let mut counter = hottest::counter(n);
            let share = Share::of_keys(&map, keys.inspect(|k| counter.insert(k.as_slice())));
            (share, Some((n, counter)))
        }
    })?;
    let hot = keys.as_ref().and_then(|(_, (share, counter))| {
        let (n, counter) = counter.as_ref()?;
        let server = |k: &Vec<u8>| hottest::server(map.servers(), map.pick_key(k)).map(ToString::to_string);
        let places = vec![Place { json: "server", heading: "server".into() }];
        Some(Hottest::of(counter, *n, "keys".into(), share.total, places, |k| (k.clone(), None), |k| vec![server(k)]))
    });
    let keys = keys.map(|(path, (share, _))| (path, share));
    if let Some(path) = &args.svg.svg {
        let title = format!("upstream {name}: share of first picks");
        let inputs = loaded.files.iter().cloned().chain(args.keys.path().map(std::path::Path::to_path_buf)).collect();
        svg::write(path, &svg::share_svg(&map, &title), inputs)?;
    }
    let rows = share_rows(&share, up.method());
    let key_rows = keys.as_ref().map(|(_, k)| key_rows(k));
    let verdict = Verdict::of(args.gate.fail_skew_above.into_iter().flat_map(|limit| {
        let over_keys = keys.as_ref().map(|(path, k)| (format!("the keys of {}", path.display()), k));
        [("the hash space".to_string(), &share)].into_iter().chain(over_keys).map(move |(what, s)| {
            let (server, skew) = largest_over_fair(s)?;
            gate::skew_above(limit, &server, skew, &what)
        })
    }));
    let written = (|| -> Result<()> {
        let mut out = BufWriter::new(crate::stdout::stdout());
        match args.format.format {
            Format::Json => {
                let doc = ShareJson {
                    schema: SCHEMA,
                    upstream: name,
                    method: up.method().as_str(),
                    nginx: up.version().to_string(),
                    basis: basis_name(share.unit),
                    total: share.total,
                    servers: rows.json(),
                    round_robin: share.round_robin,
                    round_robin_fraction: rows::fraction(share.round_robin, share.total),
                    answerable: share.answerable,
                    replies,
                    keys: keys.as_ref().zip(key_rows.as_ref()).map(|((path, k), rows)| KeysJson {
                        file: path.display().to_string(),
                        total: k.total,
                        round_robin: k.round_robin,
                        servers: rows.json(),
                        hottest: hot.as_ref(),
                    }),
                };
                json(&mut out, &doc)?;
            }
            Format::Table => {
                let (method, version) = (up.method().as_str(), up.version());
                writeln!(out, "upstream {name} ({method}, nginx {version}): {}", unit_words(share.unit))?;
                with_keys(rows, key_rows).write_table(&mut out)?;
                if !share.answerable {
                    writeln!(out, "no peer answers: every request fails")?;
                }
                for r in replies.iter().flatten() {
                    writeln!(out, "{}", r.line())?;
                }
                if let Some(hot) = &hot {
                    writeln!(out)?;
                    hot.write_table(&mut out)?;
                }
            }
            Format::Csv => with_keys(rows, key_rows).write_csv(&mut out)?,
        }
        out.flush()?;
        Ok(())
    })();
    gate::after(verdict, written)
}
