//! Live parity suite: real nginx on one side, the library on the other.
//!
//! Needs nginx provisioned by `scripts/provision-nginx` (and, for the container test, images from
//! `scripts/build-images` and a Docker engine). Without them each test prints a loud `SKIP:` line and
//! passes — unless `NGINX_PARITY=require` (set by `.ci/run`), which turns every skip into a failure.
//! Every test prints what it verified: versions, topologies, requests, arcs, sessions.

use anyhow::Result;
use nginx_ketama::md5_variants::Md5VnodeRing;
use nginx_ketama::{Method, NginxVersion, Server};
use nginx_ketama_harness::catalog;
use nginx_ketama_harness::nginx::build::Build;
use nginx_ketama_harness::nginx::docker;
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::proofs::sweep::{SweepOptions, VersionReport, sweep_backend};
use nginx_ketama_harness::run::observation::Observation;
use nginx_ketama_harness::run::parity::{self, KeyKind, LibraryModel, Model, PlanOptions, compare};
use nginx_ketama_harness::site::topology::{Capabilities, ServerLine, Spelling, Topology, TopologyOptions};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use nginx_ketama_harness::testkit::{assert_sweep_clean, provisioned_releases, release_matches, report, skip};

#[path = "support/common.rs"]
mod common;

use common::CLI;

fn installs() -> Option<Vec<Installation>> {
    nginx_ketama_harness::testkit::provisioned_or_skip()
}

fn print_reports(title: &str, reports: &[VersionReport]) {
    let mut text = format!("{title}\n{}", nginx_ketama_harness::proofs::sweep::VersionReport::table(reports));
    for r in reports {
        text.push_str(&format!(
            "  nginx {} ({}): {} spellings {:?}\n",
            r.version,
            r.backend,
            r.spellings.len(),
            r.spellings
        ));
    }
    report(&text);
}

/// The main proof: random topologies in every spelling, random keys, forged keys at both ends of every arc,
/// empty keys, failover chains and a stream upstream, on every provisioned version, request by request.
#[test]
fn random_topologies_match_nginx_on_every_version() -> Result<()> {
    let Some(installs) = installs() else { return Ok(()) };
    let options = SweepOptions {
        seed: 7,
        topologies: 8,
        keys: 1500,
        stream_sessions: 300,
        resolver_exe: Some(PathBuf::from(CLI)),
        ..SweepOptions::default()
    };
    let mut reports = Vec::new();
    for install in &installs {
        reports.push(sweep_backend(&Build::Local(install.clone()), &options, &mut |_| {}));
    }
    print_reports("random topologies, local nginx", &reports);
    assert_sweep_clean(&reports);
    let versions: BTreeSet<String> = reports.iter().map(|r| r.version.clone()).collect();
    for release in provisioned_releases() {
        if !versions.iter().any(|v| release_matches(&release, v)) {
            skip(&format!("nginx {release} is not provisioned"));
        }
    }
    for r in &reports {
        assert!(r.arcs_proven >= 5000, "nginx {}: only {} arcs proven", r.version, r.arcs_proven);
        assert!(r.failovers >= 500 && r.round_robin >= 100 && r.stream_sessions >= 250, "{r:?}");
        // The per-topology records (what `verify --report` lists) add up to the totals, one per topology.
        let indexes: Vec<usize> = r.runs.iter().map(|t| t.index).collect();
        assert_eq!(indexes, (0..options.topologies).collect::<Vec<_>>(), "nginx {}", r.version);
        assert_eq!(r.runs.iter().map(|t| t.requests).sum::<usize>(), r.requests, "nginx {}", r.version);
        assert_eq!(r.runs.iter().map(|t| t.arcs_proven).sum::<usize>(), r.arcs_proven, "nginx {}", r.version);
        assert_eq!(r.runs.iter().map(|t| t.failovers).sum::<usize>(), r.failovers, "nginx {}", r.version);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let spellings: BTreeSet<&String> = reports.iter().flat_map(|r| &r.spellings).collect();
        assert_eq!(spellings.len(), Spelling::ALL.len(), "every server spelling exercised: {spellings:?}");
    }
    Ok(())
}

/// The same harness through testcontainers, on the locally built image (or `$NGINX_KETAMA_IMAGE`).
#[test]
fn testcontainers_backend_matches_nginx() -> Result<()> {
    if !docker::available() {
        skip("no Docker engine answers");
        return Ok(());
    }
    let version = NginxVersion::LATEST;
    let backend = match docker::image_for(version, nginx_ketama::Libc::Glibc).map(Build::Docker) {
        Ok(b) => b,
        Err(e) => {
            skip(&e.to_string());
            return Ok(());
        }
    };
    let options = SweepOptions { seed: 11, topologies: 5, keys: 1000, ..SweepOptions::default() };
    let report = sweep_backend(&backend, &options, &mut |_| {});
    print_reports("random topologies through testcontainers", std::slice::from_ref(&report));
    assert_sweep_clean(std::slice::from_ref(&report));
    assert!(report.requests >= 5000 && report.topologies == 5);
    assert!(report.spellings.contains("HostnameTwoAddresses"), "a two-address name through Docker's hosts file");
    let leftovers = std::process::Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label={}={}", nginx_ketama_harness::nginx::cleanup::OWNER_LABEL, std::process::id()),
        ])
        .output()?;
    assert!(leftovers.stdout.is_empty(), "containers left behind: {}", String::from_utf8_lossy(&leftovers.stdout));
    Ok(())
}

fn latest_local() -> Option<Build> {
    let installs = installs()?;
    Some(Build::Local(installs.last().expect("non-empty").clone()))
}

fn ip_lines(n: usize, first_octet: u8) -> Vec<ServerLine> {
    (0..n)
        .map(|i| {
            let addr = SocketAddr::from(([127, first_octet, (i / 200) as u8, (i % 200 + 1) as u8], 20000 + i as u16));
            let mut line = catalog::line(&addr.to_string());
            line.weight = 1 + (i % 3) as u32;
            line
        })
        .collect()
}

/// A model that is wrong on purpose.
struct Mutant<F: FnMut(&[u8]) -> String>(F);

impl<F: FnMut(&[u8]) -> String> Model for Mutant<F> {
    fn expect(&mut self, key: &[u8]) -> Observation {
        Observation { status: 200, upstream_addr: (self.0)(key), upstream_status: None }
    }
}

/// The harness must catch a wrong library: MD5 instead of CRC32 on most keys, and `>` instead of `≥` in
/// the lookup exactly on the forged keys that sit on ring points (which random keys almost never hit).
#[test]
fn harness_detects_deliberately_wrong_libraries() -> Result<()> {
    let Some(backend) = latest_local() else { return Ok(()) };
    let topology = Topology { seed: 1, method: Method::Consistent, lines: ip_lines(12, 61), hosts: vec![] };
    let session = parity::start(&backend, topology.clone())?;
    let upstream = topology.upstream(backend.version(), backend.libc())?;
    let plan = parity::plan(&upstream, 5, &PlanOptions { random_keys: 3000, empty_keys: 0, prove_ring: true });
    let responses = session.send(&plan.requests.iter().map(|r| r.key.clone()).collect::<Vec<_>>(), &mut |_| {})?;

    let right = compare(&plan, &responses, &mut LibraryModel::new(&upstream, &topology), Duration::ZERO);
    assert!(right.mismatches.is_empty(), "the real library must match: {:?}", right.mismatches.first());

    let ring = upstream.ring().expect("consistent");
    let servers: Vec<(Server, u32)> =
        topology.lines.iter().map(|l| (Server::new(l.server.clone()), l.weight)).collect();
    let md5 = Md5VnodeRing::new(servers.iter().map(|(s, w)| (s, *w)));
    let md5_report =
        compare(&plan, &responses, &mut Mutant(|k: &[u8]| md5.owner(k).unwrap().to_string()), Duration::ZERO);

    let hashes: Vec<u32> = ring.points().map(|p| p.hash).collect();
    let strictly_greater = |k: &[u8]| {
        let h = crc32fast::hash(k);
        let i = hashes.partition_point(|&p| p <= h) % hashes.len();
        ring.point(i).server.to_string()
    };
    let gt_report = compare(&plan, &responses, &mut Mutant(strictly_greater), Duration::ZERO);

    report(&format!(
        "mutation check on nginx {}: {} requests ({} arcs); library {} mismatches, MD5 ring {} ({:.0}%), `>` lookup {}",
        backend.version(),
        right.requests,
        plan.arcs,
        right.mismatches.len(),
        md5_report.mismatches.len(),
        100.0 * md5_report.mismatches.len() as f64 / right.requests as f64,
        gt_report.mismatches.len()
    ));
    assert!(md5_report.mismatches.len() * 10 > right.requests * 8, "MD5 must disagree on most keys");
    assert_eq!(md5_report.arcs_proven, 0);
    // `>` differs exactly on keys whose CRC equals a point owned by another server than the next point: the
    // forged on-point keys of those arcs, none of the random or one-past keys.
    let boundaries = (0..ring.len()).filter(|&i| ring.point(i).server != ring.point(i + 1).server).count();
    let on_point = gt_report.mismatches.iter().filter(|m| m.kind == KeyKind::OnPoint).count();
    assert_eq!(on_point, boundaries, "every server boundary on the ring must be caught");
    assert!(gt_report.mismatches.iter().all(|m| matches!(m.kind, KeyKind::OnPoint | KeyKind::RingEdge)));
    assert_eq!(gt_report.arcs_proven, 0);
    Ok(())
}

fn run_scenario(backend: &Build, name: &str, topology: Topology, keys: Vec<Vec<u8>>) -> Result<usize> {
    let session = parity::start(backend, topology)?;
    let topology = session.topology();
    let upstream = topology.upstream(backend.version(), backend.libc())?;
    let plan = parity::Plan {
        requests: keys
            .into_iter()
            .map(|key| parity::PlannedRequest { key, kind: KeyKind::Random, method: Default::default() })
            .collect(),
        arcs: 0,
    };
    let run = session.run(&plan, &mut LibraryModel::new(&upstream, topology), &mut |_| {})?;
    for m in run.mismatches.iter().take(5) {
        eprintln!(
            "{name}: request {} key {} expected {:?} nginx {:?}",
            m.index,
            parity::show_key(&m.key),
            m.expected,
            m.actual
        );
    }
    assert!(run.mismatches.is_empty(), "{name} on nginx {}: {} mismatches", backend.version(), run.mismatches.len());
    report(&format!(
        "  {name:<44} nginx {}: {} requests, {} with retries, 0 mismatches",
        backend.version(),
        run.requests,
        run.failovers
    ));
    Ok(run.requests)
}

fn keys(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

/// Hand-built stateful scenarios from docs/nginx-algorithm.md (§3.4, §4, §5, §9), each on every version:
/// more than 20 misses then round-robin and backups, failure accounting, empty keys, a single server, plain
/// hash with one primary plus backups (where 1.26 and 1.30 differ).
#[test]
fn stateful_scenarios_match_nginx() -> Result<()> {
    let Some(installs) = installs() else { return Ok(()) };
    report("stateful scenarios:");
    for install in installs {
        let backend = Build::Local(install);
        let mut total = 0;

        // 25 down servers around two live ones, a backup declared before `hash`, one live server refusing.
        let mut lines = ip_lines(28, 71);
        for l in &mut lines[..25] {
            l.down = true;
        }
        lines[27].dead = true;
        let mut backup = ip_lines(1, 72).remove(0);
        backup.backup = true;
        lines.push(backup);
        let t = Topology { seed: 0, method: Method::Consistent, lines, hosts: vec![] };
        total += run_scenario(&backend, "more than 20 misses → round-robin → backup", t, keys("miss", 400))?;

        // Failure accounting: dead servers with max_fails=1 drop out after their first failure.
        let mut lines = ip_lines(10, 73);
        for l in lines.iter_mut().step_by(3) {
            l.dead = true;
            l.max_fails = 1;
            l.fail_timeout = 3600;
        }
        let t = Topology { seed: 0, method: Method::Consistent, lines: lines.clone(), hosts: vec![] };
        total += run_scenario(&backend, "max_fails=1: failed peers skipped (consistent)", t, keys("acct", 400))?;
        let t = Topology { seed: 0, method: Method::Plain, lines, hosts: vec![] };
        total += run_scenario(&backend, "max_fails=1: failed peers skipped (plain)", t, keys("acct", 400))?;

        // Empty keys: weighted round-robin across the list, interleaved with hashed keys.
        let t = Topology { seed: 0, method: Method::Consistent, lines: ip_lines(5, 74), hosts: vec![] };
        let mixed: Vec<Vec<u8>> =
            (0..300).map(|i| if i % 3 == 0 { Vec::new() } else { format!("e{i}").into_bytes() }).collect();
        total += run_scenario(&backend, "empty keys interleaved (round-robin)", t, mixed)?;

        // A single server, refusing: one attempt, never counted as failed.
        let mut one = ip_lines(1, 75);
        one[0].dead = true;
        one[0].max_fails = 1;
        let t = Topology { seed: 0, method: Method::Consistent, lines: one, hosts: vec![] };
        total += run_scenario(&backend, "single refusing server", t, keys("single", 50))?;

        // Plain hash, one primary (refusing) plus three backups: version dependent (algorithm §8, 1.27.3).
        let mut lines = ip_lines(4, 76);
        lines[0].dead = true;
        for l in &mut lines[1..] {
            l.backup = true;
        }
        lines[1].dead = true;
        let t = Topology { seed: 0, method: Method::Plain, lines, hosts: vec![] };
        total += run_scenario(&backend, "plain: one primary + backups", t, keys("pb", 300))?;
        report(&format!("  nginx {}: {total} stateful requests, 0 mismatches", backend.version()));
    }
    Ok(())
}

/// The `route` command, reading the very nginx.conf nginx runs (hostnames resolved in the same private
/// hosts namespace, a name with two addresses, refused servers), agrees with nginx on every attempt.
#[test]
fn route_command_agrees_with_nginx() -> Result<()> {
    let Some(backend) = latest_local() else { return Ok(()) };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip("hostname namespaces need root");
        return Ok(());
    }
    let unix_dir = nginx_ketama_harness::nginx::local::fresh_prefix()?;
    // nginx has a network namespace of its own, so `[::1]` (port 80 too) is its alone.
    let caps =
        Capabilities { ipv6: true, port80: true, hostnames: true, unix_dir: Some(unix_dir.display().to_string()) };
    let topology = loop {
        // A topology with a two-address name and some refusing servers.
        let seed = rand_seed();
        let t =
            Topology::random(seed, &TopologyOptions { max_servers: 25, backups: false, ..Default::default() }, &caps);
        if t.spellings().contains(&Spelling::HostnameTwoAddresses) && t.lines.iter().any(|l| l.dead) {
            break t;
        }
    };
    let resolved = nginx_ketama_harness::proofs::sweep::resolve_in_namespace(
        CLI.as_ref(),
        &topology.hosts_file(),
        &topology.hostnames(),
    )?;
    let topology = topology.resolved(&resolved);
    let session = parity::start(&backend, topology.clone())?;
    let prefix = session.prefix().expect("a local nginx has a prefix");
    let conf = prefix.join("nginx.conf");
    let hosts = prefix.join("hosts");
    let requests: Vec<Vec<u8>> = nginx_ketama_harness::site::topology::random_keys(3, 500);
    let responses = session.send(&requests, &mut |_| {})?;

    let mut cmd = nginx_ketama_harness::nginx::netns::isolated_command(CLI, Some(&hosts))?;
    cmd.args(["route", "--config"]).arg(&conf).args(["--upstream", "parity"]);
    for l in topology.lines.iter().filter(|l| l.dead) {
        cmd.args(["--failed", &l.server]);
    }
    let input: Vec<u8> = requests.iter().flat_map(|k| k.iter().copied().chain([b'\n'])).collect();
    let out = nginx_ketama_harness::testkit::run_with_stdin(cmd, &input)?;
    anyhow::ensure!(out.status.success(), "route failed: {}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out.stdout)?.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    assert_eq!(lines.len(), requests.len());
    let by_address = |addr: &str| -> String {
        topology
            .lines
            .iter()
            .find(|l| l.endpoints.iter().any(|e| e.name == addr))
            .map(|l| l.server.clone())
            .unwrap_or_else(|| addr.to_string())
    };
    for (i, (line, resp)) in lines.iter().zip(&responses).enumerate() {
        let nginx: Vec<String> = resp.upstream_addr.as_deref().unwrap_or("").split(", ").map(by_address).collect();
        let ours: Vec<String> =
            line["attempts"].as_array().expect("attempts").iter().map(|v| v.as_str().unwrap().to_string()).collect();
        assert_eq!(ours, nginx, "request {i} key {}", parity::show_key(&requests[i]));
        assert_eq!(line["server"].as_str(), ours.first().map(String::as_str));
    }
    drop(session);
    drop(unix_dir);
    report(&format!(
        "route command: {} keys over {} server lines (spellings {:?}) agree with nginx {}",
        requests.len(),
        topology.lines.len(),
        topology.spellings(),
        backend.version()
    ));
    Ok(())
}

fn rand_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(100);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// nginx refusing to start is reported with nginx's own words, and nothing is left running.
#[test]
fn a_failing_start_shows_nginx_error_output() -> Result<()> {
    let Some(backend) = latest_local() else { return Ok(()) };
    let site = nginx_ketama_harness::site::conf::Site {
        http: Some(nginx_ketama_harness::site::conf::Part {
            upstream_block:
                "upstream parity {\n    server 127.0.0.1:1 weight=0;\n    hash $http_x_key consistent;\n}\n".into(),
            listeners: vec![],
        }),
        ..Default::default()
    };
    let prefix = backend.prefix()?;
    let path = prefix.to_path_buf();
    let err = match backend.start(&site, prefix) {
        Ok(_) => panic!("nginx accepted weight=0"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("nginx exited during startup"), "{err}");
    assert!(err.contains("invalid parameter \"weight=0\""), "{err}");
    assert!(!path.exists(), "the prefix is removed");
    report(&format!("startup failure reported as: {}", err.lines().find(|l| l.contains("weight=0")).unwrap_or("")));
    Ok(())
}

/// A test that panics while nginx runs still stops it: the session's nginx is killed (its whole process
/// group) while the panic unwinds.
#[test]
fn nginx_does_not_outlive_a_panicking_test() -> Result<()> {
    let Some(backend) = latest_local() else { return Ok(()) };
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let topology = Topology { seed: 0, method: Method::Consistent, lines: ip_lines(3, 77), hosts: vec![] };
        let session = parity::start(&backend, topology).expect("nginx starts");
        tx.send((session.pid(), session.prefix())).expect("send");
        panic!("a test failing while nginx runs");
    })
    .join();
    assert!(outcome.is_err(), "the thread panicked");
    let (pid, prefix) = rx.recv()?;
    let pid = pid.expect("a local nginx has a pid") as i32;
    // SAFETY: signal 0 only asks whether the process (the master, reaped on drop) still exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    assert!(!alive, "nginx (pid {pid}) still runs after the panic");
    assert!(!prefix.expect("local prefix").exists(), "the prefix was removed");
    report(&format!("panic during a run: nginx (pid {pid}) was stopped while unwinding"));
    Ok(())
}

/// `verify --shim`: the library behind the shim protocol is proven like the library itself, and a wrong
/// implementation behind the same protocol is caught (exit 1, mismatches), on the newest local nginx.
#[test]
fn shims_are_proven_live() -> Result<()> {
    let Some(backend) = latest_local() else { return Ok(()) };
    let version = backend.version().to_string();
    let verify = |shim: &str| -> Result<std::process::Output> {
        let dir = nginx_ketama_harness::nginx::local::fresh_prefix()?;
        let out = std::process::Command::new(CLI)
            .args(["verify", "--backend", "local", "--versions", &version, "--topologies", "2", "--keys", "300"])
            .args(["--stream-sessions", "50", "--shim", shim, "--mismatches"])
            .arg(dir.join("mismatches.jsonl"))
            .output()?;
        drop(dir);
        Ok(out)
    };
    let out = verify(&format!("{CLI} shim"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("0 mismatches: the shim routes exactly like nginx"), "{text}");
    // Topology 1 has failure kinds: it went through the shim by protocol 2, statuses compared.
    assert!(text.contains("failure kinds: 1 topologies") && !text.contains("not proven"), "{text}");
    // A shim that speaks protocol 1 only: that topology is not proven, with the reason; not a fault.
    let out = std::process::Command::new(CLI)
        .args(["verify", "--backend", "local", "--versions", &version, "--only", "1", "--keys", "100"])
        .args(["--stream-sessions", "0", "--shim", &format!("{CLI} shim --mutation protocol-1")])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "nothing proven: {text}");
    assert!(
        text.contains("not proven: nginx ")
            && text.contains("not proven: the shim speaks protocol 1")
            && text.contains("protocol 2 (this shim speaks 1)")
            && !text.contains("fault:"),
        "{text}"
    );
    let wrong = nginx_ketama_harness::testkit::TempFile::new(
        "wrong_shim.py",
        "import sys, json\npeers = []\nfor line in sys.stdin:\n    m = json.loads(line)\n    if m['op'] == 'upstream':\n        peers = m['peers']\n        out = {'ok': True}\n    elif m['op'] == 'reset':\n        out = {'ok': True}\n    else:\n        out = {'attempts': [peers[0]['address']], 'outcome': 'answered'}\n    print(json.dumps(out), flush=True)\n",
    );
    let out = verify(&format!("python3 {}", wrong.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("mismatches; all of them are in"), "{text}");
    report(&format!(
        "shim protocol on nginx {version}: the reference shim proven (protocol 2 on failure kinds), a protocol-1 \
         shim not proven there, a wrong shim caught"
    ));
    Ok(())
}

/// `verify` on the command line, as a user runs it: exit code and stdout.
fn verify_cli(args: &[&str]) -> Result<(Option<i32>, String)> {
    let tmp = tempfile::tempdir()?;
    let mismatches = tmp.path().join("mismatches.jsonl");
    let out = std::process::Command::new(CLI)
        .arg("verify")
        .args(args)
        .args(["--topologies", "3", "--keys", "200", "--mismatches", mismatches.to_str().expect("utf-8")])
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    Ok((out.status.code(), stdout))
}

/// The numbers of the table row of `label`: topologies, requests, arcs proven, failovers, rr/empty, stream
/// sessions, … (the consistent count in parentheses left out).
fn row_numbers(table: &str, label: &str) -> Vec<u64> {
    let row = table.lines().find(|l| l.split_whitespace().next() == Some(label)).unwrap_or_else(|| panic!("{label}"));
    row.split_whitespace().filter_map(|w| w.parse().ok()).collect()
}

/// `verify --nginx PATH` proves any nginx binary as a local process: here every provisioned build named by
/// its path (the wrapper of each tree), each described by what its `nginx -V` says, with arcs proven, the
/// stream module used where the build has it, and 0 mismatches.
#[test]
fn verify_proves_a_named_nginx_binary() -> Result<()> {
    let Some(installs) = installs() else { return Ok(()) };
    let installs: Vec<&Installation> = installs.iter().filter(|i| i.version.modelled().is_ok()).collect();
    let mut args = Vec::new();
    for install in &installs {
        args.push("--nginx".to_string());
        args.push(install.binary().display().to_string());
    }
    args.extend(["--stream-sessions".to_string(), "40".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out) = verify_cli(&args)?;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("0 mismatches: the library routes exactly like nginx"), "{out}");
    for install in &installs {
        let stream = match install.libc {
            nginx_ketama::Libc::Glibc => "stream module (dynamic)",
            nginx_ketama::Libc::Musl => "stream module (built in)",
        };
        let line = format!("{}: nginx {}, {}, {stream}", install.binary().display(), install.version, install.libc);
        assert!(out.contains(&line), "the report names {line:?}:\n{out}");
        let numbers = row_numbers(&out, &install.label());
        assert!(numbers[1] > 0 && numbers[2] > 0, "{}: requests and arcs proven: {numbers:?}", install.label());
        assert_eq!(numbers[5], 40, "{}: stream sessions", install.label());
    }
    report(&format!("verify --nginx: {} provisioned binaries proven by path, 0 mismatches", installs.len()));
    Ok(())
}

/// `verify --image REF` proves a local image through testcontainers, read from the image itself; the
/// stream check, which a container cannot host, is skipped with the reason.
#[test]
fn verify_proves_a_named_image() -> Result<()> {
    if !docker::available() {
        skip("no Docker engine answers");
        return Ok(());
    }
    let reference = "nginx-ketama/nginx:1.26.3";
    let present = std::process::Command::new("docker").args(["image", "inspect", reference]).output()?;
    if !present.status.success() {
        skip(&format!("image {reference} is not built (scripts/build-images 1.26.3)"));
        return Ok(());
    }
    let (code, out) = verify_cli(&["--image", reference])?;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("nginx-ketama/nginx:1.26.3: nginx 1.26.3, glibc, stream module (dynamic)"), "{out}");
    assert!(
        out.contains(
            "stream check skipped: a container hides the client's source port, which the stream upstream hashes; \
             a named image is its own build, not checked on a provisioned one"
        ),
        "{out}"
    );
    let numbers = row_numbers(&out, "1.26.3");
    assert!(numbers[1] > 0 && numbers[2] > 0, "requests and arcs proven: {numbers:?}");
    report(&format!("verify --image {reference}: proven through testcontainers, 0 mismatches"));
    Ok(())
}

/// Issue 21 point 4: every key expression `verify`'s random topologies draw (`site::expressions`, maps with
/// regular expressions, captures and `hostnames` included) on every local build, and those that do not read
/// the client's address in the newest image: generated requests, 0 mismatches. The same answers judged as if
/// the upstream hashed the next expression of the list give mismatches for every expression.
#[test]
fn every_key_expression_is_proven_on_every_build() -> Result<()> {
    use nginx_ketama::config::{Config, Input, LoadOptions};
    use nginx_ketama_harness::run::keyed;
    use nginx_ketama_harness::site::expressions::{EXPRESSIONS, variables};
    let Some(installs) = installs() else { return Ok(()) };
    let mut backends: Vec<Build> = installs.into_iter().map(Build::Local).collect();
    if docker::available()
        && let Ok(image) = docker::image_for(NginxVersion::LATEST, nginx_ketama::Libc::Glibc)
    {
        backends.push(Build::Docker(image));
    }
    let topology = Topology { seed: 21, method: Method::Consistent, lines: ip_lines(5, 31), hosts: Vec::new() };
    let mut lines = Vec::new();
    for backend in &backends {
        let local = matches!(backend, Build::Local(_));
        let (mut requests, mut caught) = (0, 0);
        for (i, e) in EXPRESSIONS.iter().enumerate().filter(|(_, e)| local || !e.reads_client) {
            let maps = e.maps.concat();
            let session = parity::start_keyed(backend, topology.clone(), e.expression, &maps)?;
            let t = session.topology().clone();
            let server = parity::front_as_nginx_sees_it(backend, &session);
            let load =
                LoadOptions { resolve: false, version: backend.version(), libc: backend.libc(), input: Input::Config };
            let judge = |expression: &str, maps: &str| -> Result<keyed::KeyedRun> {
                let config =
                    Config::parse_str(&parity::keyed_model_conf(&t, expression, maps, server), "k.conf", &load)?;
                let up = t.upstream(backend.version(), backend.libc())?;
                let generated = keyed::requests(&variables(e), 5, 100);
                let run = keyed::run(
                    keyed::Target { net: session.net(), front: session.http_front(), server, client_addresses: local },
                    &generated,
                    &config,
                    &up,
                    |_| false,
                )?;
                run.map_err(|keyed::NotModelled(why)| anyhow::anyhow!("{}: {why}", e.expression))
            };
            let run = judge(e.expression, &maps)?;
            assert!(
                run.mismatches.is_empty(),
                "{} on {}: {:?}",
                e.expression,
                backend.describe(),
                run.mismatches.first()
            );
            let other = EXPRESSIONS.iter().cycle().skip(i + 1).find(|o| local || !o.reads_client).expect("another");
            let wrong = judge(other.expression, &[maps.as_str(), &other.maps.concat()].concat())?;
            assert!(!wrong.mismatches.is_empty(), "{} judged as {}: no mismatch", e.expression, other.expression);
            requests += run.requests;
            caught += 1;
        }
        lines.push(format!(
            "{}: {requests} requests, 0 mismatches; {caught} expressions, each caught when judged as another",
            backend.describe()
        ));
    }
    report(&format!("every key expression of the random topologies:\n  {}", lines.join("\n  ")));
    Ok(())
}
