//! Where a config's servers live during the proof: which addresses go on `lo`, what each hostname resolves
//! to, the namespace's ephemeral port range, the front server's address, which directories are shadowed
//! for `unix:` sockets — and which server lines cannot be hosted at all, and why. Pure: computed from the
//! upstreams, a resolver and the file system's directories, tested without nginx.
//!
//! What cannot be hosted (each refusal names the `server` line, `file:line`, and why; the upstream is then
//! not run, never compared):
//! * addresses TCP cannot connect to, or that are not one server's own: `0.0.0.0/8` and `[::]` (a
//!   connection to them reaches the host itself), the broadcast address `255.255.255.255`, multicast
//!   (`224.0.0.0/4`, `ff00::/8`), IPv6 link-local addresses (`fe80::/10`: nginx has no way to name their
//!   interface, so it cannot connect to them on any machine). An IPv4-mapped IPv6 address
//!   (`[::ffff:10.0.0.1]`) is hosted on its IPv4 address, which is where the kernel connects it.
//! * `unix:` sockets whose directory cannot be replaced by a private one: a path with `..`, a path none of
//!   whose directories exist (the private one would cover `/`), and a directory whose cover would hide
//!   what the run needs (`/etc/passwd`, the C library, `/proc`, the nginx build: a socket in `/etc`,
//!   `/usr/lib` or `/proc`). A relative path is hosted in the namespace's private working directory (nginx
//!   resolves it against its own).

use super::ConfigUpstream;
use crate::site::topology::{Listen, Spelling};
use nginx_ketama::server::Address;
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::{Component, Path, PathBuf};

/// Where a hostname's addresses come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameSource {
    /// It resolves on this machine (resolved in a private network namespace with a private name service:
    /// only `/etc/hosts` can answer); its addresses are kept, in the resolver's order.
    Machine,
    /// It does not resolve here: a stand-in address from 127.254.0.0/16 is given to it.
    StandIn,
}

/// One hostname of the config and the addresses the private hosts file gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePlan {
    /// The name as written in the `server` line.
    pub name: String,
    /// Its addresses, in hosts-file order.
    pub addresses: Vec<IpAddr>,
    /// Where they come from.
    pub source: NameSource,
}

/// A unix socket of the config in a shadowed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Socket {
    /// The path as written.
    pub path: PathBuf,
    /// Where it is below the shadow's target.
    pub within: PathBuf,
}

/// A directory shadowed by a private one inside the mount namespace, so the config's `unix:` sockets can be
/// created there without touching the machine's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadow {
    /// The existing directory that is covered (the socket's directory, or its nearest existing ancestor),
    /// with symbolic links resolved.
    pub target: PathBuf,
    /// The sockets under it.
    pub sockets: Vec<Socket>,
}

/// An upstream the plan leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The upstream's name.
    pub upstream: String,
    /// Why: the first `server` line that cannot be hosted, with its `file:line`.
    pub why: String,
}

/// Everything the namespace needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPlan {
    /// Addresses added to `lo` (everything outside 127.0.0.0/8 and `::1`, which `lo` already has).
    pub on_lo: Vec<IpAddr>,
    /// Every hostname, with its addresses.
    pub names: Vec<NamePlan>,
    /// Every TCP port of the config (live or failing).
    pub ports: BTreeSet<u16>,
    /// The namespace's ephemeral range: no port of the config (nor the front's) is in it, so a failing
    /// server's port can never become nginx's own source port (see [`crate::nginx::netns`]).
    pub ephemeral: RangeInclusive<u16>,
    /// The front server: an address the config does not use.
    pub front: SocketAddr,
    /// Directories shadowed for unix sockets.
    pub shadows: Vec<Shadow>,
    /// Relative unix socket paths: nginx runs in a private working directory, where they are created.
    pub relative: Vec<PathBuf>,
    /// Upstreams that cannot be hosted (none of their addresses or sockets is in the plan).
    pub refused: Vec<Refused>,
}

/// The whole config cannot be hosted (not one upstream of it): the config's ports leave no ephemeral
/// range, or no address is left for the front server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unhostable(pub String);

/// The fewest ports an ephemeral range may have.
pub const MIN_EPHEMERAL: u16 = 1000;

/// The host part of a hostname line (`app.internal` of `app.internal:8080`).
pub fn hostname_of(server: &str) -> Option<String> {
    match Address::parse(server) {
        Ok(Address::Host { host, .. }) => Some(host),
        _ => None,
    }
}

/// Why a private namespace cannot give `ip` to one server (`None`: it can, on `lo`).
pub fn unhostable_ip(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) if v4.octets()[0] == 0 => Some(
            "an address of 0.0.0.0/8 (\"this network\"): a connection to it reaches this host itself (or nothing), \
             so it cannot be one server's own address",
        ),
        IpAddr::V4(v4) if v4.is_broadcast() => Some("the broadcast address: TCP cannot connect to it"),
        IpAddr::V4(v4) if v4.is_multicast() => Some("a multicast address: TCP cannot connect to it"),
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => unhostable_ip(IpAddr::V4(v4)),
            None if v6.is_unspecified() => Some(
                "the unspecified address: a connection to it reaches this host itself, so it cannot be one server's \
                 own address",
            ),
            None if v6.is_multicast() => Some("a multicast address: TCP cannot connect to it"),
            None if v6.is_unicast_link_local() => Some(
                "a link-local address: nginx cannot name its interface (no `%zone`), so it cannot connect to it on \
                 any machine",
            ),
            None => None,
        },
    }
}

/// Whether `lo` has `ip` without being told: 127.0.0.0/8 and `::1`.
pub fn is_on_lo_already(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

/// What one upstream needs from the namespace.
#[derive(Debug, Default)]
struct Needs {
    ips: Vec<IpAddr>,
    ports: Vec<u16>,
    sockets: Vec<(PathBuf, Shadow)>,
    relative: Vec<PathBuf>,
}

impl NetworkPlan {
    /// Plans the namespace for `upstreams` (hostname lines not yet resolved). `resolve` says what a name
    /// resolves to on this machine (`None`: it does not); `needed` are the paths the run reads inside the
    /// namespace (the nginx builds, the system files of [`needed_paths`]): no shadow may hide them.
    ///
    /// # Errors
    ///
    /// The config as a whole cannot be hosted ([`Unhostable`]): its ports leave no ephemeral range of
    /// [`MIN_EPHEMERAL`] ports, or every loopback address is taken. An upstream that cannot be hosted is
    /// not an error: it is [`NetworkPlan::refused`].
    pub fn new(
        upstreams: &[&ConfigUpstream],
        mut resolve: impl FnMut(&str) -> Option<Vec<IpAddr>>,
        needed: &[&Path],
    ) -> Result<NetworkPlan, Unhostable> {
        let mut names: Vec<NamePlan> = Vec::new();
        // Names compare without case, as resolvers do.
        let mut index: HashMap<String, usize> = HashMap::new();
        for u in upstreams {
            for line in &u.topology.lines {
                if let Some(host) = hostname_line(&line.server, line.spelling)
                    && !index.contains_key(&host.to_ascii_lowercase())
                {
                    let (addresses, source) = match resolve(&host) {
                        Some(addrs) if !addrs.is_empty() => (addrs, NameSource::Machine),
                        _ => (Vec::new(), NameSource::StandIn),
                    };
                    index.insert(host.to_ascii_lowercase(), names.len());
                    names.push(NamePlan { name: host, addresses, source });
                }
            }
        }
        let needed = canonical_all(needed);
        let mut refused = Vec::new();
        let mut hosted: Vec<Needs> = Vec::new();
        let addresses_of = |host: &str| index.get(&host.to_ascii_lowercase()).map_or(&[][..], |&i| &names[i].addresses);
        for u in upstreams {
            match needs_of(u, addresses_of, &needed) {
                Ok(needs) => hosted.push(needs),
                Err(why) => refused.push(Refused { upstream: u.name.clone(), why }),
            }
        }
        let mut ips: BTreeSet<IpAddr> = hosted.iter().flat_map(|n| n.ips.iter().copied()).collect();
        let ports: BTreeSet<u16> = hosted.iter().flat_map(|n| n.ports.iter().copied()).collect();
        let mut stand_ins = (1..=u16::MAX).map(|i| {
            let [hi, lo] = i.to_be_bytes();
            IpAddr::V4(Ipv4Addr::new(127, 254, hi, lo))
        });
        for n in names.iter_mut().filter(|n| n.source == NameSource::StandIn) {
            let ip = stand_ins.find(|ip| !ips.contains(ip)).ok_or_else(|| {
                Unhostable("more names that do not resolve than stand-in addresses (127.254.0.0/16)".into())
            })?;
            ips.insert(ip);
            n.addresses = vec![ip];
        }
        // The first loopback address the config does not use (there are 2^24; a config has fewer).
        let front_ip = (1..0x00ff_ffffu32)
            .map(|i| IpAddr::V4(Ipv4Addr::from(0x7f00_0000 | i)))
            .find(|ip| !ips.contains(ip))
            .ok_or_else(|| Unhostable("every loopback address is taken: no address is left for the front".into()))?;
        // Its port: the first one no server uses; on an address of its own, any port would do.
        let front_port = (1024..=u16::MAX).find(|p| !ports.contains(p)).unwrap_or(1024);
        let mut taken = ports.clone();
        taken.insert(front_port);
        let ephemeral = ephemeral_range(&taken)?;
        let on_lo = ips.iter().copied().filter(|ip| !is_on_lo_already(*ip)).collect();
        let mut relative: Vec<PathBuf> = Vec::new();
        for r in hosted.iter().flat_map(|n| &n.relative) {
            if !relative.contains(r) {
                relative.push(r.clone());
            }
        }
        Ok(NetworkPlan {
            on_lo,
            names,
            ports,
            ephemeral,
            front: SocketAddr::new(front_ip, front_port),
            shadows: merge_shadows(hosted.into_iter().flat_map(|n| n.sockets).map(|(_, s)| s).collect()),
            relative,
            refused,
        })
    }

    /// The private hosts file: every name's addresses, nothing else.
    pub fn hosts_file(&self) -> String {
        let mut s = String::from("# nginx-ketama verify --config: private hosts file\n");
        for n in &self.names {
            for a in &n.addresses {
                s.push_str(&format!("{a} {}\n", n.name));
            }
        }
        s
    }

    /// Why `upstream` is not in the plan (`None`: it is).
    pub fn refusal(&self, upstream: &str) -> Option<&str> {
        self.refused.iter().find(|r| r.upstream == upstream).map(|r| r.why.as_str())
    }
}

/// The host of a hostname line.
fn hostname_line(server: &str, spelling: Spelling) -> Option<String> {
    matches!(spelling, Spelling::Hostname | Spelling::HostnameTwoAddresses).then(|| hostname_of(server)).flatten()
}

/// What `u` needs, or why the first line that cannot be hosted cannot.
fn needs_of<'n>(
    u: &ConfigUpstream,
    addresses_of: impl Fn(&str) -> &'n [IpAddr],
    needed: &[PathBuf],
) -> Result<Needs, String> {
    let mut needs = Needs::default();
    for (i, line) in u.topology.lines.iter().enumerate() {
        let at = u.locations.get(i).map_or_else(|| u.location.clone(), Clone::clone);
        let refuse = |why: String| format!("server \"{}\" in {at} cannot be hosted: {why}", line.server);
        if let Some(host) = hostname_line(&line.server, line.spelling) {
            if let Ok(a) = Address::parse(&line.server) {
                needs.ports.push(a.port().unwrap_or(80));
            }
            for ip in addresses_of(&host) {
                if let Some(why) = unhostable_ip(*ip) {
                    return Err(refuse(format!("{host} resolves on this machine to {ip}, {why}")));
                }
                needs.ips.push(*ip);
            }
        }
        for ep in &line.endpoints {
            match &ep.listen {
                Listen::Tcp(a) => {
                    if let Some(why) = unhostable_ip(a.ip()) {
                        return Err(refuse(why.to_string()));
                    }
                    needs.ips.push(a.ip().to_canonical());
                    needs.ports.push(a.port());
                }
                Listen::Unix(p) => {
                    let path = PathBuf::from(p);
                    if path.components().any(|c| c == Component::ParentDir) {
                        return Err(refuse(
                            "a path with `..`: the proof would have to decide where it leads; spell it without `..`"
                                .into(),
                        ));
                    }
                    if path.is_relative() {
                        needs.relative.push(path);
                    } else {
                        let shadow = shadow_of(&path, needed).map_err(refuse)?;
                        needs.sockets.push((path, shadow));
                    }
                }
            }
        }
    }
    Ok(needs)
}

/// The directory to shadow for the absolute socket path `socket`: its directory, or its nearest existing
/// ancestor, with symbolic links resolved; refused if that is `/` or would hide one of `needed`.
fn shadow_of(socket: &Path, needed: &[PathBuf]) -> Result<Shadow, String> {
    let mut dir = socket.parent().unwrap_or(Path::new("/")).to_path_buf();
    while !dir.is_dir() {
        dir = dir.parent().unwrap_or(Path::new("/")).to_path_buf();
    }
    let within = socket.strip_prefix(&dir).map(Path::to_path_buf).unwrap_or_default();
    let target = dir.canonicalize().unwrap_or(dir);
    if target == Path::new("/") {
        return Err(format!(
            "none of the directories of {} exists on this machine, so the private one would have to cover /",
            socket.display()
        ));
    }
    if let Some(n) = needed.iter().find(|n| n.starts_with(&target)) {
        return Err(format!(
            "the unix socket's directory would be covered by a private one in the namespace, which would hide {} \
             (the run needs it)",
            n.display()
        ));
    }
    Ok(Shadow { target, sockets: vec![Socket { path: socket.to_path_buf(), within }] })
}

/// One shadow per outermost target: a target below another is covered by it.
fn merge_shadows(mut shadows: Vec<Shadow>) -> Vec<Shadow> {
    shadows.sort_by_key(|s| s.target.components().count());
    let mut out: Vec<Shadow> = Vec::new();
    for s in shadows {
        match out.iter_mut().find(|o| s.target.starts_with(&o.target)) {
            Some(o) => {
                let below = s.target.strip_prefix(&o.target).map(Path::to_path_buf).unwrap_or_default();
                for sock in s.sockets {
                    if !o.sockets.iter().any(|x| x.path == sock.path) {
                        o.sockets.push(Socket { path: sock.path, within: below.join(sock.within) });
                    }
                }
            }
            None => out.push(s),
        }
    }
    out
}

fn canonical_all(paths: &[&Path]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        out.push(p.to_path_buf());
        if let Ok(c) = p.canonicalize() {
            out.push(c);
        }
    }
    out
}

/// The system paths processes in the namespace read: the account and name-service files nginx reads at
/// start, the dynamic loader's cache and library directories (those mapped into this process too),
/// `/proc` (the holder sets the ephemeral range there) and the binaries the harness runs there.
pub fn needed_paths() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        "/etc/passwd",
        "/etc/group",
        "/etc/hosts",
        "/etc/nsswitch.conf",
        "/etc/ld.so.cache",
        "/proc/sys/net/ipv4/ip_local_port_range",
        "/dev/null",
        "/dev/urandom",
        "/bin",
        "/sbin",
        "/usr/bin",
        "/usr/sbin",
        "/lib",
        "/lib64",
        "/usr/lib",
        "/usr/lib64",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Ok(maps) = std::fs::read_to_string("/proc/self/maps") {
        for lib in maps.lines().filter_map(|l| l.split_whitespace().nth(5)).filter(|p| p.starts_with('/')) {
            if let Some(dir) = Path::new(lib).parent()
                && !out.iter().any(|o| o == dir)
            {
                out.push(dir.to_path_buf());
            }
        }
    }
    out
}

/// The widest range of ports in 1024..=65535 that holds none of `taken`, with ends of different parity
/// (as the kernel prefers).
///
/// # Errors
///
/// No gap of [`MIN_EPHEMERAL`] ports.
pub fn ephemeral_range(taken: &BTreeSet<u16>) -> Result<RangeInclusive<u16>, Unhostable> {
    let mut best: Option<(u16, u16)> = None;
    let mut start: u32 = 1024;
    let bounds = taken.iter().map(|&p| u32::from(p)).filter(|&p| p >= 1024).chain([65536]);
    for stop in bounds {
        if stop > start {
            let (lo, hi) = (start, stop - 1);
            if best.is_none_or(|(a, b)| hi - lo > u32::from(b - a)) {
                best = Some((lo as u16, hi as u16));
            }
        }
        start = stop + 1;
    }
    match best {
        Some((lo, hi)) if hi - lo + 1 >= MIN_EPHEMERAL => {
            let hi = if (hi - lo) % 2 == 0 { hi - 1 } else { hi };
            Ok(lo..=hi)
        }
        _ => Err(Unhostable(format!(
            "the config's ports leave no range of {MIN_EPHEMERAL} free ports for the namespace's outgoing \
             connections (ports: {})",
            summarize(taken.iter(), 12)
        ))),
    }
}

/// `items` joined with ", ", the first `show` of them and how many more (`a, b, c … (+97)`).
pub fn summarize<T: std::fmt::Display>(items: impl ExactSizeIterator<Item = T>, show: usize) -> String {
    let total = items.len();
    let shown: Vec<String> = items.take(show).map(|i| i.to_string()).collect();
    if total > show { format!("{} … (+{})", shown.join(", "), total - show) } else { shown.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ephemeral_range_avoids_every_config_port() {
        let taken: BTreeSet<u16> = [80, 443, 8080, 9000].into();
        let r = ephemeral_range(&taken).unwrap();
        assert_eq!(r, 9001..=65534);
        assert!(taken.iter().all(|p| !r.contains(p)));
        let taken: BTreeSet<u16> = [80, 30000, 40000].into();
        let r = ephemeral_range(&taken).unwrap();
        assert_eq!(r, 1024..=29999, "the widest gap wins");
        assert_ne!(r.start() % 2, r.end() % 2);
        let dense: BTreeSet<u16> = (1024..=u16::MAX).step_by(900).collect();
        let e = ephemeral_range(&dense).unwrap_err().to_string();
        assert!(e.contains("no range of 1000") && e.contains("(+"), "{e}");
    }

    #[test]
    fn shadows_cover_existing_directories_and_keep_what_the_run_needs() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("run/app")).unwrap();
        let a = base.join("run/app/app.sock");
        let b = base.join("run/missing/deeper/b.sock");
        let sa = shadow_of(&a, &[]).unwrap();
        let sb = shadow_of(&b, &[]).unwrap();
        assert_eq!(sa.target, base.join("run/app"));
        assert_eq!(sb.target, base.join("run"));
        assert_eq!(sb.sockets[0].within, PathBuf::from("missing/deeper/b.sock"));
        // /run/app is below /run (the nearest existing ancestor of b's directory): one shadow covers both.
        let merged = merge_shadows(vec![sa, sb]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].target, base.join("run"));
        let within: Vec<&Path> = merged[0].sockets.iter().map(|s| s.within.as_path()).collect();
        assert_eq!(within, [Path::new("missing/deeper/b.sock"), Path::new("app/app.sock")]);
        let e = shadow_of(&a, &[base.join("run/app/nginx")]).unwrap_err();
        assert!(e.contains("would hide") && e.contains("run/app/nginx"), "{e}");
        let e = shadow_of(Path::new("/no-such-dir-nk/x.sock"), &[]).unwrap_err();
        assert!(e.contains("cover /"), "{e}");
        // Through a symbolic link, the real directory is covered.
        std::os::unix::fs::symlink(base.join("run"), base.join("link")).unwrap();
        let s = shadow_of(&base.join("link/app/x.sock"), &[]).unwrap();
        assert_eq!((s.target, s.sockets[0].within.clone()), (base.join("run/app"), PathBuf::from("x.sock")));
    }

    /// Every address class a private `lo` cannot give to one server is refused with its reason; the rest
    /// (class E, 169.254/16, unique local, documentation ranges) are hosted.
    #[test]
    fn addresses_that_cannot_be_hosted() {
        for (ip, why) in [
            ("0.0.0.0", "0.0.0.0/8"),
            ("0.1.2.3", "0.0.0.0/8"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("::", "unspecified"),
            ("ff02::1", "multicast"),
            ("fe80::1", "link-local"),
            ("::ffff:224.0.0.1", "multicast"),
            ("::ffff:0.0.0.0", "0.0.0.0/8"),
        ] {
            let got = unhostable_ip(ip.parse().unwrap());
            assert!(got.is_some_and(|g| g.contains(why)), "{ip}: {got:?}");
        }
        for ip in ["10.0.0.1", "240.0.0.1", "169.254.1.1", "192.0.2.1", "127.0.0.2", "::1", "fd00::3", "2001:db8::7"] {
            assert_eq!(unhostable_ip(ip.parse().unwrap()), None, "{ip}");
        }
        assert_eq!(unhostable_ip("::ffff:10.0.0.1".parse().unwrap()), None, "hosted on 10.0.0.1");
    }

    #[test]
    fn long_lists_are_summarized() {
        assert_eq!(summarize([1, 2, 3].iter(), 5), "1, 2, 3");
        assert_eq!(summarize((1..=500u16).map(|i| format!("10.0.{}.1", i % 256)), 2), "10.0.1.1, 10.0.2.1 … (+498)");
    }
}
