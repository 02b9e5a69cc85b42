//! The stream module (`stream { upstream { hash $remote_port consistent; } }`): same algorithm, keyed by the
//! client's source port, which this client chooses by binding before it connects.

use crate::nginx::build::Build;
use crate::nginx::instance::Instance;
use crate::nginx::log::log_tail;
use crate::run::parity::Model;
use crate::site::conf::{Part, STREAM_KEY, Site};
use crate::site::topology::Topology;
use anyhow::{Context, Result, bail};
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The stream upstream's site: the topology's lines under `hash $remote_port`.
pub fn stream_site(topology: &Topology) -> Site {
    Site {
        http: None,
        stream: Some(Part {
            upstream_block: topology.upstream_block(STREAM_KEY, false),
            listeners: topology.live_listeners(),
        }),
        hosts: None,
        probes: Vec::new(),
        failing: None,
    }
}

/// Result of a stream run.
#[derive(Debug, Clone)]
pub struct StreamReport {
    /// Sessions compared.
    pub sessions: usize,
    /// (source port, expected, actual) for each difference.
    pub mismatches: Vec<(u16, String, String)>,
}

/// Opens one session per source port, in order, and compares nginx's `$upstream_addr` (from its stream
/// access log) with `model` fed the same ports as keys.
///
/// # Errors
///
/// nginx failing to start, a backend that cannot host stream checks, or the log not appearing.
pub fn run_stream(backend: &Build, topology: &Topology, ports: &[u16], model: &mut dyn Model) -> Result<StreamReport> {
    let instance: Box<dyn Instance> = backend.start(&stream_site(topology), backend.prefix()?)?;
    let (Some(front), Some(log)) = (instance.stream_front(), instance.stream_log()) else {
        bail!("{} cannot run stream checks (client source ports are not preserved)", backend.describe());
    };
    let SocketAddr::V4(_) = front else { bail!("stream front must be IPv4") };
    let net = instance.net();
    let mut used = Vec::with_capacity(ports.len());
    for &port in ports {
        let from = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut s = net
            .connect(front, Some(from), Duration::from_secs(5))
            .with_context(|| format!("connecting to the stream front {front} from {from}"))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
        used.push(port);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= used.len() {
            break lines;
        }
        if Instant::now() > deadline {
            bail!("stream log has {} of {} sessions\n{}", lines.len(), used.len(), log_tail(&instance.logs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut mismatches = Vec::new();
    for (port, line) in used.iter().zip(&lines) {
        let (logged_port, actual) = line.split_once('|').context("stream log line")?;
        if logged_port != port.to_string() {
            bail!(
                "stream log out of order: expected port {port}, found {logged_port}\nsent: {used:?}\nlog:\n{}",
                lines.join("\n")
            );
        }
        let expected = model.expect(port.to_string().as_bytes()).upstream_addr;
        if expected != actual {
            mismatches.push((*port, expected, actual.to_string()));
        }
    }
    Ok(StreamReport { sessions: used.len(), mismatches })
}
