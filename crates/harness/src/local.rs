//! nginx as a local process: its own prefix, `daemon off`, its own network namespace (as root; see
//! [`super::netns`]), killed with its whole process group when dropped — and reaped on the next run if the
//! owner died without dropping it.

use super::backend::log_tail;
use super::install::Installation;
use super::netns::{self, Net, NetNs};
use super::site::{self, Environment, Site};
use super::topology::SERVICE_PORTS;
use crate::cleanup::Stale;
use anyhow::{Context, Result, bail};
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running local nginx.
#[derive(Debug)]
pub struct LocalNginx {
    child: Child,
    prefix: PathBuf,
    registry_entry: PathBuf,
    http_front: SocketAddr,
    stream_front: SocketAddr,
    stderr: Arc<Mutex<String>>,
    /// nginx's private network namespace; `None` when not root (nginx then shares this machine's loopback).
    netns: Option<NetNs>,
}

/// Directory holding one file per running nginx: `<process group>` containing the owner's pid.
fn registry() -> PathBuf {
    std::env::temp_dir().join("nginx-ketama-runs")
}

/// Kills nginx process groups whose owning process no longer exists (a test run killed before cleanup)
/// and returns them.
pub fn reap_stale() -> Vec<Stale> {
    let Ok(entries) = std::fs::read_dir(registry()) else { return Vec::new() };
    let mut reaped = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let pgid: i32 = match e.file_name().to_str().and_then(|s| s.parse().ok()) {
            Some(p) => p,
            None => continue,
        };
        let owner: i32 = std::fs::read_to_string(e.path()).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        if !crate::cleanup::alive(owner) {
            // SAFETY: signalling a process group we started earlier.
            unsafe { libc::killpg(pgid, libc::SIGKILL) };
            let _ = std::fs::remove_file(e.path());
            reaped.push(Stale::ProcessGroup { pgid, owner });
        }
    }
    reaped
}

/// A free TCP port on `ip` (bound and released; nginx binds it right after).
pub fn free_port(ip: std::net::IpAddr) -> Result<u16> {
    Ok(TcpListener::bind((ip, 0)).with_context(|| format!("binding an ephemeral port on {ip}"))?.local_addr()?.port())
}

static NEXT_PREFIX: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A fresh, short prefix directory (unix socket paths must fit in 107 bytes).
pub fn fresh_prefix() -> Result<PathBuf> {
    let n = NEXT_PREFIX.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = PathBuf::from(format!("/tmp/nk-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["logs", "tmp", "sock"] {
        std::fs::create_dir_all(dir.join(sub)).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(dir)
}

impl LocalNginx {
    /// Renders `site` into `prefix`, starts nginx and waits until its front server accepts connections.
    ///
    /// # Errors
    ///
    /// nginx failing to start (its own error output is included), or not listening within 15 s.
    pub fn start(install: &Installation, site: &Site, prefix: PathBuf) -> Result<LocalNginx> {
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
        prefix: PathBuf,
        holder: &netns::Holder,
        front: SocketAddr,
    ) -> Result<LocalNginx> {
        LocalNginx::start_in(install, site, prefix, Some((holder, front)))
    }

    fn start_in(
        install: &Installation,
        site: &Site,
        prefix: PathBuf,
        joined: Option<(&netns::Holder, SocketAddr)>,
    ) -> Result<LocalNginx> {
        reap_stale();
        let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
        let isolated = netns::available() || joined.is_some();
        let (http_front, stream_front) = if let Some((_, front)) = joined {
            (front, front)
        } else if isolated {
            (SocketAddr::new(loopback, site::FRONT_HTTP_PORT), SocketAddr::new(loopback, site::FRONT_STREAM_PORT))
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
        std::fs::write(&conf, site::render(site, &env))?;
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
        cmd.arg("-p").arg(&prefix).arg("-c").arg(&conf);
        // The start-up log: an nginx without `-e` (before 1.19.5) says in one [alert] line that it cannot open
        // its compiled path, then follows the rendered config's `error_log stderr notice;`.
        if install.version.rules().error_log_switch {
            cmd.arg("-e").arg("stderr");
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        cmd.process_group(0);
        // SAFETY: prctl is async-signal-safe; the child dies with us if we die without cleaning up.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().with_context(|| format!("starting {}", install.binary().display()))?;
        // `spawn` returns after `exec`, so the namespace exists by now.
        let netns = if isolated { Some(NetNs::of(child.id()).context("nginx's network namespace")?) } else { None };
        let registry_entry = registry().join(child.id().to_string());
        std::fs::create_dir_all(registry())?;
        std::fs::write(&registry_entry, std::process::id().to_string())?;
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped stderr");
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
        let mut nginx = LocalNginx { child, prefix, registry_entry, http_front, stream_front, stderr, netns };
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
            if self.child.try_wait()?.is_some() {
                // Give the stderr reader a moment to drain what nginx printed before exiting.
                let until = Instant::now() + Duration::from_millis(300);
                while Instant::now() < until && self.stderr().is_empty() {
                    std::thread::yield_now();
                }
                bail!("nginx exited during startup:\n{}", log_tail(&self.stderr()));
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

    /// The master process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The prefix directory (logs, sockets).
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// What nginx printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr buffer").clone()
    }
}

/// Without a private namespace nginx shares this machine's loopback: at least make sure the kernel never
/// hands out a topology port as a source port (see [`super::netns`]).
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

impl Drop for LocalNginx {
    fn drop(&mut self) {
        let pgid = self.child.id() as i32;
        // SAFETY: the child leads its own process group (process_group(0)); kill master and workers.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.registry_entry);
        let _ = std::fs::remove_dir_all(&self.prefix);
    }
}
