//! `nginx-ketama verify --config FILE [--upstream NAME]...`: the user's own upstreams, proven on every
//! provisioned nginx with their addresses made local in a private network namespace.

use super::verify::{BackendChoice, Verdict, VerifyArgs, backends, save_findings};
use indicatif::{ProgressBar, ProgressStyle};
use nginx_ketama::Libc;
use nginx_ketama_harness::backend::Backend;
use nginx_ketama_harness::install::{Installation, Origin};
use nginx_ketama_harness::netns;
use nginx_ketama_harness::own_config::plan::NameSource;
use nginx_ketama_harness::own_config::{self, Choice, ProveOptions, Prover, UpstreamReport};
use nginx_ketama_harness::parity::show_key;
use std::fmt::Write as _;
use std::path::Path;

/// The command that runs one upstream of `file` on one build again.
pub(crate) fn replay_command(args: &VerifyArgs, file: &Path, upstream: &str, install: &Installation) -> String {
    let mut cmd = format!("nginx-ketama verify --config {} --upstream {upstream}", file.display());
    match &install.origin {
        Origin::Named { path, .. } => {
            let _ = write!(cmd, " --nginx {}", path.display());
        }
        Origin::Provisioned { .. } => {
            let _ = write!(cmd, " --versions {}", install.version);
            if install.libc != Libc::Glibc {
                let _ = write!(cmd, " --libc {}", install.libc);
            }
        }
    }
    let _ = write!(cmd, " --seed {} --keys {} --failure-runs {}", args.seed, args.keys, args.failure_runs);
    if args.no_ring_proof {
        cmd.push_str(" --no-ring-proof");
    }
    cmd
}

/// Runs `verify --config`.
pub(crate) fn verify_config(args: &VerifyArgs, file: &Path) -> Verdict {
    if args.shim.is_some() || args.only.is_some() || args.repeat > 1 {
        eprintln!(
            "nginx-ketama: --config proves this library on your upstreams; --shim, --only and --repeat do not apply"
        );
        return Verdict::Usage;
    }
    if args.backend == BackendChoice::Docker || !args.image.is_empty() {
        eprintln!("nginx-ketama: --config runs nginx as local processes (the provisioned builds, or --nginx PATH)");
        return Verdict::Usage;
    }
    let local = VerifyArgs { backend: BackendChoice::Local, ..args.clone() };
    let installs: Vec<Installation> = match backends(&local) {
        Ok(b) => b
            .into_iter()
            .filter_map(|b| match b {
                Backend::Local(i) => Some(i),
                Backend::Docker(_) => None,
            })
            .collect(),
        Err(refusal) => return refusal.report(),
    };
    // Each build reads the file with its own version's rules.
    let mut choices: Vec<(Installation, Result<Choice, String>)> = Vec::new();
    for install in installs {
        let choice = own_config::load(file, install.version, install.libc)
            .map_err(|e| e.to_string())
            .and_then(|c| own_config::choose(&c, &args.upstream, args.seed).map_err(|e| format!("{e:#}")));
        choices.push((install, choice));
    }
    let Some(first) = choices.iter().find_map(|(_, c)| c.as_ref().ok()).cloned() else {
        for (install, c) in &choices {
            if let Err(e) = c {
                eprintln!("nginx-ketama: nginx {}: {e}", install.label());
            }
        }
        return Verdict::Usage;
    };
    println!(
        "config: {}: {} hash upstream{} to prove, {} skipped",
        file.display(),
        first.prove.len(),
        if first.prove.len() == 1 { "" } else { "s" },
        first.skipped.len()
    );
    for s in &first.skipped {
        println!("  skipped: {} ({}): {}", s.name, s.location, s.why);
    }
    if !first.prove.is_empty() {
        let keys: Vec<String> = first.prove.iter().map(|u| format!("{} ({})", u.key, u.name)).collect();
        println!(
            "  keys: the proof sends raw keys in place of each key expression: {}; how nginx builds a key from its \
             expression is not proven",
            keys.join(", ")
        );
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("nginx-ketama: locating this executable (it resolves names in the namespace): {e}");
            return Verdict::HarnessFault;
        }
    };
    let upstream_refs: Vec<&own_config::ConfigUpstream> = first.prove.iter().collect();
    let install_refs: Vec<&Installation> = choices.iter().map(|(i, _)| i).collect();
    let prover = match Prover::new(&upstream_refs, &install_refs, &exe) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("nginx-ketama: preparing the namespace for {}: {e:#}", file.display());
            return Verdict::HarnessFault;
        }
    };
    print_environment(&prover);
    let options = ProveOptions {
        seed: args.seed,
        keys: args.keys,
        prove_ring: !args.no_ring_proof,
        failure_runs: args.failure_runs,
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>11} {bar:30} {pos:>7}/{len:7} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut reports: Vec<UpstreamReport> = Vec::new();
    let mut not_run: Vec<String> = Vec::new();
    let mut faults = 0;
    for (install, choice) in &choices {
        let choice = match choice {
            Ok(c) => c,
            Err(e) => {
                bar.println(format!("harness fault: nginx {} rejects the config: {e}", install.label()));
                faults += 1;
                continue;
            }
        };
        for u in &choice.prove {
            if let Err(why) = prover.runnable(&u.topology) {
                if !not_run.iter().any(|n| n.starts_with(&format!("{}:", u.name))) {
                    not_run.push(format!("{}: {why}", u.name));
                }
                continue;
            }
            bar.set_prefix(install.label());
            bar.set_message(u.name.clone());
            let replay = replay_command(args, file, &u.name, install);
            let report = prover.prove(install, u, &options, &replay, &mut |n, total| {
                bar.set_length(total as u64);
                bar.set_position(n as u64);
            });
            reports.push(report);
        }
    }
    bar.finish_and_clear();
    for n in &not_run {
        println!("  not run: {n}");
    }
    print!("{}", table(&reports));
    let mut order: Vec<(String, String)> = Vec::new();
    for r in &reports {
        for (name, ips) in &r.resolution {
            if !order.iter().any(|(n, _)| n == name) {
                let ips: Vec<String> = ips.iter().map(ToString::to_string).collect();
                order.push((name.clone(), format!("{name} → {} (nginx {})", ips.join(", "), r.build)));
            }
        }
    }
    if !order.is_empty() {
        let order: Vec<String> = order.into_iter().map(|(_, o)| o).collect();
        println!("nginx's address order, asked from nginx: {}", order.join("; "));
    }
    for r in &reports {
        if let Some(f) = &r.fault {
            println!("harness fault: nginx {}, upstream {}:", r.build, r.upstream);
            for line in f.lines() {
                println!("    {line}");
            }
            println!("  replay: {}", replay_command(args, file, &r.upstream, installation_of(&choices, &r.build)));
            faults += 1;
        }
    }
    let findings: Vec<_> = reports.iter().flat_map(|r| r.findings.iter().cloned()).collect();
    for f in findings.iter().take(5) {
        println!(
            "  nginx {} upstream {} key {}: expected {:?}, nginx {:?}\n  replay: {}",
            f.version,
            reports.iter().find(|r| r.findings.iter().any(|g| g.replay == f.replay)).map_or("", |r| &r.upstream),
            show_key(&f.mismatch.key),
            f.mismatch.expected,
            f.mismatch.actual,
            f.replay
        );
    }
    let verdict = if !findings.is_empty() {
        Verdict::Mismatches
    } else if faults > 0 || reports.iter().all(|r| r.requests == 0) {
        Verdict::HarnessFault
    } else {
        Verdict::Proven
    };
    match verdict {
        Verdict::Proven => println!("0 mismatches: the library routes exactly like nginx on every request above."),
        Verdict::HarnessFault if faults == 0 => println!("nothing checked: no request was compared"),
        Verdict::HarnessFault => println!("harness fault: this run proves nothing (see above)"),
        _ => {}
    }
    save_findings(args, &findings, verdict);
    verdict
}

fn installation_of<'a>(choices: &'a [(Installation, Result<Choice, String>)], label: &str) -> &'a Installation {
    choices.iter().map(|(i, _)| i).find(|i| i.label() == label).expect("a report's build")
}

fn print_environment(prover: &Prover) {
    let Some(plan) = prover.plan() else {
        println!(
            "  network: no private namespaces (not root, or ${} set): the config's addresses cannot be made \
             local; only upstreams whose servers are all loopback literals run, on this machine's loopback",
            netns::NO_NAMESPACES_ENV
        );
        return;
    };
    let addrs: Vec<String> = plan.on_lo.iter().map(ToString::to_string).collect();
    println!(
        "  network: a private network namespace; {} addresses added to its lo ({}); front {}; ephemeral ports {}-{} \
         (no port of the config)",
        addrs.len(),
        addrs.join(", "),
        plan.front,
        plan.ephemeral.start(),
        plan.ephemeral.end()
    );
    for n in &plan.names {
        let ips: Vec<String> = n.addresses.iter().map(ToString::to_string).collect();
        match n.source {
            NameSource::Machine => println!(
                "  hostname {}: {} (resolves on this machine; resolved inside a private namespace, so no DNS query \
                 left it)",
                n.name,
                ips.join(", ")
            ),
            NameSource::StandIn => {
                println!("  hostname {}: does not resolve on this machine; stand-in address {}", n.name, ips.join(", "))
            }
        }
    }
    for s in &plan.shadows {
        let socks: Vec<String> = s.sockets.iter().map(|p| p.display().to_string()).collect();
        println!(
            "  unix sockets {}: in a private directory mounted over {} (inside the namespace only)",
            socks.join(", "),
            s.target.display()
        );
    }
}

/// One row per build and upstream.
pub(crate) fn table(reports: &[UpstreamReport]) -> String {
    let mut out = format!(
        "{:<11} {:<12} {:<10} {:>7} {:>5} {:>6} {:>11} {:>8} {:>4} {:>9} {:>10}\n",
        "nginx",
        "upstream",
        "method",
        "servers",
        "peers",
        "points",
        "arcs proven",
        "requests",
        "runs",
        "failovers",
        "mismatches"
    );
    for r in reports {
        let _ = writeln!(
            out,
            "{:<11} {:<12} {:<10} {:>7} {:>5} {:>6} {:>11} {:>8} {:>4} {:>9} {:>10}",
            r.build,
            r.upstream,
            r.method.as_str(),
            r.servers,
            r.peers,
            r.points,
            r.arcs_proven,
            r.requests,
            r.runs,
            r.failovers,
            if r.fault.is_some() { "fault".to_string() } else { r.findings.len().to_string() }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use nginx_ketama::Method;

    #[derive(Debug, Parser)]
    struct Wrap {
        #[command(flatten)]
        args: VerifyArgs,
    }

    /// The replay command names the config, the upstream and everything that changes the keys.
    #[test]
    fn replay_names_the_config_and_the_upstream() {
        let args =
            Wrap::parse_from(["x", "--config", "a/nginx.conf", "--seed", "7", "--keys", "50", "--no-ring-proof"]).args;
        let install = Installation {
            version: "1.26.3".parse().unwrap(),
            libc: Libc::Musl,
            stream: nginx_ketama_harness::install::Stream::BuiltIn,
            configure: Vec::new(),
            origin: Origin::Provisioned { dir: "/nowhere".into(), package: "1.26.3-3".into() },
        };
        assert_eq!(
            replay_command(&args, Path::new("a/nginx.conf"), "app", &install),
            "nginx-ketama verify --config a/nginx.conf --upstream app --versions 1.26.3 --libc musl --seed 7 --keys 50 \
             --failure-runs 4 --no-ring-proof"
        );
        assert!(Wrap::try_parse_from(["x", "--upstream", "app"]).is_err(), "--upstream needs --config");
    }

    #[test]
    fn the_table_has_one_row_per_build_and_upstream() {
        let r = UpstreamReport {
            peers: 6,
            points: 1440,
            arcs_proven: 1440,
            requests: 100,
            runs: 5,
            failovers: 3,
            ..UpstreamReport::new("1.30.6".into(), "app".into(), Method::Consistent, 6)
        };
        let t = table(&[r]);
        let rows: Vec<&str> = t.lines().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[1].split_whitespace().collect::<Vec<_>>(),
            ["1.30.6", "app", "consistent", "6", "6", "1440", "1440", "100", "5", "3", "0"]
        );
    }
}
