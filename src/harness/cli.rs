//! `nginx-ketama verify`: the parity sweep with a progress bar, a summary table and a replay file.

use super::backend::{Backend, docker_available, docker_backend};
use super::install::Installation;
use super::parity::show_key;
use super::sweep::{Event, Finding, SweepOptions, VersionReport, sweep_backend};
use crate::version::NginxVersion;
use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::PathBuf;

/// Options of `nginx-ketama verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Where nginx runs: `auto` (Docker if an engine answers and the images exist, else local binaries),
    /// `local` or `docker`.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// nginx versions to check (default: every provisioned one).
    #[arg(long, value_delimiter = ',')]
    pub versions: Vec<NginxVersion>,
    /// Random topologies per version.
    #[arg(long, default_value_t = 14)]
    pub topologies: usize,
    /// Random keys per topology (plus 2% empty keys and, for consistent upstreams, two forged keys per
    /// ring point).
    #[arg(long, default_value_t = 3000)]
    pub keys: usize,
    /// Master seed (a mismatch report names it).
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Run only this topology index (to replay a mismatch).
    #[arg(long)]
    pub only: Option<usize>,
    /// Largest topology, in server lines.
    #[arg(long, default_value_t = 60)]
    pub max_servers: usize,
    /// Skip the arc-by-arc ring proof.
    #[arg(long)]
    pub no_ring_proof: bool,
    /// Stream sessions per version (local backend; 0 to skip).
    #[arg(long, default_value_t = 300)]
    pub stream_sessions: usize,
    /// Where to write mismatches (JSON lines) if there are any.
    #[arg(long, default_value = "target/nginx-ketama/mismatches.jsonl")]
    pub mismatches: PathBuf,
    /// Directory of provisioned nginx builds (default: $NGINX_KETAMA_NGINX_DIR or ./.nginx).
    #[arg(long)]
    pub nginx_dir: Option<PathBuf>,
}

/// Chooses backends for `args`.
///
/// # Errors
///
/// No provisioned nginx, or Docker asked for but not available.
pub fn backends(args: &VerifyArgs) -> Result<Vec<Backend>> {
    let root = args.nginx_dir.clone().unwrap_or_else(Installation::default_root);
    let installs = Installation::discover(&root);
    let wanted: Vec<NginxVersion> =
        if args.versions.is_empty() { installs.iter().map(|i| i.version).collect() } else { args.versions.clone() };
    if wanted.is_empty() && args.backend != "docker" {
        bail!("no nginx under {} — run scripts/provision-nginx first", root.display());
    }
    let docker = match args.backend.as_str() {
        "local" => false,
        "docker" => true,
        "auto" => docker_available() && wanted.iter().all(|v| docker_backend(*v).is_ok()),
        other => bail!("unknown backend {other:?} (auto, local or docker)"),
    };
    wanted
        .iter()
        .map(|v| {
            if docker {
                docker_backend(*v)
            } else {
                installs.iter().find(|i| i.version == *v).cloned().map(Backend::Local).ok_or_else(|| {
                    anyhow::anyhow!(
                        "nginx {v} is not provisioned under {} (scripts/provision-nginx {v})",
                        root.display()
                    )
                })
            }
        })
        .collect()
}

/// Runs `verify`; returns the process exit code (0 only with zero mismatches).
///
/// # Errors
///
/// Anything that stops the sweep (nginx not starting, I/O).
pub fn verify(args: VerifyArgs) -> Result<i32> {
    let backends = backends(&args)?;
    let options = SweepOptions {
        seed: args.seed,
        topologies: args.topologies,
        only: args.only,
        keys: args.keys,
        prove_ring: !args.no_ring_proof,
        stream_sessions: args.stream_sessions,
        resolver_exe: std::env::current_exe().ok(),
        topology: super::topology::TopologyOptions { max_servers: args.max_servers, ..Default::default() },
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>8} {bar:30} {pos:>7}/{len:7} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut reports = Vec::new();
    for backend in &backends {
        let report = sweep_backend(backend, &options, &mut |e| match e {
            Event::Topology(version, index, label, planned) => {
                bar.set_prefix(version.to_string());
                bar.set_length(planned as u64);
                bar.set_position(0);
                bar.set_message(format!("topology {index}: {label}"));
            }
            Event::Requests(n) => bar.set_position(n as u64),
            Event::Done(0) => {}
            Event::Done(n) => bar.println(format!("  {n} mismatches")),
        })?;
        let mut report = report;
        // Containers hide the client's source port; check the stream module with the local build instead.
        if let (Backend::Docker { version, .. }, true) =
            (backend, options.stream_sessions > 0 && options.only.is_none())
        {
            let root = args.nginx_dir.clone().unwrap_or_else(Installation::default_root);
            if let Some(install) = Installation::discover(&root).into_iter().find(|i| i.version == *version) {
                bar.set_message(format!("stream module, local nginx {version}"));
                let (sessions, findings) = super::sweep::stream_check(&Backend::Local(install), &options)?;
                report.stream_sessions = sessions;
                report.findings.extend(findings);
            }
        }
        reports.push(report);
    }
    bar.finish_and_clear();
    print!("{}", table(&reports));
    let findings: Vec<&Finding> = reports.iter().flat_map(|r| &r.findings).collect();
    if findings.is_empty() {
        println!("0 mismatches: the library routes exactly like nginx on every request above.");
        return Ok(0);
    }
    write_findings(&args, &findings)?;
    for f in findings.iter().take(5) {
        println!(
            "  nginx {} topology {} key {}: expected {:?}, nginx {:?}",
            f.version,
            f.topology,
            show_key(&f.mismatch.key),
            f.mismatch.expected,
            f.mismatch.actual
        );
    }
    println!("{} mismatches; all of them are in {}", findings.len(), args.mismatches.display());
    Ok(1)
}

/// The summary table, one row per nginx version.
pub fn table(reports: &[VersionReport]) -> String {
    let mut out = format!(
        "{:<8} {:<7} {:>10} {:>9} {:>12} {:>10} {:>9} {:>8} {:>11} {:>9}\n",
        "nginx",
        "backend",
        "topologies",
        "requests",
        "arcs proven",
        "failovers",
        "rr/empty",
        "stream",
        "mismatches",
        "req/s"
    );
    for r in reports {
        out.push_str(&format!(
            "{:<8} {:<7} {:>10} {:>9} {:>12} {:>10} {:>9} {:>8} {:>11} {:>9.0}\n",
            r.version,
            r.backend.split_whitespace().next().unwrap_or(""),
            format!("{} ({}c)", r.topologies, r.consistent),
            r.requests,
            r.arcs_proven,
            r.failovers,
            r.round_robin,
            r.stream_sessions,
            r.findings.len(),
            r.rate()
        ));
    }
    out
}

fn write_findings(args: &VerifyArgs, findings: &[&Finding]) -> Result<()> {
    if let Some(dir) = args.mismatches.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = args.mismatches.with_extension("jsonl.tmp");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    for f in findings {
        let m = &f.mismatch;
        let line = serde_json::json!({
            "nginx": f.version,
            "backend": f.backend,
            "seed": args.seed,
            "topology": f.topology,
            "topology_seed": f.topology_seed,
            "request_index": m.index,
            "kind": format!("{:?}", m.kind),
            "key": String::from_utf8_lossy(&m.key),
            "key_hex": m.key.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "expected": {"status": m.expected.0, "upstream_addr": m.expected.1},
            "nginx_said": {"status": m.actual.0, "upstream_addr": m.actual.1},
            "upstream_block": f.upstream_block,
            "replay": format!(
                "nginx-ketama verify --backend {} --versions {} --seed {} --keys {} --only {}",
                f.backend.split_whitespace().next().unwrap_or("local"), f.version, args.seed, args.keys, f.topology
            ),
        });
        serde_json::to_writer(&mut file, &line)?;
        file.write_all(b"\n")?;
    }
    file.flush()?;
    drop(file);
    std::fs::rename(&tmp, &args.mismatches)?;
    Ok(())
}
