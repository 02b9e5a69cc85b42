//! Live proof of the failure model (issue 20 point 4): servers that answer a status code (500, 502, 503,
//! 504, 403, 404, 429), stall past `proxy_read_timeout`, send an invalid header or refuse, under random
//! `proxy_next_upstream` policies and tries limits, with GET and POST requests. For every request nginx's
//! attempts (`$upstream_addr`), their `$upstream_status` and the client's status are compared with
//! `Worker::request_with`; peer state carries across the requests of a topology.
//!
//! And the mutation check: the same answers judged by a model with one of nginx's rules changed must
//! differ.
//!
//! Without provisioned nginx this prints a loud `SKIP:` line and passes, unless `NGINX_PARITY=require`.

use anyhow::Result;
use nginx_ketama::Method;
use nginx_ketama::failure::{Condition, NextUpstream, RetryPolicy};
use nginx_ketama_harness::catalog;
use nginx_ketama_harness::nginx::build::Build;
use nginx_ketama_harness::nginx::docker;
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::proofs::shim::ShimModel;
use nginx_ketama_harness::proofs::sweep::{SweepOptions, VersionReport, sweep_backend};
use nginx_ketama_harness::run::client::Method as HttpMethod;
use nginx_ketama_harness::run::parity::{self, FailureModel, KeyKind, Mutation, Plan, PlannedRequest, compare};
use nginx_ketama_harness::site::failures::{Answer, Failures, STATUSES};
use nginx_ketama_harness::site::topology::{ServerLine, Topology, TopologyOptions};
use nginx_ketama_harness::testkit::{assert_sweep_clean, report, skip};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[path = "support/common.rs"]
mod common;

use common::CLI;

fn installs() -> Option<Vec<Installation>> {
    nginx_ketama_harness::testkit::provisioned_or_skip()
}

/// A small sweep whose odd topologies have failure kinds; the seed is one whose failure topologies meet
/// every kind on every build.
fn options() -> SweepOptions {
    SweepOptions {
        seed: 87,
        topologies: 10,
        keys: 250,
        stream_sessions: 0,
        resolver_exe: Some(PathBuf::from(CLI)),
        topology: TopologyOptions { max_servers: 16, ..TopologyOptions::default() },
        ..SweepOptions::default()
    }
}

fn check(reports: &[VersionReport], title: &str) {
    report(&format!("{title}\n{}", VersionReport::table(reports)));
    assert_sweep_clean(reports);
    for r in reports {
        assert_eq!(r.failure_topologies, 5, "nginx {}", r.version);
        assert!(r.failure_requests.1 > 0, "POSTs sent on nginx {}", r.version);
        let mut kinds: Vec<String> = STATUSES.iter().map(|s| format!("http_{s}")).collect();
        kinds.extend(["refused", "timeout", "invalid_header", "stale_keepalive"].map(String::from));
        for kind in kinds {
            assert!(r.failure_kinds.get(&kind).is_some_and(|&n| n > 0), "nginx {}: no request met {kind}", r.version);
        }
    }
}

/// Every provisioned build, as a local process: every failure kind, 0 mismatches.
#[test]
fn failure_kinds_match_nginx_on_every_local_build() {
    let Some(installs) = installs() else { return };
    let options = options();
    let reports: Vec<VersionReport> =
        installs.iter().map(|i| sweep_backend(&Build::Local(i.clone()), &options, &mut |_| {})).collect();
    check(&reports, "failure kinds, local nginx");
}

/// The same sweep in containers, on every locally built image (glibc and musl).
#[test]
fn failure_kinds_match_nginx_in_containers() {
    if !docker::available() {
        skip("no Docker engine answers");
        return;
    }
    let Some(installs) = installs() else { return };
    let mut reports = Vec::new();
    for install in &installs {
        match docker::image_for(install.version, install.libc) {
            Ok(image) => reports.push(sweep_backend(&Build::Docker(image), &options(), &mut |_| {})),
            Err(e) => skip(&e.to_string()),
        }
    }
    check(&reports, "failure kinds, containers");
}

/// Eight `127.0.70.x` lines with failure accounting (`max_fails=1 fail_timeout=3600s`) except the three
/// that answer `200 OK`, which never leave.
fn scenario() -> (Topology, Failures) {
    let answers = [
        Some(Answer::Status(503)),
        Some(Answer::Status(404)),
        None,
        Some(Answer::Status(502)),
        None,
        Some(Answer::InvalidHeader),
        None,
        Some(Answer::Stall),
    ];
    let mut lines: Vec<ServerLine> = Vec::new();
    let mut by_server = BTreeMap::new();
    for (i, answer) in answers.iter().enumerate() {
        let mut l = catalog::line(&format!("127.0.70.{}:{}", i + 1, 21000 + i));
        if answer.is_some() {
            l.max_fails = 1;
            l.fail_timeout = 3600;
        }
        if let Some(a) = answer {
            by_server.insert(l.server.clone(), *a);
        }
        lines.push(l);
    }
    let mut dead = catalog::line("127.0.70.9:21008");
    dead.dead = true;
    dead.max_fails = 1;
    dead.fail_timeout = 3600;
    lines.push(dead);
    let policy = RetryPolicy {
        next_upstream: [
            Condition::Error,
            Condition::Timeout,
            Condition::Http502,
            Condition::Http503,
            Condition::Http404,
        ]
        .into_iter()
        .collect::<NextUpstream>(),
        tries: 2,
        timeout_ms: 0,
    };
    let topology = Topology { seed: 70, method: Method::Consistent, lines, hosts: vec![] };
    (topology, Failures { answers: by_server, policy, post_percent: 40 })
}

/// The mutation check: on one scenario per build, the library matches nginx request by request, and a
/// model with one rule changed does not — a listed 5xx passed on as the last attempt counted as a failure,
/// a retried 404 counted as a failure, or a sent POST retried without `non_idempotent`.
#[test]
fn changed_failure_rules_fail_the_live_comparison() -> Result<()> {
    let Some(installs) = installs() else { return Ok(()) };
    for install in installs {
        let backend = Build::Local(install);
        let (topology, failures) = scenario();
        let session = parity::start_failing(&backend, topology.clone(), Some(&failures))?;
        let upstream = topology.upstream(backend.version(), backend.libc())?;
        let keys =
            parity::plan(&upstream, 3, &parity::PlanOptions { random_keys: 300, empty_keys: 0, prove_ring: false });
        // The keys once with 40% POSTs, then all again as GET: later requests see what earlier ones did to
        // each peer's failure count.
        let first = parity::with_posts(keys.clone(), 3, failures.post_percent);
        let requests: Vec<PlannedRequest> = first.requests.into_iter().chain(keys.requests).collect();
        let plan = Plan { requests, arcs: 0 };
        let responses = session.send_plan(&plan, &mut |_| {})?;
        let right = compare(&plan, &responses, &mut FailureModel::new(&upstream, &topology, &failures), Duration::ZERO);
        for m in right.mismatches.iter().take(5) {
            eprintln!("request {} {:?}: expected {:?}, nginx {:?}", m.index, m.kind, m.expected, m.actual);
        }
        assert!(right.mismatches.is_empty(), "nginx {}: {} mismatches", backend.version(), right.mismatches.len());
        assert!(right.failovers > 0);
        let mut line = format!(
            "failure mutation check on nginx {} ({}): {} requests ({} POST), library 0 mismatches",
            backend.version(),
            backend.libc(),
            right.requests,
            plan.requests.iter().filter(|r| r.method == HttpMethod::Post).count()
        );
        for mutation in [Mutation::LastStatusFails, Mutation::NotFoundFails, Mutation::PostRetried] {
            let mut model = FailureModel::new(&upstream, &topology, &failures).mutated(mutation);
            let wrong = compare(&plan, &responses, &mut model, Duration::ZERO);
            line.push_str(&format!(", {mutation:?} {}", wrong.mismatches.len()));
            assert!(!wrong.mismatches.is_empty(), "nginx {}: {mutation:?} went unnoticed", backend.version());
            assert!(wrong.mismatches.iter().all(|m| m.kind == KeyKind::Random));
        }
        report(&line);
    }
    Ok(())
}

/// The same scenario through the shim protocol (version 2) on the newest build: the reference shim matches
/// nginx request by request, statuses included; the reference shim with `non_idempotent` ignored
/// (`--mutation post-retried`: a sent POST retried like a GET) does not.
#[test]
fn a_shim_with_a_changed_failure_rule_fails_the_live_comparison() -> Result<()> {
    let Some(installs) = installs() else { return Ok(()) };
    let Some(install) = installs.into_iter().filter(|i| i.libc == nginx_ketama::Libc::Glibc).max_by_key(|i| i.version)
    else {
        return Ok(());
    };
    let backend = Build::Local(install);
    let (topology, failures) = scenario();
    let session = parity::start_failing(&backend, topology.clone(), Some(&failures))?;
    let upstream = topology.upstream(backend.version(), backend.libc())?;
    let keys = parity::plan(&upstream, 3, &parity::PlanOptions { random_keys: 200, empty_keys: 0, prove_ring: false });
    let plan = parity::with_posts(keys, 3, failures.post_percent);
    let responses = session.send_plan(&plan, &mut |_| {})?;
    let through = |shim: &str| -> Result<usize> {
        let mut model = ShimModel::failing(shim, &topology, &failures, backend.version())?;
        let run = compare(&plan, &responses, &mut model, Duration::ZERO);
        model.finish()?;
        Ok(run.mismatches.len())
    };
    let right = through(&format!("{CLI} shim"))?;
    assert_eq!(right, 0, "nginx {}: the reference shim differs", backend.version());
    let posts = through(&format!("{CLI} shim --mutation post-retried"))?;
    assert!(posts > 0, "nginx {}: a shim that retries sent POSTs went unnoticed", backend.version());
    report(&format!(
        "shim protocol 2 on nginx {}: {} requests, reference shim 0 mismatches, post-retried shim {posts}",
        backend.version(),
        plan.requests.len()
    ));
    Ok(())
}

/// The scenario's failures as `--fail SERVER=KIND` arguments (dead servers refuse).
fn fail_args(topology: &Topology, failures: &Failures) -> Vec<String> {
    let mut args: Vec<String> = failures
        .answers
        .iter()
        .map(|(server, answer)| match answer {
            Answer::Status(s) => format!("{server}={s}"),
            Answer::Stall => format!("{server}=timeout"),
            Answer::InvalidHeader => format!("{server}=invalid-header"),
            // `--fail S=stale` makes every attempt stale; the scenario's servers never alternate so.
            Answer::StaleKeepalive => unreachable!("the scenario has no stale-keepalive server"),
        })
        .collect();
    args.extend(topology.lines.iter().filter(|l| l.dead).map(|l| format!("{}=refused", l.server)));
    args
}

/// `route` (and `explain`) `--fail … --method … --location …` against nginx: the scenario's nginx.conf, as the harness rendered
/// it, is `route`'s `--config`; the location is its front `proxy_pass` (so the retry rules come from the
/// config reader); every key's attempts, `$upstream_status` and client status must be nginx's, for GET and
/// for POST (each on a fresh nginx, as `route` starts a fresh worker).
#[test]
fn route_with_failure_kinds_agrees_with_nginx() -> Result<()> {
    let Some(installs) = installs() else { return Ok(()) };
    let backend = Build::Local(installs.last().expect("non-empty").clone());
    let (topology, failures) = scenario();
    let fail_args = fail_args(&topology, &failures);
    let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("route-{i}").into_bytes()).collect();
    for method in [HttpMethod::Get, HttpMethod::Post] {
        let session = parity::start_failing(&backend, topology.clone(), Some(&failures))?;
        let conf = session.prefix().expect("a local nginx has a prefix").join("nginx.conf");
        let text = std::fs::read_to_string(&conf)?;
        let line =
            1 + text.lines().position(|l| l.contains("proxy_pass http://parity;")).expect("the front's proxy_pass");
        let plan = Plan {
            requests: keys.iter().map(|k| PlannedRequest { key: k.clone(), kind: KeyKind::Random, method }).collect(),
            arcs: 0,
        };
        let responses = session.send_plan(&plan, &mut |_| {})?;
        let mut cmd = std::process::Command::new(CLI);
        cmd.args(["route", "--config"]).arg(&conf).args(["--upstream", "parity", "--no-resolve"]);
        cmd.args(["--nginx-version", &backend.version().to_string(), "--location", &line.to_string()]);
        cmd.args(["--method", if method == HttpMethod::Post { "POST" } else { "GET" }]);
        for f in &fail_args {
            cmd.args(["--fail", f]);
        }
        let input: Vec<u8> = keys.iter().flat_map(|k| [k.as_slice(), b"\n"].concat()).collect();
        let out = nginx_ketama_harness::testkit::run_with_stdin(cmd, &input)?;
        assert!(out.status.success(), "route failed: {}", String::from_utf8_lossy(&out.stderr));
        let routed: Vec<serde_json::Value> =
            String::from_utf8(out.stdout)?.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
        assert_eq!(routed.len(), responses.len());
        let mut retried = 0;
        for ((key, resp), r) in keys.iter().zip(&responses).zip(&routed) {
            let attempts: Vec<&str> = r["attempts"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
            let statuses: Vec<String> =
                r["upstream_status"].as_array().unwrap().iter().map(|s| s.to_string()).collect();
            let mut addr = attempts.join(", ");
            if statuses.len() > attempts.len() {
                addr = if addr.is_empty() { "parity".into() } else { format!("{addr}, parity") };
            }
            let what = format!("{method:?} key {}", String::from_utf8_lossy(key));
            assert_eq!(Some(addr.as_str()), resp.upstream_addr.as_deref(), "{what}");
            assert_eq!(Some(statuses.join(", ")), resp.upstream_status, "{what}");
            assert_eq!(r["status"].as_u64(), Some(u64::from(resp.status)), "{what}");
            retried += usize::from(attempts.len() > 1);
        }
        // `explain` with the same flags: the same attempts and statuses, key by key.
        let mut cmd = std::process::Command::new(CLI);
        cmd.args(["explain", "--format", "json", "--config"]).arg(&conf).args(["--upstream", "parity", "--no-resolve"]);
        cmd.args(["--nginx-version", &backend.version().to_string(), "--location", &line.to_string()]);
        cmd.args(["--method", if method == HttpMethod::Post { "POST" } else { "GET" }]);
        for f in &fail_args {
            cmd.args(["--fail", f]);
        }
        cmd.args(keys.iter().map(|k| String::from_utf8_lossy(k).into_owned()));
        let out = cmd.output()?;
        assert!(out.status.success(), "explain failed: {}", String::from_utf8_lossy(&out.stderr));
        let explained: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let explained = explained["keys"].as_array().expect("keys");
        assert_eq!(explained.len(), routed.len());
        for (e, r) in explained.iter().zip(&routed) {
            assert_eq!(e["attempts"], r["attempts"], "{e}");
            assert_eq!(e["upstream_status"], r["upstream_status"], "{e}");
            assert_eq!(e["client_status"], r["status"], "{e}");
        }
        assert!(retried > 0, "{method:?}: some keys are retried");
        report(&format!(
            "route --fail/--method/--location on nginx {}: {} {method:?} keys as nginx routed them ({retried} retried)",
            backend.version(),
            keys.len()
        ));
    }
    Ok(())
}

/// `route --requests … --fail …` against nginx: the same scenario, its requests written as `--requests`
/// lines (GET and POST mixed, the `X-Key` header the front hashes), sent once to one fresh nginx. No
/// `--location` or `--method`: each request's location (the front's) gives the retry rules, as the config
/// reader read them, and each line its method; peer state carries across the run as in nginx's worker.
#[test]
fn route_requests_with_failure_kinds_agrees_with_nginx() -> Result<()> {
    let Some(installs) = installs() else { return Ok(()) };
    let backend = Build::Local(installs.last().expect("non-empty").clone());
    let (topology, failures) = scenario();
    let fail_args = fail_args(&topology, &failures);
    let plan = Plan {
        requests: (0..200)
            .map(|i| PlannedRequest {
                key: format!("req-{i}").into_bytes(),
                kind: KeyKind::Random,
                method: HttpMethod::Get,
            })
            .collect(),
        arcs: 0,
    };
    let plan = parity::with_posts(plan, 5, 40);
    let session = parity::start_failing(&backend, topology.clone(), Some(&failures))?;
    let conf = session.prefix().expect("a local nginx has a prefix").join("nginx.conf");
    let text = std::fs::read_to_string(&conf)?;
    // The address the front listens on: the `listen` of the server block holding its proxy_pass.
    let lines: Vec<&str> = text.lines().collect();
    let pass = lines.iter().position(|l| l.contains("proxy_pass http://parity;")).expect("the front's proxy_pass");
    let listen = lines[..pass]
        .iter()
        .rev()
        .find_map(|l| l.trim().strip_prefix("listen ")?.strip_suffix(';'))
        .expect("the front's listen");
    let responses = session.send_plan(&plan, &mut |_| {})?;
    let mut jsonl = String::new();
    for r in &plan.requests {
        let key = String::from_utf8(r.key.clone())?;
        let (method, extra) = match r.method {
            HttpMethod::Post => ("POST", r#", ["Content-Length", "0"]"#),
            HttpMethod::Get => ("GET", ""),
        };
        jsonl.push_str(&format!(
            r#"{{"method": "{method}", "target": "/", "server": "{listen}", "headers": [["Host", "parity"]{extra}, ["X-Key", "{key}"]]}}"#
        ));
        jsonl.push('\n');
    }
    let dir = tempfile::tempdir()?;
    let requests = dir.path().join("requests.jsonl");
    std::fs::write(&requests, jsonl)?;
    let mut cmd = std::process::Command::new(CLI);
    cmd.args(["route", "--no-resolve", "--config"]).arg(&conf).arg("--requests").arg(&requests);
    cmd.args(["--nginx-version", &backend.version().to_string()]);
    for f in &fail_args {
        cmd.args(["--fail", f]);
    }
    let out = cmd.output()?;
    assert!(out.status.success(), "route failed: {}", String::from_utf8_lossy(&out.stderr));
    let routed: Vec<serde_json::Value> =
        String::from_utf8(out.stdout)?.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    assert_eq!(routed.len(), responses.len());
    let (mut retried, mut posts_stopped) = (0, 0);
    for ((request, resp), r) in plan.requests.iter().zip(&responses).zip(&routed) {
        let what = format!("{:?} key {}: {r}", request.method, String::from_utf8_lossy(&request.key));
        assert_eq!(r["goes"], "hash", "{what}");
        let attempts: Vec<&str> = r["attempts"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let statuses: Vec<String> = r["upstream_status"].as_array().unwrap().iter().map(|s| s.to_string()).collect();
        let mut addr = attempts.join(", ");
        if statuses.len() > attempts.len() {
            addr = if addr.is_empty() { "parity".into() } else { format!("{addr}, parity") };
        }
        assert_eq!(Some(addr.as_str()), resp.upstream_addr.as_deref(), "{what}");
        assert_eq!(Some(statuses.join(", ")), resp.upstream_status, "{what}");
        assert_eq!(r["status"].as_u64(), Some(u64::from(resp.status)), "{what}");
        retried += usize::from(attempts.len() > 1);
        posts_stopped +=
            usize::from(request.method == HttpMethod::Post && attempts.len() == 1 && r["status"].as_u64() != Some(200));
    }
    assert!(retried > 0 && posts_stopped > 0, "retried {retried}, POSTs not retried {posts_stopped}");
    report(&format!(
        "route --requests --fail on nginx {}: {} requests (GET and POST) as nginx routed them under their \
         location's rules ({retried} retried, {posts_stopped} POSTs not retried)",
        backend.version(),
        plan.requests.len()
    ));
    Ok(())
}

/// `share --fail` (issue 20 point 3): the steady-state map `PickMap::with_replies` draws — a server whose
/// answer to a first attempt frees it as FAILED (a listed 502/503 with tries left, an invalid header, a stall,
/// a refusal) passed over, one whose listed 404 is retried as NEXT keeping its first picks — is where nginx
/// sends each request first once every failing server has failed. The same answers judged with the map
/// that `--failed` on every named server draws, or with no server failing, are wrong.
#[test]
fn share_with_failure_kinds_is_where_nginx_sends_requests_first() -> Result<()> {
    use nginx_ketama::analysis::{Pick, PickMap};
    use nginx_ketama::failure::ClientRequest;
    let Some(installs) = installs() else { return Ok(()) };
    let backend = Build::Local(installs.last().expect("non-empty").clone());
    let (topology, failures) = scenario();
    let up = topology.upstream(backend.version(), backend.libc())?;
    let one = std::num::NonZeroUsize::MIN;
    let steady = PickMap::with_replies(
        &up,
        |p| failures.reply(&topology, p, &mut Default::default()),
        &failures.policy,
        &ClientRequest::default(),
        one,
    );
    let named = |p: &nginx_ketama::Peer| failures.kind(&topology, p.name()).is_some();
    let all_named_failed = PickMap::with_failing(&up, named, one);
    let none_failed = PickMap::new(&up);
    let session = parity::start_failing(&backend, topology.clone(), Some(&failures))?;
    let keys = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}-{i}").into_bytes()).collect::<Vec<_>>();
    // Warm-up: every failing server is a first pick of some of these keys, and fails (max_fails=1).
    session.send(&keys("warm", 400), &mut |_| {})?;
    let probe = keys("probe", 600);
    let responses = session.send(&probe, &mut |_| {})?;
    drop(session);
    let first = |map: &PickMap, key: &[u8]| match map.pick_key(key) {
        Pick::Server(i) => map.servers()[i].to_string(),
        Pick::RoundRobin => "round-robin".to_string(),
    };
    let wrong = |map: &PickMap| {
        probe
            .iter()
            .zip(&responses)
            .filter(|(k, r)| {
                let nginx = r.upstream_addr.as_deref().unwrap_or_default().split(", ").next().unwrap_or_default();
                first(map, k) != nginx
            })
            .count()
    };
    assert_eq!(wrong(&steady), 0, "share --fail's steady state is where nginx sends each request first");
    let (as_failed, as_none) = (wrong(&all_named_failed), wrong(&none_failed));
    assert!(as_failed > 0 && as_none > 0, "--failed on every named server: {as_failed}; none failing: {as_none}");
    let next_server = topology.lines[1].server.clone();
    assert!(
        probe.iter().any(|k| first(&steady, k) == next_server),
        "the server whose 404 is retried as NEXT keeps first picks"
    );
    report(&format!(
        "share --fail on nginx {}: {} requests after warm-up went first where the steady-state map says; the \
         --failed map gets {as_failed} wrong, the no-failure map {as_none}",
        backend.version(),
        probe.len()
    ));
    Ok(())
}
