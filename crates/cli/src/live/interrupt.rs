//! `SIGINT`, `SIGTERM` and `SIGHUP` while `verify`, `replay-vectors` or `record-vectors` runs: everything the
//! run started is stopped before the process exits — every nginx and shim process tree, every scratch
//! directory, every container ([`nginx_ketama_harness::nginx::cleanup::teardown`]) — and the exit code is the
//! shell's for death by that signal (130, 143, 129).
//!
//! The signals are blocked in every thread (the mask is set here, in the main thread, before any other
//! thread exists, and inherited) and taken by one thread with `sigwait`, so the teardown runs as ordinary
//! code, not in a signal handler. Children start with an empty mask (the standard library resets it).

/// The signals a run is stopped by.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Installs the handling. Call it from the main thread before any other thread is started.
pub(crate) fn install() {
    // SAFETY: a sigset_t initialised by sigemptyset, applied to the calling thread only.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        set
    };
    std::thread::spawn(move || {
        let mut signal: libc::c_int = 0;
        // SAFETY: sigwait on a set of blocked signals, into a local.
        while unsafe { libc::sigwait(&set, &mut signal) } != 0 {}
        let done = nginx_ketama_harness::nginx::cleanup::teardown();
        let name = match signal {
            libc::SIGINT => "SIGINT",
            libc::SIGTERM => "SIGTERM",
            _ => "SIGHUP",
        };
        eprintln!(
            "\nnginx-ketama: stopped by {name}: killed {} process trees (nginx, shims), removed {} scratch \
             directories and {} containers",
            done.trees, done.dirs, done.containers
        );
        // SAFETY: _exit ends the process without running anything else.
        unsafe { libc::_exit(128 + signal) }
    });
}
