//! The arguments commands share, each defined once: a command flattens the groups it takes
//! (`#[command(flatten)]`), so `--help`, the completions and the man page, all generated from these
//! definitions, describe a flag the same way in every command.
//!
//! [`ConfigArgs`] is the configuration a command reads (`--config`, `--upstream`, [`NoResolve`],
//! `--nginx-version`, `--libc`, [`Fragment`]); [`Failed`], [`KeyLength`], [`KeysFile`], [`FormatArg`]
//! and [`SvgFile`] are the analysis commands' options; [`FailMovedAbove`], [`FailSkewAbove`] and
//! [`FailAgreementBelow`] their gates (`gate`). A command in which a flag means more than its shared
//! definition says so with `#[command(mut_args(help_of("ID", "…")))]`.

use crate::gate::{Percent, Ratio};
use crate::lines::count_keys;
use crate::render::Format;
use anyhow::{Result, bail};
use clap::builder::TypedValueParser as _;
use nginx_ketama::config::{Config, Input, LoadOptions};
use nginx_ketama::version::MODELLED;
use nginx_ketama::{Libc, NginxVersion, Peer, Upstream};
use std::num::NonZeroUsize;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// The configuration a command reads, and the nginx whose rules it follows.
#[derive(clap::Args)]
pub(crate) struct ConfigArgs {
    /// nginx configuration file (includes are followed). Host names in its `server` lines are resolved with
    /// this machine's system resolver (getaddrinfo: /etc/hosts, DNS), as nginx resolves them at start-up, unless
    /// --no-resolve.
    #[arg(long)]
    config: PathBuf,
    /// The upstream to use (`NAME`, or `http:NAME` / `stream:NAME` when both contexts have one); may be left
    /// out when the file has exactly one.
    #[arg(long)]
    upstream: Option<String>,
    #[command(flatten)]
    resolve: NoResolve,
    // The help names the modelled range, from the version table.
    #[arg(
        long,
        default_value_t = NginxVersion::LATEST,
        value_parser = modelled_version,
        help = with_modelled_range("Follow the rules of this nginx version")
    )]
    nginx_version: NginxVersion,
    /// The C library nginx was built with: glibc (Debian, Ubuntu, RHEL, nginx.org packages) or musl (Alpine,
    /// the `-alpine` images). It decides which server keeps a ring point two servers share.
    #[arg(long, default_value_t = Libc::Glibc, value_parser = libc_parser())]
    libc: Libc,
    #[command(flatten)]
    fragment: Fragment,
}

impl ConfigArgs {
    /// Reads the configuration (its warnings go to stderr), every upstream of it.
    pub(crate) fn load_config(&self) -> Result<Config> {
        let options = load_options(&self.resolve, &self.fragment, self.nginx_version, self.libc);
        let config = Config::load(&self.config, &options)?;
        for w in &config.warnings {
            eprintln!("nginx-ketama: [warn] {w}");
        }
        Ok(config)
    }

    /// Reads the configuration (its warnings go to stderr) and takes the upstream `--upstream` names.
    pub(crate) fn load(&self) -> Result<Loaded> {
        let options = load_options(&self.resolve, &self.fragment, self.nginx_version, self.libc);
        load(&self.config, self.upstream.as_deref(), &options)
    }
}

/// `--no-resolve`.
#[derive(clap::Args)]
pub(crate) struct NoResolve {
    /// Make every `server` line exactly one peer, with no DNS lookups. Without it a host name is resolved
    /// with the system resolver, as nginx does at start-up, and each of its addresses is a peer.
    #[arg(long)]
    no_resolve: bool,
}

/// `--fragment [http|stream]`.
#[derive(clap::Args)]
pub(crate) struct Fragment {
    /// Read the file as a fragment (a `conf.d` include holding `upstream` blocks) that would sit inside
    /// `http { }` (the default) or `stream { }`, instead of a whole nginx.conf. This reads less than nginx.
    #[arg(long, value_enum, value_name = "CONTEXT", num_args = 0..=1, default_missing_value = "http")]
    fragment: Option<FragmentOf>,
}

/// Where a `--fragment` file's directives would sit.
#[derive(Clone, Copy, clap::ValueEnum)]
enum FragmentOf {
    Http,
    Stream,
}

/// How to read a configuration: as `resolve` and `fragment` say, for nginx `version` built with `libc`.
pub(crate) fn load_options(resolve: &NoResolve, fragment: &Fragment, version: NginxVersion, libc: Libc) -> LoadOptions {
    let input = match fragment.fragment {
        None => Input::Config,
        Some(FragmentOf::Http) => Input::Fragment,
        Some(FragmentOf::Stream) => Input::StreamFragment,
    };
    LoadOptions { resolve: !resolve.no_resolve, version, libc, input }
}

/// A hash upstream read from a configuration.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The upstream's name (without `http:`/`stream:`).
    pub(crate) name: String,
    pub(crate) upstream: Upstream,
    /// The files read: the configuration and what it includes.
    pub(crate) files: Vec<PathBuf>,
}

/// Reads the configuration `path` with `options` (its warnings go to stderr) and takes the hash upstream
/// `upstream` names (or its only one).
pub(crate) fn load(path: &Path, upstream: Option<&str>, options: &LoadOptions) -> Result<Loaded> {
    let config = Config::load(path, options)?;
    for w in &config.warnings {
        eprintln!("nginx-ketama: [warn] {w}");
    }
    let chosen = config.hash_upstream(upstream)?;
    Ok(Loaded { name: chosen.config.name.clone(), upstream: chosen.upstream.clone(), files: config.files().to_vec() })
}

/// `help`, then the releases whose routing is modelled: `… (modelled: 1.18.0 to 1.30.x)`.
pub(crate) fn with_modelled_range(help: &str) -> String {
    format!("{help} (modelled: {})", modelled_range())
}

/// The releases whose routing is modelled ([`MODELLED`]), as `--help` and `--version` name them:
/// `1.18.0 to 1.30.x`.
pub(crate) fn modelled_range() -> String {
    range_text(&MODELLED)
}

/// `1.18.0 to 1.30.x`: a last release with the highest patch number stands for every patch release.
fn range_text(range: &RangeInclusive<NginxVersion>) -> String {
    let (first, last) = (range.start(), range.end());
    let last = match last.patch {
        u32::MAX => format!("{}.{}.x", last.major, last.minor),
        _ => last.to_string(),
    };
    format!("{first} to {last}")
}

/// An nginx version whose routing is modelled ([`MODELLED`]).
pub(crate) fn modelled_version(s: &str) -> Result<NginxVersion, String> {
    let v: NginxVersion = s.parse().map_err(|e| format!("{e}"))?;
    v.modelled().map_err(|e| e.to_string())
}

/// `--libc`: one of [`Libc::ALL`] by name (listed in `--help` and the completions).
pub(crate) fn libc_parser() -> impl clap::builder::TypedValueParser<Value = Libc> {
    clap::builder::PossibleValuesParser::new(Libc::ALL.map(Libc::as_str)).try_map(|s| s.parse::<Libc>())
}

/// `--failed SERVER`, repeatable.
#[derive(clap::Args)]
pub(crate) struct Failed {
    /// A server that refuses connections: a configured server string (every peer of that line) or one
    /// peer address as nginx prints it in $upstream_addr (e.g. `127.0.0.9:8080`, `[::1]:8080`). Repeatable.
    #[arg(long = "failed", value_name = "SERVER")]
    failed: Vec<String>,
}

impl Failed {
    /// The peers of `upstream` that `--failed` names, as a predicate; an argument that names no peer is an
    /// error listing the peers.
    pub(crate) fn in_upstream(&self, upstream: &Upstream) -> Result<impl Fn(&Peer) -> bool + Copy + '_> {
        for f in &self.failed {
            if !peers(upstream).any(|p| names(f, p)) {
                let known: Vec<String> = peers(upstream).map(|p| format!("{} ({})", p.server(), p.name())).collect();
                bail!(
                    "--failed {f:?} matches no server string or peer address in upstream \"{}\"; peers: {}",
                    upstream.name(),
                    known.join(", ")
                );
            }
        }
        Ok(self.predicate())
    }

    /// The same over the two upstreams of a change: each argument must name a peer of one of them at least.
    pub(crate) fn in_either(&self, a: &Upstream, b: &Upstream) -> Result<impl Fn(&Peer) -> bool + Copy + '_> {
        for f in &self.failed {
            if !peers(a).chain(peers(b)).any(|p| names(f, p)) {
                bail!("--failed {f:?} matches no server string or peer address in either upstream");
            }
        }
        Ok(self.predicate())
    }

    fn predicate(&self) -> impl Fn(&Peer) -> bool + Copy + '_ {
        move |p: &Peer| self.failed.iter().any(|f| names(f, p))
    }
}

/// Every peer of `upstream`, primary then backup.
fn peers(upstream: &Upstream) -> impl Iterator<Item = &Peer> {
    upstream.primary().iter().chain(upstream.backup())
}

/// Whether the argument `f` names peer `p`: its server string or its address.
fn names(f: &str, p: &Peer) -> bool {
    f == p.server().as_str() || f == p.name()
}

/// `--key-length BYTES`.
#[derive(clap::Args)]
pub(crate) struct KeyLength {
    /// Plain hash with unusable slots: the key length the rehash steps are computed for (they depend on
    /// the key's CRC32 and its length).
    #[arg(long, value_name = "BYTES", default_value_t = NonZeroUsize::new(16).unwrap())]
    pub(crate) key_length: NonZeroUsize,
}

/// `--keys FILE`.
#[derive(clap::Args)]
pub(crate) struct KeysFile {
    /// Also count these keys (one per line), next to the uniform figure.
    #[arg(long, value_name = "FILE")]
    pub(crate) keys: Option<PathBuf>,
}

impl KeysFile {
    /// With `--keys`: the file and what `count` makes of its keys, streamed (see [`count_keys`]).
    pub(crate) fn count<T>(
        &self,
        count: impl FnOnce(&mut dyn Iterator<Item = Vec<u8>>) -> T,
    ) -> Result<Option<(&Path, T)>> {
        match &self.keys {
            Some(path) => Ok(Some((path, count_keys(path, count)?))),
            None => Ok(None),
        }
    }
}

/// `--format table|json|csv`.
#[derive(clap::Args)]
pub(crate) struct FormatArg {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub(crate) format: Format,
}

/// `--svg FILE`.
#[derive(clap::Args)]
pub(crate) struct SvgFile {
    /// Write a picture of the ring (SVG): arcs coloured by server.
    #[arg(long, value_name = "FILE")]
    pub(crate) svg: Option<PathBuf>,
}

/// `--fail-moved-above PERCENT` (`diff`).
#[derive(clap::Args)]
pub(crate) struct FailMovedAbove {
    /// Gate: exit 1 if more than this part of the hash space (or of the --keys) changes its first pick, after
    /// writing the answer; stderr says by how much. A percentage (20%) or a fraction (0.2).
    #[arg(long, value_name = "PERCENT", value_parser = Percent::parse)]
    pub(crate) fail_moved_above: Option<Percent>,
}

/// `--fail-skew-above RATIO` (`share`).
#[derive(clap::Args)]
pub(crate) struct FailSkewAbove {
    /// Gate: exit 1 if a server answers more than this many times its fair share (the hashed part × its
    /// points ÷ the points of the servers not failing or down), over the hash space or the --keys, after
    /// writing the answer; stderr says by how much. A ratio of at least 1 (1.25).
    #[arg(long, value_name = "RATIO", value_parser = Ratio::parse)]
    pub(crate) fail_skew_above: Option<Ratio>,
}

/// `--fail-agreement-below PERCENT` (`compare`).
#[derive(clap::Args)]
pub(crate) struct FailAgreementBelow {
    /// Gate: exit 1 if the other implementation sends less than this part of the keys (the hash space,
    /// the sample or the --keys) to nginx's server, after writing the answer; stderr says by how much. A
    /// percentage (90%) or a fraction (0.9).
    #[arg(long, value_name = "PERCENT", value_parser = Percent::parse)]
    pub(crate) fail_agreement_below: Option<Percent>,
}

/// For `#[command(mut_args(…))]`: the help of the flag `id` in one command, where it means more there than
/// its shared definition says (the flag keeps its place in the help and the completions).
pub(crate) fn help_of(id: &'static str, help: &'static str) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |arg| if arg.get_id() == id { arg.help(help) } else { arg }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The help's range follows the version table, whatever it holds.
    #[test]
    fn the_range_is_written_from_the_table() {
        let v = NginxVersion::new;
        assert_eq!(range_text(&(v(1, 18, 0)..=v(1, 30, u32::MAX))), "1.18.0 to 1.30.x");
        assert_eq!(range_text(&(v(1, 20, 2)..=v(1, 32, u32::MAX))), "1.20.2 to 1.32.x");
        assert_eq!(range_text(&(v(1, 20, 2)..=v(1, 32, 4))), "1.20.2 to 1.32.4");
        assert_eq!(
            with_modelled_range("Follow"),
            format!("Follow (modelled: {} to {}.{}.x)", MODELLED.start(), MODELLED.end().major, MODELLED.end().minor)
        );
    }
}
