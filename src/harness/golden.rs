//! Golden vectors: recording the [`super::catalog`] from real nginx, the records that are the single source
//! of truth (`vectors/records/<case>.json`), and everything derived from them — the readable insta snapshots
//! (`snapshots/catalog__<case>.snap`), the language-neutral fixtures (`vectors/v1/*.json`) and the offline
//! replay against a [`Model`] (the library's [`Worker`], or a deliberately broken one in tests).
//!
//! Only `scripts/record-vectors` writes records; the fixtures are regenerated from records by the same
//! command (`--offline` skips nginx). Nothing here derives an expected result from this library.

use super::backend::{Backend, Instance, log_tail};
use super::catalog::{Case, UNIX_DIR};
use super::client::pipeline;
use super::install::Installation;
use super::parity::{Model, http_site, resolve_through_nginx};
use super::site::HTTP_KEY;
use super::topology::{Topology, UPSTREAM};
use crate::server::Server;
use crate::upstream::{Method, Peer, Upstream};
use crate::version::NginxVersion;
use crate::worker::Worker;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Every flag a vector may carry: name, Wycheproof `bugType`, description.
pub const FLAGS: &[(&str, &str, &str)] = &[
    ("AllFailed", "FUNCTIONALITY", "Every attempt was refused and the retry budget ran out: 502 with the last error."),
    (
        "Backup",
        "FUNCTIONALITY",
        "The upstream has `backup` servers declared before `hash`; only the round-robin fallback reaches them.",
    ),
    (
        "Collision",
        "EDGE_CASE",
        "The key lands on a point hash that two different server strings generate; glibc's stable sort keeps the earlier peer's point.",
    ),
    ("DeadServers", "FUNCTIONALITY", "Some servers refuse connections (`refuses: true`), so requests fail over."),
    ("Down", "FUNCTIONALITY", "Some servers are marked `down`: they keep their points/slots but are never picked."),
    (
        "DuplicateLines",
        "EDGE_CASE",
        "The same server line appears twice: two peers with one server string and one chain of points.",
    ),
    ("EmptyKey", "FUNCTIONALITY", "The empty key is never hashed: nginx uses weighted round-robin (stateful)."),
    ("Failover", "FUNCTIONALITY", "nginx made more than one attempt for this key."),
    (
        "FailureAccounting",
        "FUNCTIONALITY",
        "max_fails=1 with a long fail_timeout: a refused connection takes the peer out for later requests.",
    ),
    (
        "Hostname",
        "FUNCTIONALITY",
        "A server line names a host (resolved at startup from a private hosts file); the name is hashed as written.",
    ),
    ("InvalidUtf8", "EDGE_CASE", "The key is not valid UTF-8: use keyHex (key is null)."),
    ("Ipv6", "BASIC", "An [::1] server line: the brackets are part of the hashed host."),
    ("LargeRing", "FUNCTIONALITY", "A ring of 1000 servers (160,000 points)."),
    ("LongKey", "EDGE_CASE", "A key of 4 KiB or more."),
    (
        "ManyMisses",
        "EDGE_CASE",
        "Long runs of unusable points/slots: more than 20 misses in one request switch it to round-robin.",
    ),
    (
        "MultiAddress",
        "FUNCTIONALITY",
        "One server line resolves to two addresses: two peers sharing one server string, alternating by weighted round-robin.",
    ),
    (
        "NoLiveUpstreams",
        "FUNCTIONALITY",
        "nginx found no usable peer: $upstream_addr ends with the upstream name (outcome noLiveUpstreams).",
    ),
    ("NonAscii", "EDGE_CASE", "The key has bytes above 0x7f (UTF-8 text or raw bytes); nginx hashes the raw bytes."),
    (
        "OddSpelling",
        "EDGE_CASE",
        "Server strings spelled unusually (no port, leading-zero ports, unix:/UNIX:): hashed exactly as written.",
    ),
    ("OnPoint", "EDGE_CASE", "The key's CRC32 equals a ring point's hash (lookup is 'first point ≥ hash')."),
    ("PastPoint", "EDGE_CASE", "The key's CRC32 is one more than a ring point's hash: it belongs to the next point."),
    ("RepeatedKey", "FUNCTIONALITY", "A key sent again later in the same stateful sequence."),
    (
        "RingEdge",
        "EDGE_CASE",
        "The key's CRC32 is 0 or 0xffffffff (below the first point / above the last point, which wraps).",
    ),
    ("SingleServer", "BASIC", "One server only: nginx skips hashing altogether."),
    ("UnixSocket", "BASIC", "A unix: (or UNIX:) server: the ring hashes the path without the prefix."),
    (
        "VersionDependent",
        "LEGACY",
        "nginx versions disagree on this case; the group holds one version set's behaviour (see its description).",
    ),
    ("Weighted", "BASIC", "Servers with weights other than 1."),
];

/// Where the records live: `vectors/records/` in this repository.
pub fn records_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors/records")
}

/// Where the generated fixtures live: `vectors/v1/`.
pub fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors/v1")
}

/// The insta snapshot name of a case: `catalog__<name with - as _>`.
pub fn snapshot_name(case: &str) -> String {
    format!("catalog__{}", case.replace('-', "_"))
}

/// Everything recorded for one catalog case, across nginx versions. Written only by the recorder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    /// The case name.
    pub case: String,
    /// Its one-line description.
    pub description: String,
    /// `consistent` or `plain`.
    pub method: String,
    /// Replay in order on one worker (`true`) or each key on a fresh worker (`false`, verified in both
    /// orders against nginx when recorded).
    pub stateful: bool,
    /// Flags of every key.
    pub flags: Vec<String>,
    /// Why versions are expected to disagree, if they do.
    pub versions_differ: Option<String>,
    /// The `upstream` block nginx ran.
    pub upstream: String,
    /// The private hosts file nginx resolved names with, if any.
    pub hosts: Option<String>,
    /// Keys in sending order.
    pub keys: Vec<RecordKey>,
    /// One run per nginx version, oldest first.
    pub runs: Vec<Run>,
}

/// One key of a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordKey {
    /// The key as text, if it is UTF-8 (for people; `keyHex` is authoritative).
    pub key: Option<String>,
    /// The raw key bytes in lowercase hex.
    pub key_hex: String,
    /// Why it is there.
    pub comment: String,
    /// Key flags.
    pub flags: Vec<String>,
}

impl RecordKey {
    /// The raw key bytes.
    pub fn bytes(&self) -> Vec<u8> {
        from_hex(&self.key_hex)
    }
}

/// One nginx version's recording of a case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Run {
    /// nginx version, e.g. `1.26.3`.
    pub nginx: String,
    /// Debian package version.
    pub package: String,
    /// The C library nginx ran with (its qsort decides collisions).
    pub libc: String,
    /// UTC day these results were first recorded (kept while re-recordings give the same results).
    pub recorded: String,
    /// Peers in nginx's list order, as nginx resolved them.
    pub peers: Vec<PeerRecord>,
    /// One result per key, in key order.
    pub results: Vec<Observed>,
}

/// One peer (one address of one server line), in the vectors' `peers` format.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PeerRecord {
    /// The configured server string.
    pub server: String,
    /// The address as nginx prints it in `$upstream_addr`.
    pub address: String,
    /// `weight=`.
    pub weight: u32,
    /// `down`.
    pub down: bool,
    /// `backup`.
    pub backup: bool,
    /// `max_fails=`.
    pub max_fails: u32,
    /// `fail_timeout=` in seconds.
    pub fail_timeout: u64,
    /// Connections to it are refused.
    pub refuses: bool,
}

/// What nginx answered to one request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Observed {
    /// HTTP status.
    pub status: u16,
    /// `$upstream_addr` exactly as nginx reported it.
    pub upstream_addr: String,
}

impl Observed {
    /// The attempted addresses and the outcome (`answered`, `failed`, `noLiveUpstreams`).
    pub fn attempts(&self) -> (Vec<&str>, &'static str) {
        let mut parts: Vec<&str> =
            if self.upstream_addr.is_empty() { Vec::new() } else { self.upstream_addr.split(", ").collect() };
        if parts.last() == Some(&UPSTREAM) {
            parts.pop();
            (parts, "noLiveUpstreams")
        } else if self.status == 200 {
            (parts, "answered")
        } else {
            (parts, "failed")
        }
    }
}

/// Lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex")).collect()
}

// ----------------------------------------------------------------------------------------------------
// Recording

/// Holds an exclusive lock while the catalog runs: its fixed addresses and socket paths cannot be shared
/// by two recordings at once (the recorder and the live test). Released when dropped.
#[derive(Debug)]
pub struct CatalogLock(#[allow(dead_code)] std::fs::File);

/// Waits for the catalog lock (`/tmp/nginx-ketama-catalog.lock`).
///
/// # Errors
///
/// The lock file cannot be opened.
pub fn lock_catalog() -> Result<CatalogLock> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("nginx-ketama-catalog.lock"))
        .context("opening the catalog lock")?;
    // SAFETY: flock on a file descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!("locking the catalog: {}", std::io::Error::last_os_error());
    }
    Ok(CatalogLock(f))
}

/// The C library an installation runs with, from its `packages.txt` (`libc6=2.36-9+deb12u14` →
/// `glibc 2.36 (Debian 2.36-9+deb12u14)`).
pub fn libc_of(install: &Installation) -> String {
    let text = std::fs::read_to_string(install.dir.join("packages.txt")).unwrap_or_default();
    match text.lines().find_map(|l| l.strip_prefix("libc6=")) {
        Some(v) => format!("glibc {} (Debian {v})", v.split('-').next().unwrap_or(v)),
        None => "unknown".to_string(),
    }
}

/// Today's date in UTC, `YYYY-MM-DD`.
pub fn utc_today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Starts nginx for `topology` and, if it uses hostnames, rewrites their endpoints in the order nginx's own
/// resolver returned them (asked through probe upstreams in the same nginx).
fn start(install: &Installation, topology: &mut Topology) -> Result<Box<dyn Instance>> {
    std::fs::create_dir_all(UNIX_DIR).with_context(|| format!("creating {UNIX_DIR}"))?;
    // nginx never unlinks a socket file left by an earlier (killed) instance; the catalog lock makes these
    // paths ours. The TCP addresses are nginx's alone: it runs in a network namespace of its own.
    for e in std::fs::read_dir(UNIX_DIR)?.flatten() {
        let _ = std::fs::remove_file(e.path());
    }
    let backend = Backend::Local(install.clone());
    let probe = !topology.hosts.is_empty();
    let instance = backend.start(&http_site(topology, probe), backend.prefix()?)?;
    if probe {
        resolve_through_nginx(instance.as_ref(), topology)?;
    }
    Ok(instance)
}

/// The peers of `topology` in nginx's list order.
pub fn peers_of(topology: &Topology) -> Vec<PeerRecord> {
    topology
        .lines
        .iter()
        .flat_map(|l| {
            l.endpoints.iter().map(move |e| PeerRecord {
                server: l.server.clone(),
                address: e.name.clone(),
                weight: l.weight,
                down: l.down,
                backup: l.backup,
                max_fails: l.max_fails,
                fail_timeout: l.fail_timeout,
                refuses: l.dead,
            })
        })
        .collect()
}

fn send(instance: &dyn Instance, keys: &[Vec<u8>], logs: &dyn Fn() -> String) -> Result<Vec<Observed>> {
    let responses = pipeline(instance.net(), instance.http_front(), keys, &mut |_| {})
        .with_context(|| format!("talking to nginx\nnginx's error log ends:\n{}", log_tail(&logs())))?;
    responses
        .into_iter()
        .map(|r| {
            Ok(Observed { status: r.status, upstream_addr: r.upstream_addr.context("a response without X-Upstream")? })
        })
        .collect()
}

/// Records one case on one nginx: keys in order on a fresh nginx; then, to prove the stateless claim, the
/// keys in reverse order on another fresh nginx (a stateful case is recorded a second time in order, to
/// prove it is deterministic). Any difference is an error.
///
/// # Errors
///
/// nginx failing to start or answer, an address that maps to two server strings, or results that differ
/// between the two recordings.
pub fn record_run(install: &Installation, case: &Case, date: &str) -> Result<Run> {
    let keys: Vec<Vec<u8>> = case.keys.iter().map(|k| k.key.clone()).collect();
    let once = |order_reversed: bool| -> Result<(Vec<PeerRecord>, Vec<Observed>)> {
        let mut topology = case.topology.clone();
        let instance = start(install, &mut topology)?;
        let logs = || instance.logs();
        let results = if order_reversed {
            let rev: Vec<Vec<u8>> = keys.iter().rev().cloned().collect();
            let mut r = send(instance.as_ref(), &rev, &logs)?;
            r.reverse();
            r
        } else {
            send(instance.as_ref(), &keys, &logs)?
        };
        Ok((peers_of(&topology), results))
    };
    let (peers, results) = once(false).with_context(|| format!("case {} on nginx {}", case.name, install.version))?;
    let (peers2, results2) =
        once(!case.stateful).with_context(|| format!("case {} on nginx {} (2nd)", case.name, install.version))?;
    if peers != peers2 {
        bail!("case {}: nginx {} resolved the peers differently on two starts", case.name, install.version);
    }
    let order = if case.stateful { "a second time in order" } else { "in reverse order" };
    for (i, (a, b)) in results.iter().zip(&results2).enumerate() {
        if a != b {
            bail!(
                "case {} on nginx {}: key #{} ({}) gave {:?} in order but {:?} {order}; the case is {} — fix the \
                 catalog",
                case.name,
                install.version,
                i + 1,
                show(&keys[i]),
                a,
                b,
                if case.stateful { "not deterministic" } else { "not stateless" }
            );
        }
    }
    let mut by_addr: BTreeMap<&str, &str> = BTreeMap::new();
    for p in &peers {
        if let Some(prev) = by_addr.insert(&p.address, &p.server)
            && prev != p.server
        {
            bail!("case {}: address {} belongs to {prev:?} and {:?}", case.name, p.address, p.server);
        }
    }
    for r in &results {
        for a in r.attempts().0 {
            if !by_addr.contains_key(a) {
                bail!("case {}: nginx tried {a}, which is no configured peer ({})", case.name, r.upstream_addr);
            }
        }
    }
    Ok(Run {
        nginx: install.version.to_string(),
        package: install.package.clone(),
        libc: libc_of(install),
        recorded: date.to_string(),
        peers,
        results,
    })
}

/// Records `case` on every installation and assembles its record.
///
/// # Errors
///
/// See [`record_run`].
pub fn record_case(installs: &[Installation], case: &Case, date: &str) -> Result<Record> {
    let runs = installs.iter().map(|i| record_run(i, case, date)).collect::<Result<Vec<_>>>()?;
    Ok(Record { runs, ..skeleton(case) })
}

/// A case's record without any run: everything the catalog alone determines.
pub fn skeleton(case: &Case) -> Record {
    Record {
        case: case.name.to_string(),
        description: case.description.to_string(),
        method: method_name(case.topology.method).to_string(),
        stateful: case.stateful,
        flags: case.flags.iter().map(|f| f.to_string()).collect(),
        versions_differ: case.versions_differ.map(str::to_string),
        upstream: case.topology.upstream_block(HTTP_KEY, true),
        hosts: (!case.topology.hosts.is_empty()).then(|| case.topology.hosts_file()),
        keys: case
            .keys
            .iter()
            .map(|k| RecordKey {
                key: std::str::from_utf8(&k.key).ok().map(str::to_string),
                key_hex: to_hex(&k.key),
                comment: k.comment.clone(),
                flags: k.flags.iter().map(|f| f.to_string()).collect(),
            })
            .collect(),
        runs: Vec::new(),
    }
}

/// Keeps the `recorded` date of runs whose results did not change since `old` (so re-recording an
/// unchanged nginx yields no diff), and runs of versions `new` lacks when the case itself is unchanged.
pub fn merge(mut new: Record, old: Option<&Record>) -> Record {
    let Some(old) = old else { return new };
    let same_case = Record { runs: Vec::new(), ..new.clone() } == Record { runs: Vec::new(), ..old.clone() };
    if !same_case {
        return new;
    }
    for run in &mut new.runs {
        if let Some(o) = old.runs.iter().find(|o| o.nginx == run.nginx)
            && (Run { recorded: o.recorded.clone(), ..run.clone() }) == *o
        {
            run.recorded = o.recorded.clone();
        }
    }
    for o in &old.runs {
        if !new.runs.iter().any(|r| r.nginx == o.nginx) {
            new.runs.push(o.clone());
        }
    }
    new.runs.sort_by_key(|r| r.nginx.parse::<NginxVersion>().ok());
    new
}

fn method_name(m: Method) -> &'static str {
    match m {
        Method::Consistent => "consistent",
        Method::Plain => "plain",
    }
}

/// Reads every record in `dir`, sorted by case name.
///
/// # Errors
///
/// An unreadable or malformed record.
pub fn load_records(dir: &Path) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = e?.path();
        if path.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&path)?;
            let r: Record = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
            out.push(r);
        }
    }
    out.sort_by(|a, b| a.case.cmp(&b.case));
    Ok(out)
}

/// The canonical text of a record file.
pub fn record_json(record: &Record) -> String {
    let mut s = serde_json::to_string_pretty(record).expect("records serialize");
    s.push('\n');
    s
}

// ----------------------------------------------------------------------------------------------------
// Grouping by version

/// Runs of one record that agree exactly (same peers, same results), in version order.
#[derive(Debug, Clone)]
pub struct VersionGroup<'a> {
    /// The runs.
    pub runs: Vec<&'a Run>,
}

impl<'a> VersionGroup<'a> {
    /// The nginx versions.
    pub fn versions(&self) -> Vec<&'a str> {
        self.runs.iter().map(|r| r.nginx.as_str()).collect()
    }
}

/// Partitions a record's runs into groups of versions that agree.
pub fn version_groups(record: &Record) -> Vec<VersionGroup<'_>> {
    let mut groups: Vec<VersionGroup<'_>> = Vec::new();
    for run in &record.runs {
        match groups.iter_mut().find(|g| g.runs[0].peers == run.peers && g.runs[0].results == run.results) {
            Some(g) => g.runs.push(run),
            None => groups.push(VersionGroup { runs: vec![run] }),
        }
    }
    groups
}

/// A group's description: the case's, plus the explanation when versions disagree.
fn group_description(record: &Record, group: &VersionGroup<'_>, split: bool) -> String {
    if !split {
        return record.description.clone();
    }
    let others: Vec<&str> =
        record.runs.iter().map(|r| r.nginx.as_str()).filter(|v| !group.versions().contains(v)).collect();
    match &record.versions_differ {
        Some(why) => format!(
            "{} Recorded on nginx {}; nginx {} differs: {why}",
            record.description,
            group.versions().join(", "),
            others.join(", ")
        ),
        None => format!(
            "{} UNEXPLAINED: nginx {} and {} disagree on this case and the catalog gives no reason.",
            record.description,
            group.versions().join(", "),
            others.join(", ")
        ),
    }
}

// ----------------------------------------------------------------------------------------------------
// Snapshots

fn show(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) if s.chars().count() > 48 => {
            format!("{:?}… ({} bytes)", s.chars().take(40).collect::<String>(), key.len())
        }
        Ok(s) => format!("{s:?}"),
        Err(_) if key.len() > 24 => format!("hex:{}… ({} bytes)", to_hex(&key[..20]), key.len()),
        Err(_) => format!("hex:{}", to_hex(key)),
    }
}

/// The readable snapshot of a record: header, upstream block, peers, and one row per key and version group
/// (`tcId`, CRC32, outcome, the attempts as configured server strings, the key). No dates.
pub fn render_snapshot(record: &Record) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "case:        {}", record.case);
    let _ = writeln!(s, "description: {}", record.description);
    let _ = writeln!(s, "method:      {}", record.method);
    let _ = writeln!(
        s,
        "stateful:    {}",
        if record.stateful {
            "yes (replay in order on one fresh worker)"
        } else {
            "no (each key independent; verified in both orders)"
        }
    );
    let _ = writeln!(s, "recorded on:");
    for r in &record.runs {
        let _ = writeln!(s, "  nginx {} (Debian {}, {})", r.nginx, r.package, r.libc);
    }
    s.push('\n');
    s.push_str(&record.upstream);
    if let Some(h) = &record.hosts {
        let _ = write!(s, "\nhosts:\n{h}");
    }
    let groups = version_groups(record);
    let split = groups.len() > 1;
    for g in &groups {
        let _ = writeln!(s, "\n=== nginx {} ===", g.versions().join(", "));
        if split {
            let _ = writeln!(s, "{}", group_description(record, g, true));
        }
        let run = g.runs[0];
        let _ = writeln!(s, "peers:");
        let w = run.peers.iter().map(|p| p.server.len()).max().unwrap_or(6).max(6);
        let aw = run.peers.iter().map(|p| p.address.len()).max().unwrap_or(7).max(7);
        let _ = writeln!(s, "  {:<w$}  {:<aw$}  weight  flags", "server", "address");
        for p in &run.peers {
            let mut flags = Vec::new();
            if p.down {
                flags.push("down".to_string());
            }
            if p.backup {
                flags.push("backup".to_string());
            }
            if p.refuses {
                flags.push("refuses".to_string());
            }
            if p.max_fails > 0 {
                flags.push(format!("max_fails={} fail_timeout={}s", p.max_fails, p.fail_timeout));
            }
            let _ =
                writeln!(s, "  {:<w$}  {:<aw$}  {:>6}  {}", p.server, p.address, p.weight, flags.join(" ")).map(|_| ());
            // Trim the trailing spaces of rows without flags.
            while s.ends_with(" \n") {
                s.pop();
                s.pop();
                s.push('\n');
            }
        }
        let server_of = address_map(run);
        let _ = writeln!(s, "tests:");
        let _ = writeln!(s, "  {:>4}  {:<8}  {:<15}  {:<40}  key", "#", "crc32", "outcome", "attempts (servers)");
        for (i, (k, r)) in record.keys.iter().zip(&run.results).enumerate() {
            let bytes = k.bytes();
            let (attempts, outcome) = r.attempts();
            let servers: Vec<&str> = attempts.iter().map(|a| server_of.get(a).copied().unwrap_or("?")).collect();
            let mut shown = servers.join(", ");
            if outcome == "noLiveUpstreams" {
                shown.push_str(if shown.is_empty() { "(none)" } else { ", (none left)" });
            }
            let _ = writeln!(
                s,
                "  {:>4}  {:08x}  {:<15}  {:<40}  {}",
                i + 1,
                crc32fast::hash(&bytes),
                format!("{outcome} {}", r.status),
                shown,
                show(&bytes)
            );
        }
    }
    s
}

fn address_map(run: &Run) -> BTreeMap<&str, &str> {
    run.peers.iter().map(|p| (p.address.as_str(), p.server.as_str())).collect()
}

// ----------------------------------------------------------------------------------------------------
// Fixtures (vectors/v1)

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VectorFile<'a> {
    schema: &'static str,
    algorithm: &'static str,
    format_version: u32,
    number_of_tests: usize,
    header: Vec<&'static str>,
    notes: BTreeMap<&'static str, Note>,
    test_groups: Vec<VectorGroup<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Note {
    bug_type: &'static str,
    description: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VectorGroup<'a> {
    name: String,
    description: String,
    source: Source<'a>,
    method: &'a str,
    stateful: bool,
    upstream: &'a str,
    peers: &'a [PeerRecord],
    tests: Vec<VectorTest<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Source<'a> {
    name: &'static str,
    versions: Vec<&'a str>,
    packages: Vec<&'a str>,
    libc: Vec<&'a str>,
    recorded: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VectorTest<'a> {
    tc_id: usize,
    comment: &'a str,
    flags: Vec<&'a str>,
    key: Option<&'a str>,
    key_hex: &'a str,
    crc32: String,
    attempts: Vec<&'a str>,
    servers: Vec<&'a str>,
    outcome: &'static str,
    status: u16,
}

/// The header lines of every fixture file.
pub const HEADER: &[&str] = &[
    "Recorded from real nginx by scripts/record-vectors; DO NOT EDIT.",
    "Generated from vectors/records/*.json (the single source of truth, written only by the recorder).",
    "Regenerate: scripts/record-vectors (re-records from nginx) or scripts/record-vectors --offline (from records).",
    "Each group ran as one nginx upstream with worker_processes 1, key $http_x_key, proxy_next_upstream error.",
    "attempts = $upstream_addr split on \", \" (the upstream name, if nginx appended it, becomes outcome noLiveUpstreams).",
    "stateful groups: replay tests in tcId order on ONE fresh worker; otherwise every test starts from a fresh worker.",
    "All requests of a group happen within one fail_timeout: failed peers (max_fails > 0) stay failed.",
    "See vectors/README.md.",
];

/// Generates the fixture files (`consistent.json`, `plain.json`) from records: file name → contents.
pub fn generate_vectors(records: &[Record]) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for method in ["consistent", "plain"] {
        let mut groups = Vec::new();
        let mut tc = 0;
        for record in records.iter().filter(|r| r.method == method) {
            let vgroups = version_groups(record);
            let split = vgroups.len() > 1;
            for g in &vgroups {
                let run = g.runs[0];
                let server_of = address_map(run);
                let tests = record
                    .keys
                    .iter()
                    .zip(&run.results)
                    .map(|(k, r)| {
                        tc += 1;
                        let (attempts, outcome) = r.attempts();
                        let mut flags: Vec<&str> = record.flags.iter().chain(&k.flags).map(String::as_str).collect();
                        if attempts.len() > 1 {
                            flags.push("Failover");
                        }
                        match outcome {
                            "noLiveUpstreams" => flags.push("NoLiveUpstreams"),
                            "failed" => flags.push("AllFailed"),
                            _ => {}
                        }
                        if split {
                            flags.push("VersionDependent");
                        }
                        flags.sort_unstable();
                        flags.dedup();
                        VectorTest {
                            tc_id: tc,
                            comment: &k.comment,
                            flags,
                            key: k.key.as_deref(),
                            key_hex: &k.key_hex,
                            crc32: format!("{:08x}", crc32fast::hash(&k.bytes())),
                            servers: attempts.iter().map(|a| server_of.get(a).copied().unwrap_or("?")).collect(),
                            attempts,
                            outcome,
                            status: r.status,
                        }
                    })
                    .collect();
                let name =
                    if split { format!("{}@{}", record.case, g.versions().join("+")) } else { record.case.clone() };
                groups.push(VectorGroup {
                    name,
                    description: group_description(record, g, split),
                    source: Source {
                        name: "nginx",
                        versions: g.versions(),
                        packages: g.runs.iter().map(|r| r.package.as_str()).collect(),
                        libc: g.runs.iter().map(|r| r.libc.as_str()).collect(),
                        recorded: g.runs.iter().map(|r| r.recorded.as_str()).max().unwrap_or(""),
                    },
                    method: &record.method,
                    stateful: record.stateful,
                    upstream: &record.upstream,
                    peers: &run.peers,
                    tests,
                });
            }
        }
        let used: BTreeSet<&str> = groups.iter().flat_map(|g| g.tests.iter().flat_map(|t| t.flags.clone())).collect();
        // Only flags defined in FLAGS get a note; an undefined flag is left for the lint to report.
        let notes = FLAGS
            .iter()
            .filter(|f| used.contains(f.0))
            .map(|&(name, bug_type, description)| (name, Note { bug_type, description }))
            .collect();
        let file = VectorFile {
            schema: "schema.json",
            algorithm: "nginx-upstream-hash",
            format_version: 1,
            number_of_tests: tc,
            header: HEADER.to_vec(),
            notes,
            test_groups: groups,
        };
        let mut text = serde_json::to_string_pretty(&file).expect("vectors serialize");
        text.push('\n');
        files.insert(format!("{method}.json"), text);
    }
    files
}

// ----------------------------------------------------------------------------------------------------
// Offline replay

/// Makes fresh models (fresh workers) for one run; implemented by the library ([`LibraryReplayer`]) and by
/// deliberately broken models in tests.
pub trait Replayer {
    /// A model in the state of a freshly started nginx worker.
    fn fresh(&self) -> Box<dyn Model + '_>;
}

/// A key whose replay differed from the recording.
#[derive(Debug, Clone)]
pub struct ReplayFailure {
    /// The case.
    pub case: String,
    /// nginx version of the run.
    pub nginx: String,
    /// 1-based position of the key in the case.
    pub position: usize,
    /// The key's flags.
    pub flags: Vec<String>,
    /// The key (shown).
    pub key: String,
    /// What nginx did: (status, `$upstream_addr`).
    pub recorded: (u16, String),
    /// What the model said.
    pub replayed: (u16, String),
}

impl std::fmt::Display for ReplayFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (nginx {}) key #{} {}: nginx {} {:?}, model {} {:?}",
            self.case,
            self.nginx,
            self.position,
            self.key,
            self.recorded.0,
            self.recorded.1,
            self.replayed.0,
            self.replayed.1
        )
    }
}

/// Replays one run: a stateful case in order on one fresh model, a stateless case with a fresh model per key.
pub fn replay(record: &Record, run: &Run, replayer: &dyn Replayer) -> Vec<ReplayFailure> {
    let mut failures = Vec::new();
    let mut shared = replayer.fresh();
    for (i, (k, want)) in record.keys.iter().zip(&run.results).enumerate() {
        let key = k.bytes();
        let got = if record.stateful { shared.expect(&key) } else { replayer.fresh().expect(&key) };
        if got != (want.status, want.upstream_addr.clone()) {
            failures.push(ReplayFailure {
                case: record.case.clone(),
                nginx: run.nginx.clone(),
                position: i + 1,
                flags: record.flags.iter().chain(&k.flags).cloned().collect(),
                key: show(&key),
                recorded: (want.status, want.upstream_addr.clone()),
                replayed: got,
            });
        }
    }
    failures
}

/// The library's [`Worker`] set up from a run's peers and nginx version.
#[derive(Debug)]
pub struct LibraryReplayer {
    upstream: Upstream,
    refusing: BTreeSet<String>,
}

impl LibraryReplayer {
    /// Builds the upstream of `run` (peers in list order) with the rules of its nginx version.
    ///
    /// # Errors
    ///
    /// An unknown method or version, or an upstream the library rejects.
    pub fn new(record: &Record, run: &Run) -> Result<LibraryReplayer> {
        let method = match record.method.as_str() {
            "consistent" => Method::Consistent,
            "plain" => Method::Plain,
            m => bail!("unknown method {m:?}"),
        };
        let version: NginxVersion = run.nginx.parse()?;
        let mut b = Upstream::builder(method).name(UPSTREAM).version(version);
        for p in &run.peers {
            let peer = Peer::new(Server::new(p.server.clone()))
                .with_name(p.address.clone())
                .with_weight(p.weight)
                .with_down(p.down)
                .with_max_fails(p.max_fails)
                .with_fail_timeout(p.fail_timeout);
            b = if p.backup { b.backup(peer) } else { b.peer(peer) };
        }
        let refusing = run.peers.iter().filter(|p| p.refuses).map(|p| p.address.clone()).collect();
        Ok(LibraryReplayer { upstream: b.build()?, refusing })
    }
}

struct WorkerModel<'a> {
    worker: Worker<'a>,
    refusing: &'a BTreeSet<String>,
}

impl Model for WorkerModel<'_> {
    fn expect(&mut self, key: &[u8]) -> (u16, String) {
        let refusing = self.refusing;
        super::parity::expect_with(&mut self.worker, key, |p| refusing.contains(p.name()))
    }
}

impl Replayer for LibraryReplayer {
    fn fresh(&self) -> Box<dyn Model + '_> {
        Box::new(WorkerModel { worker: Worker::new(&self.upstream), refusing: &self.refusing })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_from_upstream_addr() {
        let o = |status, a: &str| Observed { status, upstream_addr: a.to_string() };
        assert_eq!(o(200, "127.0.0.1:1").attempts(), (vec!["127.0.0.1:1"], "answered"));
        assert_eq!(o(502, "a:1, b:2").attempts(), (vec!["a:1", "b:2"], "failed"));
        assert_eq!(o(502, "a:1, parity").attempts(), (vec!["a:1"], "noLiveUpstreams"));
        assert_eq!(o(502, "parity").attempts(), (vec![], "noLiveUpstreams"));
    }

    #[test]
    fn hex_round_trip_and_date_shape() {
        assert_eq!(from_hex(&to_hex(b"\x00\xffk")), b"\x00\xffk");
        let d = utc_today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
    }

    #[test]
    fn flags_are_sorted_and_unique() {
        let names: Vec<&str> = FLAGS.iter().map(|f| f.0).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }
}
