//! `verify --config` on the example config (`tests/data/own-config/`): every hash upstream proven on every
//! provisioned nginx with its own addresses, inside a private network namespace and nowhere else; and the
//! fallback without namespaces. Skips (loudly) without provisioned nginx or root, unless
//! `NGINX_PARITY=require`.

use nginx_ketama_harness::install::Installation;
use nginx_ketama_harness::netns::{self, parse_ip_addresses};
use nginx_ketama_harness::own_config::{self, ProveOptions, Prover};
use nginx_ketama_harness::testkit::{report, skip};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

const CLI: &str = env!("CARGO_BIN_EXE_nginx-ketama");

fn example() -> PathBuf {
    nginx_ketama_harness::repo_root().join("tests/data/own-config/nginx.conf")
}

fn installs() -> Option<Vec<Installation>> {
    let found = Installation::discover(&Installation::default_root());
    if found.is_empty() {
        skip("no provisioned nginx (scripts/provision-nginx)");
        return None;
    }
    Some(found)
}

fn host_lo() -> Vec<IpAddr> {
    let out = Command::new("ip").args(["-o", "address", "show", "dev", "lo"]).output().expect("ip");
    parse_ip_addresses(&String::from_utf8_lossy(&out.stdout))
}

/// The acceptance run: `verify --config` on the example reports 0 mismatches and proven arcs for every
/// hash upstream on every provisioned build, skips the round-robin one with a note, and names the stand-in.
#[test]
fn the_example_config_is_proven_on_every_build() {
    let Some(installs) = installs() else { return };
    if !netns::available() {
        skip("not root: no private namespaces");
        return;
    }
    let mismatches = tempfile::tempdir().unwrap();
    let out = Command::new(CLI)
        .args(["verify", "--config"])
        .arg(example())
        .args(["--keys", "300", "--failure-runs", "2", "--mismatches"])
        .arg(mismatches.path().join("m.jsonl"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("4 hash upstreams to prove, 1 skipped"), "{stdout}");
    assert!(stdout.contains("skipped: static (") && stdout.contains("round-robin, not hash"), "{stdout}");
    assert!(stdout.contains("hostname api.backend.internal: does not resolve on this machine; stand-in"), "{stdout}");
    assert!(stdout.contains("hostname localhost: 127.0.0.1"), "{stdout}");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() == 11 && w[0].starts_with("1."))
        .collect();
    assert_eq!(rows.len(), 4 * installs.len(), "{stdout}");
    for w in &rows {
        assert_eq!(w[10], "0", "mismatches: {w:?}");
        let (points, arcs, requests): (usize, usize, usize) =
            (w[5].parse().unwrap(), w[6].parse().unwrap(), w[7].parse().unwrap());
        assert!(requests > 0, "{w:?}");
        assert_eq!(w[8], "3", "1 all-live run and 2 failure runs: {w:?}");
        if w[2] == "consistent" {
            assert!(points > 0 && arcs == points, "every arc proven: {w:?}");
        }
    }
    let app_failovers: usize = rows.iter().filter(|w| w[1] == "app").map(|w| w[9].parse::<usize>().unwrap()).sum();
    assert!(app_failovers > 0, "failure runs retried: {stdout}");
    report(&format!("verify --config on the example config:\n{stdout}"));
}

/// Nothing is put on the machine's own `lo`: the config's addresses exist inside the holder's namespace
/// (before nginx starts) and never outside it, and a proof run there answers from them.
#[test]
fn the_addresses_exist_only_inside_the_namespace() {
    let Some(installs) = installs() else { return };
    if !netns::available() {
        skip("not root: no private namespaces");
        return;
    }
    let newest = installs.last().expect("at least one build");
    let config = own_config::load(&example(), newest.version, newest.libc).unwrap();
    let choice = own_config::choose(&config, &["app".into()], 9).unwrap();
    let before = host_lo();
    let ups: Vec<&own_config::ConfigUpstream> = choice.prove.iter().collect();
    let prover = Prover::new(&ups, &[newest], CLI.as_ref()).unwrap();
    let plan = prover.plan().expect("a namespace plan as root").clone();
    let inside = prover.holder().unwrap().lo_addresses().unwrap();
    for a in &plan.on_lo {
        assert!(inside.contains(a), "{a} on lo inside: {inside:?}");
        assert!(!before.contains(a) && !host_lo().contains(a), "{a} is on the machine's own lo");
    }
    assert!(plan.on_lo.contains(&"10.0.0.7".parse().unwrap()) && plan.on_lo.contains(&"2001:db8::7".parse().unwrap()));
    let options = ProveOptions { seed: 1, keys: 100, prove_ring: true, failure_runs: 1 };
    let r = prover.prove(newest, &choice.prove[0], &options, "replay", &mut |_, _| {});
    assert!(r.fault.is_none(), "{:?}", r.fault);
    assert!(r.findings.is_empty() && r.arcs_proven > 0 && r.requests > 0, "{r:?}");
    let holder_pid = prover.holder().unwrap().pid();
    drop(prover);
    assert!(!std::path::Path::new(&format!("/proc/{holder_pid}")).exists(), "the namespace holder is gone");
    let after = host_lo();
    assert!(plan.on_lo.iter().all(|a| !after.contains(a)), "after: {after:?}");
    report(&format!(
        "own config: {} addresses only inside the namespace; app proven on nginx {} ({} requests, {} arcs)",
        plan.on_lo.len(),
        newest.label(),
        r.requests,
        r.arcs_proven
    ));
}

/// Without namespaces the proof says so and runs what it can: the loopback-only upstream.
#[test]
fn without_namespaces_only_loopback_upstreams_run() {
    let Some(installs) = installs() else { return };
    let newest = installs.last().expect("at least one build");
    let out = Command::new(CLI)
        .env(netns::NO_NAMESPACES_ENV, "1")
        .args(["verify", "--config"])
        .arg(example())
        .args(["--keys", "200", "--failure-runs", "1", "--versions"])
        .arg(newest.version.to_string())
        .args(["--libc", newest.libc.as_str()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("network: no private namespaces"), "{stdout}");
    for name in ["app", "sessions", "images"] {
        assert!(stdout.contains(&format!("not run: {name}: needs a private network namespace")), "{stdout}");
    }
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("1.")).collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    assert!(rows[0].contains("local_cache") && rows[0].trim_end().ends_with(" 0"), "{stdout}");
}

/// A name that is not an upstream, or not a hash upstream, is a usage error with the reader's message; so
/// are options that do not apply to `--config`.
#[test]
fn unknown_or_non_hash_upstreams_are_usage_errors() {
    if installs().is_none() {
        return;
    }
    for (args, want) in [
        (["--upstream", "nope"], "no upstream \"nope\" in "),
        (["--upstream", "static"], "does not use \"hash\""),
        (["--shim", "x"], "--shim, --only and --repeat do not apply"),
    ] {
        let out = Command::new(CLI).args(["verify", "--config"]).arg(example()).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(want), "{stderr}");
    }
}
