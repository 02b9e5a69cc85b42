//! The on-disk record format (`vectors/records/<case>.json`, the single source of truth): what the catalog
//! alone determines ([`skeleton`]), one [`Run`] per nginx version, and reading, writing and merging them.

use super::vocab::{MethodDef, nginx_version};
use crate::catalog::Case;
use crate::catalog::flag::Flag;
use crate::run::observation::Observation;
use crate::site::failures::Answer;
use anyhow::{Context, Result};
use nginx_ketama::failure::{NextUpstream, Proxying, RetryPolicy};
use nginx_ketama::upstream::Method;
use nginx_ketama::version::{Libc, NginxVersion};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Everything recorded for one catalog case, across nginx versions. Written only by the recorder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    /// The case name.
    pub case: String,
    /// Its one-line description.
    pub description: String,
    /// `consistent` or `plain`.
    #[serde(with = "MethodDef")]
    pub method: Method,
    /// Replay in order on one worker (`true`) or each key on a fresh worker (`false`, verified in both
    /// orders against nginx when recorded).
    pub stateful: bool,
    /// Flags of every key.
    pub flags: Vec<Flag>,
    /// Why versions are expected to disagree, if they do.
    pub versions_differ: Option<String>,
    /// Why builds of one version against different C libraries are expected to disagree, if they do.
    pub libcs_differ: Option<String>,
    /// The `upstream` block nginx ran.
    pub upstream: String,
    /// The private hosts file nginx resolved names with, if any.
    pub hosts: Option<String>,
    /// The front's retry policy, in a case with failure kinds (then its peers may carry an `answer`, its
    /// keys a method and its results `$upstream_status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyRecord>,
    /// Keys in sending order.
    pub keys: Vec<RecordKey>,
    /// One run per nginx version, oldest first.
    pub runs: Vec<Run>,
}

/// The front location's `proxy_next_upstream` and `proxy_next_upstream_tries` (`proxy_next_upstream_timeout`
/// is never set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRecord {
    /// The words, in nginx's order (`["off"]` for off).
    pub next_upstream: Vec<String>,
    /// The most attempts (0: no cap).
    pub tries: u32,
}

impl PolicyRecord {
    /// The record of `policy`.
    pub fn of(policy: &RetryPolicy) -> PolicyRecord {
        PolicyRecord {
            next_upstream: policy.next_upstream.iter().map(|c| c.word().to_string()).collect(),
            tries: policy.tries,
        }
    }

    /// The library's policy.
    ///
    /// # Errors
    ///
    /// A word `proxy_next_upstream` does not take.
    pub fn policy(&self) -> Result<RetryPolicy> {
        let next_upstream = self
            .next_upstream
            .iter()
            .map(|w| Proxying::Proxy.condition(w).with_context(|| format!("unknown proxy_next_upstream word {w:?}")))
            .collect::<Result<NextUpstream>>()?;
        Ok(RetryPolicy { next_upstream, tries: self.tries, timeout_ms: 0 })
    }
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
    pub flags: Vec<Flag>,
    /// The request method, in a case with failure kinds (`GET` or `POST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_method: Option<String>,
    /// In a case whose clock advances: the second of nginx's clock the request was sent at, counted from
    /// the case's first request (the recorder checked nginx's own clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<u64>,
}

impl RecordKey {
    /// The request method (GET unless recorded otherwise).
    pub fn method(&self) -> crate::run::client::Method {
        match self.request_method.as_deref() {
            Some("POST") => crate::run::client::Method::Post,
            _ => crate::run::client::Method::Get,
        }
    }

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
    #[serde(with = "nginx_version")]
    pub nginx: NginxVersion,
    /// Debian package version.
    pub package: String,
    /// The C library nginx ran with, its name first (`glibc 2.41 (Debian 2.41-12+deb13u5)`, `musl 1.2.3
    /// (Debian 1.2.3-1, static)`): its qsort decides collisions. See [`Run::c_library`].
    pub libc: String,
    /// UTC day these results were first recorded (kept while re-recordings give the same results).
    pub recorded: String,
    /// Peers in nginx's list order, as nginx resolved them.
    pub peers: Vec<PeerRecord>,
    /// One result per key, in key order.
    pub results: Vec<Observation>,
}

impl Run {
    /// The C library named by [`Run::libc`]'s first word ([`load_records`] refuses a record whose runs name
    /// none; a run that was never loaded from disk counts as glibc when it names none).
    pub fn c_library(&self) -> Libc {
        libc_named(&self.libc).unwrap_or(Libc::Glibc)
    }

    /// How reports name the build: the version, with `-musl` for a musl build (`1.26.3-musl`).
    pub fn label(&self) -> String {
        crate::nginx::install::build_label(self.nginx, self.c_library())
    }

    /// Configured server string by peer address.
    pub fn server_of(&self) -> BTreeMap<&str, &str> {
        self.peers.iter().map(|p| (p.address.as_str(), p.server.as_str())).collect()
    }
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
    /// How it answers when it does not answer `200 OK` (cases with failure kinds): `http_502`, `timeout`,
    /// `invalid_header`, `stale_keepalive` ([`Answer::word`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl PeerRecord {
    /// The peer's answer ([`PeerRecord::answer`] read back).
    ///
    /// # Panics
    ///
    /// An answer no recorder writes.
    pub fn answer(&self) -> Option<Answer> {
        self.answer.as_deref().map(|w| Answer::from_word(w).unwrap_or_else(|| panic!("unknown answer {w:?}")))
    }
}

/// The C library a run's `libc` text names by its first word (`glibc …`, `musl …`).
fn libc_named(text: &str) -> Option<Libc> {
    text.split_whitespace().next()?.parse().ok()
}

/// The library's upstream for `peers` (in list order) with `method`, the rules of `version` and the tie rule
/// of `libc`.
///
/// # Errors
///
/// An upstream the library rejects.
pub fn upstream_of_peers(
    method: Method,
    version: NginxVersion,
    libc: Libc,
    peers: &[PeerRecord],
) -> Result<nginx_ketama::Upstream> {
    let mut b =
        nginx_ketama::Upstream::builder(method).name(crate::site::topology::UPSTREAM).version(version).libc(libc);
    for p in peers {
        let peer = nginx_ketama::Peer::new(nginx_ketama::Server::new(p.server.clone()))
            .with_name(p.address.clone())
            .with_weight(p.weight)
            .with_down(p.down)
            .with_max_fails(p.max_fails)
            .with_fail_timeout(p.fail_timeout);
        b = if p.backup { b.backup(peer) } else { b.peer(peer) };
    }
    Ok(b.build()?)
}

/// Lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex")).collect()
}

/// A case's record without any run: everything the catalog alone determines.
pub fn skeleton(case: &Case) -> Record {
    Record {
        case: case.name.to_string(),
        description: case.description.to_string(),
        method: case.topology.method,
        stateful: case.stateful,
        flags: case.flags.clone(),
        versions_differ: case.versions_differ.map(str::to_string),
        libcs_differ: case.libcs_differ.map(str::to_string),
        upstream: crate::run::parity::http_site_failing(&case.topology, false, case.failures.as_ref())
            .http
            .expect("an http site")
            .upstream_block,
        hosts: (!case.topology.hosts.is_empty()).then(|| case.topology.hosts_file()),
        policy: case.failures.as_ref().map(|f| PolicyRecord::of(&f.policy)),
        keys: case
            .keys
            .iter()
            .map(|k| RecordKey {
                key: std::str::from_utf8(&k.key).ok().map(str::to_string),
                key_hex: to_hex(&k.key),
                comment: k.comment.clone(),
                flags: k.flags.clone(),
                request_method: case.failures.is_some().then(|| k.method.name().to_string()),
                clock: k.at,
            })
            .collect(),
        runs: Vec::new(),
    }
}

/// Keeps the `recorded` date of runs whose results did not change since `old` (so re-recording an
/// unchanged nginx yields no diff), and runs of versions `new` lacks when what nginx was asked is unchanged
/// ([`same_inputs`]): a new note in the catalog (say the `versions_differ` that explains a split found by
/// recording a new nginx) keeps every other build's runs.
pub fn merge(mut new: Record, old: Option<&Record>) -> Record {
    let Some(old) = old else { return new };
    if !same_inputs(&new, old) {
        return new;
    }
    let same_build = |a: &Run, b: &Run| a.nginx == b.nginx && a.c_library() == b.c_library();
    for run in &mut new.runs {
        if let Some(o) = old.runs.iter().find(|o| same_build(o, run))
            && (Run { recorded: o.recorded.clone(), ..run.clone() }) == *o
        {
            run.recorded = o.recorded.clone();
        }
    }
    for o in &old.runs {
        if !new.runs.iter().any(|r| same_build(r, o)) {
            new.runs.push(o.clone());
        }
    }
    new.runs.sort_by_key(|r| (r.nginx, r.c_library()));
    new
}

/// Whether `a` and `b` asked nginx the same (method, flags, upstream, hosts, keys), whatever their prose
/// (description, `versions_differ`, `libcs_differ`, key comments), which changes nothing nginx does.
pub fn same_inputs(a: &Record, b: &Record) -> bool {
    let mut b = Record { runs: Vec::new(), ..b.clone() };
    b.description.clone_from(&a.description);
    b.versions_differ.clone_from(&a.versions_differ);
    b.libcs_differ.clone_from(&a.libcs_differ);
    if b.keys.len() == a.keys.len() {
        for (key, other) in b.keys.iter_mut().zip(&a.keys) {
            key.comment.clone_from(&other.comment);
        }
    }
    b == Record { runs: Vec::new(), ..a.clone() }
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
            if let Some(run) = r.runs.iter().find(|run| libc_named(&run.libc).is_none()) {
                anyhow::bail!(
                    "{}: the run of nginx {} names no known C library ({:?}; expected glibc … or musl …)",
                    path.display(),
                    run.nginx,
                    run.libc
                );
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The upgrade workflow (docs/upgrading.md, "Upgrading nginx"): a new nginx is recorded, its split explained by a
    /// `versions_differ` note, and re-recorded: the note must not cost the other builds' runs. Built from the
    /// committed recording of `retry-budget-skips-down` (1.18.0 split from the rest).
    #[test]
    fn a_new_note_keeps_the_other_builds_runs() {
        let path = crate::repo_root().join("vectors/records/retry-budget-skips-down.json");
        let committed: Record = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(committed.versions_differ.is_some() && committed.runs.len() == 5, "{}", path.display());
        let is_new = |r: &Run| r.nginx == NginxVersion::new(1, 18, 0);
        let before = Record {
            versions_differ: None,
            runs: committed.runs.iter().filter(|r| !is_new(r)).cloned().collect(),
            ..committed.clone()
        };
        let recorded =
            Record { runs: committed.runs.iter().filter(|r| is_new(r)).cloned().collect(), ..committed.clone() };
        assert_eq!(merge(recorded.clone(), Some(&before)), committed);

        // A changed key is a new question: the other builds' answers no longer apply.
        let mut changed = before.clone();
        changed.keys[0].key_hex.push_str("00");
        assert_eq!(merge(recorded.clone(), Some(&changed)), recorded);
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(from_hex(&to_hex(b"\x00\xffk")), b"\x00\xffk");
    }
}
