//! `nginx-ketama migrate`: per hash upstream of a configuration and per proxy, the share of keys that keep
//! their server under each setting tried (`nginx_ketama::analysis::migrate::settings`), and the best.

use super::compare::provenance;
use crate::args::{ConfigArgs, FormatArg, Sample, SvgFile, TargetServersFile};
use crate::gate::Verdict;
use crate::ingress::BackendsFile;
use crate::render::rows::{self, Cell, Column, Rows};
use crate::render::{Format, json, svg};
use crate::schema::Schema;
use crate::target::ServerList;
use anyhow::{Result, bail};
use nginx_ketama::analysis::PickMap;
use nginx_ketama::analysis::compare::{CompareError, Comparison, Method, wilson};
use nginx_ketama::analysis::migrate::settings;
use nginx_ketama::config::{Balancer, Context};
use nginx_ketama::engines::{Engine, EngineError};
use std::io::{BufWriter, Write};

/// The JSON document's schema (`docs/schemas/migrate.v1.json`).
const SCHEMA: Schema = Schema("nginx-ketama/migrate/v1");

/// The engines `all` stands for, as `--to` names them.
const ALL: [&str; 7] = ["haproxy", "caddy", "ingress-nginx", "apisix", "envoy", "kong", "traefik"];

/// `--to`'s parser: one engine by name and release, without options (its settings are what is tried).
fn parse_target(s: &str) -> Result<Vec<Engine>, String> {
    if s == "all" {
        return Ok(ALL.iter().map(|e| e.parse().expect("a modelled engine")).collect());
    }
    if s.contains(':') {
        return Err(format!(
            "{s}: migrate tries the engine's settings itself; name it without options (as haproxy@3.0.11, envoy, kong)"
        ));
    }
    let engine: Engine = s.parse().map_err(|e: EngineError| e.to_string())?;
    Ok(vec![engine])
}

/// What the table says of Caddy's empty keys (random keys are never empty, so none is counted here).
pub(crate) const CADDY_EMPTY_KEY: &str = "caddy: an empty key (no such header, query parameter or cookie) is not hashed: \
     Caddy's fallback policy (random by default) picks, so such requests keep nothing; the random keys counted here \
     are never empty (compare --keys counts real ones)";

/// `migrate`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArgs,
    /// The proxies to move to, comma-separated or repeated: haproxy[@2.2.9|2.6.12|3.0.11|3.2.26],
    /// caddy[@2.6.2|2.11.4], ingress-nginx, apisix, envoy, kong, traefik, or `all`. Each is tried with
    /// its settings (docs/engines.md, "Migration report").
    #[arg(long, required = true, value_delimiter = ',', value_parser = parse_target, value_name = "ENGINE")]
    to: Vec<Vec<Engine>>,
    #[command(flatten)]
    sample: Sample,
    #[command(flatten)]
    backends: BackendsFile,
    #[command(flatten)]
    target: TargetServersFile,
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    svg: SvgFile,
}

/// One setting's result.
pub(crate) struct Tried {
    pub(crate) upstream: String,
    pub(crate) engine: Engine,
    pub(crate) setting: Engine,
    pub(crate) comparison: Comparison,
    pub(crate) best: bool,
}

impl Tried {
    pub(crate) fn fraction(&self) -> f64 {
        self.comparison.fraction(self.comparison.agree)
    }

    /// The 95% interval (sampled), or the exact figure twice.
    pub(crate) fn interval(&self) -> (f64, f64) {
        let c = &self.comparison;
        c.interval(c.agree, c.total).unwrap_or((self.fraction(), self.fraction()))
    }
}

/// The JSON document of `migrate`.
#[derive(serde::Serialize)]
struct MigrateJson<'a> {
    schema: Schema,
    config: String,
    samples: u64,
    seed: u64,
    /// With `--backends`: the ingress-nginx backend whose endpoints every engine was given; with
    /// `--target-servers`: the list's name, its format and the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoints: Option<String>,
    /// Each engine tried, what its model is read from and whether it is proven live.
    engines: Vec<EngineJson>,
    /// Every setting tried: `upstream`, `engine`, `setting`, `method`, `kept`, `total`, `kept_fraction`,
    /// `interval` (sampled only), `best`.
    settings: rows::Json<'a>,
    /// Per upstream and engine, the best setting and how many others its interval cannot tell from it.
    best: rows::Json<'a>,
    /// Upstreams left out, and why.
    skipped: Vec<SkippedJson>,
}

#[derive(serde::Serialize)]
struct EngineJson {
    engine: String,
    provenance: String,
}

#[derive(serde::Serialize)]
struct SkippedJson {
    upstream: String,
    reason: String,
}

pub(crate) fn run(args: &Args) -> Result<Verdict> {
    let mut engines: Vec<Engine> = Vec::new();
    for e in args.to.iter().flatten() {
        if !engines.contains(e) {
            engines.push(*e);
        }
    }
    let config = args.config.load_config()?;
    let mut upstreams: Vec<(String, &nginx_ketama::Upstream)> = Vec::new();
    for u in &config.upstreams {
        let name = match u.context {
            Context::Http => u.name.clone(),
            Context::Stream => format!("stream:{}", u.name),
        };
        if let Balancer::Hash { upstream, .. } = &u.balancer {
            upstreams.push((name, upstream));
        }
    }
    if let Some(wanted) = args.config.upstream() {
        let chosen = config.hash_upstream(Some(wanted))?;
        upstreams.retain(|(_, u)| std::ptr::eq(*u, chosen.upstream));
    }
    if upstreams.is_empty() {
        bail!("{}: no upstream uses hash: nothing to migrate", args.config.path().display());
    }
    let endpoints = ServerList::read(&args.backends, &args.target)?;
    if endpoints.is_some() && upstreams.len() > 1 {
        let names: Vec<&str> = upstreams.iter().map(|(n, _)| n.as_str()).collect();
        bail!(
            "--backends and --target-servers give one upstream's servers: choose it with --upstream ({})",
            names.join(", ")
        );
    }
    if let Some(list) = &endpoints {
        for e in &engines {
            list.check_engine(e)?;
        }
    }
    let mut tried: Vec<Tried> = Vec::new();
    let mut skipped: Vec<SkippedJson> = Vec::new();
    'upstreams: for (name, up) in &upstreams {
        let map = PickMap::new(up);
        let start = tried.len();
        for &engine in &engines {
            let first = tried.len();
            for setting in settings(engine) {
                let c = match &endpoints {
                    Some(e) => Comparison::against_engine_listed(
                        up,
                        &map,
                        setting,
                        e.backends(),
                        args.sample.samples,
                        args.sample.seed,
                    ),
                    None => Comparison::against_engine(up, &map, setting, args.sample.samples, args.sample.seed),
                };
                match c {
                    Ok(comparison) => {
                        tried.push(Tried { upstream: name.clone(), engine, setting, comparison, best: false })
                    }
                    // The engine refuses this setting over these servers (Kong's wheel too small): the
                    // setting is left out, the others stand.
                    Err(CompareError::Engine(e)) => {
                        skipped.push(SkippedJson { upstream: name.clone(), reason: format!("{setting}: {e}") })
                    }
                    // No server the engines can take: the whole upstream is left out.
                    Err(e) => {
                        tried.truncate(start);
                        skipped.push(SkippedJson { upstream: name.clone(), reason: e.to_string() });
                        continue 'upstreams;
                    }
                }
            }
            let group = &mut tried[first..];
            let best = (0..group.len()).reduce(|b, i| if group[i].fraction() > group[b].fraction() { i } else { b });
            if let Some(best) = best {
                group[best].best = true;
            }
        }
    }
    if tried.is_empty() {
        let why: Vec<String> = skipped.iter().map(|s| format!("upstream {}: {}", s.upstream, s.reason)).collect();
        bail!("nothing to compare: {}", why.join("; "));
    }
    let (all, best) = rows_of(&tried);
    if let Some(path) = &args.svg.svg {
        let mut inputs = config.files().to_vec();
        inputs.extend(args.backends.backends.clone());
        inputs.extend(args.target.target_servers.clone());
        let title = format!("Leaving nginx: {}", args.config.path().display());
        svg::write(path, &svg::migrate_svg(&tried, &title), inputs)?;
    }
    let mut out = BufWriter::new(crate::stdout::stdout());
    match args.format.format {
        Format::Table => {
            writeln!(out, "{}: share of keys that keep their server, per setting", args.config.path().display())?;
            if tried.iter().any(|t| matches!(t.comparison.method, Method::Sampled { .. })) {
                writeln!(
                    out,
                    "sampled: {} random keys (seed {}), 95% intervals; exact: over all 2^32 CRC32 values",
                    args.sample.samples, args.sample.seed
                )?;
            }
            for &e in &engines {
                writeln!(out, "{}", provenance(&e))?;
                if e.name() == "caddy" {
                    writeln!(out, "{}", CADDY_EMPTY_KEY)?;
                }
            }
            if let Some(e) = &endpoints {
                writeln!(out, "{}", e.line())?;
            }
            for s in &skipped {
                writeln!(out, "upstream {}: left out: {}", s.upstream, s.reason)?;
            }
            writeln!(out)?;
            all.write_table(&mut out)?;
            writeln!(out)?;
            best.write_table(&mut out)?;
        }
        Format::Json => {
            let doc = MigrateJson {
                schema: SCHEMA,
                config: args.config.path().display().to_string(),
                samples: args.sample.samples,
                seed: args.sample.seed,
                endpoints: endpoints.as_ref().map(|e| match e {
                    ServerList::Ingress(i) => format!("{} ({})", i.name, i.file.display()),
                    ServerList::Target(t) => {
                        format!("{} ({}, {})", t.name.as_deref().unwrap_or("-"), t.format.describe(), t.file.display())
                    }
                }),
                engines: engines
                    .iter()
                    .map(|e| EngineJson { engine: e.to_string(), provenance: provenance(e) })
                    .collect(),
                settings: all.json(),
                best: best.json(),
                skipped,
            };
            json(&mut out, &doc)?;
        }
        Format::Csv => all.write_csv(&mut out)?,
    }
    out.flush()?;
    Ok(Verdict::Within)
}

/// Every setting as a row, and per upstream and engine the best one.
fn rows_of(tried: &[Tried]) -> (Rows, Rows) {
    let mut all = Rows::new(vec![
        Column::text("upstream"),
        Column::text("engine"),
        Column::text("setting"),
        Column::text("method").headed("counted"),
        Column::number("kept"),
        Column::number("total").headed("of"),
        Column::number("kept_fraction").headed("percent"),
        Column::text("interval").headed("95% interval"),
        Column::text("best"),
    ]);
    let mut best = Rows::new(vec![
        Column::text("upstream"),
        Column::text("engine"),
        Column::text("setting").headed("best setting"),
        Column::number("kept_fraction").headed("keeps"),
        Column::text("interval").headed("95% interval"),
        Column::number("indistinguishable").headed("others within its interval"),
    ]);
    for t in tried {
        let c = &t.comparison;
        let sampled = matches!(c.method, Method::Sampled { .. });
        let interval = |n, total| {
            if sampled {
                let (lo, hi) = wilson(n, total);
                Cell::Interval(lo, hi)
            } else {
                Cell::Empty
            }
        };
        all.push(vec![
            Cell::Text(t.upstream.clone()),
            Cell::Text(t.engine.to_string()),
            Cell::Text(t.setting.to_string()),
            Cell::Text(if sampled { "sampled" } else { "exact" }.into()),
            Cell::Count(c.agree),
            Cell::Count(c.total),
            Cell::Fraction { n: c.agree, total: c.total },
            interval(c.agree, c.total),
            if t.best { Cell::Text("best".into()) } else { Cell::Empty },
        ]);
        if t.best {
            let (lo, _) = t.interval();
            let others = tried
                .iter()
                .filter(|o| o.upstream == t.upstream && o.engine == t.engine && o.setting != t.setting)
                .filter(|o| o.interval().1 >= lo)
                .count();
            best.push(vec![
                Cell::Text(t.upstream.clone()),
                Cell::Text(t.engine.to_string()),
                Cell::Text(t.setting.to_string()),
                Cell::Fraction { n: c.agree, total: c.total },
                interval(c.agree, c.total),
                Cell::Count(others as u64),
            ]);
        }
    }
    (all, best)
}
