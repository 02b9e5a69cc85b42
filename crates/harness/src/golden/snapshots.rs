//! The readable insta snapshots of records (`snapshots/catalog__<case>.snap`).

use super::groups::{group_description, split_of, version_groups};
use super::record_file::{Record, to_hex};
use super::vocab::method_name;
use crate::run::observation::Outcome;
use std::fmt::Write as _;

/// The insta snapshot name of a case: `catalog__<name with - as _>`.
pub fn snapshot_name(case: &str) -> String {
    format!("catalog__{}", case.replace('-', "_"))
}

/// A key for people: quoted text, shortened when long, or hex when not UTF-8.
pub(crate) fn show(key: &[u8]) -> String {
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
    let _ = writeln!(s, "method:      {}", method_name(record.method));
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
    if let Some(p) = &record.policy {
        let _ = writeln!(
            s,
            "front: proxy_next_upstream {}; proxy_next_upstream_tries {};",
            p.next_upstream.join(" "),
            p.tries
        );
    }
    if let Some(h) = &record.hosts {
        let _ = write!(s, "\nhosts:\n{h}");
    }
    let groups = version_groups(record);
    let split = split_of(&groups);
    for g in &groups {
        let _ = writeln!(s, "\n=== nginx {} ===", g.versions_joined(", "));
        if split.any() {
            let _ = writeln!(s, "{}", group_description(record, g, split));
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
            if let Some(a) = &p.answer {
                flags.push(format!("answers {a}"));
            }
            if p.max_fails > 0 {
                flags.push(format!("max_fails={} fail_timeout={}s", p.max_fails, p.fail_timeout));
            }
            let _ = writeln!(s, "  {:<w$}  {:<aw$}  {:>6}  {}", p.server, p.address, p.weight, flags.join(" "));
            // Trim the trailing spaces of rows without flags.
            while s.ends_with(" \n") {
                s.pop();
                s.pop();
                s.push('\n');
            }
        }
        let server_of = run.server_of();
        let _ = writeln!(s, "tests:");
        let _ = writeln!(s, "  {:>4}  {:<8}  {:<15}  {:<40}  key", "#", "crc32", "outcome", "attempts (servers)");
        for (i, (k, r)) in record.keys.iter().zip(&run.results).enumerate() {
            let bytes = k.bytes();
            let (attempts, outcome) = super::fixtures::outcome_of(r, &run.peers, record.policy.is_some());
            let servers: Vec<&str> = attempts.iter().map(|a| server_of.get(a).copied().unwrap_or("?")).collect();
            let mut shown = servers.join(", ");
            if outcome == Outcome::NoLiveUpstreams {
                shown.push_str(if shown.is_empty() { "(none)" } else { ", (none left)" });
            }
            // Cases with failure kinds: the method and $upstream_status (and the clock's second) lead the key.
            let mut key = show(&bytes);
            if let Some(statuses) = &r.upstream_status {
                key = format!("{} [{statuses}] {key}", k.request_method.as_deref().unwrap_or("GET"));
            }
            if let Some(at) = k.clock {
                key = format!("t+{at}s {key}");
            }
            let _ = writeln!(
                s,
                "  {:>4}  {:08x}  {:<15}  {:<40}  {}",
                i + 1,
                crc32fast::hash(&bytes),
                format!("{outcome} {}", r.status),
                shown,
                key
            );
        }
    }
    s
}

/// The metadata header of every catalog snapshot, as insta writes it: the test that checks the snapshot.
pub const SNAPSHOT_HEADER: &str = "---\nsource: tests/golden.rs\n---\n";

/// The body of a `.snap` file: what follows insta's `---` metadata block (the whole text without one).
fn snapshot_body(file: &str) -> &str {
    file.strip_prefix("---\n").and_then(|rest| rest.split_once("\n---\n")).map_or(file, |(_, body)| body)
}

/// The `.snap.new` file `cargo insta review` shows for `record` when its rendering differs from the
/// committed snapshot file `committed` (`None`: there is none), or `None` when nothing changed. Like insta,
/// trailing newlines do not count.
pub fn pending_snapshot(record: &Record, committed: Option<&str>) -> Option<String> {
    let rendered = render_snapshot(record);
    let new = rendered.trim_end_matches('\n');
    if committed.is_some_and(|c| snapshot_body(c).trim_end_matches('\n') == new) {
        return None;
    }
    Some(format!("{SNAPSHOT_HEADER}{new}\n"))
}
