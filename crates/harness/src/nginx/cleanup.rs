//! What a killed parity run leaves behind, and its removal (`nginx-ketama cleanup`, run by `scripts/test`
//! when it exits): process groups recorded by [`tree`](crate::nginx::tree) (nginx, shims), scratch directories
//! ([`scratch`](crate::nginx::scratch)) and containers labelled with their owner's pid. Only things whose owning
//! process is gone are touched — checked by pid *and* start time where the record has them — so concurrent
//! runs are safe. [`teardown`] is the other half: what an interrupted run removes itself before it exits.

use crate::nginx::owner::{Stale, alive};
use anyhow::{Context, Result};
use std::process::{Command, Stdio};

/// The label every harness container carries: the pid of the process that started it.
pub const OWNER_LABEL: &str = "nginx-ketama.owner-pid";

/// Removes every stale process group, scratch directory and container, and says what it removed.
///
/// # Errors
///
/// Docker answers but cannot list or remove a container.
pub fn run() -> Result<Vec<Stale>> {
    let mut removed = crate::nginx::tree::reap_stale();
    removed.extend(crate::nginx::scratch::reap_stale().into_iter().map(|path| Stale::Directory { path }));
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

/// Whether this process started a container (so that [`teardown`] asks Docker only then).
static STARTED_CONTAINERS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Notes that this process is starting a container labelled with [`OWNER_LABEL`].
pub(crate) fn starting_container() {
    STARTED_CONTAINERS.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// What [`teardown`] stopped and removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Teardown {
    /// Process trees killed (nginx, shims).
    pub trees: usize,
    /// Scratch directories removed.
    pub dirs: usize,
    /// Containers removed.
    pub containers: usize,
}

/// Stops everything this process started and is still running — every process tree, then every scratch
/// directory, then its containers — for an interrupted run (the CLI's `SIGINT`/`SIGTERM` handler), right
/// before it exits: no tree or directory can be started or reaped by another thread afterwards.
pub fn teardown() -> Teardown {
    let trees = crate::nginx::tree::kill_all_own();
    let dirs = crate::nginx::scratch::remove_all_own();
    let mut containers = 0;
    if STARTED_CONTAINERS.load(std::sync::atomic::Ordering::SeqCst) {
        let docker = |args: &[&str]| Command::new("docker").args(args).stdin(Stdio::null()).output();
        let filter = format!("label={OWNER_LABEL}={}", std::process::id());
        if let Ok(ps) = docker(&["ps", "-aq", "--filter", &filter]) {
            for id in String::from_utf8_lossy(&ps.stdout).split_whitespace() {
                if docker(&["rm", "-f", id]).is_ok_and(|o| o.status.success()) {
                    containers += 1;
                }
            }
        }
    }
    Teardown { trees, dirs, containers }
}
