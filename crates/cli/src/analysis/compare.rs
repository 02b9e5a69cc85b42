//! `nginx-ketama compare`: how many keys another ketama implementation, or another proxy, sends to the same
//! server.

use super::hottest::{self, Hottest, Place};
use super::unit_words;
use crate::args::{ConfigArgs, FailAgreementBelow, FormatArg, KeysFile, Sample, TargetServersFile};
use crate::gate::{self, Verdict};
use crate::ingress::BackendsFile;
use crate::render::rows::{self, Cell, Column, Rows, percent};
use crate::render::{Format, json};
use crate::schema::Schema;
use crate::target::{ServerList, ServerListJson};
use anyhow::{Result, bail};
use nginx_ketama::analysis::compare::{Against, Comparison, Listed, Method, wilson};
use nginx_ketama::analysis::{Pick, PickMap};
use nginx_ketama::engines::Engine;
use std::io::{BufWriter, Write};

/// The schema of `compare --format json` (docs/schemas/compare.v2.json; v1 had no `keys.hottest`).
const SCHEMA: Schema = Schema("nginx-ketama/compare/v2");

/// What `--against` names: a ketama implementation or another proxy (`nginx_ketama::engines::Engine`).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Other(Against);

/// `--against`'s parser: `pingora-ketama`, `libketama`, `md5-vnodes`, or an engine
/// (`haproxy[@RELEASE][:OPTION,…]`, `caddy[@RELEASE]`, `ingress-nginx`, `apisix`, `envoy[:OPTION,…]`,
/// `kong[:slots=N]`, `traefik`).
fn parse_other(s: &str) -> Result<Other, String> {
    Ok(Other(match s {
        "pingora-ketama" => Against::PingoraKetama,
        "libketama" => Against::Libketama,
        "md5-vnodes" => Against::Md5Vnodes,
        _ => Against::Engine(
            s.parse::<Engine>()
                .map_err(|e| format!("{e}; or pingora-ketama (exact), libketama, md5-vnodes (sampled)"))?,
        ),
    }))
}

/// `compare`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: ConfigArgs,
    /// The other implementation: pingora-ketama (exact), libketama, md5-vnodes (sampled), or a proxy:
    /// haproxy[@2.2.9|2.6.12|3.0.11|3.2.26][:sdbm|djb2|wt6|crc32|none,avalanche,map-based,hash-key=id|addr|addr-port,allbackups],
    /// caddy[@2.6.2|2.11.4], ingress-nginx, apisix,
    /// envoy[:maglev,table-size=N|murmur2,min-ring-size=N,max-ring-size=N][,use-hostname-for-hashing],
    /// kong[:slots=N], traefik
    /// (exact where the proxy hashes the key with CRC-32 on intervals, sampled otherwise; docs/engines.md).
    #[arg(long, value_parser = parse_other, value_name = "IMPLEMENTATION")]
    against: Other,
    #[command(flatten)]
    sample: Sample,
    #[command(flatten)]
    backends: BackendsFile,
    #[command(flatten)]
    target: TargetServersFile,
    #[command(flatten)]
    keys: KeysFile,
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    gate: FailAgreementBelow,
}

/// The JSON document of `compare`.
#[derive(serde::Serialize)]
struct CompareJson<'a> {
    schema: Schema,
    upstream: &'a str,
    against: &'a str,
    /// For a proxy: what its model is read from, and whether it is proven live.
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<&'a str>,
    /// With `--backends` or `--target-servers`: the list the engine was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoints: Option<ServerListJson>,
    /// Over the hash space: exact (pingora-ketama) or sampled (MD5 rings).
    uniform: &'a Report<'a>,
    /// With `--keys`.
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<&'a Report<'a>>,
}

/// One comparison (over the hash space, sampled keys or listed keys) as rows: each server's agreement.
struct Report<'a> {
    comparison: &'a Comparison,
    servers: Rows,
    /// Over keys, with `--hottest N`: the keys with the most requests the other sends elsewhere.
    hottest: Option<Hottest>,
}

impl Report<'_> {
    /// `measure` names it in CSV; `other` heads the other implementation's column in the table.
    /// With `listed` (an engine given its own server list): a column saying which side lists each server.
    fn of<'a>(c: &'a Comparison, measure: &'static str, other: &str, listed: bool) -> Report<'a> {
        let mut columns = vec![
            Column::text("measure").not_in_table().not_in_json(),
            Column::text("server"),
            Column::number("nginx"),
            Column::number("other").headed(other.to_string()),
            Column::number("both"),
            // `both / nginx`: the part of this server's keys the other keeps on it.
            Column::number("agreement"),
        ];
        let sampled = matches!(c.method, Method::Sampled { .. });
        if sampled {
            columns.push(Column::text("interval").headed("95% interval").not_in_csv());
        }
        if listed {
            columns.push(Column::text("listed"));
        }
        let mut servers = Rows::new(columns);
        for s in &c.servers {
            let mut row = vec![
                Cell::Text(measure.to_string()),
                Cell::Text(s.server.to_string()),
                Cell::Count(s.nginx),
                Cell::Count(s.other),
                Cell::Count(s.both),
                Cell::Fraction { n: s.both, total: s.nginx },
            ];
            if sampled {
                let (lo, hi) = wilson(s.both, s.nginx);
                row.push(Cell::Interval(lo, hi));
            }
            if listed {
                row.push(Cell::Text(listed_word(s.listed).into()));
            }
            servers.push(row);
        }
        Report { comparison: c, servers, hottest: None }
    }

    fn write_table(&self, out: &mut impl Write) -> Result<()> {
        let c = self.comparison;
        if let Method::Sampled { keys, seed } = c.method {
            writeln!(out, "sampled: {keys} random keys (seed {seed}), 95% intervals")?;
        }
        let ci = c.interval(c.agree, c.total).map(|(lo, hi)| Cell::Interval(lo, hi).to_string());
        let ci = ci.map_or_else(String::new, |ci| format!(", {ci}"));
        writeln!(out, "agree: {} of {} ({}{ci})", c.agree, c.total, percent(c.agree, c.total))?;
        if let Some(e) = c.expected {
            writeln!(out, "expected if CRC32 and MD5 were independent: {:.3}%", e * 100.0)?;
        }
        if c.round_robin > 0 {
            writeln!(out, "nginx hands {} to round-robin ({})", c.round_robin, percent(c.round_robin, c.total))?;
        }
        let caddy = matches!(c.against, Against::Engine(Engine::Caddy(_)));
        if c.not_hashed > 0 || (caddy && c.method == Method::Keys) {
            writeln!(
                out,
                "not hashed: fallback: {} ({}): empty keys (an absent header, query parameter or cookie); Caddy \
                 hashes none of them but asks its fallback policy (random by default), never counted as kept",
                c.not_hashed,
                percent(c.not_hashed, c.total)
            )?;
        }
        let only =
            |l: Listed| c.servers.iter().filter(|s| s.listed == l).map(|s| s.server.to_string()).collect::<Vec<_>>();
        let (nginx_only, other_only) = (only(Listed::Nginx), only(Listed::Other));
        if !nginx_only.is_empty() {
            writeln!(
                out,
                "only nginx has: {} (no server of the engine's list takes traffic at that address)",
                nginx_only.join(", ")
            )?;
        }
        if !other_only.is_empty() {
            writeln!(out, "only the engine's list has: {} (no nginx peer at that address)", other_only.join(", "))?;
        }
        self.servers.write_table(out)?;
        if let Some(hot) = &self.hottest {
            writeln!(out)?;
            hot.write_table(out)?;
        }
        Ok(())
    }
}

impl serde::Serialize for Report<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        struct ReportJson<'a> {
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
            /// What the other side does not hash (Caddy's empty keys: its fallback policy picks).
            #[serde(skip_serializing_if = "is_zero")]
            not_hashed_fallback: u64,
            /// `server`, `nginx`, `other`, `both`, `agreement` (`both / nginx`), `interval` (sampled only).
            servers: rows::Json<'a>,
            /// Over keys, with `--hottest N`.
            #[serde(skip_serializing_if = "Option::is_none")]
            hottest: Option<&'a Hottest>,
        }
        let c = self.comparison;
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
            agree_fraction: rows::fraction(c.agree, c.total),
            interval: c.interval(c.agree, c.total),
            expected_if_independent: c.expected,
            round_robin: c.round_robin,
            not_hashed_fallback: c.not_hashed,
            servers: self.servers.json(),
            hottest: self.hottest.as_ref(),
        }
        .serialize(serializer)
    }
}

pub(crate) fn run(args: &Args) -> Result<Verdict> {
    let n = args.keys.hottest(args.format.format)?;
    let loaded = args.config.load()?;
    let (up, name) = (&loaded.upstream, &loaded.name);
    let map = PickMap::new(up);
    let against = args.against.0;
    let endpoints = ServerList::read(&args.backends, &args.target)?;
    if let Against::Engine(Engine::Envoy { use_hostname: true, .. }) = against {
        let unnamed = match &endpoints {
            Some(list) => list.backends().iter().filter(|b| b.name.is_none() && b.hash_key.is_none()).count(),
            None => up.primary().iter().filter(|p| !p.is_down()).count(),
        };
        if unnamed > 0 {
            eprintln!(
                "nginx-ketama: [warn] {against}: {unnamed} host(s) have no hostname (nor hash_key): Envoy hashes their \
                 empty hostname, so they share one key (give the hostnames with --target-servers)"
            );
        }
    }
    let uniform = match (against, &endpoints) {
        (Against::Engine(engine), Some(e)) => {
            e.check_engine(&engine)?;
            Comparison::against_engine_listed(up, &map, engine, e.backends(), args.sample.samples, args.sample.seed)?
        }
        (_, Some(list)) => {
            bail!("{} gives a proxy its servers: use it with --against ENGINE, not {against}", list.flag())
        }
        (Against::PingoraKetama, None) => Comparison::exact(up, &map)?,
        (Against::Engine(engine), None) => {
            Comparison::against_engine(up, &map, engine, args.sample.samples, args.sample.seed)?
        }
        (_, None) => Comparison::sampled(up, &map, against, args.sample.samples, args.sample.seed)?,
    };
    // With --hottest, the keys the other does not send where nginx does (what `agree` leaves out), each with
    // both picks.
    let of_keys = |keys: &mut dyn Iterator<Item = Vec<u8>>| {
        let mut counter = n.map(|n| (n, hottest::counter::<(Vec<u8>, Pick, Pick)>(n)));
        let each = |key: &Vec<u8>, nginx: Pick, theirs: Pick| {
            if let Some((_, counter)) = &mut counter
                && !(matches!(theirs, Pick::Server(_)) && nginx == theirs)
            {
                counter.insert(&(key.clone(), nginx, theirs));
            }
        };
        let comparison = match (against, &endpoints) {
            (Against::Engine(engine), Some(e)) => {
                Comparison::of_keys_listed_each(up, &map, engine, e.backends(), keys, each)
            }
            _ => Comparison::of_keys_each(up, &map, against, keys, each),
        };
        comparison.map(|c| (c, counter))
    };
    let keys = match args.keys.count(&loaded, of_keys)? {
        Some((path, k)) => Some((path, k?)),
        None => None,
    };
    let other = against.to_string();
    let listed = endpoints.is_some();
    let report = Report::of(&uniform, "uniform", &other, listed);
    let over_keys = keys.as_ref().map(|(path, (k, counter))| {
        let mut report = Report::of(k, "keys", &other, listed);
        report.hottest = counter.as_ref().map(|(n, counter)| {
            let places =
                vec![Place { json: "nginx", heading: "nginx".into() }, Place { json: "other", heading: other.clone() }];
            let name = |p: Pick| k.server_of(p).map(ToString::to_string);
            let what = format!("keys {other} sends elsewhere");
            let goes = |item: &(Vec<u8>, Pick, Pick)| vec![name(item.1), name(item.2)];
            Hottest::of(counter, *n, what, k.total, places, |item| (item.0.clone(), None), goes)
        });
        (path, report)
    });
    let keys = keys.as_ref().map(|(path, (k, _))| (*path, k));
    let verdict = Verdict::of(args.gate.fail_agreement_below.into_iter().flat_map(|limit| {
        let what = match uniform.method {
            Method::Sampled { keys, .. } => format!("{keys} random keys"),
            _ => "the hash space".to_string(),
        };
        let over_keys = keys.map(|(path, k)| (format!("the keys of {}", path.display()), k));
        let other = &other;
        [(what, &uniform)]
            .into_iter()
            .chain(over_keys)
            .map(move |(what, c)| gate::agreement_below(limit, c.agree, c.total, &what, other))
    }));
    let written = (|| -> Result<()> {
        let mut out = BufWriter::new(crate::stdout::stdout());
        match args.format.format {
            Format::Table => {
                let how = match uniform.method {
                    Method::Exact => unit_words(uniform.unit),
                    _ => "over random keys".into(),
                };
                writeln!(out, "upstream {name} (nginx {}) against {other}: {how}", up.version())?;
                if let Against::Engine(engine) = against {
                    writeln!(out, "{}", provenance(&engine))?;
                }
                if let Some(e) = &endpoints {
                    writeln!(out, "{}", e.line())?;
                }
                report.write_table(&mut out)?;
                if let Some((path, k)) = &over_keys {
                    writeln!(out, "\nover the {} keys of {}:", k.comparison.total, path.display())?;
                    k.write_table(&mut out)?;
                }
            }
            Format::Json => {
                let provenance = match against {
                    Against::Engine(engine) => Some(provenance(&engine)),
                    _ => None,
                };
                let doc = CompareJson {
                    schema: SCHEMA,
                    upstream: name,
                    against: &other,
                    provenance: provenance.as_deref(),
                    endpoints: endpoints.as_ref().map(ServerList::json),
                    uniform: &report,
                    keys: over_keys.as_ref().map(|(_, k)| k),
                };
                json(&mut out, &doc)?;
            }
            Format::Csv => {
                let keys = over_keys.as_ref().map(|(_, k)| &k.servers);
                rows::write_csv(&mut out, [&report.servers].into_iter().chain(keys))?;
            }
        }
        out.flush()?;
        Ok(())
    })();
    gate::after(verdict, written)
}

/// "ENGINE: modelled from <source>; proven live …" or "…; not proven live".
pub(crate) fn provenance(engine: &Engine) -> String {
    let live = if engine.proven_live() {
        "proven live against the real engine (tests/engines_live.rs)"
    } else {
        "not proven live"
    };
    format!("{engine}: modelled from {}; {live}", engine.source())
}

/// `both`, `nginx only`, `engine only`.
pub(crate) fn listed_word(l: Listed) -> &'static str {
    match l {
        Listed::Both => "both",
        Listed::Nginx => "nginx only",
        Listed::Other => "engine only",
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
