//! One nginx process in a scratch prefix, without a namespace of its own: what the key and access-log tests
//! and the key-vector recorder run, where each request is one HTTP exchange on loopback.

use super::install::Installation;
use anyhow::{Context, Result, bail};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nginx; stopped (killed and reaped) when dropped or by [`Single::stop`].
#[derive(Debug)]
pub struct Single {
    child: Child,
    dir: tempfile::TempDir,
}

/// The `*_temp_path` lines that keep a single nginx's temporary files inside `prefix` (one per line,
/// indented, for an `http { }` block).
pub fn temp_paths(prefix: &Path) -> String {
    ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
        .iter()
        .map(|t| format!("  {t}_temp_path {};\n", prefix.join(t).display()))
        .collect()
}

impl Single {
    /// Starts `install` on the configuration `conf` writes for the scratch prefix (a fresh directory named
    /// `name-…`), with stderr in the prefix; ready once every address of `listens` accepts.
    ///
    /// # Errors
    ///
    /// The prefix or the process cannot be made, nginx exits during start-up or does not listen within 15 s
    /// (each with nginx's stderr).
    pub fn start(
        install: &Installation,
        name: &str,
        conf: impl FnOnce(&Path) -> String,
        listens: &[SocketAddr],
    ) -> Result<Single> {
        let dir = tempfile::Builder::new().prefix(name).tempdir()?;
        let p = dir.path();
        let file = p.join("nginx.conf");
        std::fs::write(&file, conf(p))?;
        let mut cmd = Command::new(install.binary());
        cmd.arg("-p").arg(p).arg("-c").arg(&file);
        if install.version.rules().error_log_switch {
            cmd.arg("-e").arg("stderr");
        }
        let stderr = std::fs::File::create(p.join("stderr"))?;
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        let child = cmd.spawn().with_context(|| format!("starting {}", install.binary().display()))?;
        let mut single = Single { child, dir };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = single.child.try_wait() {
                bail!("nginx {} exited during startup ({status}):\n{}", install.label(), single.stderr());
            }
            if listens.iter().all(|l| TcpStream::connect_timeout(l, Duration::from_millis(200)).is_ok()) {
                return Ok(single);
            }
            if Instant::now() > deadline {
                bail!("nginx {} did not listen within 15 s:\n{}", install.label(), single.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The scratch prefix (the configuration, logs and pid file are in it).
    pub fn prefix(&self) -> &Path {
        self.dir.path()
    }

    /// What nginx wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// Stops nginx and waits for it (every log it wrote is then on disk); the prefix stays until drop.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Single {
    fn drop(&mut self) {
        self.stop();
    }
}
