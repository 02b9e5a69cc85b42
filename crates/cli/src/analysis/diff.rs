//! `nginx-ketama diff`: what moves between two configurations (or two nginx versions).

use super::{Format, csv_line, fraction, json, percent, table, unit_words};
use crate::lines::count_keys;
use crate::render::svg;
use crate::{FragmentOf, UpstreamArgs};
use anyhow::{Result, bail};
use nginx_ketama::analysis::diff::Diff;
use nginx_ketama::analysis::{Pick, PickMap};
use nginx_ketama::{Libc, NginxVersion, Upstream};
use std::io::{BufWriter, Write};
use std::num::NonZeroUsize;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct DiffArgs {
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
    /// nginx version before (modelled: 1.18.0 to 1.30.x).
    #[arg(long, default_value_t = NginxVersion::LATEST, value_parser = crate::modelled_version)]
    from_version: NginxVersion,
    /// nginx version after.
    #[arg(long, default_value_t = NginxVersion::LATEST, value_parser = crate::modelled_version)]
    to_version: NginxVersion,
    /// The C library nginx was built with before (glibc or musl: it decides ring points two servers share).
    #[arg(long, default_value_t = Libc::Glibc, value_parser = crate::libc_parser())]
    from_libc: Libc,
    /// The C library after (e.g. `--to-libc musl` for a move from Debian to Alpine).
    #[arg(long, default_value_t = Libc::Glibc, value_parser = crate::libc_parser())]
    to_libc: Libc,
    /// Make every `server` line exactly one peer, with no DNS lookups. Without it a host name is resolved
    /// with the system resolver, as nginx does at start-up, and each of its addresses is a peer.
    #[arg(long)]
    no_resolve: bool,
    /// Read both files as fragments (see `route --help`).
    #[arg(long, value_enum, value_name = "CONTEXT", num_args = 0..=1, default_missing_value = "http")]
    fragment: Option<FragmentOf>,
    /// A server that refuses connections on both sides (a server string or a peer address). Repeatable.
    #[arg(long = "failed", value_name = "SERVER")]
    failed: Vec<String>,
    /// Plain hash with unusable slots: the key length the rehash steps are computed for.
    #[arg(long, value_name = "BYTES", default_value_t = NonZeroUsize::new(16).unwrap())]
    key_length: NonZeroUsize,
    /// Also count these keys (one per line), next to the uniform figure.
    #[arg(long, value_name = "FILE")]
    keys: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Write a picture (SVG): the ring before and after, moved arcs in red.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// The JSON document of `diff`.
#[derive(serde::Serialize)]
struct DiffJson {
    from: SideJson,
    to: SideJson,
    /// The uniform figure, over 2^32 CRC32 values.
    hash_space: ReportJson,
    /// With `--keys`: the same over the keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<ReportJson>,
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

#[derive(serde::Serialize)]
struct ReportJson {
    total: u64,
    moved: u64,
    moved_fraction: f64,
    /// Largest first; `null` is round-robin.
    moves: Vec<MoveJson>,
    servers: Vec<ChangeJson>,
    round_robin: RoundRobinJson,
}

#[derive(serde::Serialize)]
struct MoveJson {
    from: Option<String>,
    to: Option<String>,
    count: u64,
    fraction: f64,
}

#[derive(serde::Serialize)]
struct ChangeJson {
    server: String,
    before: u64,
    after: u64,
    gained: u64,
    lost: u64,
}

#[derive(serde::Serialize)]
struct RoundRobinJson {
    before: u64,
    after: u64,
}

fn name(diff: &Diff, pick: Pick) -> String {
    diff.server_of(pick).map_or_else(|| "(round-robin)".to_string(), |s| s.to_string())
}

fn report(diff: &Diff) -> ReportJson {
    ReportJson {
        total: diff.total,
        moved: diff.moved,
        moved_fraction: fraction(diff.moved, diff.total),
        moves: diff
            .moves
            .iter()
            .map(|(m, n)| MoveJson {
                from: diff.server_of(m.from).map(|s| s.to_string()),
                to: diff.server_of(m.to).map(|s| s.to_string()),
                count: *n,
                fraction: fraction(*n, diff.total),
            })
            .collect(),
        servers: diff
            .changes
            .iter()
            .map(|c| ChangeJson {
                server: c.server.to_string(),
                before: c.before,
                after: c.after,
                gained: c.gained,
                lost: c.lost,
            })
            .collect(),
        round_robin: RoundRobinJson { before: diff.round_robin.0, after: diff.round_robin.1 },
    }
}

fn print_table(out: &mut impl Write, diff: &Diff) -> Result<()> {
    writeln!(out, "moved: {} of {} ({})", diff.moved, diff.total, percent(diff.moved, diff.total))?;
    if !diff.moves.is_empty() {
        writeln!(out)?;
        let rows: Vec<Vec<String>> = diff
            .moves
            .iter()
            .map(|(m, n)| vec![name(diff, m.from), name(diff, m.to), n.to_string(), percent(*n, diff.total)])
            .collect();
        table(out, &["from", "to", "moved", "percent"], &[false, false, true, true], &rows)?;
    }
    writeln!(out)?;
    let mut rows: Vec<Vec<String>> = diff
        .changes
        .iter()
        .map(|c| {
            let net = i128::from(c.gained) - i128::from(c.lost);
            vec![
                c.server.to_string(),
                percent(c.before, diff.total),
                percent(c.after, diff.total),
                c.gained.to_string(),
                c.lost.to_string(),
                format!("{net:+}"),
            ]
        })
        .collect();
    let (b, a) = diff.round_robin;
    if b > 0 || a > 0 {
        let net = i128::from(a) - i128::from(b);
        rows.push(vec![
            "(round-robin)".into(),
            percent(b, diff.total),
            percent(a, diff.total),
            String::new(),
            String::new(),
            format!("{net:+}"),
        ]);
    }
    table(out, &["server", "before", "after", "gained", "lost", "net"], &[false, true, true, true, true, true], &rows)
}

fn load(
    args: &DiffArgs,
    config: PathBuf,
    upstream: Option<String>,
    (version, libc): (NginxVersion, Libc),
) -> Result<(Upstream, String, Vec<PathBuf>)> {
    let side = UpstreamArgs {
        config,
        upstream,
        no_resolve: args.no_resolve,
        nginx_version: version,
        libc,
        fragment: args.fragment,
    };
    let (config, name) = crate::load(&side)?;
    Ok((config.hash_upstream(Some(&name))?.upstream.clone(), name, config.files().to_vec()))
}

pub(crate) fn run(args: &DiffArgs) -> Result<()> {
    let to_path = args.to.clone().unwrap_or_else(|| args.from.clone());
    let (from, from_name, mut inputs) =
        load(args, args.from.clone(), args.upstream.clone(), (args.from_version, args.from_libc))?;
    let (to, to_name, to_files) = load(
        args,
        to_path.clone(),
        args.to_upstream.clone().or_else(|| args.upstream.clone()),
        (args.to_version, args.to_libc),
    )?;
    inputs.extend(to_files);
    inputs.extend(args.keys.clone());
    // A --failed server must exist on one side at least.
    for f in &args.failed {
        let known =
            |u: &Upstream| u.primary().iter().chain(u.backup()).any(|p| p.server().as_str() == f || p.name() == f);
        if !known(&from) && !known(&to) {
            bail!("--failed {f:?} matches no server string or peer address in either upstream");
        }
    }
    let fails = |p: &nginx_ketama::Peer| args.failed.iter().any(|f| f == p.server().as_str() || f == p.name());
    let (a, b) =
        (PickMap::with_failing(&from, fails, args.key_length), PickMap::with_failing(&to, fails, args.key_length));
    let diff = Diff::of(&a, &b);
    let keys = match &args.keys {
        Some(path) => Some((path, count_keys(path, |keys| Diff::of_keys(&a, &b, keys))?)),
        None => None,
    };
    if let Some(path) = &args.svg {
        let title = format!("{} → {}", args.from.display(), to_path.display());
        svg::write(path, &svg::diff_svg(&a, &b, &title), inputs)?;
    }
    let side = |path: &PathBuf, name: &str, up: &Upstream, map: &PickMap| SideJson {
        config: path.display().to_string(),
        upstream: name.to_string(),
        nginx: up.version().to_string(),
        libc: up.libc().as_str(),
        basis: super::basis_name(nginx_ketama::analysis::Unit::HashSpace(map.basis())),
    };
    let mut out = BufWriter::new(crate::stdout::stdout());
    match args.format {
        Format::Table => {
            let describe = |path: &PathBuf, name: &str, up: &Upstream| {
                let method = if up.ring().is_some() { "consistent" } else { "plain" };
                // The C library is named when it is not the default (glibc).
                let libc = if up.libc() == Libc::Glibc { String::new() } else { format!(", {}", up.libc()) };
                format!("{} (upstream {name}, {method}, nginx {}{libc})", path.display(), up.version())
            };
            writeln!(out, "from {}", describe(&args.from, &from_name, &from))?;
            writeln!(out, "to   {}", describe(&to_path, &to_name, &to))?;
            writeln!(out, "{}", unit_words(diff.unit))?;
            if diff.to_unit != diff.unit {
                writeln!(out, "(after: {})", unit_words(diff.to_unit))?;
            }
            print_table(&mut out, &diff)?;
            if let Some((path, k)) = &keys {
                writeln!(out, "\nover the {} keys of {}:", k.total, path.display())?;
                print_table(&mut out, k)?;
            }
        }
        Format::Json => {
            let doc = DiffJson {
                from: side(&args.from, &from_name, &from, &a),
                to: side(&to_path, &to_name, &to, &b),
                hash_space: report(&diff),
                keys: keys.as_ref().map(|(_, k)| report(k)),
            };
            json(&mut out, &doc)?;
        }
        Format::Csv => {
            csv_line(&mut out, &["measure", "from", "to", "count", "fraction"].map(String::from))?;
            let mut rows = vec![("hash-space", &diff)];
            if let Some((_, k)) = &keys {
                rows.push(("keys", k));
            }
            for (measure, d) in rows {
                for (m, n) in &d.moves {
                    csv_line(
                        &mut out,
                        &[
                            measure.into(),
                            name(d, m.from),
                            name(d, m.to),
                            n.to_string(),
                            fraction(*n, d.total).to_string(),
                        ],
                    )?;
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}
