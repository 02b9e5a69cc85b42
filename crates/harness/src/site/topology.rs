//! Random upstream topologies: server lines in every legal spelling, and where each one really listens.
//!
//! A [`Topology`] is the single source of truth for one experiment: it renders the `upstream` block nginx
//! runs and the echo listeners behind it, and it builds the library's [`Upstream`] for the same lines.

use nginx_ketama::ring::reference;
use nginx_ketama::server::Server;
use nginx_ketama::upstream::{Method, Peer, Upstream, UpstreamError};
use nginx_ketama::version::{Libc, NginxVersion};
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use rand::{Rng, RngExt, SeedableRng};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// How a `server` argument is spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Spelling {
    /// `127.a.b.c:port`
    IpPort,
    /// `127.a.b.c:0port` (leading zeros: hashed as written, connected as the number).
    IpOddPort,
    /// `127.a.b.c` (port 80).
    IpNoPort,
    /// `[::1]:port`
    Ipv6Port,
    /// `[::1]` (port 80).
    Ipv6NoPort,
    /// `unix:/path`
    Unix,
    /// `UNIX:/path`
    UnixUpper,
    /// `name:port`, one address (resolved through the topology's hosts file).
    Hostname,
    /// `name:port`, two addresses.
    HostnameTwoAddresses,
}

impl Spelling {
    /// Every spelling, for reports.
    pub const ALL: [Spelling; 9] = [
        Spelling::IpPort,
        Spelling::IpOddPort,
        Spelling::IpNoPort,
        Spelling::Ipv6Port,
        Spelling::Ipv6NoPort,
        Spelling::Unix,
        Spelling::UnixUpper,
        Spelling::Hostname,
        Spelling::HostnameTwoAddresses,
    ];
}

/// Where one peer listens (or would, if it were alive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A unix socket path.
    Unix(String),
}

/// One address of one server line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Where it listens.
    pub listen: Listen,
    /// The text nginx prints for it in `$upstream_addr`.
    pub name: String,
}

/// One `server` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLine {
    /// The argument as written.
    pub server: String,
    /// How it is spelled.
    pub spelling: Spelling,
    /// `weight=`.
    pub weight: u32,
    /// `down`.
    pub down: bool,
    /// Nothing listens: connections are refused.
    pub dead: bool,
    /// `backup` (declared before `hash`).
    pub backup: bool,
    /// `max_fails=` (0 unless the topology tests failure accounting).
    pub max_fails: u32,
    /// `fail_timeout=` in seconds.
    pub fail_timeout: u64,
    /// Addresses in the order nginx's resolver returns them (one unless a hostname has several).
    pub endpoints: Vec<Endpoint>,
}

/// What the generator may use; backends that cannot provide something turn it off.
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// `[::1]` listeners work.
    pub ipv6: bool,
    /// Port 80 on loopback addresses can be bound (root).
    pub port80: bool,
    /// A private hosts file can be given to nginx (and to the resolver that models it).
    pub hostnames: bool,
    /// Unix sockets can be used; the directory they live in (short, to fit `sun_path`).
    pub unix_dir: Option<String>,
}

/// Knobs for [`Topology::random`].
#[derive(Debug, Clone)]
pub struct TopologyOptions {
    /// Fewest server lines.
    pub min_servers: usize,
    /// Most server lines.
    pub max_servers: usize,
    /// Force a method; `None` picks consistent 3 times in 4.
    pub method: Option<Method>,
    /// Allow `backup` lines (declared before `hash`).
    pub backups: bool,
    /// Allow failure accounting (`max_fails=1 fail_timeout=1h` on some lines).
    pub failure_accounting: bool,
}

impl Default for TopologyOptions {
    fn default() -> Self {
        TopologyOptions { min_servers: 2, max_servers: 60, method: None, backups: true, failure_accounting: true }
    }
}

/// One upstream experiment.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The seed it was generated from (with [`Topology::random`]).
    pub seed: u64,
    /// `hash ... consistent` or plain `hash`.
    pub method: Method,
    /// Server lines in config order (primary and backup interleaved, as written).
    pub lines: Vec<ServerLine>,
    /// `/etc/hosts` lines nginx must see: (address, name), in file order.
    pub hosts: Vec<(IpAddr, String)>,
}

/// Ports of topology addresses (live or dead), besides port 80: below the ephemeral range of every namespace
/// nginx runs in (`nginx::netns::EPHEMERAL_PORTS`, which checks it), so the kernel never hands one out as a
/// source port and a dead server's port can never connect to itself.
pub const SERVICE_PORTS: std::ops::RangeInclusive<u16> = 10000..=32767;

/// How many ports of one address [`Topology::with_collisions`] searches: 2,048 strings of 160 points share
/// about 12 hashes between different strings (birthday bound `n² / 2³³` for `n` = 327,680 points).
pub const COLLISION_SEARCH_PORTS: usize = 2048;

/// The upstream name used in rendered configs.
pub const UPSTREAM: &str = "parity";

/// How a backend's resolver answered for each hostname of a topology: the addresses in its order (nginx
/// takes them in that order, so the peers' list order depends on it). Returned by the backend (a resolver
/// run in nginx's namespace, or nginx itself asked through probe upstreams) and applied with
/// [`Topology::resolved`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolution(Vec<(String, Vec<IpAddr>)>);

impl Resolution {
    /// The addresses of `name`, in the resolver's order (none if it was not asked or did not resolve).
    pub fn addresses(&self, name: &str) -> &[IpAddr] {
        self.0.iter().find(|(n, _)| n == name).map(|(_, ips)| ips.as_slice()).unwrap_or(&[])
    }
}

impl FromIterator<(String, Vec<IpAddr>)> for Resolution {
    fn from_iter<I: IntoIterator<Item = (String, Vec<IpAddr>)>>(names: I) -> Resolution {
        Resolution(names.into_iter().collect())
    }
}

impl Topology {
    /// A reproducible random topology. Every port is in [`SERVICE_PORTS`] (or 80); addresses are random in
    /// 127/8 (never 127.0.0.1, where the front servers listen) and `[::1]`: nginx runs in a namespace of its
    /// own (see [`crate::nginx::netns`]), so nothing else can hold them.
    pub fn random(seed: u64, options: &TopologyOptions, caps: &Capabilities) -> Topology {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let method =
            options.method.unwrap_or(if rng.random_range(0..4) < 3 { Method::Consistent } else { Method::Plain });
        let n = rng.random_range(options.min_servers..=options.max_servers.max(options.min_servers));
        let mut used_ips = BTreeSet::new();
        let mut used_ports = BTreeSet::new();
        let mut t = Topology { seed, method, lines: Vec::new(), hosts: Vec::new() };
        let mut have_v6_80 = false;
        let mut have_multi = false;
        let mut unix_n = 0;
        let mut host_n = 0;
        while t.lines.len() < n {
            // Duplicate lines: the very same text again (with its own parameters).
            if !t.lines.is_empty() && rng.random_range(0..100) < 5 {
                let mut dup = t.lines[rng.random_range(0..t.lines.len())].clone();
                dup.weight = random_weight(&mut rng);
                t.lines.push(dup);
                continue;
            }
            let mut choices = vec![Spelling::IpPort, Spelling::IpPort, Spelling::IpPort, Spelling::IpOddPort];
            if caps.port80 {
                choices.push(Spelling::IpNoPort);
            }
            if caps.ipv6 {
                choices.push(Spelling::Ipv6Port);
                if !have_v6_80 && caps.port80 {
                    choices.push(Spelling::Ipv6NoPort);
                }
            }
            if caps.unix_dir.is_some() {
                choices.extend([Spelling::Unix, Spelling::UnixUpper]);
            }
            if caps.hostnames {
                choices.push(Spelling::Hostname);
                if !have_multi {
                    choices.push(Spelling::HostnameTwoAddresses);
                }
            }
            let spelling = choices[rng.random_range(0..choices.len())];
            let mut fresh_ip = |rng: &mut ChaCha8Rng| loop {
                let ip =
                    Ipv4Addr::new(127, rng.random_range(1..=254), rng.random_range(0..=255), rng.random_range(1..=254));
                if used_ips.insert(ip) {
                    return ip;
                }
            };
            let mut fresh_port = |rng: &mut ChaCha8Rng| loop {
                let p: u16 = rng.random_range(SERVICE_PORTS);
                if used_ports.insert(p) {
                    return p;
                }
            };
            let tcp = |ip: IpAddr, port: u16| Endpoint {
                listen: Listen::Tcp(SocketAddr::new(ip, port)),
                name: SocketAddr::new(ip, port).to_string(),
            };
            let (server, endpoints) = match spelling {
                Spelling::IpPort => {
                    let (ip, port) = (fresh_ip(&mut rng), fresh_port(&mut rng));
                    (format!("{ip}:{port}"), vec![tcp(ip.into(), port)])
                }
                Spelling::IpOddPort => {
                    let (ip, port) = (fresh_ip(&mut rng), fresh_port(&mut rng));
                    (format!("{ip}:{}{port}", "0".repeat(rng.random_range(1..=2))), vec![tcp(ip.into(), port)])
                }
                Spelling::IpNoPort => {
                    let ip = fresh_ip(&mut rng);
                    (ip.to_string(), vec![tcp(ip.into(), 80)])
                }
                Spelling::Ipv6Port => {
                    let port = fresh_port(&mut rng);
                    (format!("[::1]:{port}"), vec![tcp(IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]), port)])
                }
                Spelling::Ipv6NoPort => {
                    have_v6_80 = true;
                    ("[::1]".to_string(), vec![tcp(IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]), 80)])
                }
                Spelling::Unix | Spelling::UnixUpper => {
                    unix_n += 1;
                    let path = format!("{}/u{unix_n}.sock", caps.unix_dir.as_deref().unwrap_or("/tmp"));
                    let prefix = if spelling == Spelling::Unix { "unix:" } else { "UNIX:" };
                    let text = format!("{prefix}{path}");
                    (text.clone(), vec![Endpoint { listen: Listen::Unix(path), name: text }])
                }
                Spelling::Hostname | Spelling::HostnameTwoAddresses => {
                    host_n += 1;
                    let count = if spelling == Spelling::Hostname { 1 } else { 2 };
                    have_multi |= count == 2;
                    let name = format!("backend-{host_n}.test");
                    let port = fresh_port(&mut rng);
                    let mut eps = Vec::new();
                    for _ in 0..count {
                        let ip = fresh_ip(&mut rng);
                        t.hosts.push((ip.into(), name.clone()));
                        eps.push(tcp(ip.into(), port));
                    }
                    (format!("{name}:{port}"), eps)
                }
            };
            let accounting = options.failure_accounting && rng.random_range(0..100) < 10;
            t.lines.push(ServerLine {
                server,
                spelling,
                weight: random_weight(&mut rng),
                down: rng.random_range(0..100) < 8,
                dead: rng.random_range(0..100) < 15,
                backup: options.backups && rng.random_range(0..100) < 6,
                max_fails: u32::from(accounting),
                fail_timeout: if accounting { 3600 } else { 10 },
                endpoints,
            });
        }
        // At least one primary line must exist and be usable, or most requests only test "no live upstreams".
        if t.lines.iter().all(|l| l.backup) {
            t.lines[0].backup = false;
        }
        if !t.lines.iter().any(|l| !l.backup && !l.down && !l.dead) {
            let first = t.lines.iter_mut().find(|l| !l.backup).expect("a primary line");
            first.down = false;
            first.dead = false;
        }
        // Lines sharing a text share their addresses: make them agree on being dead.
        for i in 0..t.lines.len() {
            if let Some(j) = (0..i).find(|&j| t.lines[j].server == t.lines[i].server) {
                t.lines[i].dead = t.lines[j].dead;
            }
        }
        t
    }

    /// This topology with its hostname lines' endpoints taken from `resolution` (the addresses in the
    /// order nginx's resolver returns them for this topology's hosts file); a name it lacks has none.
    pub fn resolved(mut self, resolution: &Resolution) -> Topology {
        for line in &mut self.lines {
            if matches!(line.spelling, Spelling::Hostname | Spelling::HostnameTwoAddresses) {
                let (name, port) = match line.server.rsplit_once(':') {
                    Some((name, port)) => (name, port.parse().unwrap_or(80)),
                    None => (line.server.as_str(), 80),
                };
                line.endpoints = resolution
                    .addresses(name)
                    .iter()
                    .map(|&ip| Endpoint {
                        listen: Listen::Tcp(SocketAddr::new(ip, port)),
                        name: nginx_ketama::upstream::socket_name(SocketAddr::new(ip, port)),
                    })
                    .collect();
            }
        }
        self
    }

    /// Distinct hostnames in the hosts file.
    pub fn hostnames(&self) -> Vec<String> {
        let mut names: Vec<String> = self.hosts.iter().map(|(_, n)| n.clone()).collect();
        names.dedup();
        names
    }

    /// The hosts file text (with `localhost` first).
    pub fn hosts_file(&self) -> String {
        let mut s = String::from("127.0.0.1 localhost\n");
        for (ip, name) in &self.hosts {
            let _ = writeln!(s, "{ip} {name}");
        }
        s
    }

    /// Every distinct endpoint that must accept connections.
    pub fn live_listeners(&self) -> Vec<Listen> {
        let mut out: Vec<Listen> = Vec::new();
        for line in self.lines.iter().filter(|l| !l.dead) {
            for ep in &line.endpoints {
                if !out.contains(&ep.listen) {
                    out.push(ep.listen.clone());
                }
            }
        }
        out
    }

    /// Whether connecting to the peer named `name` (as in `$upstream_addr`) fails.
    pub fn refuses(&self, name: &str) -> bool {
        !self.lines.iter().any(|l| !l.dead && l.endpoints.iter().any(|e| e.name == name))
    }

    /// The spellings used.
    pub fn spellings(&self) -> BTreeSet<Spelling> {
        self.lines.iter().map(|l| l.spelling).collect()
    }

    /// This topology made a *collision topology*: consistent, plus up to `pairs` pairs of new, live
    /// `127.a.b.c:PORT` lines whose point chains share a hash (so two different servers compete for a ring
    /// point and the C library's sort decides, algorithm §3.2), each line inserted at a random place. The
    /// pairs come from a birthday search ([`find_point_collisions`])
    /// over [`COLLISION_SEARCH_PORTS`] random ports of one fresh address; reproducible from the seed.
    pub fn with_collisions(mut self, pairs: usize) -> Topology {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x636f_6c6c);
        self.method = Method::Consistent;
        let used: BTreeSet<IpAddr> = self
            .lines
            .iter()
            .flat_map(|l| &l.endpoints)
            .filter_map(|e| match e.listen {
                Listen::Tcp(a) => Some(a.ip()),
                Listen::Unix(_) => None,
            })
            .collect();
        let mut found: Vec<(String, String)> = Vec::new();
        while found.len() < pairs {
            let ip =
                Ipv4Addr::new(127, rng.random_range(1..=254), rng.random_range(0..=255), rng.random_range(1..=254));
            if used.contains(&IpAddr::V4(ip)) {
                continue;
            }
            let mut ports: Vec<u16> = SERVICE_PORTS.collect();
            ports.shuffle(&mut rng);
            let servers: Vec<String> = ports[..COLLISION_SEARCH_PORTS].iter().map(|p| format!("{ip}:{p}")).collect();
            for (a, _, b, _, _) in find_point_collisions(&servers) {
                let taken = |s: &String| found.iter().any(|(x, y)| x == s || y == s);
                if found.len() < pairs && !taken(&a) && !taken(&b) {
                    found.push((a, b));
                }
            }
        }
        for server in found.into_iter().flat_map(|(a, b)| [a, b]) {
            let addr: SocketAddr = server.parse().expect("ip:port");
            let line = ServerLine {
                server,
                spelling: Spelling::IpPort,
                weight: 1,
                down: false,
                dead: false,
                backup: false,
                max_fails: 0,
                fail_timeout: 10,
                endpoints: vec![Endpoint { listen: Listen::Tcp(addr), name: addr.to_string() }],
            };
            let at = rng.random_range(0..=self.lines.len());
            self.lines.insert(at, line);
        }
        self
    }

    /// The library's model of this upstream, as nginx built against `libc` runs it.
    ///
    /// # Errors
    ///
    /// Whatever [`nginx_ketama::UpstreamBuilder::build`] reports (never for generated topologies).
    pub fn upstream(&self, version: NginxVersion, libc: Libc) -> Result<Upstream, UpstreamError> {
        let mut b = Upstream::builder(self.method).name(UPSTREAM).version(version).libc(libc);
        for line in &self.lines {
            for ep in &line.endpoints {
                let peer = Peer::new(Server::new(line.server.clone()))
                    .with_name(ep.name.clone())
                    .with_weight(line.weight)
                    .with_down(line.down)
                    .with_max_fails(line.max_fails)
                    .with_fail_timeout(line.fail_timeout);
                b = if line.backup { b.backup(peer) } else { b.peer(peer) };
            }
        }
        b.build()
    }

    /// The `upstream` block, as nginx reads it: server lines first (so `backup` is accepted), then `hash`.
    pub fn upstream_block(&self, key: &str, keepalive: bool) -> String {
        let mut s = format!("upstream {UPSTREAM} {{\n");
        for l in &self.lines {
            let _ = write!(
                s,
                "    server {} weight={} max_fails={}",
                super::token::token(&l.server),
                l.weight,
                l.max_fails
            );
            if l.max_fails > 0 {
                let _ = write!(s, " fail_timeout={}s", l.fail_timeout);
            }
            if l.down {
                s.push_str(" down");
            }
            if l.backup {
                s.push_str(" backup");
            }
            s.push_str(";\n");
        }
        let consistent = if self.method == Method::Consistent { " consistent" } else { "" };
        let _ = writeln!(s, "    hash {key}{consistent};");
        if keepalive {
            s.push_str("    keepalive 64;\n");
        }
        s.push_str("}\n");
        s
    }
}

fn random_weight(rng: &mut impl Rng) -> u32 {
    match rng.random_range(0..100) {
        0..70 => 1,
        70..90 => rng.random_range(2..=4),
        _ => rng.random_range(5..=10),
    }
}

/// Random request keys: printable ASCII, UTF-8 text, and long keys; never empty (add empty keys yourself),
/// never with leading or trailing white space (HTTP strips it from header values).
pub fn random_keys(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6b65_7973);
    (0..count)
        .map(|_| {
            let kind = rng.random_range(0..100);
            let len = match kind {
                0..3 => rng.random_range(4096..=6144),
                _ => rng.random_range(1..=40),
            };
            let mut s = String::new();
            while s.len() < len {
                let c = if kind >= 80 {
                    // UTF-8: Latin-1, Greek, CJK, emoji.
                    let ranges = [(0xa1u32, 0xff), (0x391, 0x3c9), (0x4e00, 0x4fff), (0x1f600, 0x1f64f), (0x21, 0x7e)];
                    let (lo, hi) = ranges[rng.random_range(0..ranges.len())];
                    char::from_u32(rng.random_range(lo..=hi)).unwrap_or('x')
                } else {
                    rng.random_range(0x20u8..=0x7e) as char
                };
                s.push(c);
            }
            s.trim().as_bytes().to_vec()
        })
        .map(|k| if k.is_empty() { b"k".to_vec() } else { k })
        .collect()
}

/// Birthday search: every pair of *different* server strings among `servers` (weight 1) whose point
/// chains share a hash, as `(first server, its point number, second server, its point number, hash)`.
pub fn find_point_collisions(servers: &[String]) -> Vec<(String, usize, String, usize, u32)> {
    let mut seen: std::collections::HashMap<u32, (usize, usize)> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (si, s) in servers.iter().enumerate() {
        for (pi, h) in reference::chain(&Server::new(s.as_str()), 160).into_iter().enumerate() {
            match seen.get(&h) {
                Some(&(sj, pj)) if sj != si => out.push((servers[sj].clone(), pj, s.clone(), pi, h)),
                Some(_) => {}
                None => {
                    seen.insert(h, (si, pi));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A collision topology really has different servers sharing ring points, and stays valid.
    #[test]
    fn collision_topologies_collide() {
        let caps = Capabilities { ipv6: false, port80: false, hostnames: false, unix_dir: None };
        for seed in 0..4 {
            let base = Topology::random(seed, &TopologyOptions { max_servers: 8, ..Default::default() }, &caps);
            let t = base.clone().with_collisions(3);
            assert_eq!(t.method, Method::Consistent);
            assert_eq!(t.lines.len(), base.lines.len() + 6);
            let added: Vec<String> =
                t.lines.iter().filter(|l| !base.lines.contains(l)).map(|l| l.server.clone()).collect();
            assert_eq!(added.len(), 6);
            assert_eq!(find_point_collisions(&added).len(), 3, "seed {seed}: {added:?}");
            for libc in Libc::ALL {
                t.upstream(NginxVersion::LATEST, libc).unwrap();
            }
        }
    }

    /// No generated address can be a source port the kernel hands out, nor the front servers' address.
    #[test]
    fn every_port_is_a_service_port() {
        let caps = Capabilities { ipv6: true, port80: true, hostnames: true, unix_dir: Some("/tmp/x".into()) };
        for seed in 0..300 {
            let t = Topology::random(seed, &TopologyOptions::default(), &caps);
            for ep in t.lines.iter().flat_map(|l| &l.endpoints) {
                if let Listen::Tcp(a) = ep.listen {
                    assert!(a.port() == 80 || SERVICE_PORTS.contains(&a.port()), "seed {seed}: {a}");
                    assert_ne!(a.ip(), IpAddr::from([127, 0, 0, 1]), "seed {seed}: the front servers' address");
                }
            }
        }
    }
}
