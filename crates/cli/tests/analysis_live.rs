//! The analysis against real nginx: 200,000 random keys routed by nginx, each server's observed fraction of
//! answers within the binomial interval of `share`'s exact figure (a consistent upstream before and after a
//! change, and a plain one with a refusing server, where the rehash is exact for the keys' length), and the
//! keys that move between the two consistent runs within the intervals of `diff`'s matrix. Key by key, the
//! maps' answers are nginx's.
//!
//! The intervals are Wilson score intervals at z = 4.5 (two-sided, about 7·10⁻⁶ per figure), so with a few
//! dozen figures per run a correct model fails about once in 5,000 runs; the keys are fixed (a seeded
//! sample), so a given build passes or fails every time. Needs provisioned nginx (`scripts/provision-nginx`);
//! without it the test prints `SKIP:` and passes, unless `NGINX_PARITY=require`.

use anyhow::{Result, ensure};
use nginx_ketama::analysis::compare::sample_keys;
use nginx_ketama::analysis::{Diff, HASH_SPACE, Pick, PickMap, Share};
use nginx_ketama::{Method, Server};
use nginx_ketama_harness::catalog;
use nginx_ketama_harness::nginx::build::Build;
use nginx_ketama_harness::run::parity;
use nginx_ketama_harness::site::topology::{ServerLine, Topology};
use nginx_ketama_harness::testkit::{report, wilson_z};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

const KEYS: u64 = 200_000;
const Z: f64 = 4.5;

fn latest_local() -> Option<Build> {
    let found = nginx_ketama_harness::testkit::provisioned_or_skip()?;
    found.last().map(|install| Build::Local(install.clone()))
}

/// `n` server lines `127.77.0.i:2100i` with weights 1–3; `dead` ones refuse connections.
fn lines(n: usize, dead: &[usize]) -> Vec<ServerLine> {
    (0..n)
        .map(|i| {
            let addr = SocketAddr::from(([127, 77, 0, (i + 1) as u8], 21000 + i as u16));
            let mut line = catalog::line(&addr.to_string());
            line.weight = 1 + (i % 3) as u32;
            line.dead = dead.contains(&i);
            line
        })
        .collect()
}

/// nginx's answer for each key: the server string that answered, or `None` (502).
fn answers(backend: &Build, topology: &Topology, keys: &[Vec<u8>]) -> Result<Vec<Option<Server>>> {
    let session = parity::start(backend, topology.clone())?;
    let by_address: HashMap<&str, &str> = topology
        .lines
        .iter()
        .flat_map(|l| l.endpoints.iter().map(move |e| (e.name.as_str(), l.server.as_str())))
        .collect();
    let responses = session.send(keys, &mut |_| {})?;
    ensure!(responses.len() == keys.len(), "{} answers for {} keys", responses.len(), keys.len());
    Ok(responses
        .iter()
        .map(|r| {
            let addr = r.upstream_addr.as_deref().unwrap_or_default();
            let last = addr.rsplit(", ").next().unwrap_or_default();
            (r.status == 200).then(|| Server::new(by_address[last]))
        })
        .collect())
}

/// Whether `k` of `n` is consistent with probability `p` (Wilson interval at [`Z`]).
fn within(k: u64, n: u64, p: f64) -> (bool, (f64, f64)) {
    let (lo, hi) = wilson_z(k, n, Z);
    (lo <= p && p <= hi, (lo, hi))
}

#[test]
fn share_and_diff_match_what_nginx_does_with_200000_keys() -> Result<()> {
    let Some(backend) = latest_local() else { return Ok(()) };
    let version = backend.version();
    let keys: Vec<Vec<u8>> = sample_keys(2026, KEYS).collect();
    // Before: 8 servers, one refusing. After: the refusing one removed and a new one added.
    let before = Topology { seed: 1, method: Method::Consistent, lines: lines(8, &[3]), hosts: vec![] };
    let mut after_lines = lines(9, &[]);
    after_lines.remove(3);
    let after = Topology { seed: 2, method: Method::Consistent, lines: after_lines, hosts: vec![] };
    // Plain hash, 6 servers, one refusing: keys on its slots rehash, exactly for keys of this length.
    let plain = Topology { seed: 3, method: Method::Plain, lines: lines(6, &[2]), hosts: vec![] };
    let key_len = std::num::NonZeroUsize::new(keys[0].len()).unwrap();
    assert!(keys.iter().all(|k| k.len() == key_len.get()), "the sample's keys have one length");

    let maps: Vec<PickMap> = [&before, &after, &plain]
        .iter()
        .map(|t| {
            let up = t.upstream(version, backend.libc()).unwrap();
            PickMap::with_failing(&up, |p| t.refuses(p.name()), key_len)
        })
        .collect();
    let observed_before = answers(&backend, &before, &keys)?;
    let observed_after = answers(&backend, &after, &keys)?;
    let observed_plain = answers(&backend, &plain, &keys)?;

    // Key by key first: the map's answer is nginx's (the figures below are then sums of these answers).
    let mut failures = Vec::new();
    let runs = [
        (&maps[0], &observed_before, "before"),
        (&maps[1], &observed_after, "after"),
        (&maps[2], &observed_plain, "plain"),
    ];
    for (map, observed, label) in runs {
        let differ = keys
            .iter()
            .zip(observed)
            .filter(|(k, o)| match (map.pick_key(k), o) {
                (Pick::Server(s), Some(o)) => map.servers()[s] != *o,
                _ => true,
            })
            .count();
        if differ > 0 {
            failures.push(format!("{label}: {differ} keys answered by another server than the map says"));
        }
    }

    // share: each server's fraction of answers.
    let mut lines_out = vec![format!("analysis live (nginx {version}, {KEYS} keys, Wilson z = {Z}):")];
    for (map, observed, label) in runs {
        let share = Share::of(map);
        assert_eq!(share.round_robin, 0, "no key falls to round-robin in these topologies");
        let mut counts: BTreeMap<&Server, u64> = BTreeMap::new();
        for s in observed.iter().flatten() {
            *counts.entry(s).or_insert(0) += 1;
        }
        assert_eq!(observed.iter().filter(|s| s.is_none()).count(), 0, "{label}: every request answered");
        for s in &share.servers {
            let k = counts.get(&s.server).copied().unwrap_or(0);
            let p = s.count as f64 / HASH_SPACE as f64;
            let (ok, (lo, hi)) = within(k, KEYS, p);
            lines_out.push(format!(
                "  share {label:<6} {:<18} exact {:>8.4}%  nginx {:>6} keys = {:>8.4}%  interval {:.4}%–{:.4}%",
                s.server.as_str(),
                p * 100.0,
                k,
                k as f64 * 100.0 / KEYS as f64,
                lo * 100.0,
                hi * 100.0
            ));
            if !ok {
                failures.push(format!("share {label} {}: exact {p}, nginx {k}/{KEYS} ({lo}..{hi})", s.server));
            }
        }
    }

    // diff: each from→to cell of the moved matrix, and the total moved.
    let diff = Diff::of(&maps[0], &maps[1]);
    let mut moved: BTreeMap<(Server, Server), u64> = BTreeMap::new();
    for (a, b) in observed_before.iter().zip(&observed_after) {
        let (Some(a), Some(b)) = (a, b) else { continue };
        if a != b {
            *moved.entry((a.clone(), b.clone())).or_insert(0) += 1;
        }
    }
    let total_moved: u64 = moved.values().sum();
    let p = diff.moved as f64 / HASH_SPACE as f64;
    let (ok, (lo, hi)) = within(total_moved, KEYS, p);
    lines_out.push(format!(
        "  diff moved exact {:.4}%, nginx {} keys = {:.4}% (interval {:.4}%–{:.4}%), {} cells",
        p * 100.0,
        total_moved,
        total_moved as f64 * 100.0 / KEYS as f64,
        lo * 100.0,
        hi * 100.0,
        diff.moves.len()
    ));
    if !ok {
        failures.push(format!("moved: exact {p}, nginx {total_moved}/{KEYS}"));
    }
    let mut expected_cells = 0;
    for (m, n) in &diff.moves {
        let (Pick::Server(_), Pick::Server(_)) = (m.from, m.to) else {
            failures.push(format!("a move involving round-robin: {m:?}"));
            continue;
        };
        let from = diff.server_of(m.from).unwrap().clone();
        let to = diff.server_of(m.to).unwrap().clone();
        let k = moved.get(&(from.clone(), to.clone())).copied().unwrap_or(0);
        let p = *n as f64 / HASH_SPACE as f64;
        let (ok, (lo, hi)) = within(k, KEYS, p);
        if !ok {
            failures.push(format!("cell {from} → {to}: exact {p}, nginx {k}/{KEYS} ({lo}..{hi})"));
        }
        expected_cells += 1;
    }
    // Nothing moves where the diff says nothing does.
    for ((from, to), k) in &moved {
        let known =
            diff.moves.iter().any(|(m, _)| diff.server_of(m.from) == Some(from) && diff.server_of(m.to) == Some(to));
        if !known {
            failures.push(format!("nginx moved {k} keys {from} → {to}, a cell the diff says is empty"));
        }
    }
    lines_out.push(format!("  diff cells checked: {expected_cells}, failures: {}", failures.len()));
    report(&lines_out.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}
