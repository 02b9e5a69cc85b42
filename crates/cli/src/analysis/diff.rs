//! `nginx-ketama diff`: what moves between two configurations (or two nginx versions).

use super::hottest::{self, Hottest, Place};
use super::{basis_name, unit_words};
use crate::args::{self, FailMovedAbove, Failed, FormatArg, Fragment, KeyLength, KeysFile, Loaded, NoResolve, SvgFile};
use crate::args::{modelled_version, with_modelled_range};
use crate::gate::{self, Verdict};
use crate::render::rows::{self, Cell, Column, Rows, percent};
use crate::render::{Format, json, svg};
use crate::schema::Schema;
use anyhow::Result;
use nginx_ketama::analysis::compare::{Method, engine_backends, wilson};
use nginx_ketama::analysis::diff::Diff;
use nginx_ketama::analysis::migrate::{EngineDiff, nginx_between_kept};
use nginx_ketama::analysis::{Pick, PickMap, Unit};
use nginx_ketama::engines::Engine;
use nginx_ketama::{Libc, NginxVersion, Upstream};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The schema of `diff --format json` (docs/schemas/diff.v2.json; v1 had no `keys.hottest`).
const SCHEMA: Schema = Schema("nginx-ketama/diff/v2");
/// The JSON document of `diff --engine` (`docs/schemas/engine-diff.v2.json`).
const ENGINE_SCHEMA: Schema = Schema("nginx-ketama/engine-diff/v2");

/// `diff`'s arguments: two sides, each a configuration file, an upstream, an nginx version and a C library.
#[derive(clap::Args)]
#[command(mut_args(args::help_of(
    "failed",
    "A server that refuses connections on both sides (a server string or a peer address). Repeatable"
)))]
#[command(mut_args(args::help_of("fragment", "Read both files as fragments (see `route --help`)")))]
#[command(mut_args(args::help_of("svg", "Write a picture (SVG): the ring before and after, moved arcs in red")))]
pub(crate) struct Args {
    /// The configuration before the change. Host names in `server` lines of both files are resolved with
    /// this machine's system resolver (getaddrinfo: /etc/hosts, DNS), as nginx resolves them at start-up, unless
    /// --no-resolve.
    #[arg(long, value_name = "FILE")]
    from: PathBuf,
    /// The configuration after the change (default: the same file, e.g. with --to-version).
    #[arg(long, value_name = "FILE")]
    to: Option<PathBuf>,
    /// The upstream (in both files, unless --to-upstream names it differently after the change).
    #[arg(long)]
    upstream: Option<String>,
    /// The upstream's name after the change.
    #[arg(long, value_name = "NAME")]
    to_upstream: Option<String>,
    // The help names the modelled range, from the version table.
    #[arg(
        long,
        default_value_t = NginxVersion::LATEST,
        value_parser = modelled_version,
        help = with_modelled_range("nginx version before")
    )]
    from_version: NginxVersion,
    /// nginx version after.
    #[arg(long, default_value_t = NginxVersion::LATEST, value_parser = modelled_version)]
    to_version: NginxVersion,
    /// The C library nginx was built with before (glibc or musl: it decides ring points two servers share).
    #[arg(long, default_value_t = Libc::Glibc, value_parser = args::libc_parser())]
    from_libc: Libc,
    /// The C library after (e.g. `--to-libc musl` for a move from Debian to Alpine).
    #[arg(long, default_value_t = Libc::Glibc, value_parser = args::libc_parser())]
    to_libc: Libc,
    #[command(flatten)]
    resolve: NoResolve,
    #[command(flatten)]
    fragment: Fragment,
    #[command(flatten)]
    failed: Failed,
    #[command(flatten)]
    key_length: KeyLength,
    #[command(flatten)]
    keys: KeysFile,
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    svg: SvgFile,
    #[command(flatten)]
    gate: FailMovedAbove,
    /// Also what this proxy moves for the same change, beside nginx: ENGINE as `compare --against` takes
    /// it (haproxy…, caddy…, ingress-nginx, apisix, envoy…, kong…, traefik), given each side's primary
    /// peers by address. Exact where the proxy hashes the key with CRC-32 on intervals, else sampled
    /// (docs/engines.md); with --keys, --requests or --log, also both over those keys.
    #[arg(long, value_name = "ENGINE", value_parser = parse_engine,
          conflicts_with_all = ["failed", "hottest", "svg", "fail_moved_above"])]
    engine: Option<Engine>,
    #[command(flatten)]
    target: args::TargetServersFile,
    /// With --engine and --target-servers FILE (the engine's own server list before the change): the
    /// engine's own list after it, in the same format.
    #[arg(long, value_name = "FILE", requires = "target_servers")]
    to_target_servers: Option<PathBuf>,
    /// With --engine, when sampled: how many random keys.
    #[arg(long, default_value_t = 100_000, requires = "engine")]
    samples: u64,
    /// With --engine, when sampled: the sample's seed.
    #[arg(long, default_value_t = 1, requires = "engine")]
    seed: u64,
}

/// `--engine`'s parser.
fn parse_engine(s: &str) -> Result<Engine, String> {
    s.parse::<Engine>().map_err(|e| e.to_string())
}

impl Args {
    /// The configuration after the change.
    fn to_path(&self) -> &Path {
        self.to.as_deref().unwrap_or(&self.from)
    }

    /// Reads one side.
    fn load(&self, path: &Path, upstream: Option<&str>, version: NginxVersion, libc: Libc) -> Result<Loaded> {
        args::load(path, upstream, &args::load_options(&self.resolve, &self.fragment, version, libc))
    }
}

/// One side of a change, for the table's heading.
fn describe(path: &Path, side: &Loaded) -> String {
    let up: &Upstream = &side.upstream;
    let method = if up.ring().is_some() { "consistent" } else { "plain" };
    // The C library is named when it is not the default (glibc).
    let libc = if up.libc() == Libc::Glibc { String::new() } else { format!(", {}", up.libc()) };
    format!("{} (upstream {}, {method}, nginx {}{libc})", path.display(), side.name, up.version())
}

/// The JSON document of `diff --engine`.
#[derive(serde::Serialize)]
struct EngineDiffJson<'a> {
    schema: Schema,
    from: SideJson,
    to: SideJson,
    engine: String,
    /// What the engine's model is read from, and whether it is proven live.
    provenance: String,
    /// With `--target-servers` and `--to-target-servers`: the engine's own lists before and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    target_servers: Option<[String; 2]>,
    /// `nginx` first (exact), then the engine.
    sides: rows::Json<'a>,
    /// With `--keys`, `--requests` or `--log`: both over those keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<EngineKeysJson<'a>>,
}

/// `diff --engine`'s figures over real keys.
#[derive(serde::Serialize)]
struct EngineKeysJson<'a> {
    /// The file the keys were read from.
    source: String,
    /// `nginx` first, then the engine, both counted over the keys.
    sides: rows::Json<'a>,
    /// Keys the engine hashes on neither side (Caddy's empty keys): neither kept nor moved.
    #[serde(skip_serializing_if = "is_zero")]
    not_hashed_fallback: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `diff --engine`: nginx's moves (exact) and the engine's (exact or sampled) for the same change, one
/// row each.
fn on_engine(
    args: &Args,
    engine: Engine,
    (from, a): (&Loaded, &PickMap),
    (to, b): (&Loaded, &PickMap),
    diff: &Diff,
) -> Result<Verdict> {
    let (before, after, lists) = match (&args.target.target_servers, &args.to_target_servers) {
        (Some(b), Some(a)) => {
            let (b, a) = (crate::target::read(b)?, crate::target::read(a)?);
            for list in [&b, &a] {
                if list.format != b.format {
                    anyhow::bail!(
                        "--to-target-servers {}: a {} list, but --target-servers is a {} list",
                        a.file.display(),
                        a.format.describe(),
                        b.format.describe()
                    );
                }
            }
            let (bl, al) = (crate::target::ServerList::Target(b), crate::target::ServerList::Target(a));
            bl.check_engine(&engine)?;
            (bl.backends().to_vec(), al.backends().to_vec(), Some((bl.line(), al.line())))
        }
        (Some(_), None) => anyhow::bail!(
            "--target-servers gives the engine's list before the change: give the list after it with --to-target-servers"
        ),
        _ => (engine_backends(&from.upstream)?, engine_backends(&to.upstream)?, None),
    };
    let theirs = EngineDiff::of(engine, &before, &after, args.samples, args.seed)?;
    // Real keys: nginx's moves and the engine's over the same keys, in one pass.
    let tally = EngineDiff::over_keys(engine, &before, &after)?;
    let over_keys = args.keys.count_pairs(from, to, move |pairs| {
        let mut tally = tally;
        let nginx = Diff::of_key_pairs(a, b, pairs.inspect(|(x, y)| tally.add(x, y)));
        (nginx, tally.finish())
    })?;
    let columns = || {
        vec![
            Column::text("side"),
            Column::text("counted"),
            Column::number("total"),
            Column::number("moved"),
            Column::number("moved_fraction").headed("percent"),
            Column::text("moved_interval").headed("95% interval"),
            Column::number("between_kept").headed("between kept"),
            Column::number("between_kept_fraction").headed("percent"),
            Column::text("between_kept_interval").headed("95% interval"),
        ]
    };
    let mut rows = Rows::new(columns());
    let counted = |m: Method| match m {
        Method::Exact => "exact".to_string(),
        Method::Sampled { keys, seed } => format!("sampled: {keys} keys, seed {seed}"),
        Method::Keys => "keys".to_string(),
    };
    let interval = |m: Method, n: u64, total: u64| match m {
        Method::Sampled { .. } => {
            let (lo, hi) = wilson(n, total);
            Cell::Interval(lo, hi)
        }
        _ => Cell::Empty,
    };
    let side = |rows: &mut Rows, name: String, m: Method, total: u64, moved: u64, kept: u64| {
        rows.push(vec![
            Cell::Text(name),
            Cell::Text(counted(m)),
            Cell::Count(total),
            Cell::Count(moved),
            Cell::Fraction { n: moved, total },
            interval(m, moved, total),
            Cell::Count(kept),
            Cell::Fraction { n: kept, total },
            interval(m, kept, total),
        ]);
    };
    side(&mut rows, "nginx".into(), Method::Exact, diff.total, diff.moved, nginx_between_kept(diff, a, b));
    side(&mut rows, engine.to_string(), theirs.method, theirs.total, theirs.moved, theirs.between_kept);
    let not_hashed = over_keys.as_ref().map_or(0, |(_, (_, theirs))| theirs.not_hashed);
    let key_rows = over_keys.map(|(path, (nginx, theirs))| {
        let mut rows = Rows::new(columns());
        let kept = nginx_between_kept(&nginx, a, b);
        side(&mut rows, "nginx".into(), Method::Keys, nginx.total, nginx.moved, kept);
        side(&mut rows, engine.to_string(), theirs.method, theirs.total, theirs.moved, theirs.between_kept);
        (path, nginx.total, rows)
    });
    let provenance = super::compare::provenance(&engine);
    let mut out = BufWriter::new(crate::stdout::stdout());
    match args.format.format {
        Format::Table => {
            writeln!(out, "from {}", describe(&args.from, from))?;
            writeln!(out, "to   {}", describe(args.to_path(), to))?;
            writeln!(out, "{provenance}")?;
            if let Some((before, after)) = &lists {
                writeln!(out, "{engine} before: {before}")?;
                writeln!(out, "{engine} after:  {after}")?;
            }
            writeln!(out, "between kept: keys moved from a server present before and after to another such server")?;
            rows.write_table(&mut out)?;
            if let Some((path, total, rows)) = &key_rows {
                writeln!(out, "\nover the {total} keys of {}:", path.display())?;
                rows.write_table(&mut out)?;
            }
            if not_hashed > 0 {
                writeln!(
                    out,
                    "not hashed: fallback: {not_hashed} of the keys are empty: {engine} hashes none of them (its \
                     fallback policy picks anew), counted neither as kept nor as moved"
                )?;
            }
        }
        Format::Json => {
            let doc = EngineDiffJson {
                schema: ENGINE_SCHEMA,
                from: SideJson::of(&args.from, from, a),
                to: SideJson::of(args.to_path(), to, b),
                engine: engine.to_string(),
                provenance,
                target_servers: lists.as_ref().map(|(b, a)| [b.clone(), a.clone()]),
                sides: rows.json(),
                keys: key_rows.as_ref().map(|(path, _, rows)| EngineKeysJson {
                    source: path.display().to_string(),
                    sides: rows.json(),
                    not_hashed_fallback: not_hashed,
                }),
            };
            json(&mut out, &doc)?;
        }
        Format::Csv => {
            let keys = key_rows.as_ref().map(|(_, _, rows)| rows);
            rows::write_csv(&mut out, [&rows].into_iter().chain(keys))?;
        }
    }
    out.flush()?;
    Ok(Verdict::Within)
}

/// The JSON document of `diff`.
#[derive(serde::Serialize)]
struct DiffJson<'a> {
    schema: Schema,
    from: SideJson,
    to: SideJson,
    /// The uniform figure, over 2^32 CRC32 values.
    hash_space: &'a Report<'a>,
    /// With `--keys`: the same over the keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<&'a Report<'a>>,
}

#[derive(serde::Serialize)]
struct SideJson {
    config: String,
    upstream: String,
    nginx: String,
    /// `glibc` or `musl`: whose tie rule built the ring.
    libc: &'static str,
    /// `ring`, `plain-first-step` or `plain-rehash-N-byte-keys`.
    basis: String,
}

impl SideJson {
    fn of(path: &Path, side: &Loaded, map: &PickMap) -> SideJson {
        SideJson {
            config: path.display().to_string(),
            upstream: side.name.clone(),
            nginx: side.upstream.version().to_string(),
            libc: side.upstream.libc().as_str(),
            basis: basis_name(Unit::HashSpace(map.basis())),
        }
    }
}

/// One measure of a diff (over the hash space, or over the keys) as rows: what moved where, and each
/// server's change.
struct Report<'a> {
    diff: &'a Diff,
    moves: Rows,
    changes: Rows,
    /// Over keys, with `--hottest N`: the keys with the most requests that move.
    hottest: Option<Hottest>,
}

impl Report<'_> {
    /// `measure` names it in CSV.
    fn of<'a>(diff: &'a Diff, measure: &'static str) -> Report<'a> {
        let pick = |p: Pick| Cell::Pick(diff.server_of(p).map(|s| s.to_string()));
        let mut moves = Rows::new(vec![
            Column::text("measure").not_in_table().not_in_json(),
            Column::text("from"),
            Column::text("to"),
            Column::number("count").headed("moved"),
            Column::number("fraction").headed("percent"),
        ]);
        for &(m, n) in &diff.moves {
            let part = Cell::Fraction { n, total: diff.total };
            moves.push(vec![Cell::Text(measure.to_string()), pick(m.from), pick(m.to), Cell::Count(n), part]);
        }
        let mut changes = Rows::new(vec![
            Column::text("server"),
            Column::number("before"),
            Column::number("after"),
            Column::number("gained"),
            Column::number("lost"),
            Column::number("net").not_in_csv().not_in_json(),
        ]);
        let of = |n: u64| Cell::CountOf { n, total: diff.total };
        let net = |gained: u64, lost: u64| Cell::Net(i128::from(gained) - i128::from(lost));
        for c in &diff.changes {
            let server = Cell::Text(c.server.to_string());
            changes.push(vec![
                server,
                of(c.before),
                of(c.after),
                Cell::Count(c.gained),
                Cell::Count(c.lost),
                net(c.gained, c.lost),
            ]);
        }
        let (b, a) = diff.round_robin;
        if b > 0 || a > 0 {
            changes.push_summary(vec![Cell::Pick(None), of(b), of(a), Cell::Empty, Cell::Empty, net(a, b)]);
        }
        Report { diff, moves, changes, hottest: None }
    }

    fn write_table(&self, out: &mut impl Write) -> Result<()> {
        let d = self.diff;
        writeln!(out, "moved: {} of {} ({})", d.moved, d.total, percent(d.moved, d.total))?;
        if !d.moves.is_empty() {
            writeln!(out)?;
            self.moves.write_table(out)?;
        }
        writeln!(out)?;
        self.changes.write_table(out)?;
        if let Some(hot) = &self.hottest {
            writeln!(out)?;
            hot.write_table(out)?;
        }
        Ok(())
    }
}

impl serde::Serialize for Report<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        /// Largest moves first; `null` is round-robin.
        #[derive(serde::Serialize)]
        struct ReportJson<'a> {
            total: u64,
            moved: u64,
            moved_fraction: f64,
            moves: rows::Json<'a>,
            servers: rows::Json<'a>,
            round_robin: RoundRobinJson,
            /// Over keys, with `--hottest N`.
            #[serde(skip_serializing_if = "Option::is_none")]
            hottest: Option<&'a Hottest>,
        }
        #[derive(serde::Serialize)]
        struct RoundRobinJson {
            before: u64,
            after: u64,
        }
        let d = self.diff;
        ReportJson {
            total: d.total,
            moved: d.moved,
            moved_fraction: rows::fraction(d.moved, d.total),
            moves: self.moves.json(),
            servers: self.changes.json(),
            round_robin: RoundRobinJson { before: d.round_robin.0, after: d.round_robin.1 },
            hottest: self.hottest.as_ref(),
        }
        .serialize(serializer)
    }
}

pub(crate) fn run(args: &Args) -> Result<Verdict> {
    let n = args.keys.hottest(args.format.format)?;
    if args.engine.is_none() && args.target.target_servers.is_some() {
        anyhow::bail!("--target-servers gives an engine its servers: use it with --engine ENGINE");
    }
    let to_path = args.to_path();
    let from = args.load(&args.from, args.upstream.as_deref(), args.from_version, args.from_libc)?;
    let to_upstream = args.to_upstream.as_deref().or(args.upstream.as_deref());
    let to = args.load(to_path, to_upstream, args.to_version, args.to_libc)?;
    let fails = args.failed.in_either(&from.upstream, &to.upstream)?;
    let key_length = args.key_length.key_length;
    let a = PickMap::with_failing(&from.upstream, fails, key_length);
    let b = PickMap::with_failing(&to.upstream, fails, key_length);
    let diff = Diff::of(&a, &b);
    if let Some(engine) = args.engine {
        return on_engine(args, engine, (&from, &a), (&to, &b), &diff);
    }
    // A request moves when its server before and after differ (round-robin is one more owner), as in `Diff`.
    let goes = |pair: &(Vec<u8>, Vec<u8>)| {
        (hottest::server(a.servers(), a.pick_key(&pair.0)), hottest::server(b.servers(), b.pick_key(&pair.1)))
    };
    let keys = args.keys.count_pairs(&from, &to, |pairs| match n {
        None => (Diff::of_key_pairs(&a, &b, pairs), None),
        Some(n) => {
            let mut counter = hottest::counter(n);
            let diff = Diff::of_key_pairs(
                &a,
                &b,
                pairs.inspect(|pair| {
                    let (before, after) = goes(pair);
                    if before != after {
                        counter.insert(pair);
                    }
                }),
            );
            (diff, Some((n, counter)))
        }
    })?;
    if let Some(path) = &args.svg.svg {
        let title = format!("{} → {}", args.from.display(), to_path.display());
        let inputs =
            from.files.iter().chain(&to.files).cloned().chain(args.keys.path().map(Path::to_path_buf)).collect();
        svg::write(path, &svg::diff_svg(&a, &b, &title), inputs)?;
    }
    let hash_space = Report::of(&diff, "hash-space");
    let over_keys = keys.as_ref().map(|(path, (k, counter))| {
        let mut report = Report::of(k, "keys");
        report.hottest = counter.as_ref().map(|(n, counter)| {
            let places =
                vec![Place { json: "from", heading: "from".into() }, Place { json: "to", heading: "to".into() }];
            let goes = |pair: &(Vec<u8>, Vec<u8>)| {
                let (before, after) = goes(pair);
                vec![before.map(ToString::to_string), after.map(ToString::to_string)]
            };
            let key = |pair: &(Vec<u8>, Vec<u8>)| (pair.0.clone(), Some(pair.1.clone()));
            Hottest::of(counter, *n, "moved keys".into(), k.total, places, key, goes)
        });
        (path, report)
    });
    let verdict = Verdict::of(args.gate.fail_moved_above.into_iter().flat_map(|limit| {
        let keys = over_keys.as_ref().map(|(path, k)| (format!("the keys of {}", path.display()), k.diff));
        [("the hash space".to_string(), &diff)]
            .into_iter()
            .chain(keys)
            .map(move |(what, d)| gate::moved_above(limit, d.moved, d.total, &what))
    }));
    let written = (|| -> Result<()> {
        let mut out = BufWriter::new(crate::stdout::stdout());
        match args.format.format {
            Format::Table => {
                writeln!(out, "from {}", describe(&args.from, &from))?;
                writeln!(out, "to   {}", describe(to_path, &to))?;
                writeln!(out, "{}", unit_words(diff.unit))?;
                if diff.to_unit != diff.unit {
                    writeln!(out, "(after: {})", unit_words(diff.to_unit))?;
                }
                hash_space.write_table(&mut out)?;
                if let Some((path, k)) = &over_keys {
                    writeln!(out, "\nover the {} keys of {}:", k.diff.total, path.display())?;
                    k.write_table(&mut out)?;
                }
            }
            Format::Json => {
                let doc = DiffJson {
                    schema: SCHEMA,
                    from: SideJson::of(&args.from, &from, &a),
                    to: SideJson::of(to_path, &to, &b),
                    hash_space: &hash_space,
                    keys: over_keys.as_ref().map(|(_, k)| k),
                };
                json(&mut out, &doc)?;
            }
            Format::Csv => {
                let keys = over_keys.as_ref().map(|(_, k)| &k.moves);
                rows::write_csv(&mut out, [&hash_space.moves].into_iter().chain(keys))?;
            }
        }
        out.flush()?;
        Ok(())
    })();
    gate::after(verdict, written)
}
