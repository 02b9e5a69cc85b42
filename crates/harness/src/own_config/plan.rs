//! Where a config's servers live during the proof: which addresses go on `lo`, what each hostname resolves
//! to, the namespace's ephemeral port range, the front server's address, and which directories are shadowed
//! for `unix:` sockets. Pure: computed from the topologies and a resolver, tested without nginx.

use crate::topology::{Listen, Spelling, Topology};
use anyhow::{Result, bail};
use nginx_ketama::server::Address;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// Where a hostname's addresses come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameSource {
    /// It resolves on this machine (resolved in a private network namespace: only `/etc/hosts` and
    /// loopback resolvers can answer); its addresses are kept, in the resolver's order.
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

/// A directory shadowed by a private one inside the mount namespace, so the config's `unix:` sockets can be
/// created there without touching the machine's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadow {
    /// The existing directory that is covered (the socket's directory, or its nearest existing ancestor).
    pub target: PathBuf,
    /// The socket paths under it.
    pub sockets: Vec<PathBuf>,
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
    /// server's port can never become nginx's own source port (see [`crate::netns`]).
    pub ephemeral: RangeInclusive<u16>,
    /// The front server: an address the config does not use.
    pub front: SocketAddr,
    /// Directories shadowed for unix sockets.
    pub shadows: Vec<Shadow>,
}

/// The fewest ports an ephemeral range may have.
pub const MIN_EPHEMERAL: u16 = 1000;

/// The host part of a hostname line (`app.internal` of `app.internal:8080`).
pub fn hostname_of(server: &str) -> Option<String> {
    match Address::parse(server) {
        Ok(Address::Host { host, .. }) => Some(host),
        _ => None,
    }
}

impl NetworkPlan {
    /// Plans the namespace for `topologies` (hostname lines not yet resolved). `resolve` says what a name
    /// resolves to on this machine (`None`: it does not).
    ///
    /// # Errors
    ///
    /// The config's ports leave no ephemeral range of [`MIN_EPHEMERAL`] ports; a unix socket whose
    /// directory cannot be shadowed (`/`, or a directory holding one of `keep`: the nginx build, the run's
    /// prefix).
    pub fn new(
        topologies: &[&Topology],
        mut resolve: impl FnMut(&str) -> Option<Vec<IpAddr>>,
        keep: &[&Path],
    ) -> Result<NetworkPlan> {
        let mut ips: BTreeSet<IpAddr> = BTreeSet::new();
        let mut ports = BTreeSet::new();
        let mut hostnames: Vec<String> = Vec::new();
        let mut sockets: Vec<PathBuf> = Vec::new();
        for t in topologies {
            for line in &t.lines {
                match line.spelling {
                    Spelling::Hostname | Spelling::HostnameTwoAddresses => {
                        if let Some(host) = hostname_of(&line.server)
                            && !hostnames.iter().any(|h| h.eq_ignore_ascii_case(&host))
                        {
                            hostnames.push(host);
                        }
                        if let Ok(a) = Address::parse(&line.server) {
                            ports.insert(a.port().unwrap_or(80));
                        }
                    }
                    _ => {}
                }
                for ep in &line.endpoints {
                    match &ep.listen {
                        Listen::Tcp(a) => {
                            ips.insert(a.ip());
                            ports.insert(a.port());
                        }
                        Listen::Unix(p) => {
                            if !sockets.iter().any(|s| s == Path::new(p)) {
                                sockets.push(PathBuf::from(p));
                            }
                        }
                    }
                }
            }
        }
        let mut names = Vec::new();
        for name in hostnames {
            match resolve(&name) {
                Some(addrs) if !addrs.is_empty() => {
                    ips.extend(addrs.iter().copied());
                    names.push(NamePlan { name, addresses: addrs, source: NameSource::Machine });
                }
                _ => names.push(NamePlan { name, addresses: Vec::new(), source: NameSource::StandIn }),
            }
        }
        let mut next_stand_in = 1u16;
        for n in names.iter_mut().filter(|n| n.source == NameSource::StandIn) {
            let ip = loop {
                let [hi, lo] = next_stand_in.to_be_bytes();
                next_stand_in += 1;
                let ip = IpAddr::V4(Ipv4Addr::new(127, 254, hi, lo));
                if !ips.contains(&ip) {
                    break ip;
                }
            };
            ips.insert(ip);
            n.addresses = vec![ip];
        }
        let front_ip = (1..=254u8)
            .map(|i| IpAddr::V4(Ipv4Addr::new(127, 0, 0, i)))
            .find(|ip| !ips.contains(ip))
            .expect("a config with fewer than 254 servers on 127.0.0.x");
        let front_port = (1024..=u16::MAX).find(|p| !ports.contains(p)).expect("a free port");
        let mut taken = ports.clone();
        taken.insert(front_port);
        let ephemeral = ephemeral_range(&taken)?;
        let on_lo = ips.iter().copied().filter(|ip| !is_on_lo_already(*ip)).collect();
        Ok(NetworkPlan {
            on_lo,
            names,
            ports,
            ephemeral,
            front: SocketAddr::new(front_ip, front_port),
            shadows: shadows(&sockets, keep)?,
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
}

/// Whether `lo` has `ip` without being told: 127.0.0.0/8 and `::1`.
pub fn is_on_lo_already(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

/// The widest range of ports in 1024..=65535 that holds none of `taken`, with ends of different parity
/// (as the kernel prefers).
///
/// # Errors
///
/// No gap of [`MIN_EPHEMERAL`] ports.
pub fn ephemeral_range(taken: &BTreeSet<u16>) -> Result<RangeInclusive<u16>> {
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
        _ => bail!(
            "the config's ports leave no range of {MIN_EPHEMERAL} free ports for the namespace's outgoing \
             connections (ports: {taken:?})"
        ),
    }
}

/// The directories to shadow for `sockets`: each socket's directory, or its nearest existing ancestor; a
/// directory below another shadowed one is covered by it.
fn shadows(sockets: &[PathBuf], keep: &[&Path]) -> Result<Vec<Shadow>> {
    let mut out: Vec<Shadow> = Vec::new();
    let mut targets: Vec<PathBuf> = Vec::new();
    for s in sockets {
        let mut dir = s.parent().unwrap_or(Path::new("/")).to_path_buf();
        while !dir.is_dir() {
            dir = dir.parent().unwrap_or(Path::new("/")).to_path_buf();
        }
        if dir == Path::new("/") {
            bail!("unix socket {}: its directory would have to be shadowed at / (none of it exists)", s.display());
        }
        if let Some(k) = keep.iter().find(|k| k.starts_with(&dir)) {
            bail!(
                "unix socket {}: shadowing {} would hide {} (which the run needs)",
                s.display(),
                dir.display(),
                k.display()
            );
        }
        targets.push(dir);
    }
    let mut sorted = targets.clone();
    sorted.sort_by_key(|t| t.components().count());
    for t in sorted {
        if !out.iter().any(|o| t.starts_with(&o.target)) {
            out.push(Shadow { target: t, sockets: Vec::new() });
        }
    }
    for s in sockets {
        if let Some(o) = out.iter_mut().find(|o| s.starts_with(&o.target)) {
            o.sockets.push(s.clone());
        }
    }
    Ok(out)
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
        assert!(ephemeral_range(&dense).unwrap_err().to_string().contains("no range of 1000"));
    }

    #[test]
    fn shadows_cover_existing_directories_and_keep_what_the_run_needs() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        std::fs::create_dir_all(base.join("run/app")).unwrap();
        let a = base.join("run/app/app.sock");
        let b = base.join("run/missing/deeper/b.sock");
        let s = shadows(&[a.clone(), b.clone()], &[]).unwrap();
        // /run/app is below /run (the nearest existing ancestor of b's directory): one shadow covers both.
        assert_eq!(s, [Shadow { target: base.join("run"), sockets: vec![a.clone(), b] }]);
        let s = shadows(std::slice::from_ref(&a), &[]).unwrap();
        assert_eq!(s[0].target, base.join("run/app"));
        let e = shadows(std::slice::from_ref(&a), &[&base.join("run/app/nginx")]).unwrap_err().to_string();
        assert!(e.contains("would hide"), "{e}");
        let e = shadows(&[PathBuf::from("/no-such-dir-nk/x.sock")], &[]).unwrap_err().to_string();
        assert!(e.contains("shadowed at /"), "{e}");
    }
}
