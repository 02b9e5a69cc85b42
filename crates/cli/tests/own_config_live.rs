//! `verify --config` on the example config (`tests/data/own-config/`): every hash upstream proven on every
//! provisioned nginx with its own addresses, inside a private network namespace and nowhere else; and the
//! fallback without namespaces. Skips (loudly) without provisioned nginx or root, unless
//! `NGINX_PARITY=require`.

use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::nginx::netns::{self, parse_ip_addresses};
use nginx_ketama_harness::proofs::own_config::{self, ProveOptions, Prover};
use nginx_ketama_harness::testkit::{report, skip};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

#[path = "support/common.rs"]
mod common;

use common::{CLI, conf};
use nginx_ketama_harness::testkit::TempFile;

fn example() -> PathBuf {
    nginx_ketama_harness::repo_root().join("tests/data/own-config/nginx.conf")
}

fn installs() -> Option<Vec<Installation>> {
    nginx_ketama_harness::testkit::provisioned_or_skip()
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
        .filter(|w| w.len() == 12 && w[0].starts_with("1."))
        .collect();
    assert_eq!(rows.len(), 4 * installs.len(), "{stdout}");
    for w in &rows {
        assert_eq!((w[10], w[11]), ("0", "0"), "not comparable, mismatches: {w:?}");
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
    // The second failure run has failure kinds, under the rules of `location /` for app and nginx's
    // defaults for the others (no status listed: nothing but errors is retried there).
    let kinds: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  ") && l.contains(" run, ")).collect();
    let builds = installs.iter().map(|i| i.label()).collect::<Vec<_>>().join(", ");
    for l in &kinds {
        // The runs are seeded: every build met the same.
        assert!(l.ends_with(&format!(" [nginx {builds}]")), "{l}");
    }
    assert_eq!(kinds.len(), 4, "a failure-kinds line per upstream: {stdout}");
    for l in &kinds {
        if l.starts_with("  app: ") {
            assert!(
                l.contains("under proxy_next_upstream error timeout http_502 http_503; proxy_next_upstream_tries 3 (")
                    && l.contains("nginx.conf:53)"),
                "{l}"
            );
        } else {
            assert!(l.contains("under proxy_next_upstream error timeout; proxy_next_upstream_tries 0 ("), "{l}");
        }
    }
    let met = |kind: &str| kinds.iter().filter(|l| l.contains(kind)).count();
    assert!(met("refused") > 0 && met("http_") > 0, "failure kinds met: {stdout}");
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
    let options = ProveOptions {
        seed: 1,
        keys: 100,
        prove_ring: true,
        failure_runs: 1,
        failure_pause: None,
        failure_kinds: true,
        model_key: None,
    };
    let r = prover.prove(newest, &choice.prove[0], &options, "replay", &mut |_| {});
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

/// `nginx.conf` in a fresh directory: `text` inside `http { }`, from line 3 on.
fn config_file(text: &str) -> TempFile {
    conf("nginx.conf", &format!("\nhttp {{\n{text}}}\n"))
}

/// `verify --config FILE` on the newest build with few keys; returns (exit code, stdout, stderr).
fn verify(file: &std::path::Path, newest: &Installation, extra: &[&str]) -> (Option<i32>, String, String) {
    let mismatches = tempfile::tempdir().unwrap();
    let out = Command::new(CLI)
        .args(["verify", "--config"])
        .arg(file)
        .args(["--versions", &newest.version.to_string(), "--libc", newest.libc.as_str(), "--mismatches"])
        .arg(mismatches.path().join("m.jsonl"))
        .args(extra)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!mismatches.path().join("m.jsonl").exists(), "nothing is ever called a mismatch here: {stdout}");
    (out.status.code(), stdout.into_owned(), stderr.into_owned())
}

/// Issue 18, item 11: a config with nothing this proof can run is a usage outcome (exit 2), as for random
/// topologies: only round-robin upstreams, a hash upstream whose only server is resolved at run time,
/// `hash` overridden by `least_conn`.
#[test]
fn nothing_to_prove_is_a_usage_outcome() {
    let Some(installs) = installs() else { return };
    let newest = installs.last().expect("a build");
    for (text, skipped) in [
        ("upstream rr { server 10.0.0.1; server 10.0.0.2; }\n", "round-robin, not hash"),
        (
            "resolver 127.0.0.1;\nupstream dyn { hash $uri; zone z 64k; server app.internal resolve; }\n",
            "resolved at run time",
        ),
        ("upstream lc { hash $uri; least_conn; server 10.0.0.1; server 10.0.0.2; }\n", "balancer least_conn"),
    ] {
        let file = config_file(text);
        let (code, stdout, stderr) = verify(&file, newest, &[]);
        assert_eq!(code, Some(2), "{text}{stdout}{stderr}");
        assert!(stdout.contains(skipped) && stderr.contains("nothing to prove"), "{text}{stdout}{stderr}");
    }
}

/// Issue 18, items 4, 5, 6 and 12 through the command: lines that cannot be hosted are refused before
/// anything runs (exit 2, each naming its `file:line`); 254 servers on 127.0.0.1–.254, quoted unix paths
/// with blanks and nginx's special characters, a relative path, an IPv4-mapped address and class E are
/// hosted and proven; a large config's network line is summarised.
#[test]
fn odd_but_valid_configs_are_refused_with_a_reason_or_proven() {
    let Some(installs) = installs() else { return };
    if !netns::available() {
        skip("not root: no private namespaces");
        return;
    }
    let newest = installs.last().expect("a build");
    let refused = "upstream a { hash $uri consistent;\n server 255.255.255.255:80;\n server 10.0.0.1:80; }\n\
                   upstream b { hash $uri consistent;\n server 224.0.0.1:80;\n server 10.0.0.1:80; }\n\
                   upstream c { hash $uri consistent;\n server [fe80::1]:80;\n server unix:/etc/x.sock; }\n";
    let file = config_file(refused);
    let (code, stdout, stderr) = verify(&file, newest, &["--keys", "20", "--failure-runs", "1"]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    let name = file.display();
    for (upstream, line, why) in [
        ("a", 4, "255.255.255.255:80\" in {name}:4 cannot be hosted: the broadcast address"),
        ("b", 7, "224.0.0.1:80\" in {name}:7 cannot be hosted: a multicast address"),
        ("c", 10, "[fe80::1]:80\" in {name}:10 cannot be hosted: a link-local address"),
    ] {
        let want = format!("not run: {upstream}: server \"{}", why.replace("{name}", &name.to_string()));
        assert!(stdout.contains(&want), "line {line}: {want}\n{stdout}");
    }
    assert!(stderr.contains("nothing to prove: no upstream") && !stdout.contains("mismatches:"), "{stdout}{stderr}");

    let lo254: String = (1..=254).map(|i| format!(" server 127.0.0.{i}:18080;\n")).collect();
    let odd = format!(
        "upstream lo254 {{ hash $uri;\n{lo254}}}\n\
         upstream quoted {{ hash $uri consistent;\n\
          server \"unix:/tmp/nk sock dir/a b.sock\";\n\
          server 'unix:/tmp/nk sock dir/q\"uote;{{brace}}#$x.sock';\n\
          server unix:nk-rel/c.sock;\n\
          server [::ffff:10.5.0.1]:8080;\n\
          server 240.0.0.7:8080;\n\
          server 10.5.0.1:8081; }}\n"
    );
    let file = config_file(&odd);
    let (code, stdout, stderr) = verify(&file, newest, &["--keys", "60", "--failure-runs", "2"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("added to its lo (10.5.0.1, 240.0.0.7)"), "{stdout}");
    assert!(stdout.contains("unix sockets nk-rel/c.sock: relative paths"), "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with(&newest.label())).collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    for r in rows {
        assert!(r.trim_end().ends_with(" 0"), "{r}");
    }
    report(&format!("odd but valid configs, refused with a reason or proven:\n{stdout}"));
}

/// Issue 18, item 13: the network line of a large config is a summary, not 500 addresses.
#[test]
fn a_large_config_is_summarised() {
    let Some(installs) = installs() else { return };
    if !netns::available() {
        skip("not root: no private namespaces");
        return;
    }
    let newest = installs.last().expect("a build");
    let servers: String = (0..500).map(|i| format!(" server 10.{}.{}.1:8080;\n", i / 250, i % 250)).collect();
    let file = config_file(&format!("upstream big {{ hash $uri;\n{servers}}}\n"));
    let (code, stdout, stderr) = verify(&file, newest, &["--keys", "20", "--failure-runs", "0"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let network = stdout.lines().find(|l| l.contains("network:")).unwrap_or_default();
    assert!(
        network.contains("500 addresses added to its lo (10.0.0.1, 10.0.1.1, 10.0.2.1, 10.0.3.1, 10.0.4.1 … (+495))"),
        "{network}"
    );
    assert!(network.len() < 400, "{network}");
    assert!(stdout.contains("plan: 20 requests in all"), "{stdout}");
}

/// `n` lines `127.0.3.i:2000i` (every third one dead) with `max_fails=1 fail_timeout=…`.
fn short_window_topology(n: usize, fail_timeout: u64) -> nginx_ketama_harness::site::topology::Topology {
    use nginx_ketama_harness::site::topology::{Endpoint, Listen, ServerLine, Spelling, Topology};
    let lines = (1..=n)
        .map(|i| {
            let a: std::net::SocketAddr = format!("127.0.3.{i}:{}", 20000 + i).parse().unwrap();
            ServerLine {
                server: a.to_string(),
                spelling: Spelling::IpPort,
                weight: 1,
                down: false,
                dead: i % 3 == 0,
                backup: false,
                max_fails: 1,
                fail_timeout,
                endpoints: vec![Endpoint { listen: Listen::Tcp(a), name: a.to_string() }],
            }
        })
        .collect();
    Topology { seed: 3, method: nginx_ketama::Method::Consistent, lines, hosts: Vec::new() }
}

/// Issue 21 point 4: `verify --config` keeps each key expression as written — client addresses (from
/// across 127.0.0.0/8, so `$binary_remote_addr` and `$remote_port` vary), Host and URI, arguments and
/// cookies, a header, maps with regular expressions, captures and `hostnames` — on every build, 0
/// mismatches; a key `set` in a location is refused with the reason. A model evaluating a different
/// expression than nginx hashes is caught.
#[test]
fn key_expressions_are_proven_as_written() {
    let Some(installs) = installs() else { return };
    if !netns::available() {
        skip("not root: no private namespaces");
        return;
    }
    let conf = conf(
        "nginx.conf",
        r#"http {
    map $http_x_tenant $tenant {
        default $arg_user;
        ~^(?<region>[a-z]+)-eu$ eu-$region;
        alpha a;
    }
    map $host $site {
        hostnames;
        default other;
        *.example shop;
        127.0.0.1 loopback;
    }
    upstream by_client { hash $binary_remote_addr consistent; server 10.7.0.1:80; server 10.7.0.2:80; server 10.7.0.3:80 weight=2; }
    upstream by_port { hash $remote_addr:$remote_port; server 10.7.1.1:80; server 10.7.1.2:80; server 10.7.1.3:80; }
    upstream by_page { hash $host$request_uri consistent; server 10.7.2.1:80; server 10.7.2.2:80; }
    upstream by_tenant { hash "${site}/$tenant|$cookie_sid|$http_x_tenant|$args" consistent; server 10.7.3.1:80; server 10.7.3.2:80; server 10.7.3.3:80; }
    upstream by_set { hash $bucket consistent; server 10.7.4.1:80; server 10.7.4.2:80; }
    server {
        listen 80;
        location /c/ { proxy_pass http://by_client; }
        location /p/ { proxy_pass http://by_port; }
        location /g/ { proxy_pass http://by_page; }
        location /t/ { proxy_pass http://by_tenant; }
        location /s/ { set $bucket $uri; proxy_pass http://by_set; }
    }
}
"#,
    );
    let newest = installs.last().expect("a build");
    let mut out = Vec::new();
    for install in &installs {
        let (code, stdout, stderr) = verify(&conf, install, &["--keys", "1000", "--failure-runs", "0"]);
        assert_eq!(code, Some(0), "{stdout}{stderr}");
        let line = |name: &str| {
            stdout.lines().find(|l| l.starts_with(&format!("  {name}: "))).unwrap_or_else(|| panic!("{name}: {stdout}"))
        };
        for (name, vars) in [
            ("by_client", "$binary_remote_addr"),
            ("by_port", "$remote_addr, $remote_port"),
            ("by_page", "$host, $request_uri"),
            ("by_tenant", "$arg_user, $args, $cookie_sid, $host, $http_x_tenant, $region, $site, $tenant"),
        ] {
            let l = line(name);
            assert!(l.contains("100 generated requests") && l.contains(", 0 mismatches; variables: "), "{l}");
            assert!(l.contains(&format!("variables: {vars} [")), "{l}");
        }
        assert!(line("by_set").contains("not proven: the key reads $bucket, which `set`"), "{stdout}");
        out.push(stdout);
    }
    // The same requests judged by a model that evaluates another expression: caught.
    let config = own_config::load(&conf, newest.version, newest.libc).unwrap();
    let choice = own_config::choose(&config, &["by_page".to_string()], 2026).unwrap();
    let ups: Vec<&own_config::ConfigUpstream> = choice.prove.iter().collect();
    let prover = Prover::new(&ups, &[newest], CLI.as_ref()).unwrap();
    let mut options = ProveOptions {
        seed: 2026,
        keys: 1000,
        prove_ring: false,
        failure_runs: 0,
        failure_pause: None,
        failure_kinds: false,
        model_key: None,
    };
    let right = prover.prove(newest, &choice.prove[0], &options, "replay", &mut |_| {});
    assert!(right.fault.is_none() && right.findings.is_empty(), "{:?} {:?}", right.fault, right.findings.first());
    options.model_key = Some("$http_host$request_uri".into());
    let wrong = prover.prove(newest, &choice.prove[0], &options, "replay", &mut |_| {});
    assert!(wrong.fault.is_none(), "{:?}", wrong.fault);
    assert!(!wrong.findings.is_empty(), "$http_host in place of $host must be caught");
    report(&format!(
        "verify --config key expressions as written, on every build (a model hashing $http_host for $host: {} \
         mismatches):\n{}",
        wrong.findings.len(),
        out.last()
            .map(|o| o.lines().filter(|l| l.starts_with("  by_")).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    ));
}

/// Issue 20 point 4 for `verify --config`: failure kinds (listed and unlisted statuses, an invalid header,
/// refused connections) under a location's rules, GET and POST, judged through nginx's clock: servers
/// failed in the first half come back after their 1 s `fail_timeout` in the second. The clocked failure
/// model finds no mismatch; the same answers judged under nginx's default rules, as refusals only, or on a
/// fixed clock each give mismatches (each rule the proof relies on, changed, is caught).
#[test]
fn failure_kinds_follow_the_locations_rules_through_nginx_clock() {
    use nginx_ketama::failure::{Condition, NextUpstream, RetryPolicy};
    use nginx_ketama_harness::run::clock::ClockedModel;
    use nginx_ketama_harness::run::parity::{self, FailureModel, PlanOptions};
    use nginx_ketama_harness::site::failures::{Answer, Failures};
    let Some(installs) = installs() else { return };
    let newest = installs.last().expect("a build");
    let t = short_window_topology(9, 1);
    let up = t.upstream(newest.version, newest.libc).unwrap();
    let answers = [
        (1, Answer::Status(502)),
        (2, Answer::Status(503)),
        (4, Answer::Status(404)),
        (5, Answer::InvalidHeader),
        (7, Answer::Status(500)),
    ]
    .into_iter()
    .map(|(i, a)| (t.lines[i - 1].server.clone(), a))
    .collect();
    let listed = [Condition::Http502, Condition::Http503, Condition::Http404];
    let policy = RetryPolicy {
        next_upstream: listed.into_iter().fold(NextUpstream::default(), NextUpstream::with),
        tries: 3,
        timeout_ms: 0,
    };
    let failures = Failures { answers, policy, post_percent: 30 };
    let prefix = nginx_ketama_harness::nginx::local::fresh_prefix().unwrap();
    let site = parity::http_site_failing(&t, false, Some(&failures));
    let nginx = nginx_ketama_harness::nginx::local::LocalNginx::start(newest, &site, prefix).unwrap();
    let plan = parity::plan(&up, 6, &PlanOptions { random_keys: 400, empty_keys: 8, prove_ring: false });
    let plan = parity::with_posts(plan, 6, failures.post_percent);
    let requests: Vec<_> = plan.requests.iter().map(|r| (r.method, r.key.as_slice())).collect();
    let (first, second) = requests.split_at(requests.len() / 2);
    let send = |r: &[(_, &[u8])]| {
        nginx_ketama_harness::run::client::pipeline_methods(nginx.net(), nginx.http_front(), r, &mut |_| {}).unwrap()
    };
    let mut responses = send(first);
    std::thread::sleep(std::time::Duration::from_millis(2300));
    responses.extend(send(second));
    drop(nginx);
    let judge = |f: &Failures| {
        parity::compare_clocked(&plan, &responses, &mut ClockedModel::failing(&up, &t, f), Default::default())
    };
    let run = judge(&failures);
    let not_compared: usize = run.not_comparable.iter().map(|(_, n)| n).sum();
    assert!(run.mismatches.is_empty(), "{:?}", run.mismatches.first());
    assert!(not_compared * 20 < responses.len(), "{not_compared} not comparable");
    let statuses: std::collections::BTreeSet<&str> =
        responses.iter().filter_map(|r| r.upstream_status.as_deref()).flat_map(|s| s.split(", ")).collect();
    for s in ["200", "404", "500", "502", "503"] {
        assert!(statuses.contains(s), "an attempt answered {s}: {statuses:?}");
    }
    let defaults = judge(&Failures { policy: RetryPolicy::default(), ..failures.clone() });
    assert!(!defaults.mismatches.is_empty(), "nginx's default rules in place of the location's must be caught");
    let refusals = parity::compare_clocked(&plan, &responses, &mut ClockedModel::new(&up, &t), Default::default());
    assert!(!refusals.mismatches.is_empty(), "a refusals-only model must be caught");
    let fixed = parity::compare(&plan, &responses, &mut FailureModel::new(&up, &t, &failures), Default::default());
    assert!(!fixed.mismatches.is_empty(), "a fixed clock must get the second half wrong");
    report(&format!(
        "verify --config failure kinds through nginx {}'s clock: {} requests ({} failovers), 0 mismatches \
         ({not_compared} not comparable); nginx's default rules {}, refusals only {}, a fixed clock {} mismatches",
        newest.label(),
        run.requests,
        run.failovers,
        defaults.mismatches.len(),
        refusals.mismatches.len(),
        fixed.mismatches.len()
    ));
}

/// Issue 18, item 3: a failure run that outlasts `fail_timeout` (1 s and 0 s here, the keys sent in two
/// halves with a pause between) sees nginx retry the servers it failed in the first half. The model that
/// follows nginx's clock finds no mismatch; the old model (one fixed clock for the whole run) calls those
/// retries mismatches on the very same answers.
#[test]
fn failed_servers_come_back_when_their_fail_timeout_runs_out() {
    use nginx_ketama_harness::run::clock::ClockedModel;
    use nginx_ketama_harness::run::parity::{self, LibraryModel, PlanOptions};
    let Some(installs) = installs() else { return };
    let newest = installs.last().expect("a build");
    let mut summary = Vec::new();
    for (fail_timeout, pause_ms) in [(1, 2300), (0, 1200)] {
        let t = short_window_topology(9, fail_timeout);
        let up = t.upstream(newest.version, newest.libc).unwrap();
        let prefix = nginx_ketama_harness::nginx::local::fresh_prefix().unwrap();
        let nginx =
            nginx_ketama_harness::nginx::local::LocalNginx::start(newest, &parity::http_site(&t, false), prefix)
                .unwrap();
        let plan = parity::plan(&up, 5, &PlanOptions { random_keys: 400, empty_keys: 8, prove_ring: false });
        let keys: Vec<Vec<u8>> = plan.requests.iter().map(|r| r.key.clone()).collect();
        let (first, second) = keys.split_at(keys.len() / 2);
        let send = |k: &[Vec<u8>]| {
            nginx_ketama_harness::run::client::pipeline(nginx.net(), nginx.http_front(), k, &mut |_| {}).unwrap()
        };
        let mut responses = send(first);
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
        responses.extend(send(second));
        drop(nginx);
        assert!(responses.iter().all(|r| r.clock.is_some()), "nginx reports its clock with every answer");
        let clocked = parity::compare_clocked(&plan, &responses, &mut ClockedModel::new(&up, &t), Default::default());
        let not_compared: usize = clocked.not_comparable.iter().map(|(_, n)| n).sum();
        assert!(clocked.mismatches.is_empty(), "fail_timeout={fail_timeout}: {:?}", clocked.mismatches.first());
        assert!(not_compared * 20 < responses.len(), "{not_compared} not comparable");
        let fixed = parity::compare(&plan, &responses, &mut LibraryModel::new(&up, &t), Default::default());
        assert!(
            !fixed.mismatches.is_empty(),
            "fail_timeout={fail_timeout}: a fixed clock must get the second half wrong (else this proves nothing)"
        );
        summary.push(format!(
            "fail_timeout={fail_timeout}s, pause {pause_ms} ms: {} requests, {} failovers, 0 mismatches following nginx's \
             clock ({not_compared} not comparable); a fixed clock: {} mismatches",
            clocked.requests,
            clocked.failovers,
            fixed.mismatches.len()
        ));
    }
    report(&format!("nginx's clock during failure runs:\n  {}", summary.join("\n  ")));
}

/// The same through the proof of a config: `fail_timeout=1s` servers, failure runs with a pause longer
/// than it; no mismatch.
#[test]
fn a_config_proof_follows_nginx_clock() {
    let Some(installs) = installs() else { return };
    if !netns::available() {
        skip("not root: no private namespaces");
        return;
    }
    let newest = installs.last().expect("a build");
    let servers: String = (1..=8).map(|i| format!(" server 10.6.0.{i}:8080 fail_timeout=1s;\n")).collect();
    let file = config_file(&format!("upstream short {{ hash $uri consistent;\n{servers}}}\n"));
    let config = own_config::load(&file, newest.version, newest.libc).unwrap();
    let choice = own_config::choose(&config, &[], 4).unwrap();
    let ups: Vec<&own_config::ConfigUpstream> = choice.prove.iter().collect();
    let prover = Prover::new(&ups, &[newest], CLI.as_ref()).unwrap();
    let options = ProveOptions {
        seed: 4,
        keys: 300,
        prove_ring: false,
        failure_runs: 1,
        failure_pause: Some(std::time::Duration::from_millis(2300)),
        failure_kinds: false,
        model_key: None,
    };
    let r = prover.prove(newest, &choice.prove[0], &options, "replay", &mut |_| {});
    assert!(r.fault.is_none(), "{:?}", r.fault);
    assert!(r.findings.is_empty(), "{:?}", r.findings.first());
    assert!(r.requests > 0 && r.failovers > 0 && r.not_compared() * 20 < r.requests, "{r:?}");
}

/// Issue 18, item 14: `verify --config` resolves names privately even where this machine resolves through
/// a unix socket. In a mount namespace of this test's own, fake nscd and systemd-resolved sockets listen
/// where glibc looks for them, with `hosts: files resolve dns`; `getent hosts` there (the control)
/// connects to the fake nscd, while a whole `verify --config` run that resolves a name (the resolver
/// helper and nginx) connects to neither. The machine's own files are untouched: every mount is in the
/// test's namespace.
#[test]
fn names_never_reach_a_name_service_daemon_of_the_host() {
    use std::os::unix::net::UnixListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let Some(installs) = installs() else { return };
    if !netns::available() {
        skip("not root: no private namespaces");
        return;
    }
    let newest = installs.last().expect("a build");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for sub in ["nscd", "resolve"] {
        std::fs::create_dir(d.join(sub)).unwrap();
    }
    let listeners = [
        UnixListener::bind(d.join("nscd/socket")).unwrap(),
        UnixListener::bind(d.join("resolve/io.systemd.Resolve")).unwrap(),
    ];
    let counts = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let stop = Arc::new(AtomicBool::new(false));
    let trap = {
        let (counts, stop) = (counts.clone(), stop.clone());
        std::thread::spawn(move || {
            for l in &listeners {
                l.set_nonblocking(true).unwrap();
            }
            while !stop.load(Ordering::Relaxed) {
                for (l, c) in listeners.iter().zip(counts.iter()) {
                    // Accept and hang up at once: glibc then falls back to nsswitch.conf.
                    while let Ok((conn, _)) = l.accept() {
                        c.fetch_add(1, Ordering::Relaxed);
                        drop(conn);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    std::fs::write(d.join("hosts"), "127.0.0.1 localhost\n10.7.7.7 trap.test\n").unwrap();
    std::fs::write(d.join("nsswitch.conf"), "passwd: files\ngroup: files\nhosts: files resolve dns\n").unwrap();
    std::fs::write(
        d.join("nginx.conf"),
        "events {}\nhttp { upstream t { hash $uri consistent; server trap.test:8080; server 10.7.7.8:8080; } }\n",
    )
    .unwrap();
    let script = "set -e; run=$(readlink -f /var/run); mount -t tmpfs nk-trap \"$run\"; \
                  mkdir -p \"$run/nscd\" /run/systemd/resolve; mount --bind \"$D/nscd\" \"$run/nscd\"; \
                  mount --bind \"$D/resolve\" /run/systemd/resolve; mount --bind \"$D/hosts\" /etc/hosts; \
                  mount --bind \"$D/nsswitch.conf\" /etc/nsswitch.conf; exec \"$@\"";
    let in_trap = |args: &[&std::ffi::OsStr]| {
        let out = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
            .args(args)
            .env("D", d)
            .output()
            .expect("unshare (util-linux)");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = in_trap(&["getent".as_ref(), "hosts".as_ref(), "trap.test".as_ref()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("10.7.7.7"), "{stdout}");
    let control = counts[0].swap(0, Ordering::Relaxed) + counts[1].swap(0, Ordering::Relaxed);
    assert!(control > 0, "the trap works: glibc asks nscd first");
    let m = d.join("m.jsonl");
    let version = newest.version.to_string();
    let (code, stdout, stderr) = in_trap(&[
        CLI.as_ref(),
        "verify".as_ref(),
        "--config".as_ref(),
        d.join("nginx.conf").as_os_str(),
        "--versions".as_ref(),
        version.as_ref(),
        "--libc".as_ref(),
        newest.libc.as_str().as_ref(),
        "--keys".as_ref(),
        "30".as_ref(),
        "--failure-runs".as_ref(),
        "1".as_ref(),
        "--mismatches".as_ref(),
        m.as_os_str(),
    ]);
    stop.store(true, Ordering::Relaxed);
    trap.join().unwrap();
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("hostname trap.test: 10.7.7.7 (resolves on this machine"), "{stdout}");
    let during = [counts[0].load(Ordering::Relaxed), counts[1].load(Ordering::Relaxed)];
    assert_eq!(during, [0, 0], "connections to the fake nscd and resolved sockets during the run\n{stdout}");
    report(&format!("private name service: getent reached the fake nscd {control} time(s); verify --config 0 times"));
}

/// Issue 18, item 13: `--failure-runs` belongs to `--config`; without it, it is a usage error (exit 2), not
/// silently ignored. Needs no nginx.
#[test]
fn failure_runs_need_a_config() {
    let out = Command::new(CLI).args(["verify", "--failure-runs", "2", "--topologies", "1"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--config <FILE>"), "{stderr}");
}

/// IPv6 literals whose text nginx writes its own way (`ngx_inet6_ntop()`: a dotted last 32 bits after a
/// leading run of zeros) are named as nginx names them in `$upstream_addr`: every server answers or fails
/// under its nginx name on the newest build, so any difference is a mismatch.
#[test]
fn ipv6_names_are_printed_as_nginx_prints_them() {
    let Some(installs) = installs() else { return };
    if !netns::available() {
        skip("not root: no private namespaces");
        return;
    }
    let newest = installs.last().expect("a build");
    let servers = [
        "[::10.0.0.1]:80",
        "[::ffff:10.0.0.1]:81",
        "[::102]:80",
        "[::201]:80",
        "[::2]:80",
        "[::1:0:0]:80",
        "[1::]:80",
        "[1:0:0:2:0:0:0:3]:80",
        "[1:0:0:2:0:0:3:4]:80",
        "[64:ff9b::10.0.0.1]:80",
        "[0:0:0:0:0:1:0:1]:80",
    ];
    let lines: String = servers.iter().map(|s| format!(" server {s};\n")).collect();
    let file = config_file(&format!("upstream v6 {{ hash $uri consistent;\n{lines}}}\n"));
    let (code, stdout, stderr) = verify(&file, newest, &["--keys", "200", "--failure-runs", "2"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let row = stdout.lines().find(|l| l.starts_with(&newest.label())).unwrap_or_default();
    assert!(row.trim_end().ends_with(" 0 0") || row.split_whitespace().last() == Some("0"), "{stdout}");
}
