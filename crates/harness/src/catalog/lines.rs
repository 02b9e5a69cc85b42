//! Server lines for catalog cases: every spelling nginx accepts, with the catalog's defaults, and chainable
//! setters for weight, `down`, refusing, `backup` and failure accounting.

use crate::site::topology::{Endpoint, Listen, ServerLine, Spelling, Topology};
use nginx_ketama::server::Server;
use nginx_ketama::upstream::{Method, default_name};
use std::net::{IpAddr, SocketAddr};

/// A server line with the catalog's defaults: weight 1, `max_fails=0` (so refused connections never take a
/// peer out and results stay stateless), live, primary. The endpoint is derived from the spelling:
/// `127.0.2.1:9001`, `127.0.2.1` (port 80), `127.0.2.1:09001` (port 9001), `[::1]:9101`, `[::1]`,
/// `unix:/path` / `UNIX:/path`. Hostnames go through [`host_line`].
pub fn line(server: &str) -> ServerLine {
    let lower = server.to_ascii_lowercase();
    let (spelling, listen, name) = if lower.starts_with("unix:") {
        let spelling = if server.starts_with("unix:") { Spelling::Unix } else { Spelling::UnixUpper };
        (spelling, Listen::Unix(server[5..].to_string()), server.to_string())
    } else {
        let name = default_name(&Server::new(server), 80);
        let addr: SocketAddr = name.parse().unwrap_or_else(|_| panic!("catalog server {server:?} is not a literal"));
        let has_port = server.rsplit_once(':').is_some_and(|(_, p)| !p.ends_with(']'));
        let spelling = match (server.starts_with('['), has_port) {
            (true, true) => Spelling::Ipv6Port,
            (true, false) => Spelling::Ipv6NoPort,
            (false, false) => Spelling::IpNoPort,
            (false, true) if server.rsplit_once(':').is_some_and(|(_, p)| p.starts_with('0')) => Spelling::IpOddPort,
            (false, true) => Spelling::IpPort,
        };
        (spelling, Listen::Tcp(addr), name)
    };
    ServerLine {
        server: server.to_string(),
        spelling,
        weight: 1,
        down: false,
        dead: false,
        backup: false,
        max_fails: 0,
        fail_timeout: 10,
        endpoints: vec![Endpoint { listen, name }],
    }
}

/// A `name:port` line whose name resolves (through the case's private hosts file) to `ips`, in file order.
/// The recorder asks nginx for its resolver's order before recording.
/// Without a port, the line is `name` and connects to port 80.
pub fn host_line(topology: &mut Topology, name: &str, port: Option<u16>, ips: &[IpAddr]) -> ServerLine {
    let mut l = line("127.0.0.1:1");
    l.server = match port {
        Some(p) => format!("{name}:{p}"),
        None => name.to_string(),
    };
    let port = port.unwrap_or(80);
    l.spelling = if ips.len() > 1 { Spelling::HostnameTwoAddresses } else { Spelling::Hostname };
    l.endpoints = ips
        .iter()
        .map(|&ip| {
            topology.hosts.push((ip, name.to_string()));
            let a = SocketAddr::new(ip, port);
            Endpoint { listen: Listen::Tcp(a), name: a.to_string() }
        })
        .collect();
    l
}

/// Chainable setters for catalog lines.
pub(super) trait LineExt {
    fn weight(self, w: u32) -> Self;
    fn down(self) -> Self;
    fn dead(self) -> Self;
    fn backup(self) -> Self;
    fn accounting(self) -> Self;
}

impl LineExt for ServerLine {
    fn weight(mut self, w: u32) -> Self {
        self.weight = w;
        self
    }
    fn down(mut self) -> Self {
        self.down = true;
        self
    }
    fn dead(mut self) -> Self {
        self.dead = true;
        self
    }
    fn backup(mut self) -> Self {
        self.backup = true;
        self
    }
    /// `max_fails=1 fail_timeout=3600s`: a refused connection takes the peer out for the whole run.
    fn accounting(mut self) -> Self {
        self.max_fails = 1;
        self.fail_timeout = 3600;
        self
    }
}

/// A topology of `lines`.
pub(super) fn topo(method: Method, lines: Vec<ServerLine>) -> Topology {
    Topology { seed: 0, method, lines, hosts: Vec::new() }
}
/// `127.0.a.b`.
pub(super) fn ip(a: u8, b: u8) -> IpAddr {
    IpAddr::from([127, 0, a, b])
}

/// `127.0.C.i:PORT` for `i` in `hosts`.
pub(super) fn lines(c: u8, hosts: impl IntoIterator<Item = u32>, port: u16) -> Vec<ServerLine> {
    hosts.into_iter().map(|i| line(&format!("127.0.{c}.{i}:{port}"))).collect()
}
