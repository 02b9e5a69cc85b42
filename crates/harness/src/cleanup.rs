//! What a killed parity run leaves behind, and its removal (`nginx-ketama cleanup`, run by `scripts/test`
//! when it exits): nginx process groups recorded by [`local`](crate::local) and containers labelled with
//! their owner's pid. Only things whose owning process is gone are touched, so concurrent runs are safe.

use anyhow::{Context, Result};
use std::fmt;
use std::process::{Command, Stdio};

/// The label every harness container carries: the pid of the process that started it.
pub const OWNER_LABEL: &str = "nginx-ketama.owner-pid";

/// One thing a dead run left behind (and this module removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// A local nginx's process group.
    ProcessGroup {
        /// The process group (nginx's master).
        pgid: i32,
        /// The pid of the run that started it.
        owner: i32,
    },
    /// A container started through testcontainers.
    Container {
        /// Docker's container id.
        id: String,
        /// The pid of the run that started it.
        owner: i32,
    },
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stale::ProcessGroup { pgid, owner } => {
                write!(f, "killed nginx process group {pgid} (its run, pid {owner}, is gone)")
            }
            Stale::Container { id, owner } => write!(f, "removed container {id} (its run, pid {owner}, is gone)"),
        }
    }
}

/// Whether a process with this pid exists.
pub(crate) fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

/// Removes every stale process group and container, and says what it removed.
///
/// # Errors
///
/// Docker answers but cannot list or remove a container.
pub fn run() -> Result<Vec<Stale>> {
    let mut removed = crate::local::reap_stale();
    let docker = |args: &[&str]| Command::new("docker").args(args).stdin(Stdio::null()).output();
    let Ok(ps) = docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label={OWNER_LABEL}"),
        "--format",
        &format!("{{{{.ID}}}} {{{{.Label \"{OWNER_LABEL}\"}}}}"),
    ]) else {
        return Ok(removed); // no docker client: nothing of ours can be running there
    };
    if !ps.status.success() {
        return Ok(removed); // no engine answers
    }
    for line in String::from_utf8_lossy(&ps.stdout).lines() {
        let Some((id, owner)) = line.split_once(' ') else { continue };
        let owner: i32 = owner.trim().parse().unwrap_or(0);
        if !alive(owner) {
            let out = docker(&["rm", "-f", id]).context("running docker rm")?;
            anyhow::ensure!(out.status.success(), "docker rm -f {id}: {}", String::from_utf8_lossy(&out.stderr).trim());
            removed.push(Stale::Container { id: id.to_string(), owner });
        }
    }
    Ok(removed)
}
