//! One engine build as a process: started by its `run` wrapper in a scratch directory holding its
//! configuration, on a free 127.0.0.1 port, as a process tree the harness owns
//! ([`crate::nginx::tree::ProcessTree`], as nginx is): killed whole when its guard drops, by the kernel when
//! the thread that started it dies, and by the CLI's signal handling *before* it removes the scratch
//! directories (an engine still running then could write its state back into one: Caddy recreates its
//! `$HOME` directories). The directory is one of the harness's scratch directories
//! ([`crate::nginx::scratch`]): removed when dropped, by the CLI's signal handling when interrupted, and by
//! `nginx-ketama cleanup` after a `SIGKILL`, which also kills an engine tree left behind.

use super::install::{Build, Live};
use crate::nginx::local::fresh_prefix;
use crate::nginx::scratch::ScratchDir;
use crate::nginx::tree::ProcessTree;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long an engine may take to listen.
const LISTEN_WITHIN: Duration = Duration::from_secs(20);
/// Ports tried when the one picked was taken meanwhile.
const PORT_TRIES: usize = 5;

/// Why an engine did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The scratch directory or the configuration could not be written, or the wrapper not run.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The engine exited before it listened.
    #[error("{} exited ({status}) before listening:\n{stderr}\nconfig:\n{config}", wrapper.display())]
    Exited {
        /// The wrapper.
        wrapper: PathBuf,
        /// How it ended.
        status: ExitStatus,
        /// What it said.
        stderr: String,
        /// The configuration it was given.
        config: String,
    },
    /// The engine did not listen in time.
    #[error("{} did not listen within {} s", wrapper.display(), LISTEN_WITHIN.as_secs())]
    Silent {
        /// The wrapper.
        wrapper: PathBuf,
    },
    /// Every port tried was taken before the engine bound it.
    #[error("no free port for {} after {PORT_TRIES} tries", wrapper.display())]
    NoPort {
        /// The wrapper.
        wrapper: PathBuf,
    },
}

/// A running engine, killed when dropped.
#[derive(Debug)]
pub struct Running {
    tree: ProcessTree,
    front: SocketAddr,
    config: String,
    dir: ScratchDir,
}

impl Running {
    /// Where it listens.
    pub fn front(&self) -> SocketAddr {
        self.front
    }

    /// The configuration it runs.
    pub fn config(&self) -> &str {
        &self.config
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Before the directory (a field) is removed.
        self.tree.kill();
    }
}

/// What each engine is given: its configuration file's name and its command line.
fn invocation(engine: Live) -> (&'static str, &'static [&'static str]) {
    match engine {
        Live::HaProxy => ("haproxy.cfg", &["-db", "-f", "haproxy.cfg"]),
        Live::Caddy => ("Caddyfile", &["run", "--config", "Caddyfile", "--adapter", "caddyfile"]),
    }
}

/// Starts `build` with `config(front port)` in a fresh directory, on a free port; tries another port when
/// the one picked was taken meanwhile.
///
/// # Errors
///
/// [`StartError`]: the engine refused its configuration, exited, or did not listen.
pub fn start(build: &Build, config: &dyn Fn(u16) -> String) -> Result<Running, StartError> {
    let wrapper = build.dir.join("run");
    let io = |what: &str| {
        let what = format!("{what} for {}", wrapper.display());
        move |source| StartError::Io { what, source }
    };
    let (file, args) = invocation(build.engine);
    for _ in 0..PORT_TRIES {
        let dir =
            fresh_prefix().map_err(|e| std::io::Error::other(format!("{e:#}"))).map_err(io("a scratch directory"))?;
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(io("a free port"))?.port();
        let text = config(port);
        std::fs::write(dir.path().join(file), &text).map_err(io("writing the configuration"))?;
        let stderr = std::fs::File::create(dir.path().join("stderr")).map_err(io("the stderr file"))?;
        let mut cmd = Command::new(&wrapper);
        cmd.args(args).current_dir(dir.path()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        if build.engine == Live::Caddy {
            // Caddy writes its state under $HOME and the XDG directories: the scratch directory's.
            let home = dir.path().join("home");
            cmd.env_clear().env("PATH", "/usr/bin:/bin").env("HOME", &home);
            for (var, sub) in [("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache")] {
                cmd.env(var, home.join(sub));
            }
        }
        let name = match build.engine {
            Live::HaProxy => "haproxy",
            Live::Caddy => "caddy",
        };
        let tree = ProcessTree::spawn(&mut cmd, name).map_err(io("starting"))?;
        let mut running = Running { tree, front: SocketAddr::from(([127, 0, 0, 1], port)), config: text, dir };
        let deadline = Instant::now() + LISTEN_WITHIN;
        loop {
            if let Some(status) = running.tree.exited() {
                let stderr = std::fs::read_to_string(running.dir.path().join("stderr")).unwrap_or_default();
                if stderr.contains("ddress already in use") {
                    break;
                }
                let config = std::mem::take(&mut running.config);
                return Err(StartError::Exited { wrapper, status, stderr, config });
            }
            if TcpStream::connect(running.front).is_ok() {
                return Ok(running);
            }
            if Instant::now() >= deadline {
                return Err(StartError::Silent { wrapper });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Err(StartError::NoPort { wrapper })
}
