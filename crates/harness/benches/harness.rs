//! The parity harness's own throughput: keys per second that `verify` checks against a live nginx (send,
//! receive and compare with the simulator), beside what `wrk` gets from the same nginx with the same request.
//!
//! Run with `cargo bench --bench harness` (needs `scripts/provision-nginx` and the `wrk` package).

use nginx_ketama::Method;
use nginx_ketama_harness::catalog;
use nginx_ketama_harness::nginx::build::Build;
use nginx_ketama_harness::nginx::netns::Net;
use nginx_ketama_harness::nginx::selection::Selection;
use nginx_ketama_harness::run::parity::{self, LibraryModel, PlanOptions};
use nginx_ketama_harness::site::topology::Topology;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Instant;

/// `wrk` against `front`, run inside nginx's network namespace when it has one.
fn wrk(net: Net<'_>, front: SocketAddr, threads: u32, connections: u32) -> Option<f64> {
    let mut cmd = match net {
        Net::Own => Command::new("wrk"),
        Net::Private(ns) => {
            let mut c = Command::new("nsenter");
            c.arg(format!("--net={}", ns.path().display())).arg("wrk");
            c
        }
    };
    let out = cmd
        .args([
            "-t",
            &threads.to_string(),
            "-c",
            &connections.to_string(),
            "-d",
            "5s",
            "-H",
            "X-Key: /abc/object-12345",
        ])
        .arg(format!("http://{front}/"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| l.strip_prefix("Requests/sec:")).and_then(|v| v.trim().parse().ok())
}

fn main() {
    let install = match Selection::default_provisioned().installations() {
        Ok(mut found) => found.pop().expect("a selection that succeeds holds a build"),
        Err(e) => {
            eprintln!("{e}");
            return;
        }
    };
    let backend = Build::Local(install);
    let lines: Vec<_> = (1..=10).map(|i| catalog::line(&format!("127.90.0.{i}:{}", 21000 + i))).collect();
    let topology = Topology { seed: 0, method: Method::Consistent, lines, hosts: vec![] };
    let session = parity::start(&backend, topology.clone()).expect("nginx starts");
    let upstream = topology.upstream(backend.version(), backend.libc()).expect("upstream");
    let plan = parity::plan(&upstream, 1, &PlanOptions { random_keys: 200_000, empty_keys: 0, prove_ring: false });
    // Warm up, then measure the full check: pipelined send + compare with the simulator.
    let _ = session.send(&plan.requests[..5000].iter().map(|r| r.key.clone()).collect::<Vec<_>>(), &mut |_| {});
    let started = Instant::now();
    let report = session.run(&plan, &mut LibraryModel::new(&upstream, &topology), &mut |_| {}).expect("run");
    let ours = report.requests as f64 / started.elapsed().as_secs_f64();
    assert!(report.mismatches.is_empty());
    let front = session.http_front();
    println!("harness throughput against nginx {} (10 servers, consistent, keys ~25 B)", backend.version());
    println!("{:<44} {:>12}", "what", "requests/s");
    println!("{:<44} {:>12.0}", "verify: 1 pipelined connection + comparison", ours);
    for (t, c) in [(1, 1), (2, 8), (2, 32)] {
        match wrk(session.net(), front, t, c) {
            Some(rate) => println!(
                "{:<44} {:>12.0}   (verify = {:.2}×)",
                format!("wrk -t{t} -c{c} (same request)"),
                rate,
                ours / rate
            ),
            None => println!("wrk -t{t} -c{c}: wrk not available (apt-get install wrk)"),
        }
    }
}
