//! nginx as a local process: its own prefix, `daemon off`, its own network namespace (as root; see
//! [`crate::nginx::netns`]), a [`ProcessTree`] killed whole (master and workers) when dropped or when the CLI is
//! interrupted — and reaped on the next run if the owner died without either.

use crate::nginx::install::Installation;
use crate::nginx::instance::Instance;
use crate::nginx::log::log_tail;
use crate::nginx::netns::{self, Net, NetNs};
use crate::nginx::scratch::ScratchDir;
use crate::nginx::tree::ProcessTree;
use crate::site::conf::{self, Environment, Site};
use crate::site::topology::SERVICE_PORTS;
use anyhow::{Context, Result, bail};
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running local nginx.
#[derive(Debug)]
pub struct LocalNginx {
    // Declared before `prefix`: the tree is killed before its directory is removed.
    tree: ProcessTree,
    prefix: ScratchDir,
    http_front: SocketAddr,
    stream_front: SocketAddr,
    stderr: Arc<Mutex<String>>,
    /// nginx's private network namespace; `None` when not root (nginx then shares this machine's loopback).
    netns: Option<NetNs>,
}

/// A free TCP port on `ip` (bound and released; nginx binds it right after).
pub fn free_port(ip: std::net::IpAddr) -> Result<u16> {
    Ok(TcpListener::bind((ip, 0)).with_context(|| format!("binding an ephemeral port on {ip}"))?.local_addr()?.port())
}

static NEXT_PREFIX: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A fresh, short prefix directory (unix socket paths must fit in 107 bytes), removed when dropped.
pub fn fresh_prefix() -> Result<ScratchDir> {
    let n = NEXT_PREFIX.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = PathBuf::from(format!("/tmp/nk-{}-{n}", std::process::id()));
    Ok(ScratchDir::create(dir, &["logs", "tmp", "sock"])?)
}

impl LocalNginx {
    /// Renders `site` into `prefix`, starts nginx and waits until its front server accepts connections.
    ///
    /// # Errors
    ///
    /// nginx failing to start (its own error output is included), or not listening within 15 s.
    pub fn start(install: &Installation, site: &Site, prefix: ScratchDir) -> Result<LocalNginx> {
        LocalNginx::start_in(install, site, prefix, None)
    }

    /// As [`LocalNginx::start`], but inside `holder`'s namespaces (whose `lo` already has the addresses
    /// and whose mounts already hold the hosts file), with the HTTP front server at `front` (the site's
    /// `hosts` is not mounted again).
    ///
    /// # Errors
    ///
    /// As [`LocalNginx::start`].
    pub fn start_joined(
        install: &Installation,
        site: &Site,
        prefix: ScratchDir,
        holder: &netns::Holder,
        front: SocketAddr,
    ) -> Result<LocalNginx> {
        LocalNginx::start_in(install, site, prefix, Some((holder, front)))
    }

    fn start_in(
        install: &Installation,
        site: &Site,
        prefix: ScratchDir,
        joined: Option<(&netns::Holder, SocketAddr)>,
    ) -> Result<LocalNginx> {
        crate::nginx::tree::reap_stale();
        let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
        let isolated = netns::available() || joined.is_some();
        let (http_front, stream_front) = if let Some((_, front)) = joined {
            (front, front)
        } else if isolated {
            (SocketAddr::new(loopback, conf::FRONT_HTTP_PORT), SocketAddr::new(loopback, conf::FRONT_STREAM_PORT))
        } else {
            check_shared_loopback()?;
            (SocketAddr::new(loopback, free_port(loopback)?), SocketAddr::new(loopback, free_port(loopback)?))
        };
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let env = Environment {
            prefix: prefix.display().to_string(),
            http_front: http_front.to_string(),
            stream_front: stream_front.to_string(),
            // None: the stream module is built in (the musl build), so no load_module line.
            stream_module: install.stream_module().map(|m| m.display().to_string()),
            user_root: root,
        };
        let conf = prefix.join("nginx.conf");
        std::fs::write(&conf, conf::render(site, &env))?;
        let mut cmd = Command::new(install.binary());
        let hosts_file = match &site.hosts {
            Some(_) if joined.is_some() => None,
            Some(hosts) => {
                let file = prefix.join("hosts");
                std::fs::write(&file, hosts)?;
                Some(file)
            }
            None => None,
        };
        if let Some((holder, _)) = joined {
            holder.join(&mut cmd);
        } else if isolated {
            netns::isolate(&mut cmd, hosts_file.as_deref())?;
        } else if hosts_file.is_some() {
            bail!("a private hosts file needs root (a private mount namespace)");
        }
        cmd.arg("-p").arg(prefix.path()).arg("-c").arg(&conf);
        // The start-up log: an nginx without `-e` (before 1.19.5) says in one [alert] line that it cannot open
        // its compiled path, then follows the rendered config's `error_log stderr notice;`.
        if install.version.rules().error_log_switch {
            cmd.arg("-e").arg("stderr");
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut tree = ProcessTree::spawn(&mut cmd, "nginx")
            .with_context(|| format!("starting {}", install.binary().display()))?;
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = tree.take_stderr().expect("piped stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut s = sink.lock().expect("stderr buffer");
                s.push_str(&String::from_utf8_lossy(&buf[..n]));
                if s.len() > 256 * 1024 {
                    let mut cut = s.len() - 128 * 1024;
                    while !s.is_char_boundary(cut) {
                        cut += 1;
                    }
                    s.replace_range(..cut, "[...]\n");
                }
            }
        });
        // `spawn` returns after `exec`, so the namespace exists by now — unless nginx has already exited,
        // which takes its namespace with it: then that is what is reported, as `wait_ready` reports it.
        let netns = match isolated.then(|| NetNs::of(tree.id())) {
            None => None,
            Some(Ok(ns)) => Some(ns),
            Some(Err(e)) => {
                // An exiting process drops its namespaces before its parent can see it exit: wait for that.
                let until = Instant::now() + Duration::from_secs(2);
                while tree.exited().is_none() && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if tree.exited().is_some() {
                    bail!("nginx exited during startup:\n{}", log_tail(&drained(&stderr)));
                }
                return Err(anyhow::Error::from(e).context("nginx's network namespace"));
            }
        };
        let mut nginx = LocalNginx { tree, prefix, http_front, stream_front, stderr, netns };
        nginx.wait_ready()?;
        Ok(nginx)
    }

    /// Waits until nginx has started its worker (it logs `start worker process`, which it does only after
    /// every listener is bound — a busy port makes it retry for seconds and then exit) and its HTTP front
    /// accepts (never the stream front: a probe there would be a session that shifts the stream upstream's
    /// state), or until nginx exits, or 15 s pass.
    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut pending = vec![self.http_front];
        loop {
            if self.tree.exited().is_some() {
                bail!("nginx exited during startup:\n{}", log_tail(&drained(&self.stderr)));
            }
            let started = self.stderr().contains("start worker process");
            if started {
                let net = self.net();
                pending.retain(|a| net.connect(*a, None, Duration::from_millis(200)).is_err());
            }
            if started && pending.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("nginx did not listen on {pending:?} within 15 s:\n{}", log_tail(&self.stderr()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The HTTP front server.
    pub fn http_front(&self) -> SocketAddr {
        self.http_front
    }

    /// The stream front server.
    pub fn stream_front(&self) -> SocketAddr {
        self.stream_front
    }

    /// Where connections to this nginx are opened.
    pub fn net(&self) -> Net<'_> {
        self.netns.as_ref().map_or(Net::Own, Net::Private)
    }

    /// nginx's private network namespace (`None` when not root).
    pub fn netns(&self) -> Option<&NetNs> {
        self.netns.as_ref()
    }

    /// The process id of the tree's leader: nginx's master, or as root the keeper of the PID namespace
    /// the master is process 1 of (see [`ProcessTree`]).
    pub fn pid(&self) -> u32 {
        self.tree.id()
    }

    /// The prefix directory (logs, sockets).
    pub fn prefix(&self) -> &Path {
        self.prefix.path()
    }

    /// What nginx printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr buffer").clone()
    }
}

/// What an nginx that exited printed: the stderr reader is given a moment to drain it.
fn drained(stderr: &Mutex<String>) -> String {
    let read = || stderr.lock().expect("stderr buffer").clone();
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until && read().is_empty() {
        std::thread::yield_now();
    }
    read()
}

/// Without a private namespace nginx shares this machine's loopback: at least make sure the kernel never
/// hands out a topology port as a source port (see [`crate::nginx::netns`]).
fn check_shared_loopback() -> Result<()> {
    let own = netns::own_ephemeral_ports().context("reading the ephemeral port range")?;
    if own.start() <= SERVICE_PORTS.end() && SERVICE_PORTS.start() <= own.end() {
        bail!(
            "the ephemeral port range {}-{} overlaps the harness's ports {}-{}; run as root (private \
             namespaces) or move the range (sysctl net.ipv4.ip_local_port_range)",
            own.start(),
            own.end(),
            SERVICE_PORTS.start(),
            SERVICE_PORTS.end()
        );
    }
    Ok(())
}
impl Instance for LocalNginx {
    fn http_front(&self) -> SocketAddr {
        LocalNginx::http_front(self)
    }
    fn stream_front(&self) -> Option<SocketAddr> {
        Some(LocalNginx::stream_front(self))
    }
    fn stream_log(&self) -> Option<PathBuf> {
        Some(self.prefix().join("logs/stream.log"))
    }
    fn logs(&self) -> String {
        self.stderr()
    }
    fn prefix(&self) -> Option<PathBuf> {
        Some(LocalNginx::prefix(self).to_path_buf())
    }
    fn net(&self) -> Net<'_> {
        LocalNginx::net(self)
    }
    fn pid(&self) -> Option<u32> {
        Some(LocalNginx::pid(self))
    }
}
