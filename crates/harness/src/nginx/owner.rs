//! Who started something: a process identity that survives PID reuse. A pid alone names whichever process
//! holds that number now; the pid with its start time (`/proc/<pid>/stat`, field 22, in clock ticks since
//! boot) and the boot it belongs to (`/proc/sys/kernel/random/boot_id`) names one process, ever. Every
//! process group and directory the harness leaves on the machine while it runs is recorded with such
//! identities (see [`crate::nginx::tree`], [`crate::nginx::scratch`]), so that `nginx-ketama cleanup` only ever touches
//! what a run that is gone left behind.

use std::fmt;

/// One process, for as long as the machine runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Its process id.
    pub pid: i32,
    /// When it started, in clock ticks after boot (`/proc/<pid>/stat`, field 22).
    pub start: u64,
    /// The boot it started in.
    pub boot: String,
}

/// What `/proc/<pid>/stat` says about a process (the fields the harness uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its state (field 3): `Z` for a zombie, which has ended and only waits to be reaped.
    pub state: char,
    /// Its parent (field 4).
    pub ppid: i32,
    /// Its process group (field 5).
    pub pgrp: i32,
    /// Its start time (field 22).
    pub start: u64,
}

/// Fields 3, 4, 5 and 22 of `/proc/<pid>/stat`, or `None` if no such process exists.
pub fn stat(pid: i32) -> Option<Stat> {
    if pid <= 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may itself hold
/// spaces and parentheses: the fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (the state).
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// This boot's id.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default()
}

impl Stat {
    /// Whether the process still runs (it is not a zombie, or being removed).
    pub fn running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

impl Identity {
    /// The process `pid` as it is now (`None` if there is none).
    pub fn of(pid: i32) -> Option<Identity> {
        Some(Identity { pid, start: stat(pid)?.start, boot: boot_id() })
    }

    /// This process.
    pub fn current() -> Identity {
        let pid = std::process::id() as i32;
        Identity::of(pid).unwrap_or(Identity { pid, start: 0, boot: boot_id() })
    }

    /// Whether this very process still runs (not merely some process with its pid; not a zombie).
    pub fn alive(&self) -> bool {
        self.boot == boot_id() && stat(self.pid).is_some_and(|s| s.start == self.start && s.running())
    }

    /// Parses what [`Identity`]'s `Display` wrote: `pid start boot`.
    pub fn parse(text: &str) -> Option<Identity> {
        let mut words = text.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        let start = words.next()?.parse().ok()?;
        let boot = words.next()?.to_string();
        Some(Identity { pid, start, boot })
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.pid, self.start, self.boot)
    }
}

/// The pids of every process whose process group is `pgid`, with their stat.
pub fn members(pgid: i32) -> Vec<(i32, Stat)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .filter(|(_, s)| s.pgrp == pgid)
        .collect()
}

/// One thing a dead run left behind (and this module removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// A process group: a local nginx's, a shim's.
    ProcessGroup {
        /// The process group.
        pgid: i32,
        /// What it ran (`nginx`, `shim`).
        what: String,
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
    /// A scratch directory.
    Directory {
        /// Where it was.
        path: std::path::PathBuf,
    },
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stale::ProcessGroup { pgid, what, owner } => {
                write!(f, "killed {what} process group {pgid} (its run, pid {owner}, is gone)")
            }
            Stale::Container { id, owner } => write!(f, "removed container {id} (its run, pid {owner}, is gone)"),
            Stale::Directory { path } => write!(f, "removed {} (its run is gone)", path.display()),
        }
    }
}

/// Whether a process with this pid exists.
pub fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_name_may_hold_spaces_and_parentheses() {
        let line =
            "4242 (a) b (c)) S 1 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        assert_eq!(parse_stat(line), Some(Stat { state: 'S', ppid: 1, pgrp: 4240, start: 987_654 }));
        assert_eq!(parse_stat("garbage"), None);
    }

    /// This process is alive; an identity with its pid and another start time is not (a reused pid).
    #[test]
    fn an_identity_is_a_pid_and_a_start_time() {
        let me = Identity::current();
        assert!(me.start > 0 && me.alive());
        assert_eq!(Identity::parse(&me.to_string()), Some(me.clone()));
        let reused = Identity { start: me.start + 1, ..me.clone() };
        assert!(!reused.alive());
        let other_boot = Identity { boot: "another-boot".into(), ..me };
        assert!(!other_boot.alive());
    }
}
