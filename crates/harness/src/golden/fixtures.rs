//! The language-neutral fixtures in `vectors/v1/` (Wycheproof style), generated from the records.

use super::groups::{group_description, group_name, split_of, version_groups};
use super::record_file::{PeerRecord, PolicyRecord, Record};
use super::vocab::{method_name, nginx_version};
use crate::catalog::flag::{BugType, Flag};
use crate::run::observation::Observation;
use crate::run::observation::Outcome;
use crate::site::failures::Answer;
use nginx_ketama::upstream::Method;
use nginx_ketama::version::NginxVersion;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

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
    bug_type: BugType,
    description: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VectorGroup<'a> {
    name: String,
    description: String,
    source: Source<'a>,
    method: &'static str,
    libc: Vec<&'static str>,
    /// The routing rules every version of the group follows (a rule its versions differ on is left out:
    /// their recordings agree, so the rule does not decide any of the group's tests).
    rules: BTreeMap<&'static str, &'static str>,
    stateful: bool,
    upstream: &'a str,
    /// The front's retry policy: present exactly in the groups with failure kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<&'a PolicyRecord>,
    peers: &'a [PeerRecord],
    tests: Vec<VectorTest<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Source<'a> {
    name: &'static str,
    #[serde(serialize_with = "nginx_version::serialize_all")]
    versions: Vec<NginxVersion>,
    packages: Vec<&'a str>,
    libc: Vec<&'a str>,
    recorded: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VectorTest<'a> {
    tc_id: usize,
    comment: &'a str,
    flags: Vec<Flag>,
    key: Option<&'a str>,
    key_hex: &'a str,
    crc32: String,
    attempts: Vec<&'a str>,
    servers: Vec<&'a str>,
    outcome: Outcome,
    status: u16,
    /// Groups with failure kinds: the method, and `$upstream_status` split on `", "`.
    #[serde(skip_serializing_if = "Option::is_none")]
    request_method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_statuses: Option<Vec<&'a str>>,
    /// Groups whose clock advances: nginx's second at this request, from the group's first request.
    #[serde(skip_serializing_if = "Option::is_none")]
    clock: Option<u64>,
}

/// The outcome of a result: [`Observation::attempts`]'s, except in a group with failure kinds, where a
/// response passed on from the last attempt (a status the peer answers, or `200` from a healthy or
/// stale-keepalive one) is `answered` whatever its status, and nginx's own 502/504 is `failed`.
pub(crate) fn outcome_of<'r>(r: &'r Observation, peers: &[PeerRecord], failing: bool) -> (Vec<&'r str>, Outcome) {
    let (attempts, outcome) = r.attempts();
    if !failing || outcome == Outcome::NoLiveUpstreams {
        return (attempts, outcome);
    }
    let last_status = r.upstream_status.as_deref().and_then(|s| s.rsplit(", ").next()).and_then(|s| s.parse().ok());
    let answers_with = attempts.last().and_then(|a| peers.iter().find(|p| p.address == *a)).map(|p| match p.answer() {
        _ if p.refuses => None,
        None | Some(Answer::StaleKeepalive) => Some(200u16),
        Some(Answer::Status(s)) => Some(s),
        Some(Answer::Stall | Answer::InvalidHeader) => None,
    });
    let passed = matches!(answers_with, Some(Some(s)) if Some(s) == last_status && s == r.status);
    (attempts, if passed { Outcome::Answered } else { Outcome::Failed })
}

/// Whether the result at `position` differs between two runs of `record` that differ only in the C library
/// (`by_libc`) or only in the nginx version.
fn depends(record: &Record, position: usize, by_libc: bool) -> bool {
    record.runs.iter().any(|a| {
        record.runs.iter().any(|b| {
            let pair = if by_libc {
                a.nginx == b.nginx && a.c_library() != b.c_library()
            } else {
                a.nginx != b.nginx && a.c_library() == b.c_library()
            };
            pair && (a.results[position] != b.results[position] || a.peers != b.peers)
        })
    })
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

/// The routing rules on which all of `versions` agree, by name.
fn shared_rules(versions: &[NginxVersion]) -> BTreeMap<&'static str, &'static str> {
    let mut all = versions.iter().map(|v| v.rules().routing());
    let Some(first) = all.next() else { return BTreeMap::new() };
    let mut shared: BTreeMap<&'static str, &'static str> = first.into_iter().collect();
    for other in all {
        for (name, value) in other {
            if shared.get(name) != Some(&value) {
                shared.remove(name);
            }
        }
    }
    shared
}

/// Generates the fixture files (`consistent.json`, `plain.json`) from records: file name → contents.
pub fn generate_vectors(records: &[Record]) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for method in [Method::Consistent, Method::Plain] {
        let mut groups = Vec::new();
        let mut tc = 0;
        for record in records.iter().filter(|r| r.method == method) {
            let vgroups = version_groups(record);
            let split = split_of(&vgroups);
            for g in &vgroups {
                let run = g.runs[0];
                let server_of = run.server_of();
                let tests = record
                    .keys
                    .iter()
                    .zip(&run.results)
                    .enumerate()
                    .map(|(position, (k, r))| {
                        tc += 1;
                        let (attempts, outcome) = outcome_of(r, &run.peers, record.policy.is_some());
                        let mut flags: Vec<Flag> = record.flags.iter().chain(&k.flags).copied().collect();
                        if attempts.len() > 1 {
                            flags.push(Flag::Failover);
                        }
                        match outcome {
                            Outcome::NoLiveUpstreams => flags.push(Flag::NoLiveUpstreams),
                            Outcome::Failed => flags.push(Flag::AllFailed),
                            Outcome::Answered => {}
                        }
                        // Per test: only the tests whose own results differ between the builds.
                        if split.by_version && depends(record, position, false) {
                            flags.push(Flag::VersionDependent);
                        }
                        if split.by_libc && depends(record, position, true) {
                            flags.push(Flag::LibcDependent);
                        }
                        if record.policy.is_some() {
                            flags.push(Flag::FailureKinds);
                        }
                        // Flag's order is its names' order.
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
                            request_method: k.request_method.as_deref(),
                            upstream_statuses: r.upstream_status.as_deref().map(|s| s.split(", ").collect()),
                            clock: k.clock,
                        }
                    })
                    .collect();
                let name = group_name(record, g, split);
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
                    method: method_name(record.method),
                    libc: g.libcs().into_iter().map(|l| l.as_str()).collect(),
                    rules: shared_rules(&g.versions()),
                    stateful: record.stateful,
                    upstream: &record.upstream,
                    policy: record.policy.as_ref(),
                    peers: &run.peers,
                    tests,
                });
            }
        }
        let used: BTreeSet<Flag> = groups.iter().flat_map(|g| g.tests.iter().flat_map(|t| t.flags.clone())).collect();
        let notes =
            used.iter().map(|&f| (f.name(), Note { bug_type: f.bug_type(), description: f.description() })).collect();
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
        files.insert(format!("{}.json", method_name(method)), text);
    }
    files
}
