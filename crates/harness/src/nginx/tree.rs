//! A process tree the harness starts and owns — nginx, a shim — and stops whole on every exit path.
//!
//! [`ProcessTree::spawn`] starts a command so that nothing it starts can outlive the harness:
//! * it leads a process group of its own, which [`ProcessTree::kill`] (and `Drop`) kill whole with
//!   `SIGKILL` before reaping the leader (so the group's number cannot have been reused);
//! * it gets `SIGKILL` when the thread that started it dies (`PR_SET_PDEATHSIG`), even by `SIGKILL`;
//! * as root (where [`netns::available`]), it runs as process 1 of a PID namespace of its own, kept by a
//!   small process forked before `exec`: when the keeper dies — killed with the group, or by its own death
//!   signal — process 1 gets `SIGKILL`, and when process 1 dies the kernel kills every process left in the
//!   namespace. So an nginx worker (whose parent is the master, not the harness) and a shim's own children
//!   die with the tree even if the harness is killed with `SIGKILL`, or they change their process group.
//!   Without root, a `SIGKILL`ed harness can leave a worker behind; `nginx-ketama cleanup` removes it.
//! * it is recorded twice: in this process's list of live trees, which [`kill_all_own`] kills when the CLI
//!   is interrupted (`SIGINT`, `SIGTERM`), and in a registry file (`$TMPDIR/nginx-ketama-runs-<uid>/<pgid>`)
//!   with the identities ([`Identity`]: pid and start time) of its owner and of its leader, which
//!   [`reap_stale`] (`nginx-ketama cleanup`) reads: it kills a group only if the run that started it is
//!   gone and the group is provably still that run's.

use crate::nginx::netns;
use crate::nginx::owner::Stale;
use crate::nginx::owner::{self, Identity};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus};
use std::sync::{Mutex, MutexGuard};

/// The process groups of this process's live trees.
static OWN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn own() -> MutexGuard<'static, Vec<i32>> {
    OWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running process tree (see the module documentation).
#[derive(Debug)]
pub struct ProcessTree {
    child: Child,
    pgid: i32,
    entry: PathBuf,
    killed: bool,
}

impl ProcessTree {
    /// Starts `cmd` (whose own `pre_exec` steps, e.g. joining namespaces, run first) as a tree this
    /// process owns; `what` names it in the registry (`nginx`, `shim`).
    ///
    /// # Errors
    ///
    /// Spawning failed (the OS error), or the registry could not be written (the tree is then killed).
    pub fn spawn(cmd: &mut Command, what: &str) -> io::Result<ProcessTree> {
        let parent = std::process::id() as libc::pid_t;
        cmd.process_group(0);
        // SAFETY: prctl and getppid are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // The parent died before the death signal was armed: it will never come.
                if libc::getppid() != parent {
                    return Err(io::Error::other("the harness exited while starting a process"));
                }
                Ok(())
            });
            if netns::available() {
                cmd.pre_exec(pid_namespace);
            }
        }
        let mut own = own();
        let mut child = cmd.spawn()?;
        let pgid = child.id() as i32;
        let entry = registry().join(pgid.to_string());
        // The leader is not reaped yet: its identity is the group's.
        let recorded = Identity::of(pgid)
            .ok_or_else(|| io::Error::other("the process vanished before it was reaped"))
            .and_then(|leader| record(&entry, what, &leader));
        if let Err(e) = recorded {
            // SAFETY: the group of a child not yet reaped.
            unsafe { libc::killpg(pgid, libc::SIGKILL) };
            let _ = child.wait();
            let _ = std::fs::remove_file(&entry);
            return Err(e);
        }
        own.push(pgid);
        Ok(ProcessTree { child, pgid, entry, killed: false })
    }

    /// The leader's process id (also the process group's).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The leader's stdin, if piped (once).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// The leader's stdout, if piped (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The leader's stderr, if piped (once).
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// How the leader ended, if it has — without reaping it, so that its group stays ours to kill.
    pub fn exited(&self) -> Option<ExitStatus> {
        // SAFETY: waitid on our own child with WNOWAIT (nothing is reaped) into a zeroed siginfo_t.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            if libc::waitid(libc::P_PID, self.child.id(), &mut info, flags) != 0 || info.si_pid() == 0 {
                return None;
            }
            let status = info.si_status();
            let raw = match info.si_code {
                libc::CLD_EXITED => (status & 0xff) << 8,
                libc::CLD_KILLED => status & 0x7f,
                libc::CLD_DUMPED => (status & 0x7f) | 0x80,
                _ => return None,
            };
            Some(ExitStatus::from_raw(raw))
        }
    }

    /// Kills the whole tree (its process group; as root, its PID namespace with it), reaps the leader and
    /// removes its registry entry. Idempotent.
    pub fn kill(&mut self) {
        if self.killed {
            return;
        }
        let mut own = own();
        // SAFETY: the leader is not reaped yet, so the group number is still this tree's.
        unsafe { libc::killpg(self.pgid, libc::SIGKILL) };
        let _ = self.child.wait();
        own.retain(|&p| p != self.pgid);
        drop(own);
        let _ = std::fs::remove_file(&self.entry);
        self.killed = true;
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Kills every live tree of this process, and makes sure no other thread starts or reaps one afterwards:
/// for the CLI's signal handler, right before it exits. Returns how many it killed.
pub fn kill_all_own() -> usize {
    let own = own();
    for &pgid in own.iter() {
        // SAFETY: groups whose leaders are not reaped (reaping happens under this lock, after removal).
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
        let _ = std::fs::remove_file(registry().join(pgid.to_string()));
    }
    let n = own.len();
    // Held until the process exits: a tree spawned or reaped after this point would escape the list.
    std::mem::forget(own);
    n
}

/// Between `fork` and `exec` (only async-signal-safe calls, no allocation): moves what follows into a new
/// PID namespace, as its process 1, and turns this process into the namespace's keeper, which waits for
/// process 1 and exits as it did. Process 1 gets `SIGKILL` when the keeper dies; the kernel kills the
/// whole namespace when process 1 dies.
fn pid_namespace() -> io::Result<()> {
    // SAFETY: system calls on local buffers only; the keeper never returns (it `_exit`s).
    unsafe {
        if libc::unshare(libc::CLONE_NEWPID) != 0 {
            return Err(io::Error::last_os_error());
        }
        // The keeper holds the write end until it exits: process 1 sees it closed if the keeper died
        // before process 1 armed its death signal.
        let mut alive = [0 as libc::c_int; 2];
        if libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        let init = libc::fork();
        if init < 0 {
            return Err(io::Error::last_os_error());
        }
        if init == 0 {
            libc::close(alive[1]);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let mut keeper = libc::pollfd { fd: alive[0], events: libc::POLLIN, revents: 0 };
            if libc::poll(&mut keeper, 1, 0) != 0 {
                libc::_exit(127);
            }
            libc::close(alive[0]);
            return Ok(());
        }
        // The keeper keeps no descriptor but its end of the pipe: the exec-status pipe of `spawn`, stdio
        // pipes and namespace descriptors belong to process 1.
        libc::close(alive[0]);
        let keep = alive[1] as libc::c_uint;
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0 as libc::c_uint, keep - 1, 0 as libc::c_uint);
        }
        libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0 as libc::c_uint);
        let mut status = 0;
        loop {
            let r = libc::waitpid(init, &mut status, 0);
            if r == init {
                break;
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// The registry of process groups: `$TMPDIR/nginx-ketama-runs-<uid>`, one file per group.
fn registry() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("nginx-ketama-runs-{uid}"))
}

/// Whether `dir` is this user's own and nobody else can write to it: only then are its entries trusted
/// (anybody can create files in a shared `/tmp`).
pub(crate) fn trusted(dir: &std::path::Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| {
        // SAFETY: geteuid has no preconditions.
        m.is_dir() && m.uid() == unsafe { libc::geteuid() } && m.permissions().mode() & 0o022 == 0
    })
}

fn record(entry: &std::path::Path, what: &str, leader: &Identity) -> io::Result<()> {
    let dir = registry();
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    if !trusted(&dir) {
        return Err(io::Error::other(format!("{} is not this user's own private directory", dir.display())));
    }
    std::fs::write(entry, format!("what {what}\nowner {}\nleader {leader}\n", Identity::current()))
}

/// One registry entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    what: String,
    owner: Identity,
    leader: Identity,
}

fn parse_entry(text: &str) -> Option<Entry> {
    let field = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' '));
    Some(Entry {
        what: field("what")?.trim().to_string(),
        owner: Identity::parse(field("owner")?)?,
        leader: Identity::parse(field("leader")?)?,
    })
}

/// Kills the process groups of runs that are gone and returns them. A group is killed only if it is
/// provably the one recorded: its leader is the recorded process (pid and start time), or — the leader
/// gone, as when an nginx master died of its death signal and left a worker — its members started no
/// earlier than the recorded leader (the group's number cannot be taken by a new group while any member
/// of the old one lives). Entries that cannot be checked (this user's directory is not private, an entry
/// without identities) are left alone.
pub fn reap_stale() -> Vec<Stale> {
    let dir = registry();
    if !trusted(&dir) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut reaped = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let Some(pgid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Some(entry) = std::fs::read_to_string(e.path()).ok().as_deref().and_then(parse_entry) else {
            continue;
        };
        if entry.owner.alive() || pgid != entry.leader.pid {
            continue;
        }
        let mut killed = 0;
        if entry.leader.alive() {
            // SAFETY: the recorded leader, checked by its start time, leads this group.
            unsafe { libc::killpg(pgid, libc::SIGKILL) };
            killed = 1;
        } else if entry.leader.boot == owner::boot_id() {
            for (pid, stat) in owner::members(pgid) {
                if stat.running() && stat.start >= entry.leader.start && kill_checked(pid, stat.start) {
                    killed += 1;
                }
            }
        }
        let _ = std::fs::remove_file(e.path());
        if killed > 0 {
            reaped.push(Stale::ProcessGroup { pgid, what: entry.what, owner: entry.owner.pid });
        }
    }
    reaped
}

/// Sends `SIGKILL` to `pid` if it is still the process that started at `start`: through a pidfd, so the
/// check and the signal concern one process even if the pid is reused in between.
fn kill_checked(pid: i32, start: u64) -> bool {
    // SAFETY: pidfd_open and pidfd_send_signal on a descriptor we own and close.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as libc::c_int;
        if fd < 0 {
            return false;
        }
        let same = owner::stat(pid).is_some_and(|s| s.start == start);
        let sent = same
            && libc::syscall(libc::SYS_pidfd_send_signal, fd, libc::SIGKILL, std::ptr::null::<libc::siginfo_t>(), 0)
                == 0;
        libc::close(fd);
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn gone(pid: i32, start: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if owner::stat(pid).is_none_or(|s| s.start != start) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// A child that leaves the tree's process group (`setsid`) still dies with the tree: as root the tree is
    /// a PID namespace; without root the group is all there is, so the test needs root.
    #[test]
    fn killing_a_tree_kills_what_it_started() {
        if !netns::available() {
            eprintln!("SKIP: not root");
            return;
        }
        let marker = format!("{}.{}", 300 + std::process::id() % 100, std::process::id());
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("setsid sleep {marker} & sleep {marker}; true"));
        let mut tree = ProcessTree::spawn(&mut cmd, "test").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let sleepers = loop {
            let found = sleepers(&marker);
            if found.len() == 2 || Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(sleepers.len(), 2, "both sleeps started");
        let entry = tree.entry.clone();
        assert!(entry.exists());
        tree.kill();
        for (pid, start) in sleepers {
            assert!(gone(pid, start), "sleep {pid} survived its tree");
        }
        assert!(!entry.exists(), "the registry entry is removed");
    }

    fn sleepers(marker: &str) -> Vec<(i32, u64)> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c == format!("sleep\0{marker}\0").as_bytes())
            })
            .filter_map(|pid| Some((pid, owner::stat(pid)?.start)))
            .collect()
    }

    /// The keeper exits as process 1 did, and `exited` does not reap it.
    #[test]
    fn a_tree_reports_how_its_leader_ended() {
        let mut tree = ProcessTree::spawn(Command::new("sh").args(["-c", "exit 7"]), "test").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(s) = tree.exited() {
                break s;
            }
            assert!(Instant::now() < deadline, "sh -c 'exit 7' did not end");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(status.code(), Some(7));
        assert_eq!(tree.exited().and_then(|s| s.code()), Some(7), "not reaped by the first look");
        tree.kill();
    }

    /// `cleanup` kills a recorded group only if it is still the recorded one: an entry whose leader's pid now
    /// belongs to another process (another start time: the pid was reused) is removed without a signal; an
    /// entry naming the process exactly is reaped.
    #[test]
    fn stale_entries_are_checked_before_killing() {
        let mut sleeper = Command::new("sleep");
        sleeper.arg(format!("{}.{}", 400 + std::process::id() % 100, std::process::id())).process_group(0);
        let mut sleeper = sleeper.spawn().unwrap();
        let pgid = sleeper.id() as i32;
        let real = Identity::of(pgid).unwrap();
        // An owner that is gone: this process's pid with another start time.
        let gone_owner = Identity { start: Identity::current().start + 1, ..Identity::current() };
        let entry = registry().join(pgid.to_string());
        let _ = std::fs::DirBuilder::new().mode(0o700).create(registry());
        let write = |leader: &Identity| {
            std::fs::write(&entry, format!("what test\nowner {gone_owner}\nleader {leader}\n")).unwrap();
        };
        write(&Identity { start: real.start + 1, ..real.clone() });
        let reaped = reap_stale();
        assert!(!reaped.iter().any(|s| matches!(s, Stale::ProcessGroup { pgid: p, .. } if *p == pgid)), "{reaped:?}");
        assert!(sleeper.try_wait().unwrap().is_none(), "a process that is not the recorded leader was killed");
        assert!(!entry.exists(), "the unverifiable entry is removed");
        write(&real);
        let reaped = reap_stale();
        assert!(reaped.iter().any(|s| matches!(s, Stale::ProcessGroup { pgid: p, .. } if *p == pgid)), "{reaped:?}");
        let status = sleeper.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "the recorded group is reaped");
    }

    #[test]
    fn registry_entries_round_trip() {
        let me = Identity::current();
        let text = format!("what nginx\nowner {me}\nleader {me}\n");
        assert_eq!(parse_entry(&text), Some(Entry { what: "nginx".into(), owner: me.clone(), leader: me }));
        assert_eq!(parse_entry("4242\n"), None, "the old format (an owner pid only) cannot be checked");
    }
}
