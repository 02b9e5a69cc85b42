//! The stream module (`stream { upstream { hash $remote_port consistent; } }`): same algorithm, keyed by the
//! client's source port, which this client chooses by binding before it connects.

use super::backend::{Backend, Instance};
use super::parity::Model;
use super::site::{Part, STREAM_KEY, Site};
use super::topology::Topology;
use anyhow::{Context, Result, bail};
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::FromRawFd;
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
    }
}

/// Opens a TCP connection from `127.0.0.1:source_port` to `to`.
fn connect_from(source_port: u16, to: SocketAddrV4) -> std::io::Result<TcpStream> {
    // SAFETY: plain socket calls on a descriptor we own; it is closed on every error path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            &one as *const _ as *const libc::c_void,
            std::mem::size_of_val(&one) as libc::socklen_t,
        );
        let sa = |a: SocketAddrV4| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
            sin_zero: [0; 8],
        };
        let local = sa(SocketAddrV4::new(Ipv4Addr::LOCALHOST, source_port));
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, &local as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let remote = sa(to);
        if libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
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
pub fn run_stream(
    backend: &Backend,
    topology: &Topology,
    ports: &[u16],
    model: &mut dyn Model,
) -> Result<StreamReport> {
    let instance: Box<dyn Instance> = backend.start(&stream_site(topology), backend.prefix()?)?;
    let (Some(front), Some(log)) = (instance.stream_front(), instance.stream_log()) else {
        bail!("{} cannot run stream checks (client source ports are not preserved)", backend.describe());
    };
    let SocketAddr::V4(front) = front else { bail!("stream front must be IPv4") };
    let mut used = Vec::with_capacity(ports.len());
    for &port in ports {
        let Ok(mut s) = connect_from(port, front) else { continue };
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
            bail!("stream log has {} of {} sessions\n{}", lines.len(), used.len(), instance.logs());
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
        let (_, expected) = model.expect(port.to_string().as_bytes());
        if expected != actual {
            mismatches.push((*port, expected, actual.to_string()));
        }
    }
    Ok(StreamReport { sessions: used.len(), mismatches })
}
