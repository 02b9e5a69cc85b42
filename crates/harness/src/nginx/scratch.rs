//! Scratch directories: the prefixes nginx runs in, the short directories of unix sockets, the private
//! trees of `verify --config`. A [`ScratchDir`] is removed when dropped, on every path out of the code that
//! made it; it is also in this process's list of live directories, which [`remove_all_own`] removes when
//! the CLI is interrupted; and it holds a marker naming its owner ([`Identity`]), by which
//! [`reap_stale`] (`nginx-ketama cleanup`) removes the directories of runs that are gone — a run killed
//! with `SIGKILL` cannot remove its own.

use crate::nginx::owner::Identity;
use std::io;
use std::ops::Deref;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The file in every top-level scratch directory that names its owner.
pub const MARKER: &str = ".nginx-ketama-owner";

/// The directories scratch directories are made in (and looked for by [`reap_stale`]).
pub const PLACES: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// This process's live scratch directories.
static OWN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn own() -> MutexGuard<'static, Vec<PathBuf>> {
    OWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A directory this process made and removes.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Makes `path` afresh (a leftover of an earlier process with the same pid is removed first; a symlink
    /// is never followed), with `subdirs` in it and the owner marker.
    ///
    /// # Errors
    ///
    /// The directory could not be made (the message names it).
    pub fn create(path: PathBuf, subdirs: &[&str]) -> io::Result<ScratchDir> {
        let _ = std::fs::remove_dir_all(&path);
        let mut own = own();
        std::fs::create_dir(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", path.display())))?;
        own.push(path.clone());
        drop(own);
        let dir = ScratchDir { path };
        std::fs::write(dir.path.join(MARKER), format!("{}\n", Identity::current()))?;
        for sub in subdirs {
            std::fs::create_dir_all(dir.path.join(sub))?;
        }
        Ok(dir)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Deref for ScratchDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let mut own = own();
        let _ = std::fs::remove_dir_all(&self.path);
        own.retain(|p| p != &self.path);
    }
}

/// Removes every live scratch directory of this process, and makes sure no other thread makes one
/// afterwards: for the CLI's signal handler, right before it exits. Returns how many it removed.
pub fn remove_all_own() -> usize {
    let own = own();
    for path in own.iter() {
        let _ = std::fs::remove_dir_all(path);
    }
    let n = own.len();
    std::mem::forget(own);
    n
}

/// The owner a directory name gives (`nk-<pid>-<n>`, `nk-oc-<pid>-<n>`).
fn named_owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("nk-")?;
    let rest = rest.strip_prefix("oc-").unwrap_or(rest);
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Removes the scratch directories of runs that are gone and returns them: directories in [`PLACES`]
/// named as scratch directories are, owned by this user, whose marker names a process that no longer
/// exists (pid and start time) — or, made before markers existed, whose name's pid is not running.
pub fn reap_stale() -> Vec<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for place in PLACES {
        let Ok(entries) = std::fs::read_dir(place) else { continue };
        for e in entries.filter_map(Result::ok) {
            let Some(pid) = e.file_name().to_str().and_then(named_owner) else { continue };
            let path = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
            if !meta.is_dir() || meta.uid() != uid {
                continue;
            }
            let gone = match std::fs::read_to_string(path.join(MARKER)) {
                Ok(text) => Identity::parse(&text).is_some_and(|owner| owner.pid == pid && !owner.alive()),
                Err(_) => !crate::nginx::owner::alive(pid),
            };
            if gone && std::fs::remove_dir_all(&path).is_ok() {
                removed.push(path);
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_names_carry_their_owner() {
        assert_eq!(named_owner("nk-123-0"), Some(123));
        assert_eq!(named_owner("nk-oc-123-4"), Some(123));
        assert_eq!(named_owner("nk-oc-x-4"), None);
        assert_eq!(named_owner("nk-123"), None);
        assert_eq!(named_owner("nginx-ketama-runs"), None);
    }

    /// A dropped scratch directory is gone; one whose marker names a process that is not running (a pid
    /// with another start time) is stale; one of a live owner is not.
    #[test]
    fn stale_directories_are_those_of_gone_owners() {
        let me = Identity::current();
        let live = ScratchDir::create(PathBuf::from(format!("/tmp/nk-{}-{}", me.pid, 900_001)), &["logs"]).unwrap();
        assert!(live.join("logs").is_dir() && live.join(MARKER).is_file());
        let stale = PathBuf::from(format!("/tmp/nk-{}-{}", me.pid, 900_002));
        std::fs::create_dir_all(&stale).unwrap();
        let reused = Identity { start: me.start + 1, ..me.clone() };
        std::fs::write(stale.join(MARKER), format!("{reused}\n")).unwrap();
        let removed = reap_stale();
        assert!(removed.contains(&stale) && !stale.exists(), "{removed:?}");
        assert!(!removed.contains(&live.to_path_buf()) && live.exists());
        let path = live.to_path_buf();
        drop(live);
        assert!(!path.exists());
    }
}
