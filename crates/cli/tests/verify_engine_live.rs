//! `verify --engine`: the HAProxy and Caddy models against every provisioned build of the real engines
//! (`scripts/provision-engines`; `$NGINX_KETAMA_ENGINES_DIR`), through the command. Each release's row
//! says 0 mismatches and the run exits 0; a deliberately wrong model (`--wrong-model`) is caught — on
//! HAProxy only by the keys at the ring's boundaries — and exits 1 with its mismatches in `--mismatches`
//! (each line following `docs/schemas/engine-mismatch.v1.json`); an interrupted run leaves no engine and
//! no directory. Without provisioned engines the live tests print a loud `SKIP:` line and pass, unless
//! `NGINX_PARITY=require`. Exits 2 (an engine that does
//! not run here, a flag that does not apply) and 3 (not provisioned) need nothing provisioned.

use nginx_ketama_harness::engines::install::{Build, Live, builds, default_root};
use nginx_ketama_harness::nginx::owner::stat;
use nginx_ketama_harness::testkit::{report, skip};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

#[path = "support/common.rs"]
mod common;
#[path = "support/processes.rs"]
mod processes;
#[path = "support/schemas.rs"]
mod schemas;

use common::CLI;

/// Runs `verify` with `args`, its engines looked for under `root`.
fn verify(root: &Path, args: &[&str]) -> Output {
    Command::new(CLI).arg("verify").args(args).env("NGINX_KETAMA_ENGINES_DIR", root).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The provisioned builds of `engine`, or the skip every live test takes.
fn provisioned(engine: Live) -> Option<Vec<Build>> {
    let found = builds(engine, &default_root());
    if found.is_empty() {
        skip(&format!(
            "verify_engine_live: no {engine} under {} — run scripts/provision-engines",
            default_root().display()
        ));
        return None;
    }
    Some(found)
}

/// The table's row of `release`: `[engine, release, topologies, requests, mismatches]`.
fn row<'a>(stdout: &'a str, engine: Live, release: &str) -> Vec<&'a str> {
    let row = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.len() == 5 && cells[0] == engine.name() && cells[1] == release);
    row.unwrap_or_else(|| panic!("no row for {engine} {release} in:\n{stdout}"))
}

/// Every provisioned release of `engine` proven through the command: one row each, requests counted, 0
/// mismatches, exit 0, no mismatch file. Returns what it printed.
fn proves_every_release(engine: Live, args: &[&str]) -> Option<String> {
    let found = provisioned(engine)?;
    let dir = tempfile::tempdir().unwrap();
    let mismatches = dir.path().join("m.jsonl");
    let mut all = vec!["--engine", engine.name(), "--seed", "11", "--mismatches", mismatches.to_str().unwrap()];
    all.extend(args);
    let out = verify(&default_root(), &all);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.starts_with("engine   release  topologies  requests mismatches\n"), "{stdout}");
    for build in &found {
        let cells = row(&stdout, engine, &build.release);
        let requests: usize = cells[3].parse().unwrap();
        assert!(requests > 0 && cells[4] == "0", "{cells:?}");
    }
    assert!(stdout.contains(&format!("0 mismatches: the {engine} model picks the server the real {engine} picks")));
    assert!(!mismatches.exists());
    report(&format!("verify_engine_live: verify --engine {engine} {}\n{stdout}", args.join(" ")));
    Some(stdout)
}

#[test]
fn verify_engine_haproxy_proves_every_provisioned_release() {
    // One topology of each kind (16 or 21), few random keys: the boundary keys are the proof's edge.
    proves_every_release(Live::HaProxy, &["--keys", "20"]);
}

/// Caddy: every hashing policy of each release (two pools each), with its own row of 0 mismatches.
#[test]
fn verify_engine_caddy_proves_every_provisioned_release() {
    let Some(found) = provisioned(Live::Caddy) else { return };
    let Some(stdout) = proves_every_release(Live::Caddy, &["--keys", "40"]) else { return };
    for build in &found {
        for policy in caddy_policies(&build.release) {
            let counts = policy_row(&stdout, &build.release, policy);
            assert_eq!(counts, [2, 80, 0], "{} {policy}:\n{stdout}", build.release);
        }
    }
    assert!(stdout.contains("2.6.2 has no query nor client_ip_hash policy"), "{stdout}");
}

/// The hashing policies Caddy `release` has, as the table names them (`query` and `client_ip_hash` came
/// in 2.7).
fn caddy_policies(release: &str) -> Vec<&'static str> {
    let mut all = vec!["header X-Key", "uri_hash", "ip_hash"];
    if release != "2.6.2" {
        all.extend(["query k", "client_ip_hash (trusted_proxies 127.0.0.0/9)"]);
    }
    all
}

/// The per-policy row of `release`: `[topologies, requests, mismatches]`.
fn policy_row(stdout: &str, release: &str, policy: &str) -> [usize; 3] {
    for line in stdout.lines() {
        let cells: Vec<&str> = line.split_whitespace().collect();
        if cells.len() > 4 && cells[0] == release && cells[1..cells.len() - 3].join(" ") == policy {
            let n = |i: usize| cells[cells.len() - 3 + i].parse().unwrap();
            return [n(0), n(1), n(2)];
        }
    }
    panic!("no row for caddy {release} {policy} in:\n{stdout}")
}

/// The mutation check: `--wrong-model` runs `engine`'s newest release against a wrong rule; the run
/// exits 1, says how many mismatches and where, and every line of the file follows its schema. Returns
/// the lines.
fn wrong_model_is_caught(engine: Live, file: &Path, args: &[&str]) -> Option<Vec<Value>> {
    let newest = provisioned(engine)?.pop()?;
    let target = format!("{engine}@{}", newest.release);
    let mut all = vec!["--engine", &target, "--wrong-model", "--mismatches", file.to_str().unwrap()];
    all.extend(args);
    let out = verify(&default_root(), &all);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    let found: usize = row(&stdout, engine, &newest.release)[4].parse().unwrap();
    assert!(found > 0, "{stdout}");
    assert!(stdout.contains(&format!("{found} mismatches; all of them are in {}", file.display())), "{stdout}");
    let lines: Vec<Value> =
        std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), found);
    for line in &lines {
        assert_eq!(schemas::check(line), "nginx-ketama/engine-mismatch/v1");
        assert_eq!(
            (line["engine"].as_str(), line["model"].as_str()),
            (Some(engine.name()), Some("wrong (--wrong-model)"))
        );
        assert_ne!(line["model_said"], line["engine_said"]);
    }
    report(&format!("verify_engine_live: {target} --wrong-model: {found} mismatches"));
    Some(lines)
}

/// A HAProxy model whose ring boundaries are one hash value early (ties to the node above) is caught, and
/// only on the topologies whose keys sit at both ends of every segment (`crc32`, `none`, and the
/// `hash-key` and backup rings that hash with `crc32`): random keys alone would not see it.
#[test]
fn a_wrong_haproxy_model_is_caught_by_the_boundary_keys() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lines) = wrong_model_is_caught(Live::HaProxy, &dir.path().join("m.jsonl"), &["--keys", "20"]) else {
        return;
    };
    for line in &lines {
        let kind = line["topology_kind"].as_str().unwrap();
        let boundary_keyed = ["consistent crc32", "consistent none", "hash-key", "backups consistent"]
            .iter()
            .any(|k| kind.starts_with(k));
        assert!(boundary_keyed && !kind.contains("avalanche"), "{kind}: {line}");
        // The replay names the topology and the mutation.
        let replay = line["replay"].as_str().unwrap();
        assert!(
            replay.contains(&format!("--only {}", line["topology"])) && replay.ends_with("--wrong-model"),
            "{replay}"
        );
    }
}

/// A wrong Caddy model is caught on every policy of the newest release: `header` with the other release's
/// hash, `uri_hash` hashing the path without its query, `query` the first value only, `ip_hash` the
/// address's four bytes, `client_ip_hash` the peer with `trusted_proxies` ignored. A passing run at the
/// same path then removes that earlier run's mismatch file, as `verify` does with nginx's.
#[test]
fn a_wrong_caddy_model_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.jsonl");
    let args = ["--keys", "30"];
    let Some(lines) = wrong_model_is_caught(Live::Caddy, &file, &args) else { return };
    let newest = provisioned(Live::Caddy).and_then(|mut b| b.pop()).unwrap();
    for policy in caddy_policies(&newest.release) {
        let prefix = format!("{policy},");
        let caught = lines.iter().filter(|l| l["topology_kind"].as_str().unwrap().starts_with(&prefix)).count();
        assert!(caught > 0, "{policy}: no mismatch");
        report(&format!("verify_engine_live: caddy@{} --wrong-model: {policy}: {caught} mismatches", newest.release));
    }
    let mut all = vec!["--engine", "caddy", "--mismatches", file.to_str().unwrap()];
    all.extend(args);
    let out = verify(&default_root(), &all);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("removed {}: it held the mismatches of an earlier run", file.display())),
        "{stdout}"
    );
    assert!(!file.exists());
}

/// `verify --engine caddy --report junit=FILE --report json=FILE`: a suite per release and a case per
/// policy, with its requests; the JSON follows `nginx-ketama/verify/v1` (proof kind `engine`). With
/// `--wrong-model` every policy's case of the newest release fails with its count of mismatches, and the
/// run exits 1.
#[test]
fn verify_engine_writes_reports_with_a_case_per_policy() {
    let Some(found) = provisioned(Live::Caddy) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (junit, json) = (dir.path().join("r.xml"), dir.path().join("r.json"));
    let junit_flag = format!("junit={}", junit.display());
    let json_flag = format!("json={}", json.display());
    let m = dir.path().join("m.jsonl");
    let run = |extra: &[&str]| {
        let mut args = vec!["--engine", "caddy", "--keys", "20", "--mismatches", m.to_str().unwrap()];
        args.extend(["--report", &junit_flag, "--report", &json_flag]);
        args.extend(extra);
        verify(&default_root(), &args)
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(schemas::check(&doc), "nginx-ketama/verify/v1");
    assert_eq!((doc["proof"]["kind"].as_str(), doc["proof"]["engine"].as_str()), (Some("engine"), Some("caddy")));
    assert_eq!(doc["verdict"], "proven");
    let suites = doc["suites"].as_array().unwrap();
    assert_eq!(suites.len(), found.len());
    for (suite, build) in suites.iter().zip(&found) {
        assert_eq!(suite["build"].as_str(), Some(build.release.as_str()));
        let names: Vec<&str> = suite["cases"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        for policy in caddy_policies(&build.release) {
            let case =
                suite["cases"].as_array().unwrap().iter().find(|c| c["name"].as_str().unwrap().starts_with(policy));
            let case = case.unwrap_or_else(|| panic!("{policy} not in {names:?}"));
            // Two pools of 20 random keys (and the boundary keys where computable) per policy.
            assert!(case["requests"].as_u64().unwrap() >= 40, "{case}");
            assert_eq!(case["result"]["outcome"], "passed");
        }
    }
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testsuite name=\"caddy 2.6.2\"") || !found.iter().any(|b| b.release == "2.6.2"), "{xml}");
    assert!(xml.contains("classname=\"verify-engine.caddy-"), "{xml}");
    let newest = found.last().unwrap();
    let target = format!("caddy@{}", newest.release);
    let mut args = vec!["--engine", &target, "--keys", "20", "--wrong-model", "--mismatches", m.to_str().unwrap()];
    args.extend(["--report", &junit_flag, "--report", &json_flag]);
    let out = verify(&default_root(), &args);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(schemas::check(&doc), "nginx-ketama/verify/v1");
    let cases = doc["suites"][0]["cases"].as_array().unwrap();
    for policy in caddy_policies(&newest.release) {
        let case = cases.iter().find(|c| c["name"].as_str().unwrap().starts_with(policy)).unwrap();
        assert_eq!(case["result"]["outcome"], "failed", "{case}");
        assert!(case["result"]["mismatches"].as_u64().unwrap() > 0);
    }
    assert!(std::fs::read_to_string(&junit).unwrap().contains("routed differently from the real caddy"));
}

/// Engines that do not run here exit 2 and say so as docs/engines.md does; nothing is started.
#[test]
fn an_engine_not_run_here_exits_2_naming_its_source() {
    let empty = tempfile::tempdir().unwrap();
    for (engine, from) in
        [("envoy", "Envoy 1.36"), ("kong", "Kong 3.9.3"), ("traefik", "Traefik v3.7.9"), ("apisix", "APISIX 3.18.0")]
    {
        let out = verify(empty.path(), &["--engine", engine]);
        let stderr = common::fails(&out);
        assert!(stderr.contains(&format!("{engine}: modelled from {from} source, not proven live")), "{stderr}");
        assert!(out.stdout.is_empty());
    }
}

/// No build of the engine, or none of the release named: exit 3, naming scripts/provision-engines.
#[test]
fn an_engine_not_provisioned_exits_3() {
    let empty = tempfile::tempdir().unwrap();
    let out = verify(empty.path(), &["--engine", "caddy@2.6.2"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no caddy is provisioned under") && stderr.contains("scripts/provision-engines caddy"),
        "{stderr}"
    );
    // A tree holding another release only.
    let build = empty.path().join("haproxy-2.2.9");
    std::fs::create_dir(&build).unwrap();
    std::fs::write(build.join("run"), "#!/bin/sh\nexit 1\n").unwrap();
    let out = verify(empty.path(), &["--engine", "haproxy@3.0"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("haproxy 3.0 is not provisioned") && stderr.contains("(provisioned: 2.2.9)"), "{stderr}");
    assert!(stderr.contains("scripts/provision-engines haproxy:3.0"), "{stderr}");
    // A build that does not start: a harness fault, with what it said, never a pass or a mismatch.
    std::fs::write(build.join("run"), "#!/bin/sh\necho 'no such engine' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(build.join("run"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = verify(empty.path(), &["--engine", "haproxy", "--topologies", "1"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(
        all.contains("haproxy 2.2.9, topology 0") && all.contains("exited (exit status: 1) before listening"),
        "{all}"
    );
    assert!(all.contains("no such engine") && all.contains("harness fault: this run proves nothing"), "{all}");
}

/// What does not apply to an engine is refused before anything runs: nginx's flags, engine options, a
/// release the models lack, --wrong-model alone.
#[test]
fn flags_that_do_not_apply_are_refused() {
    let empty = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            &["--engine", "haproxy", "--config", "nginx.conf"][..],
            "'--engine <ENGINE[@RELEASE]>' cannot be used with '--config <FILE>'",
        ),
        (&["--engine", "caddy", "--backend", "docker"][..], "cannot be used with '--backend <BACKEND>'"),
        (&["--engine", "haproxy", "--versions", "1.26.3"][..], "cannot be used with"),
        (&["--engine", "haproxy:crc32"][..], "haproxy: takes no options here (ENGINE[@RELEASE])"),
        (
            &["--engine", "haproxy@1.8"][..],
            "haproxy: invalid release \"1.8\" (expected 2.2.9, 2.6.12, 3.0.11 or 3.2.26)",
        ),
        (&["--engine", "nginx"][..], "unknown engine \"nginx\""),
        (&["--wrong-model"][..], "--engine <ENGINE[@RELEASE]>"),
    ] {
        let stderr = common::fails(&verify(empty.path(), args));
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // --only beyond the topologies run.
    let build = empty.path().join("caddy-2.6.2");
    std::fs::create_dir(&build).unwrap();
    std::fs::write(build.join("run"), "#!/bin/sh\nexit 1\n").unwrap();
    let stderr = common::fails(&verify(empty.path(), &["--engine", "caddy", "--only", "6"]));
    assert!(stderr.contains("--only 6 is out of range: caddy 2.6.2 runs 6 topologies"), "{stderr}");
}

/// The directories `/tmp/nk-<pid>-*` the process `pid` made (the harness's scratch directories).
fn scratch_of(pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("nk-{pid}-");
    std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// The running processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&child| stat(child).is_some_and(|s| s.running() && s.ppid == pid as i32))
        .collect()
}

/// The running processes below `pid` (children and their children: an engine runs as a process tree the
/// harness owns, under a keeper process as root).
fn descendants_of(pid: u32) -> Vec<i32> {
    let children = children_of(pid);
    let grandchildren: Vec<i32> = children.iter().flat_map(|&c| children_of(c as u32)).collect();
    children.into_iter().chain(grandchildren).collect()
}

/// Whether process `pid` runs Caddy (its command line names the binary: the provisioned wrapper runs it
/// through the tree's own loader).
fn is_caddy(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a.ends_with(b"/usr/bin/caddy")))
}

/// Interrupted while an engine runs (Caddy itself, not only its wrapper): exit 130, the engine's process tree
/// killed by the signal handling before the scratch directories are removed (Caddy writes its state under
/// its `$HOME` in one: a Caddy still running then recreated it, which this test once caught), its scratch
/// directory removed.
#[test]
fn an_interrupted_run_leaves_no_engine_and_no_directory() {
    let Some(first) = provisioned(Live::Caddy).and_then(|b| b.into_iter().next()) else { return };
    let target = format!("caddy@{}", first.release);
    let mut cmd = Command::new(CLI);
    cmd.args(["verify", "--engine", &target, "--topologies", "1000", "--keys", "5"]);
    cmd.env("NGINX_KETAMA_ENGINES_DIR", default_root()).stdout(std::process::Stdio::piped());
    cmd.stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut engines = Vec::new();
    let started = processes::within(std::time::Duration::from_secs(60), || {
        engines = descendants_of(pid);
        // Caddy has run far enough to write its state under its `$HOME` (a scratch directory's).
        engines.iter().any(|&p| is_caddy(p)) && scratch_of(pid).iter().any(|d| d.join("home").exists())
    });
    // SAFETY: the process this test started.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = processes::wait_bounded(child, std::time::Duration::from_secs(60));
    assert!(started, "no engine started within 60 s: {}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("stopped by SIGINT"), "{}", text(&out.stderr));
    let gone = |p: &i32| stat(*p).is_none_or(|s| !s.running());
    assert!(
        processes::within(std::time::Duration::from_secs(10), || engines.iter().all(gone)),
        "left running: {engines:?}"
    );
    assert_eq!(scratch_of(pid), Vec::<std::path::PathBuf>::new());
}
